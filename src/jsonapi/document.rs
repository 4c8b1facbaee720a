//! Writing JSON:API response documents.
//!
//! Documents are written straight into one byte buffer from the declarations and the rows read:
//! no intermediate `serde_json::Value` tree, compact JSON, UTF-8 left unescaped.

use std::io::Write as _;

use rusqlite::types::Value;

use crate::resources::{Kind, Relationship};
use crate::store::{Record, Selection};

/// The absolute URL prefix of the API, e.g. `http://127.0.0.1:8080/v1`. Checked to hold only
/// characters that need no escaping in JSON or in a URL, so it is written as is.
#[derive(Debug, Clone)]
pub struct Base(String);

impl Base {
    /// The base for `scheme://authority`; `None` when the authority holds unexpected characters.
    pub fn new(scheme: &str, authority: &str) -> Option<Base> {
        let ok = !authority.is_empty()
            && authority.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
            && (scheme == "http" || scheme == "https");
        ok.then(|| Base(format!("{scheme}://{authority}/v1")))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// `scheme://authority`, without `/v1`.
    pub fn origin(&self) -> &str {
        &self.0[..self.0.len() - 3]
    }
}

/// A response document being written.
pub struct Doc {
    buf: Vec<u8>,
}

impl Doc {
    /// Starts a document: `{"jsonapi":{"version":"1.0"}`; members follow with [`Doc::member`].
    pub fn new(capacity: usize) -> Doc {
        let mut buf = Vec::with_capacity(capacity.max(256));
        buf.extend_from_slice(br#"{"jsonapi":{"version":"1.0"}"#);
        Doc { buf }
    }

    /// Writes `,"name":` (the value follows).
    pub fn member(&mut self, name: &str) {
        self.buf.push(b',');
        self.string(name);
        self.buf.push(b':');
    }

    pub fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub fn number(&mut self, n: i64) {
        let _ = write!(self.buf, "{n}");
    }

    /// Writes `s` as a JSON string.
    pub fn string(&mut self, s: &str) {
        self.buf.push(b'"');
        escape_into(&mut self.buf, s);
        self.buf.push(b'"');
    }

    /// Writes a URL string made of `base` and the path segments, each after a `/`.
    pub fn url(&mut self, base: &Base, segments: &[&str]) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(base.0.as_bytes());
        for s in segments {
            self.buf.push(b'/');
            escape_into(&mut self.buf, s);
        }
        self.buf.push(b'"');
    }

    /// Writes a resource identifier object.
    pub fn identifier(&mut self, type_name: &str, id: &str) {
        self.raw(r#"{"type":"#);
        self.string(type_name);
        self.raw(r#","id":"#);
        self.string(id);
        self.buf.push(b'}');
    }

    /// Writes one resource object of the selection.
    pub fn resource(&mut self, base: &Base, sel: &Selection, rec: &Record) {
        let ty = sel.rt.name;
        self.raw(r#"{"type":"#);
        self.string(ty);
        self.raw(r#","id":"#);
        self.string(&rec.id);
        if !sel.attrs.is_empty() {
            self.raw(r#","attributes":{"#);
            for (i, (attr, value)) in sel.attrs.iter().zip(&rec.attrs).enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                self.string(attr.name);
                self.buf.push(b':');
                self.value(attr.kind, value);
            }
            self.buf.push(b'}');
        }
        if !sel.rels.is_empty() {
            self.raw(r#","relationships":{"#);
            for (i, rel) in sel.rels.iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                self.relationship(base, ty, &rec.id, rel, sel, rec);
            }
            self.buf.push(b'}');
        }
        self.raw(r#","links":{"self":"#);
        self.url(base, &[ty, &rec.id]);
        self.raw("}}");
    }

    fn relationship(&mut self, base: &Base, ty: &str, id: &str, rel: &Relationship, sel: &Selection, rec: &Record) {
        self.string(rel.name);
        self.raw(r#":{"links":{"self":"#);
        self.url(base, &[ty, id, "relationships", rel.name]);
        self.raw(r#","related":"#);
        self.url(base, &[ty, id, rel.name]);
        self.buf.push(b'}');
        let target = rel.target().name;
        if rel.is_to_one() {
            self.raw(r#","data":"#);
            match sel.parent_of(rec, rel) {
                Some(parent) => self.identifier(target, parent),
                None => self.raw("null"),
            }
        } else if let Some(children) = rec.children_of(rel) {
            self.raw(r#","data":["#);
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                self.identifier(target, child);
            }
            self.buf.push(b']');
        }
        self.buf.push(b'}');
    }

    fn value(&mut self, kind: Kind, value: &Value) {
        match (kind, value) {
            (_, Value::Null) => self.raw("null"),
            (Kind::Bool, Value::Integer(i)) => self.raw(if *i != 0 { "true" } else { "false" }),
            (_, Value::Integer(i)) => self.number(*i),
            (_, Value::Text(s)) => self.string(s),
            (_, Value::Real(f)) => {
                let _ = write!(self.buf, "{f}");
            }
            (_, Value::Blob(b)) => self.string(&String::from_utf8_lossy(b)),
        }
    }

    /// Closes the document and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(b'}');
        self.buf
    }
}

/// Bytes that JSON strings must escape: 0 none, `u` for `\u00XX`, else the letter after `\`.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[0x08] = b'b';
    t[0x0c] = b'f';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Appends `s` JSON-escaped (without quotes): runs that need no escaping are copied whole.
pub fn escape_into(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc = ESCAPE[b as usize];
        if esc == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if esc == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        } else {
            out.extend_from_slice(&[b'\\', esc]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_matches_serde_json() {
        for s in ["plain", "quote \" and \\ back", "line\nbreak\ttab\r\u{1}\u{1f}", "café Zürich ✓", ""] {
            let mut out = Vec::new();
            escape_into(&mut out, s);
            let ours = format!("\"{}\"", String::from_utf8(out).unwrap());
            assert_eq!(serde_json::from_str::<String>(&ours).unwrap(), s);
        }
    }
}
