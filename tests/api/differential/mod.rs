//! The same requests on both engines over the same catalogue get the same answers.
//!
//! - Random reads, the same status and the same bytes: every sort field of the registry in both
//!   directions, exact-match and relationship filters (`null` among them), `filter[id]`, searches (words, prefixes,
//!   phrases, `-relevance`), paging, `include` and sparse fieldsets, on collections, related and
//!   relationship endpoints and single resources.
//! - Random writes, valid and not (`writes.rs`), the same status and the same document but for
//!   the ids and timestamps the server makes; then every resource reads the same.
//!
//! The catalogue is `copy.rs`'s, which tells collations and null orders apart; requests are
//! drawn with a fixed seed, so a failure names one that fails again.

mod writes;

use coursed::resources::{ResourceType, TYPES};

/// A small xorshift generator: the same paths on every run.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
    fn one<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const MODULES: &[&str] = &["01900000-0000-7000-8000-000000000002", "01900000-0000-7000-8000-000000000005"];
/// Subjects with a module and (107) without.
const SUBJECTS: &[&str] = &[
    "01900000-0000-7000-8000-000000000101",
    "01900000-0000-7000-8000-000000000102",
    "01900000-0000-7000-8000-000000000107",
];
/// Parameters every endpoint refuses: the error documents must be the same too.
const REFUSED: &[&str] =
    &["page[size]=0", "sort=nope", "include=nope", "filter[search]=%22unclosed", "fields[subjects]=nope", "foo=1"];
/// Words of the catalogue (titles, introductions, contents), cases and accents mixed, and what
/// the catalogue does not hold; percent-encoded where a URL needs it.
const SEARCHES: &[&str] = &[
    "apple",
    "APPLE",
    "%C3%A9clair",
    "eclair",
    "zurich",
    "about",
    "ap*",
    "ze*",
    "text",
    "q",
    "chapter",
    "10",
    "%22about%20apple%22",
    "%22text%20e%22",
    "about%20zebra",
    "nothing",
];
const EXTERNAL_IDS: &[&str] = &["ext-b", "EXT-B", "EXT-C", "S-3", "S-39", "s-3", "none"];

fn rt(name: &str) -> &'static ResourceType {
    TYPES.iter().copied().find(|t| t.name == name).unwrap()
}

/// `sort=`: one to three of the type's sort fields, each in either direction, `-relevance`
/// among them when searching.
fn sort(d: &mut Draw, t: &'static ResourceType, searching: bool) -> String {
    let mut fields: Vec<&str> = t.sort_fields().collect();
    if searching {
        fields.push("relevance");
    }
    let mut keys: Vec<String> = Vec::new();
    for _ in 0..1 + d.below(3) {
        let f = d.one(&fields);
        if keys.iter().any(|k| k.trim_start_matches('-') == f) {
            continue;
        }
        keys.push(if f == "relevance" || d.chance(50) { format!("-{f}") } else { f.to_owned() });
    }
    format!("sort={}", keys.join(","))
}

/// The query of a collection of `t` (a top-level collection or a to-many related endpoint).
fn collection_query(d: &mut Draw, t: &'static ResourceType) -> Vec<String> {
    let mut q = Vec::new();
    let searching = coursed::search::searchable(t) && d.chance(50);
    if searching {
        q.push(format!("filter[search]={}", d.one(SEARCHES)));
    }
    if d.chance(60) {
        q.push(sort(d, t, searching));
    }
    for a in t.attributes.iter().filter(|a| a.filterable) {
        if d.chance(20) {
            let value = match a.name {
                "external_id" => d.one(EXTERNAL_IDS).to_owned(),
                _ => d.one(&["true", "false"]).to_owned(),
            };
            q.push(format!("filter[{}]={value}", a.name));
        }
    }
    for r in t.relationships.iter().filter(|r| r.is_to_one()) {
        if d.chance(20) {
            let mut values = if r.fk.parent.name == "modules" { MODULES } else { SUBJECTS }.to_vec();
            values.push("null");
            q.push(format!("filter[{}]={}", r.name, d.one(&values)));
        }
    }
    if t.name == "subjects" && d.chance(10) {
        q.push(format!("filter[id]={},{}", d.one(SUBJECTS), d.one(SUBJECTS)));
    }
    if d.chance(60) {
        q.push(format!("page[size]={}", 1 + d.below(12)));
    }
    if d.chance(25) {
        q.push(format!("page[number]={}", 1 + d.below(3)));
    }
    q.extend(resource_query(d, t));
    q
}

