//! JSON:API 1.0 documents: query parameters, request documents, response documents.

pub mod body;
pub mod document;
pub mod escape;
pub mod etag;
pub mod query;
pub mod response;

pub use document::{Base, Doc};
pub use query::{Accepts, Query};
