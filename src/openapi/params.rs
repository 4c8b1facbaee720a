//! The parameters of the operations: the path's id, and the query parameters each kind of
//! operation takes, with the server's grammar of their values.

use serde_json::{json, Value};

use super::patterns;
use super::schemas::filter_schema;
use crate::jsonapi::body::singular;
use crate::jsonapi::query::{MAX_IDS, MAX_PAGE_SIZE, NO_PARENT};
use crate::resources::{ResourceType, TYPES};
use crate::search::query::{MAX_CHARS, MAX_PHRASE_WORDS, MAX_TERMS, MIN_PREFIX};

pub fn id_param(rt: &ResourceType) -> Value {
    json!({"name": "id", "in": "path", "required": true, "description": format!("The id of the {}.", singular(rt)),
        "schema": {"type": "string", "format": "uuid"}})
}

fn query(name: &str, description: String, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
}

/// `include` and `fields[...]`: taken wherever resources are returned.
pub fn single_params(rt: &'static ResourceType) -> Vec<Value> {
    let rels: Vec<&str> = rt.relationships.iter().map(|r| r.name).collect();
    let mut params = vec![query(
        "include",
        format!("Comma-separated relationship paths to include, up to two deep (e.g. {}).", rels.join(", ")),
        json!({"type": "string", "pattern": patterns::include(rt)}),
    )];
    for t in TYPES {
        let fields: Vec<&str> =
            t.attributes.iter().map(|a| a.name).chain(t.relationships.iter().map(|r| r.name)).collect();
        params.push(query(
            &format!("fields[{}]", t.name),
            format!("Sparse fieldset of {}: a comma-separated list of {}.", t.name, fields.join(", ")),
            json!({"type": "string", "pattern": patterns::fields(t)}),
        ));
    }
    params
}

/// Paging, sorting and filtering, plus `include` and `fields`.
pub fn collection_params(rt: &'static ResourceType) -> Vec<Value> {
    let mut sortable: Vec<&str> = rt.sort_fields().collect();
    if crate::search::searchable(rt) {
        sortable
            .push("and, with `filter[search]` only, `-relevance` (best match first, the default order of a search)");
    }
    let mut params = vec![
        query(
            "page[number]",
            "Page number, from 1 (default 1).".into(),
            json!({"type": "integer", "minimum": 1, "maximum": u64::MAX, "default": 1}),
        ),
        query(
            "page[size]",
            format!("Page size, 1 to {MAX_PAGE_SIZE} (default 20)."),
            json!({"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20}),
        ),
        query(
            "sort",
            format!(
                "Comma-separated sort fields, each at most once, `-` for descending: {}. Ties are broken by id.",
                sortable.join(", ")
            ),
            json!({"type": "string", "pattern": patterns::sort(rt)}),
        ),
        query(
            "filter[id]",
            format!("Comma-separated ids (at most {MAX_IDS}); `filter[id][]=` and repeated `filter[id]=` work too."),
            json!({"type": "string"}),
        ),
    ];
    if crate::search::searchable(rt) {
        let attrs: Vec<&str> = crate::search::columns(rt).map(|(a, _)| a.name).collect();
        params.push(query("filter[search]", search_doc(&attrs), json!({"type": "string", "maxLength": MAX_CHARS})));
    }
    for a in rt.attributes.iter().filter(|a| a.filterable) {
        params.push(query(
            &format!("filter[{}]", a.name),
            format!("Exact match on `{}` (a value no resource can have matches nothing).", a.name),
            filter_schema(a),
        ));
    }
    for r in rt.to_one() {
        let target = singular(r.target());
        let none = if r.fk.nullable {
            format!("only {} without a {target}", rt.name)
        } else {
            format!("nothing (every {} has a {target})", singular(rt))
        };
        params.push(query(
            &format!("filter[{}]", r.name),
            format!(
                "Only {} of the {target} with this id (an id that names none matches nothing); \
                 `{NO_PARENT}` matches {none}.",
                rt.name
            ),
            json!({"type": "string"}),
        ));
    }
    params.extend(single_params(rt));
    params
}

/// The description of `filter[search]` over the attributes `attrs`.
fn search_doc(attrs: &[&str]) -> String {
    format!(
        "Full-text search over {}. Words separated by spaces must all match, each in any of them; \
         case and accents do not count (`resume` finds `Résumé`), nor does HTML markup in a module's \
         content. `word*` matches words that start with `word` (at least {MIN_PREFIX} letters or digits \
         before `*`); `\"two words\"` matches them one after the other in one attribute, and `\"two wo\"*` \
         takes the last as a prefix. Punctuation splits a word into a phrase (`e-mail` is `\"e mail\"`). \
         At most {MAX_CHARS} characters, {MAX_TERMS} terms, {MAX_PHRASE_WORDS} words a phrase; there are \
         no operators (`OR`, `-` are words or punctuation). Malformed text (an unclosed `\"`, a lone `*`, \
         `*` inside a word, no word at all, too long, too many terms) is a 400 naming `filter[search]`. \
         Without `sort`, results come best match first: those whose title holds every term, then the \
         others, each by id. Each resource found carries `meta.search`: `attribute`, the first attribute in which a \
         term matches, and `excerpt`, about {} characters of its text around the first match, as \
         HTML-escaped text with every match in `<mark>`...`</mark>` and `…` where text is left out.",
        attrs.join(", "),
        crate::search::excerpt::LENGTH
    )
}
