mod binary;
mod collections;
mod errors;
mod helpers;
mod include_fields;
mod openapi;
mod relationships;
mod resources;
