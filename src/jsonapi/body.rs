//! Request documents: parsed and checked against the declarations before any SQL runs.
//!
//! Structural faults (not JSON, no `data`, members of the wrong JSON type) are 400 and end the
//! parse; a client id on create is 403; a wrong `type` or `id` is 409; then every invalid value
//! is collected and reported at once as 422.

use serde_json::{Map, Value as Json};

use crate::error::{Error, Problem};
use crate::jsonapi::query::normalize_id;
use crate::resources::{Attribute, Kind, Relationship, ResourceType};
use crate::value::Value;

/// What a create or update sets.
#[derive(Debug)]
pub struct Changes {
    /// Validated attribute values, in storage form.
    pub attributes: Vec<(&'static Attribute, Value)>,
    pub relationships: Vec<Linkage>,
    /// The search words of the searchable attributes among `attributes`, as (words column,
    /// words): computed here, on the request's thread, so that the one writer only stores them.
    pub words: Vec<(&'static str, Value)>,
}

/// A relationship's new linkage as sent by the client.
#[derive(Debug)]
pub struct Linkage {
    pub rel: &'static Relationship,
    /// The ids named (empty for a to-one `null`). Ids that are not UUIDs are kept as sent: they
    /// name nothing, so they fail the existence check with a 404.
    pub ids: Vec<String>,
    /// The pointer of the `data` member; a to-many id `i` is at `{pointer}/{i}`.
    pub pointer: String,
}

impl Linkage {
    pub fn pointer_of(&self, index: usize) -> String {
        if self.rel.is_to_one() {
            self.pointer.clone()
        } else {
            format!("{}/{index}", self.pointer)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    Create,
    /// An update of the resource with this (normalized) id.
    Update(&'a str),
    /// The whole resource with this (normalized) id, as a bundle line states it: `id` given,
    /// every required member too.
    Whole(&'a str),
}

impl Mode<'_> {
    /// Whether the document must state every required member.
    fn whole(self) -> bool {
        matches!(self, Mode::Create | Mode::Whole(_))
    }
}

/// Parses a create or update document for `rt`.
pub fn resource(rt: &'static ResourceType, bytes: &[u8], mode: Mode<'_>) -> Result<Changes, Error> {
    resource_data(rt, &data_member(bytes)?, mode)
}

/// Parses the `data` member of a create or update document for `rt` (pointers are those of the
/// whole document: `/data/...`).
pub fn resource_data(rt: &'static ResourceType, data: &Json, mode: Mode<'_>) -> Result<Changes, Error> {
    resource_data_with(rt, data, mode, None)
}

/// The search words of the searchable attributes `data` (a resource object) sets, as
/// (words column, words), computed before a unit of work that must not spend its time on them
/// (see [`resource_data_with`]). A value that is not valid is skipped: the parse refuses it.
pub fn words_in(rt: &'static ResourceType, data: &Json) -> Vec<(&'static str, Value)> {
    let Some(attrs) = data.get("attributes").and_then(Json::as_object) else { return Vec::new() };
    crate::search::columns(rt)
        .filter_map(|(a, _)| match attrs.get(a.name) {
            // Leading and trailing white space, which a title loses, is no part of any word.
            Some(Json::String(s)) => crate::search::derived_text(a, s),
            Some(Json::Null) => crate::search::derived_text(a, ""),
            _ => None,
        })
        .collect()
}

/// [`resource_data`], with the search words already computed by [`words_in`] when given.
pub fn resource_data_with(
    rt: &'static ResourceType,
    data: &Json,
    mode: Mode<'_>,
    words: Option<Vec<(&'static str, Value)>>,
) -> Result<Changes, Error> {
    let Some(data) = data.as_object() else {
        return Err(Problem::malformed("/data", "`data` must be a resource object.").into());
    };
    for member in ["attributes", "relationships"] {
        if data.get(member).is_some_and(|v| !v.is_object()) {
            return Err(Problem::malformed(format!("/data/{member}"), format!("`{member}` must be an object.")).into());
        }
    }
    let type_name = data.get("type").and_then(Json::as_str);
    let Some(type_name) = type_name else {
        return Err(Problem::malformed("/data", "The resource object needs a `type` member (a string).").into());
    };
    match (mode, data.get("id")) {
        (Mode::Create, Some(_)) => {
            return Err(Error::forbidden(
                "/data/id",
                "Ids are assigned by the server; remove `id` from the new resource.",
            ));
        }
        (Mode::Update(_) | Mode::Whole(_), None) => {
            return Err(Problem::malformed("/data", "An update needs `id` in `data`, the id of the resource.").into());
        }
        (Mode::Update(_) | Mode::Whole(_), Some(id)) if !id.is_string() => {
            return Err(Problem::malformed("/data/id", "`id` must be a string.").into());
        }
        _ => {}
    }
    if type_name != rt.name {
        return Err(Error::conflict(
            "/data/type",
            format!("This endpoint takes `{}` resources, not `{type_name}`.", rt.name),
        ));
    }
    if let (Mode::Update(url_id) | Mode::Whole(url_id), Some(Json::String(id))) = (mode, data.get("id")) {
        if normalize_id(id).as_deref() != Some(url_id) {
            return Err(Error::conflict("/data/id", format!("`id` {id} does not match the id in the URL ({url_id}).")));
        }
    }

    let mut problems = Vec::new();
    let empty = Map::new();
    let attrs = data.get("attributes").and_then(Json::as_object);
    let mut attributes = Vec::new();
    for (name, value) in attrs.unwrap_or(&empty) {
        let pointer = format!("/data/attributes/{name}");
        match rt.attribute(name) {
            None => problems.push(Problem::invalid(pointer, format!("{} have no attribute `{name}`.", rt.name))),
            Some(a) if a.read_only() => {} // the server sets it; a client may send it back
            Some(a) => match attribute_value(a, value) {
                Ok(v) => attributes.push((a, v)),
                Err(detail) => problems.push(Problem::invalid(pointer, detail)),
            },
        }
    }
    if mode.whole() {
        let at = if attrs.is_some() { "/data/attributes" } else { "/data" };
        for a in rt.attributes.iter().filter(|a| a.required) {
            if !attributes.iter().any(|(set, _)| std::ptr::eq(*set, a)) && !problems.iter().any(|p| mentions(p, a.name))
            {
                problems.push(Problem::invalid(at, format!("`{}` is required.", a.name)));
            }
        }
    }

    let rels = data.get("relationships").and_then(Json::as_object);
    let mut relationships = Vec::new();
    for (name, value) in rels.unwrap_or(&empty) {
        let pointer = format!("/data/relationships/{name}");
        let Some(rel) = rt.relationship(name) else {
            problems.push(Problem::invalid(pointer, format!("{} have no relationship `{name}`.", rt.name)));
            continue;
        };
        match value.as_object().and_then(|o| o.get("data")) {
            Some(data) => match linkage(rel, data, format!("{pointer}/data")) {
                Ok(l) => relationships.push(l),
                Err(mut ps) => problems.append(&mut ps),
            },
            None => problems.push(Problem::invalid(pointer, "A relationship must be an object with a `data` member.")),
        }
    }
    if mode.whole() {
        let at = if rels.is_some() { "/data/relationships" } else { "/data" };
        for rel in rt.to_one().filter(|r| !r.fk.nullable) {
            if !relationships.iter().any(|l| std::ptr::eq(l.rel, rel))
                && !problems.iter().any(|p| mentions(p, rel.name))
            {
                problems.push(Problem::invalid(
                    at,
                    format!(
                        "`{}` is required: every {} belongs to one of the {}.",
                        rel.name,
                        singular(rt),
                        rel.target().name
                    ),
                ));
            }
        }
    }
    if problems.is_empty() {
        let words =
            words.unwrap_or_else(|| attributes.iter().filter_map(|(a, v)| crate::search::derived(a, v)).collect());
        Ok(Changes { attributes, relationships, words })
    } else {
        Err(Error::many(problems))
    }
}

/// Parses the body of a write to a relationship endpoint: `{"data": linkage}`.
pub fn relationship(rel: &'static Relationship, bytes: &[u8]) -> Result<Linkage, Error> {
    relationship_data(rel, &data_member(bytes)?)
}

/// Parses the `data` member of a relationship write (pointers are those of the whole document).
pub fn relationship_data(rel: &'static Relationship, data: &Json) -> Result<Linkage, Error> {
    linkage(rel, data, "/data".to_owned()).map_err(Error::many)
}

/// The `data` member of a request document.
fn data_member(bytes: &[u8]) -> Result<Json, Error> {
    let doc: Json = serde_json::from_slice(bytes)
        .map_err(|e| Problem::malformed("", format!("The body is not valid JSON ({e}); send a JSON:API document.")))?;
    match doc {
        Json::Object(mut map) => {
            map.remove("data").ok_or_else(|| Problem::malformed("", "The document has no `data` member.").into())
        }
        _ => Err(Problem::malformed("", "The body must be a JSON object with a `data` member.").into()),
    }
}

fn linkage(rel: &'static Relationship, data: &Json, pointer: String) -> Result<Linkage, Vec<Problem>> {
    let target = rel.target().name;
    let mut problems = Vec::new();
    let mut ids = Vec::new();
    let mut identifier = |value: &Json, at: String| match identifier(value, target) {
        Ok(id) => ids.push(id),
        Err(detail) => problems.push(Problem::invalid(at, detail)),
    };
    match (rel.is_to_one(), data) {
        (true, Json::Null) => {}
        (true, Json::Object(_)) => identifier(data, pointer.clone()),
        (false, Json::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                identifier(item, format!("{pointer}/{i}"));
            }
        }
        (true, _) => problems.push(Problem::invalid(
            pointer.clone(),
            format!(
                "`{}` is to-one: `data` must be null or an identifier object {{\"type\":\"{target}\",\"id\":...}}.",
                rel.name
            ),
        )),
        (false, _) => problems.push(Problem::invalid(
            pointer.clone(),
            format!("`{}` is to-many: `data` must be an array of identifier objects.", rel.name),
        )),
    }
    if problems.is_empty() {
        Ok(Linkage { rel, ids, pointer })
    } else {
        Err(problems)
    }
}

/// The id of a resource identifier object of type `target`.
fn identifier(value: &Json, target: &str) -> Result<String, String> {
    let obj = value.as_object().ok_or("A resource identifier must be an object with `type` and `id`.")?;
    match (obj.get("type").and_then(Json::as_str), obj.get("id").and_then(Json::as_str)) {
        (Some(t), Some(id)) if t == target => Ok(normalize_id(id).unwrap_or_else(|| id.to_owned())),
        (Some(t), Some(_)) => Err(format!("This relationship links to `{target}`, not `{t}`.")),
        _ => Err("A resource identifier needs `type` and `id`, both strings.".into()),
    }
}

/// The storage value of `json` for attribute `a`, or why it is invalid.
fn attribute_value(a: &Attribute, json: &Json) -> Result<Value, String> {
    let name = a.name;
    match (a.kind, json) {
        (Kind::NullableText, Json::Null) => Ok(Value::Null),
        (Kind::Text | Kind::NullableText, Json::String(s)) => {
            let s = if a.trim { s.trim() } else { s.as_str() };
            let chars = s.chars().count() as i64;
            if chars < a.min || chars > a.max {
                let after = if a.trim { " after trimming" } else { "" };
                return Err(match a.max {
                    i64::MAX => format!("`{name}` must have at least {} characters{after}.", a.min),
                    max => format!("`{name}` must have {} to {max} characters{after}; it has {chars}.", a.min),
                });
            }
            if s.contains('\0') {
                return Err(format!("`{name}` must not contain the character U+0000."));
            }
            if s.len() as i64 > a.max_bytes {
                return Err(format!("`{name}` must be at most {} bytes; it has {}.", a.max_bytes, s.len()));
            }
            Ok(Value::Text(s.to_owned()))
        }
        (Kind::Bool, Json::Bool(b)) => Ok(Value::Bool(*b)),
        // `3.0` is a whole number too (JSON Schema counts it as an integer).
        (Kind::Integer, Json::Number(n)) => match n.as_i64().or_else(|| whole(n.as_f64()?)) {
            Some(i) if i >= a.min => Ok(Value::Int(i)),
            Some(_) => Err(format!("`{name}` must be at least {}.", a.min)),
            None => Err(format!("`{name}` must be a whole number.")),
        },
        (kind, _) => Err(format!("`{name}` must be {}.", expected(kind))),
    }
}

/// `f` as an `i64` when it is a whole number in range.
fn whole(f: f64) -> Option<i64> {
    // 2^63 is the first float past i64::MAX.
    (f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f)).then_some(f as i64)
}

fn expected(kind: Kind) -> &'static str {
    match kind {
        Kind::Text | Kind::Timestamp => "a string",
        Kind::NullableText => "a string or null",
        Kind::Bool => "true or false",
        Kind::Integer => "a whole number",
    }
}

fn mentions(p: &Problem, name: &str) -> bool {
    matches!(&p.source, crate::error::Source::Pointer(ptr) if ptr.ends_with(&format!("/{name}")) || ptr.contains(&format!("/{name}/")))
}

/// "subject" for `subjects`: used in details.
pub fn singular(rt: &ResourceType) -> &str {
    rt.name.strip_suffix('s').unwrap_or(rt.name)
}
