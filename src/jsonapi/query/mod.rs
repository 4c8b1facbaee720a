//! Query parameters: parsed once into a [`Query`] checked against the resource declarations.
//!
//! Every problem is reported at once with `source.parameter`. Parameters that an endpoint does
//! not take (paging on a single resource, anything unknown) are 400s.

use std::collections::BTreeMap;

use crate::error::{Error, Problem};
use crate::resources::{Attribute, Relationship, ResourceType};
use crate::search::SearchQuery;

mod params;
use params::{decode_pair, parse_fields, parse_filter, parse_include, parse_number, parse_sort};

pub const DEFAULT_PAGE_SIZE: u64 = 20;
pub const MAX_PAGE_SIZE: u64 = 100;
pub const MAX_IDS: usize = 100;
pub const MAX_INCLUDE_DEPTH: usize = 2;
/// The sort key of a search's relevance (`sort=-relevance`).
pub const RELEVANCE: &str = "relevance";
/// The value of `filter[rel]` on a to-one relationship that selects the resources without a
/// parent (`filter[module]=null`).
pub const NO_PARENT: &str = "null";

/// What one response document may take: bytes (of the rows read for it and of the document
/// written) and included resources. A document is first read within [`Budget::SMALL`]; one
/// that outgrows it is read again within [`Budget::LARGE`], the limit of any document (past it,
/// a 400 that says how to ask for less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub bytes: usize,
    pub included: usize,
}

impl Budget {
    /// A document that costs well under a millisecond to read and write.
    pub const SMALL: Budget = Budget { bytes: 1 << 20, included: 1000 };
    /// The largest document served.
    pub const LARGE: Budget = Budget { bytes: 32 << 20, included: 10_000 };

    /// The error of a document that outgrew this budget: a 400 when it is the largest.
    pub fn exceeded(self) -> Error {
        let detail = format!(
            "The document would be larger than {} MiB or include more than {} resources, the most one \
             response holds. Ask for less: a smaller `page[size]`, fewer relationships in `include`, or \
             `fields[TYPE]` without the long attributes (such as `content`).",
            self.bytes >> 20,
            self.included
        );
        Problem::new(warp::http::StatusCode::BAD_REQUEST, DOCUMENT_TOO_LARGE, detail).into()
    }
}

/// The code of [`Budget::exceeded`].
pub const DOCUMENT_TOO_LARGE: &str = "document_too_large";

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
    /// `filter[rel]` on a to-one relationship: the resources whose parent is this id (`None`, a
    /// value that is not a UUID, matches nothing).
    Parent(&'static Relationship, Option<String>),
    /// `filter[rel]=null` on a to-one relationship whose foreign key may be null: the resources
    /// without a parent.
    NoParent(&'static Relationship),
    /// A filter no resource can match (a value holding U+0000, which stored text never does, or
    /// [`NO_PARENT`] for a relationship every resource has).
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
    /// What the document may take (set by the server, not by a parameter).
    pub budget: Budget,
    /// The pairs as received (still encoded) with their decoded keys, for paging links.
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Whether the page is in id order (no `sort`, or `sort=id`): the order the kept page keys
    /// serve.
    pub fn in_id_order(&self) -> bool {
        self.sort.is_empty() || matches!(self.sort.as_slice(), [k] if k.column == "id" && !k.descending)
    }

    /// Parses `raw` (the query string without `?`) for an endpoint serving `rt`.
    pub fn parse(raw: Option<&str>, rt: &'static ResourceType, accepts: Accepts) -> Result<Query, Error> {
        let mut q = Query {
            page: Page { number: 1, size: DEFAULT_PAGE_SIZE },
            sort: Vec::new(),
            filters: Vec::new(),
            include: Vec::new(),
            fields: BTreeMap::new(),
            search: None,
            budget: Budget::SMALL,
            pairs: Vec::new(),
        };
        let raw = raw.unwrap_or("");
        if raw.is_empty() {
            return Ok(q);
        }
        let mut problems = Vec::new();
        // Each key with how often it came: a key given again is one problem, however often.
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut repeated: Vec<String> = Vec::new();
        let mut ids: Option<Vec<String>> = None;
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = decode_pair(pair);
            q.pairs.push((pair.to_owned(), key.clone()));
            let repeatable = key == "filter[id]" || key == "filter[id][]";
            let times = seen.entry(key.clone()).or_insert(0);
            *times += 1;
            if !repeatable && *times > 1 {
                if *times == 2 {
                    repeated.push(key);
                }
                continue;
            }
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
        if q.search.is_none() && q.sort.iter().any(|k| k.column == RELEVANCE) && !seen.contains_key("filter[search]") {
            problems.push(Problem::bad_param(
                "sort",
                "`relevance` orders the results of a search: give `filter[search]` with it, or sort by another field.",
            ));
        }
        for key in repeated {
            let times = seen[&key];
            problems.push(Problem::bad_param(&key, format!("`{key}` is given {times} times; give it once.")));
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

    /// This query, to be answered within `budget`.
    pub fn within(&self, budget: Budget) -> Query {
        Query { budget, ..self.clone() }
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
