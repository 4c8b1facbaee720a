//! Entity tags of documents.
//!
//! A tag is a 128-bit XXH3 hash, written as 32 hex digits in quotes. XXH3 is fixed by its
//! specification, so every replica and every release computes the same tag for the same
//! document (a process-seeded hash would make each replica disagree).
//!
//! * A resource's document (without `include`) is a function of the base URL, the query string
//!   and the row: its tag hashes those, without rendering the document, so that a conditional
//!   `GET` answered 304 costs one row read. The same tag, for the plain document (no query),
//!   is what `If-Match` is compared with on writes to the resource. The plain document's tag
//!   also covers the generation of the resource's to-many linkage (see
//!   [`Selection::tagged`](crate::store::Selection::tagged)), which the document shows only as
//!   links: a write that replaces the set of children must not pass with a tag read before
//!   another client added a child.
//! * Any other document (a page, a linkage, a resource with `include`) is tagged by hashing its
//!   bytes.

use xxhash_rust::xxh3::Xxh3;

use super::Base;
use crate::store::{Cell, Fields, Selection};

/// The tag of the document of resource `rec` read with `sel`, for a request with `query`.
pub fn resource(base: &Base, query: Option<&str>, sel: &Selection, rec: &impl Fields) -> String {
    let mut h = Xxh3::new();
    for part in [base.as_str(), sel.rt.name, rec.id(), query.unwrap_or("")] {
        h.update(part.as_bytes());
        h.update(&[0xff]);
    }
    for i in 0..sel.attrs.len() {
        match rec.attr(i) {
            Cell::Null => h.update(&[0]),
            Cell::Int(n) => {
                h.update(&[1]);
                h.update(&n.to_le_bytes());
            }
            Cell::Bool(b) => h.update(&[2, u8::from(b)]),
            Cell::Time(t) => {
                h.update(&[3]);
                h.update(&t.to_le_bytes());
            }
            Cell::Text(t) => {
                h.update(&[4]);
                h.update(&(t.len() as u64).to_le_bytes());
                h.update(t);
            }
        }
    }
    for i in 0..sel.to_one.len() {
        match rec.parent(i) {
            Some(id) => {
                h.update(&[5]);
                h.update(id.as_bytes());
            }
            None => h.update(&[6]),
        }
    }
    if let Some(generation) = rec.links() {
        h.update(&[7]);
        h.update(&generation.to_le_bytes());
    }
    quoted(h.digest128())
}

/// The tag of a document by its bytes.
pub fn bytes(body: &[u8]) -> String {
    quoted(xxhash_rust::xxh3::xxh3_128(body))
}

/// `"` and the hash in 32 lower-case hex digits and `"` (what `format!("\"{hash:032x}\"")`
/// writes, without the formatting machinery on every request).
fn quoted(hash: u128) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut tag = [b'"'; 34];
    for (i, digit) in tag[1..33].iter_mut().enumerate() {
        *digit = HEX[(hash >> (124 - 4 * i)) as usize & 0xf];
    }
    String::from_utf8_lossy(&tag).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn tags_are_32_hex_digits_in_quotes() {
        for hash in [0u128, 1, 0xabc, u128::MAX, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210] {
            assert_eq!(super::quoted(hash), format!("\"{hash:032x}\""));
        }
    }
}
