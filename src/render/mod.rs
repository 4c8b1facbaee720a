//! Writing JSON:API response documents: the document writer (here), whole responses
//! (`response.rs`), entity tags (`etag.rs`) and JSON escaping (`escape.rs`).
//!
//! Documents are written straight into one byte buffer from the declarations and the rows read:
//! no intermediate `serde_json::Value` tree, compact JSON, UTF-8 left unescaped.

pub mod escape;
pub mod etag;
pub mod response;

use std::io::Write as _;

use self::escape::{escape_into, escape_utf8_into};
use crate::resources::{Kind, Relationship};
use crate::store::{Cell, Fields, Selection};

/// The absolute URL prefix of the API, e.g. `http://127.0.0.1:8080/v1`. Checked to hold only
/// characters that need no escaping in JSON or in a URL, so it is written as is.
#[derive(Debug, Clone)]
pub struct Base(String);

impl Base {
    /// The base for `scheme://authority`; `None` when the authority holds unexpected characters.
    pub fn new(scheme: &str, authority: &str) -> Option<Base> {
        let ok = Base::is_authority(authority) && (scheme == "http" || scheme == "https");
        // Built by hand: this runs for every request, and `format!` costs several times more.
        ok.then(|| {
            let mut base = String::with_capacity(scheme.len() + authority.len() + 6);
            for part in [scheme, "://", authority, "/v1"] {
                base.push_str(part);
            }
            Base(base)
        })
    }
    /// Whether `authority` is a host name or address with an optional port, as links may hold.
    pub fn is_authority(authority: &str) -> bool {
        !authority.is_empty() && authority.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
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
    /// The escaped URL of the resource being written, which all its links start with.
    self_url: Vec<u8>,
}

impl Doc {
    /// Starts a document: `{"jsonapi":{"version":"1.0"}`; members follow with [`Doc::member`].
    pub fn new(capacity: usize) -> Doc {
        let mut buf = Vec::with_capacity(capacity.max(256));
        buf.extend_from_slice(br#"{"jsonapi":{"version":"1.0"}"#);
        Doc { buf, self_url: Vec::with_capacity(128) }
    }

    /// The bytes written so far.
    pub fn written(&self) -> usize {
        self.buf.len()
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
    pub fn resource(&mut self, base: &Base, sel: &Selection, rec: &impl Fields) {
        self.resource_with_meta(base, sel, rec, None);
    }

    /// Writes one resource object of the selection, with `meta` (a JSON object) when given.
    pub fn resource_with_meta(&mut self, base: &Base, sel: &Selection, rec: &impl Fields, meta: Option<&str>) {
        let ty = sel.rt.name;
        let id = rec.id();
        self.self_url.clear();
        self.self_url.extend_from_slice(base.0.as_bytes());
        for segment in [ty, id] {
            self.self_url.push(b'/');
            escape_into(&mut self.self_url, segment);
        }
        self.raw(r#"{"type":"#);
        self.string(ty);
        self.raw(r#","id":"#);
        self.string(id);
        self.attributes(sel, rec);
        if !sel.rels.is_empty() {
            self.raw(r#","relationships":{"#);
            for (i, rel) in sel.rels.iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                self.relationship(rel, sel, rec);
            }
            self.buf.push(b'}');
        }
        if let Some(meta) = meta {
            self.raw(r#","meta":"#);
            self.raw(meta);
        }
        self.raw(r#","links":{"self":""#);
        self.buf.extend_from_slice(&self.self_url);
        self.raw("\"}}");
    }

    /// Writes `,"attributes":{...}` of the selection (nothing when it has none).
    fn attributes(&mut self, sel: &Selection, rec: &impl Fields) {
        if sel.attrs.is_empty() {
            return;
        }
        self.raw(r#","attributes":{"#);
        for (i, attr) in sel.attrs.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            self.string(attr.name);
            self.buf.push(b':');
            self.value(attr.kind, rec.attr(i));
        }
        self.buf.push(b'}');
    }

    /// An empty buffer for one line of a bundle (see [`Doc::portable`]), not a document.
    pub fn line() -> Doc {
        Doc { buf: Vec::with_capacity(4096), self_url: Vec::new() }
    }

    /// Writes a resource object as a bundle carries it: `type`, `id`, the attributes of the
    /// selection (written as the API writes them), and its to-one relationships with their
    /// linkage only; no links.
    pub fn portable(&mut self, sel: &Selection, rec: &impl Fields) {
        self.raw(r#"{"type":"#);
        self.string(sel.rt.name);
        self.raw(r#","id":"#);
        self.string(rec.id());
        self.attributes(sel, rec);
        if !sel.to_one.is_empty() {
            self.raw(r#","relationships":{"#);
            for (i, rel) in sel.to_one.iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                self.string(rel.name);
                self.raw(r#":{"data":"#);
                match sel.parent_of(rec, rel) {
                    Some(parent) => self.identifier(rel.target().name, parent),
                    None => self.raw("null"),
                }
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
        }
        self.buf.push(b'}');
    }

    /// The bytes written so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Empties the buffer, keeping its memory.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Writes the resource URL followed by `suffixes`, as a JSON string.
    fn link(&mut self, suffixes: &[&str]) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(&self.self_url);
        for s in suffixes {
            self.buf.push(b'/');
            escape_into(&mut self.buf, s);
        }
        self.buf.push(b'"');
    }

    fn relationship(&mut self, rel: &Relationship, sel: &Selection, rec: &impl Fields) {
        self.string(rel.name);
        self.raw(r#":{"links":{"self":"#);
        self.link(&["relationships", rel.name]);
        self.raw(r#","related":"#);
        self.link(&[rel.name]);
        self.buf.push(b'}');
        let target = rel.target().name;
        if rel.is_to_one() {
            self.raw(r#","data":"#);
            match sel.parent_of(rec, rel) {
                Some(parent) => self.identifier(target, parent),
                None => self.raw("null"),
            }
        } else if let Some(children) = rec.children(rel) {
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

    fn value(&mut self, kind: Kind, value: Cell<'_>) {
        match (kind, value) {
            (_, Cell::Null) => self.raw("null"),
            (Kind::Bool, Cell::Int(i)) => self.raw(if i != 0 { "true" } else { "false" }),
            (_, Cell::Bool(b)) => self.raw(if b { "true" } else { "false" }),
            (_, Cell::Int(i)) => self.number(i),
            (_, Cell::Text(t)) => {
                self.buf.push(b'"');
                if !escape_utf8_into(&mut self.buf, t) {
                    // Not UTF-8 (written by another program): send it with replacement characters.
                    escape_into(&mut self.buf, &String::from_utf8_lossy(t));
                }
                self.buf.push(b'"');
            }
            (_, Cell::Time(ms)) => self.string(&crate::time::format_ms(ms)),
        }
    }

    /// Closes the document and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(b'}');
        self.buf
    }
}
