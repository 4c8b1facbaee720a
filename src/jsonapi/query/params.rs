//! The values of the query parameters, one parser each: numbers, `sort`, `include`, `filter[...]`
//! and `fields[...]`, each checked against the resource declarations.

use warp::http::StatusCode;

use super::{normalize_id, Filter, FilterValue, Include, SortKey, MAX_INCLUDE_DEPTH, NO_PARENT, RELEVANCE};
use crate::error::Problem;
use crate::resources::{Kind, ResourceType};

pub(super) fn decode_pair(pair: &str) -> (String, String) {
    let mut it = form_urlencoded::parse(pair.as_bytes());
    match it.next() {
        Some((k, v)) => (k.into_owned(), v.into_owned()),
        None => (String::new(), String::new()),
    }
}

/// A whole number written in digits only (`parse` would take a sign, which the links of the
/// response would then repeat as sent).
pub(super) fn parse_number(key: &str, value: &str, min: u64, max: u64) -> Result<u64, Problem> {
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    match value.parse::<u64>() {
        Ok(n) if digits && (min..=max).contains(&n) => Ok(n),
        _ if max == u64::MAX => {
            Err(Problem::bad_param(key, format!("`{key}` must be a whole number of at least {min}; got `{value}`.")))
        }
        _ => {
            Err(Problem::bad_param(key, format!("`{key}` must be a whole number from {min} to {max}; got `{value}`.")))
        }
    }
}

pub(super) fn parse_sort(value: &str, rt: &ResourceType) -> Result<Vec<SortKey>, Problem> {
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

pub(super) fn parse_include(value: &str, rt: &'static ResourceType) -> Result<Vec<Include>, Problem> {
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

pub(super) fn parse_filter(key: &str, name: &str, value: &str, rt: &'static ResourceType) -> Result<Filter, Problem> {
    if let Some(rel) = rt.relationship(name).filter(|r| r.is_to_one()) {
        return Ok(match value.trim() {
            NO_PARENT if rel.fk.nullable => Filter::NoParent(rel),
            // Every resource has this parent (its column is never null): none is without it.
            NO_PARENT => Filter::Nothing,
            id => Filter::Parent(rel, normalize_id(id)),
        });
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

pub(super) fn parse_fields(key: &str, type_name: &str, value: &str) -> Result<(&'static str, Vec<String>), Problem> {
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