/// `include` and `fields` of a document of `t`.
fn resource_query(d: &mut Draw, t: &'static ResourceType) -> Vec<String> {
    let mut q = Vec::new();
    if d.chance(30) {
        let paths: &[&str] = match t.name {
            "modules" => &["subjects", "subjects.chapters", "subjects.module"],
            "subjects" => &["module", "chapters", "chapters.subject", "module,chapters", "module.subjects"],
            _ => &["subject", "subject.module", "subject.chapters"],
        };
        q.push(format!("include={}", d.one(paths)));
    }
    if d.chance(25) {
        let fields: Vec<&str> =
            t.attributes.iter().map(|a| a.name).chain(t.relationships.iter().map(|r| r.name)).collect();
        let picked: Vec<&str> = fields.iter().copied().filter(|_| d.chance(40)).collect();
        if !picked.is_empty() {
            q.push(format!("fields[{}]={}", t.name, picked.join(",")));
        }
    }
    q
}

/// One random path: a collection, a related or relationship endpoint, or a resource.
fn path(d: &mut Draw) -> String {
    let (path, q) = match d.below(7) {
        0..=2 => {
            let t = d.one(&TYPES);
            (format!("/v1/{}", t.name), collection_query(d, t))
        }
        3 => (format!("/v1/modules/{}/subjects", d.one(MODULES)), collection_query(d, rt("subjects"))),
        4 => (format!("/v1/subjects/{}/chapters", d.one(SUBJECTS)), collection_query(d, rt("chapters"))),
        5 => {
            let endpoint = d.one(&["relationships/chapters", "relationships/module", "module"]);
            let q = if endpoint == "module" { resource_query(d, rt("modules")) } else { Vec::new() };
            (format!("/v1/subjects/{}/{endpoint}", d.one(SUBJECTS)), q)
        }
        _ => (format!("/v1/subjects/{}", d.one(SUBJECTS)), resource_query(d, rt("subjects"))),
    };
    let mut q = q;
    if d.chance(5) {
        q.push(d.one(REFUSED).to_owned());
    }
    if q.is_empty() {
        path
    } else {
        format!("{path}?{}", q.join("&"))
    }
}

#[tokio::test]
async fn random_reads_get_the_same_bytes_on_sqlite_and_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = crate::copy::catalogue_on_both_engines(dir.path()).await else { return };
    let mut d = Draw(0x2545_F491_4F6C_DD1D);
    let (mut found, mut refused, mut searched) = (0, 0, 0);
    for _ in 0..400 {
        let path = path(&mut d);
        let (sa, ba) = a.raw(&path).await;
        let (sb, bb) = b.raw(&path).await;
        assert_eq!((sa, &ba), (sb, &bb), "{path} answers differently on SQLite and PostgreSQL");
        assert!(sa == 200 || sa == 400, "{path}: {sa} {ba:?}");
        if sa == 200 {
            found += 1;
            searched += usize::from(
                path.contains("filter[search]") && ba.starts_with(b"{\"jsonapi\":{\"version\":\"1.0\"},\"data\":[{"),
            );
        } else {
            refused += 1;
        }
    }
    // The draws must mostly be reads that find something, searches that find something among
    // them, and a few refusals.
    assert!(
        found >= 300 && searched >= 30 && refused >= 5,
        "{found} answered 200 ({searched} searches found something), {refused} refused"
    );
}
