//! Regular expressions for the query parameters whose values the server checks, so that the
//! document admits exactly what the server serves (fuzzers such as schemathesis trust it).
//!
//! Items are separated by commas and trimmed of the whitespace Rust's `str::trim` removes.

use crate::jsonapi::query::{MAX_INCLUDE_DEPTH, RELEVANCE};
use crate::resources::ResourceType;

/// What `str::trim` removes (Unicode White_Space), the inside of a character class. Not `\s`:
/// that is ECMA-262's (JSON Schema's) white space, which has U+FEFF and lacks U+0085.
macro_rules! white_space {
    () => {
        r"\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
    };
}

/// What `str::trim` removes, as a character class.
const W: &str = concat!("[", white_space!(), "]");

/// Text the server takes: no U+0000; with `visible`, at least one character `str::trim` keeps.
pub fn text(visible: bool) -> &'static str {
    if visible {
        concat!(r"^[^\u0000]*[^\u0000", white_space!(), r"][^\u0000]*$")
    } else {
        r"^[^\u0000]*$"
    }
}

fn alternatives<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.map(|n| n.replace('.', r"\.")).collect::<Vec<_>>().join("|")
}

/// A list whose items are `names` (or empty: empty items are skipped).
fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let item = format!("{W}*(?:{})?{W}*", alternatives(names));
    format!("^{item}(?:,{item})*$")
}

/// `fields[TYPE]`: attribute and relationship names of `rt`.
pub fn fields(rt: &ResourceType) -> String {
    list(rt.attributes.iter().map(|a| a.name).chain(rt.relationships.iter().map(|r| r.name)))
}

/// `include`: relationship paths from `rt`, up to the server's depth.
pub fn include(rt: &'static ResourceType) -> String {
    let mut paths: Vec<String> = Vec::new();
    let mut frontier: Vec<(String, &'static ResourceType)> = vec![(String::new(), rt)];
    for _ in 0..MAX_INCLUDE_DEPTH {
        let mut next = Vec::new();
        for (prefix, ty) in &frontier {
            for rel in ty.relationships {
                let path = if prefix.is_empty() { rel.name.to_owned() } else { format!("{prefix}.{}", rel.name) };
                paths.push(path.clone());
                next.push((path, rel.target()));
            }
        }
        frontier = next;
    }
    list(paths.iter().map(String::as_str))
}

/// `sort`: at least one sort field, each at most once, `-` for descending.
/// A searchable type also takes `-relevance` (descending only; with `filter[search]`, which a
/// pattern cannot require).
pub fn sort(rt: &ResourceType) -> String {
    let f = alternatives(rt.sort_fields());
    let (item, all) = if crate::search::searchable(rt) {
        (format!("{W}*(?:-?(?:{f})|-{RELEVANCE}){W}*"), format!("{f}|{RELEVANCE}"))
    } else {
        (format!("{W}*-?(?:{f}){W}*"), f.clone())
    };
    // No field twice (with or without `-`); `[\s\S]`, since `.` stops at line breaks.
    let twice = format!(r"(?!(?:[\s\S]*,)?{W}*-?({all}){W}*,(?:[\s\S]*,)?{W}*-?\1{W}*(?:,|$))");
    format!("^{twice}{item}(?:,{item})*$")
}
