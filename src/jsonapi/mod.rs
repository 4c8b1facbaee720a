//! JSON:API 1.0 requests: query parameters and request documents, parsed and checked against
//! the declarations before any SQL runs (the response documents are the `render` module's).

pub mod body;
pub mod query;

/// The JSON:API media type.
pub const JSONAPI: &str = "application/vnd.api+json";
/// The Atomic Operations extension's URI, as `ext` names it in media types.
pub const ATOMIC: &str = "https://jsonapi.org/ext/atomic";
/// The most operations one atomic request may hold (more is a 413).
pub const MAX_OPERATIONS: usize = 1000;
pub use query::{Accepts, Query};
