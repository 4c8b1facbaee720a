//! JSON:API 1.0 documents: query parameters, request documents, response documents.

pub mod body;
pub mod document;
pub mod escape;
pub mod etag;
pub mod query;
pub mod response;

pub use document::{Base, Doc};

/// The JSON:API media type.
pub const JSONAPI: &str = "application/vnd.api+json";
/// The Atomic Operations extension's URI, as `ext` names it in media types.
pub const ATOMIC: &str = "https://jsonapi.org/ext/atomic";
/// The most operations one atomic request may hold (more is a 413).
pub const MAX_OPERATIONS: usize = 1000;
pub use query::{Accepts, Query};
