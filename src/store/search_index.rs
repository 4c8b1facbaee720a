//! What each engine's search index answers (its own SQL is in `sqlite/search.rs` and
//! `postgres/search.rs`), chosen by the dialect.

use super::dialect::{Dialect, Tier};
use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::value::Value;

impl Dialect {
    /// The condition that a row of `rt` matches the search `q`, with its parameters: each
    /// engine queries its own index (see `sqlite/search.rs` and `postgres/search.rs`).
    pub fn search_match(self, rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
        match self {
            Dialect::Sqlite => super::sqlite::search::matching(rt, q),
            Dialect::Postgres => super::postgres::search::matching(rt, q),
        }
    }

    /// A statement counting the rows of `rt` that match the search `q` when nothing else
    /// filters them, if the engine has one cheaper than counting the rows of the condition.
    pub fn search_count(self, rt: &ResourceType, q: &SearchQuery) -> Option<(String, Vec<Value>)> {
        match self {
            Dialect::Sqlite => Some(super::sqlite::search::count(rt, q)),
            Dialect::Postgres => super::postgres::search::count(rt, q),
        }
    }

    /// The two tiers of a search's results, best first: a row of `rt` matches `q` and every
    /// term is in its title; it matches and not every term is.
    pub fn search_tiers(self, rt: &ResourceType, q: &SearchQuery) -> [Tier; 2] {
        match self {
            Dialect::Sqlite => super::sqlite::search::tiers(rt, q),
            Dialect::Postgres => super::postgres::search::tiers(rt, q),
        }
    }

    /// A statement counting the rows of the first tier of a search (`q` matches and every term
    /// is in the title) when nothing else filters them, if the engine's index can tell without
    /// reading rows.
    pub fn search_title_count(self, rt: &ResourceType, q: &SearchQuery) -> Option<(String, Vec<Value>)> {
        match self {
            Dialect::Sqlite => super::sqlite::search::title_count(rt, q),
            Dialect::Postgres => None,
        }
    }
}
