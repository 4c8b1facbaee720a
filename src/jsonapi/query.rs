//! Query parameters: parsed once into a [`Query`] checked against the resource declarations.
//!
//! Every problem is reported at once with `source.parameter`. Parameters that an endpoint does
//! not take (paging on a single resource, anything unknown) are 400s.

use std::collections::BTreeMap;

use warp::http::StatusCode;

use crate::error::{Error, Problem};
use crate::resources::{Attribute, Kind, Relationship, ResourceType};
use crate::search::SearchQuery;

pub const DEFAULT_PAGE_SIZE: u64 = 20;
pub const MAX_PAGE_SIZE: u64 = 100;
pub const MAX_IDS: usize = 100;
pub const MAX_INCLUDE_DEPTH: usize = 2;
/// The sort key of a search's relevance (`sort=-relevance`).
pub const RELEVANCE: &str = "relevance";

/// What an endpoint accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// Collections and to-many related endpoints: page, sort, filter, include, fields.
    Collection,
    /// A single resource (or a to-one related one): include, fields.
    Single,
    /// Relationship linkage: nothing.
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub number: u64,
    pub size: u64,
}

impl Page {
    pub fn offset(&self) -> u64 {
        (self.number - 1).saturating_mul(self.size)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SortKey {
    /// `"id"`, a sortable attribute's column, or [`RELEVANCE`].
    pub column: &'static str,
    pub descending: bool,
}

#[derive(Debug, Clone)]
pub enum Filter {
    /// `filter[id]`: the listed ids (those that are not UUIDs are dropped: they match nothing).
    Ids(Vec<String>),
    /// `filter[attr]`: exact match.
    Equals(&'static Attribute, FilterValue),
    /// `filter[rel]` on a to-one relationship: the resources whose parent is this id.
    Parent(&'static Relationship, Option<String>),
    /// A filter no resource can match (a value holding U+0000, which stored text never does).
    Nothing,
}

#[derive(Debug, Clone)]
pub enum FilterValue {
    Text(String),
    Bool(bool),
    Integer(i64),
}

/// One node of the `include` tree.
#[derive(Debug, Clone)]
pub struct Include {
    pub rel: &'static Relationship,
    pub children: Vec<Include>,
}

#[derive(Debug, Clone)]
pub struct Query {
    pub page: Page,
    pub sort: Vec<SortKey>,
    pub filters: Vec<Filter>,
    pub include: Vec<Include>,
    /// `fields[type]`: the members to render per type; a type not listed renders everything.
    pub fields: BTreeMap<&'static str, Vec<String>>,
    /// `filter[search]`: the full-text search, if any.
    pub search: Option<SearchQuery>,
    /// The pairs as received (still encoded) with their decoded keys, for paging links.
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `raw` (the query string without `?`) for an endpoint serving `rt`.
    pub fn parse(raw: Option<&str>, rt: &'static ResourceType, accepts: Accepts) -> Result<Query, Error> {
        let mut q = Query {
            page: Page { number: 1, size: DEFAULT_PAGE_SIZE },
            sort: Vec::new(),
            filters: Vec::new(),
            include: Vec::new(),
            fields: BTreeMap::new(),
            search: None,
            pairs: Vec::new(),
        };
        let raw = raw.unwrap_or("");
        if raw.is_empty() {
            return Ok(q);
        }
        let mut problems = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let mut ids: Option<Vec<String>> = None;
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = decode_pair(pair);
            q.pairs.push((pair.to_owned(), key.clone()));
            let repeatable = key == "filter[id]" || key == "filter[id][]";
            if !repeatable && seen.contains(&key) {
                problems.push(Problem::bad_param(&key, format!("`{key}` is given more than once; give it once.")));
                continue;
            }
            seen.push(key.clone());
            let family = key.split('[').next().unwrap_or("");
            let allowed = match family {
                "include" | "fields" => accepts != Accepts::Nothing,
                "page" | "sort" | "filter" => accepts == Accepts::Collection,
                _ => false,
            };
            if !allowed {
                let detail = if accepts == Accepts::Nothing
                    || ["include", "fields", "page", "sort", "filter"].contains(&family)
                {
                    format!("This endpoint does not take the query parameter `{key}`; remove it.")
                } else {
                    format!("Unknown query parameter `{key}`. Known: page[number], page[size], sort, filter[...], include, fields[TYPE].")
                };
                problems.push(Problem::bad_param(&key, detail));
                continue;
            }
            let result = match key.as_str() {
                "page[number]" => parse_number(&key, &value, 1, u64::MAX).map(|n| q.page.number = n),
                "page[size]" => parse_number(&key, &value, 1, MAX_PAGE_SIZE).map(|n| q.page.size = n),
                "sort" => parse_sort(&value, rt).map(|s| q.sort = s),
                "include" => parse_include(&value, rt).map(|i| q.include = i),
                "filter[id]" | "filter[id][]" => {
                    let list = ids.get_or_insert_with(Vec::new);
                    list.extend(value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned));
                    Ok(())
                }
                "filter[search]" if crate::search::searchable(rt) => SearchQuery::parse(&value)
                    .map(|s| q.search = Some(s))
                    .map_err(|detail| Problem::bad_param(&key, detail)),
                _ if key.starts_with("filter[") && key.ends_with(']') => {
                    parse_filter(&key, &key[7..key.len() - 1], &value, rt).map(|f| q.filters.push(f))
                }
                _ if key.starts_with("fields[") && key.ends_with(']') => {
                    parse_fields(&key, &key[7..key.len() - 1], &value).map(|(t, f)| {
                        q.fields.insert(t, f);
                    })
                }
                _ => Err(Problem::bad_param(&key, format!("Unknown query parameter `{key}`."))),
            };
            if let Err(p) = result {
                problems.push(p);
            }
        }
        if q.search.is_none()
            && q.sort.iter().any(|k| k.column == RELEVANCE)
            && !seen.iter().any(|k| k == "filter[search]")
        {
            problems.push(Problem::bad_param(
                "sort",
                "`relevance` orders the results of a search: give `filter[search]` with it, or sort by another field.",
            ));
        }
        if let Some(list) = ids {
            if list.len() > MAX_IDS {
                problems.push(Problem::bad_param(
                    "filter[id]",
                    format!("`filter[id]` lists {} ids; list at most {MAX_IDS}.", list.len()),
                ));
            }
            let mut valid: Vec<String> = list.iter().filter_map(|s| normalize_id(s)).collect();
            valid.sort();
            valid.dedup();
            q.filters.push(Filter::Ids(valid));
        }
        if problems.is_empty() {
            Ok(q)
        } else {
            Err(Error::many(problems))
        }
    }

    /// The query string of page `number`, other parameters kept as received.
    pub fn with_page(&self, number: u64) -> String {
        let mut out = String::new();
        for (raw, key) in &self.pairs {
            if key != "page[number]" {
                out.push_str(raw);
                out.push('&');
            }
        }
        out.push_str("page%5Bnumber%5D=");
        out.push_str(&number.to_string());
        out
    }

    /// The members of `rt` to render, `None` for all of them.
    pub fn fieldset(&self, rt: &ResourceType) -> Option<&[String]> {
        self.fields.get(rt.name).map(Vec::as_slice)
    }
}

/// A lower-case hyphenated UUID, or `None` when `s` is not a UUID.
pub fn normalize_id(s: &str) -> Option<String> {
    uuid::Uuid::try_parse(s).ok().map(|u| u.hyphenated().to_string())
}

fn decode_pair(pair: &str) -> (String, String) {
    let mut it = form_urlencoded::parse(pair.as_bytes());
    match it.next() {
        Some((k, v)) => (k.into_owned(), v.into_owned()),
        None => (String::new(), String::new()),
    }
}

fn parse_number(key: &str, value: &str, min: u64, max: u64) -> Result<u64, Problem> {
    match value.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ if max == u64::MAX => {
            Err(Problem::bad_param(key, format!("`{key}` must be a whole number of at least {min}; got `{value}`.")))
        }
        _ => {
            Err(Problem::bad_param(key, format!("`{key}` must be a whole number from {min} to {max}; got `{value}`.")))
        }
    }
}

fn parse_sort(value: &str, rt: &ResourceType) -> Result<Vec<SortKey>, Problem> {
    let mut keys: Vec<SortKey> = Vec::new();
    for field in value.split(',').map(str::trim) {
        let (name, descending) = match field.strip_prefix('-') {
            Some(rest) => (rest, true),
            None => (field, false),
        };
        if name == RELEVANCE && crate::search::searchable(rt) {
            if !descending {
                return Err(Problem::bad_param("sort", "`relevance` sorts best matches first: write `-relevance`."));
            }
            if keys.iter().any(|k| k.column == RELEVANCE) {
                return Err(Problem::bad_param("sort", format!("`sort` names `{name}` twice; name each field once.")));
            }
            keys.push(SortKey { column: RELEVANCE, descending });
            continue;
        }
        let Some(column) = rt.sort_fields().find(|f| *f == name) else {
            let mut known: Vec<&str> = rt.sort_fields().collect();
            if crate::search::searchable(rt) {
                known.push("-relevance (with filter[search])");
            }
            return Err(Problem::bad_param(
                "sort",
                format!("`{name}` is not a sort field of {}; use one of: {}.", rt.name, known.join(", ")),
            ));
        };
        if keys.iter().any(|k| k.column == column) {
            return Err(Problem::bad_param("sort", format!("`sort` names `{name}` twice; name each field once.")));
        }
        keys.push(SortKey { column, descending });
    }
    Ok(keys)
}

fn parse_include(value: &str, rt: &'static ResourceType) -> Result<Vec<Include>, Problem> {
    let mut roots: Vec<Include> = Vec::new();
    for path in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let segments: Vec<&str> = path.split('.').collect();
        if segments.len() > MAX_INCLUDE_DEPTH {
            return Err(Problem::bad_param(
                "include",
                format!("`{path}` is deeper than {MAX_INCLUDE_DEPTH} relationships; shorten it."),
            ));
        }
        let mut level = &mut roots;
        let mut ty = rt;
        for seg in segments {
            let Some(rel) = ty.relationship(seg) else {
                let names: Vec<&str> = ty.relationships.iter().map(|r| r.name).collect();
                return Err(Problem::bad_param(
                    "include",
                    format!(
                        "`{path}` cannot be included: {} have no relationship `{seg}` (they have: {}).",
                        ty.name,
                        names.join(", ")
                    ),
                ));
            };
            let at = match level.iter().position(|n| std::ptr::eq(n.rel, rel)) {
                Some(i) => i,
                None => {
                    level.push(Include { rel, children: Vec::new() });
                    level.len() - 1
                }
            };
            level = &mut level[at].children;
            ty = rel.target();
        }
    }
    Ok(roots)
}

fn parse_filter(key: &str, name: &str, value: &str, rt: &'static ResourceType) -> Result<Filter, Problem> {
    if let Some(rel) = rt.relationship(name).filter(|r| r.is_to_one()) {
        return Ok(Filter::Parent(rel, normalize_id(value.trim())));
    }
    let Some(attr) = rt.attribute(name).filter(|a| a.filterable) else {
        let mut known = vec!["id".to_owned()];
        known.extend(rt.attributes.iter().filter(|a| a.filterable).map(|a| a.name.to_owned()));
        known.extend(rt.to_one().map(|r| r.name.to_owned()));
        if crate::search::searchable(rt) {
            known.push("search".to_owned());
        }
        return Err(Problem::bad_param(
            key,
            format!("{} cannot be filtered by `{name}`; filter by one of: {}.", rt.name, known.join(", ")),
        ));
    };
    let parsed = match attr.kind {
        Kind::Bool => match value {
            "true" => Some(FilterValue::Bool(true)),
            "false" => Some(FilterValue::Bool(false)),
            _ => None,
        },
        Kind::Integer => value.parse().ok().map(FilterValue::Integer),
        _ if value.contains('\0') => return Ok(Filter::Nothing),
        _ => Some(FilterValue::Text(value.to_owned())),
    };
    let expected = if attr.kind == Kind::Bool { "`true` or `false`" } else { "an integer" };
    parsed
        .map(|v| Filter::Equals(attr, v))
        .ok_or_else(|| Problem::bad_param(key, format!("`{key}` must be {expected}; got `{value}`.")))
}

fn parse_fields(key: &str, type_name: &str, value: &str) -> Result<(&'static str, Vec<String>), Problem> {
    let Some(ty) = crate::resources::by_name(type_name) else {
        return Err(Problem::bad_param(key, format!("`{type_name}` is not a resource type.")));
    };
    let mut fields = Vec::new();
    for f in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let known = ty.attribute(f).is_some() || ty.relationship(f).is_some();
        if !known {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid_parameter",
                format!("{} have no field `{f}`.", ty.name),
            )
            .param(key));
        }
        fields.push(f.to_owned());
    }
    Ok((ty.name, fields))
}
