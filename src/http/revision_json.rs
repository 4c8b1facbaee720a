//! A revision's resource object written straight to JSON text: the same bytes as
//! `serde_json::to_vec(&revisions::object(base, r))` (the tests hold them equal), without a tree
//! of values on the way. The live stream and webhooks send one for every revision; a create's
//! revision holds the whole resource, whose `content` alone may be kilobytes that the tree would
//! copy, unescape and escape again.
//!
//! serde_json (without `preserve_order`) writes an object's members sorted by name, a string
//! with its own escapes, a number as it parsed it; so does this. A value in the stored
//! `changes` is copied as it is stored when serde_json would write it the same way (a string
//! with no escape serde_json writes otherwise, an integer in its shortest form, `true`, `false`,
//! `null`), and goes through serde_json otherwise.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::render::Base;
use crate::store::history::{revision_id, Revision};

/// Appends the resource object of `r` with links under `base` to `out`.
pub fn write_object(base: &Base, r: &Revision, out: &mut Vec<u8>) {
    let id = revision_id(r.key);
    out.extend_from_slice(b"{\"attributes\":{\"action\":");
    string(out, &r.action);
    out.extend_from_slice(b",\"at\":");
    string(out, &r.at);
    out.extend_from_slice(b",\"by\":");
    string(out, &r.by);
    out.extend_from_slice(b",\"changes\":");
    changes(r, out);
    out.extend_from_slice(b",\"number\":");
    out.extend_from_slice(r.number.to_string().as_bytes());
    out.extend_from_slice(b"},\"id\":");
    string(out, &id);
    out.extend_from_slice(b",\"links\":{\"self\":");
    string(out, &format!("{}/revisions/{id}", base.as_str()));
    out.push(b'}');
    if let Some(seq) = r.seq {
        out.extend_from_slice(b",\"meta\":{\"cursor\":");
        string(out, &seq.to_string());
        out.push(b'}');
    }
    out.extend_from_slice(b",\"relationships\":{\"resource\":{\"data\":{\"id\":");
    string(out, &r.resource_id);
    out.extend_from_slice(b",\"type\":");
    string(out, &r.resource_type);
    out.extend_from_slice(b"},\"links\":{\"related\":");
    string(out, &format!("{}/{}/{}", base.as_str(), r.resource_type, r.resource_id));
    out.extend_from_slice(b"}}},\"type\":\"revisions\"}");
}

/// `{"data": <the resource object>, "jsonapi": {"version": "1.0"}}`: a webhook's body.
pub fn document(base: &Base, r: &Revision) -> Vec<u8> {
    let mut out = Vec::with_capacity(r.changes.len() + 640);
    out.extend_from_slice(b"{\"data\":");
    write_object(base, r, &mut out);
    out.extend_from_slice(b",\"jsonapi\":{\"version\":\"1.0\"}}");
    out
}

/// `changes` as `Revision::changes_object` makes them: each member's `[before, after]` as
/// `{"after": ..., "before": ...}`, a to-one relationship's ids as resource identifiers.
fn changes(r: &Revision, out: &mut Vec<u8>) {
    let Ok(members) = serde_json::from_str::<BTreeMap<String, &RawValue>>(&r.changes) else {
        // Not an object (or not JSON): `changes_object` gives `{}`.
        out.extend_from_slice(b"{}");
        return;
    };
    let rt = crate::resources::by_name(&r.resource_type);
    out.push(b'{');
    for (i, (name, pair)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, name);
        let (before, after) = match serde_json::from_str::<Vec<&RawValue>>(pair.get()) {
            Ok(both) if both.len() == 2 => (Some(both[0]), Some(both[1])),
            _ => (None, Some(*pair)),
        };
        let parent = rt.and_then(|rt| rt.relationship(name)).filter(|r| r.is_to_one()).map(|r| r.fk.parent.name);
        out.extend_from_slice(b":{\"after\":");
        member(out, after, parent);
        out.extend_from_slice(b",\"before\":");
        member(out, before, parent);
        out.push(b'}');
    }
    out.push(b'}');
}

/// One side of a member's change; `None` is `null`. A to-one relationship's id (a string)
/// becomes `{"id": ..., "type": parent}`.
fn member(out: &mut Vec<u8>, value: Option<&RawValue>, parent: Option<&str>) {
    let Some(raw) = value.map(RawValue::get) else {
        out.extend_from_slice(b"null");
        return;
    };
    match parent {
        Some(ty) if raw.starts_with('"') => {
            out.extend_from_slice(b"{\"id\":");
            value_text(out, raw);
            out.extend_from_slice(b",\"type\":");
            string(out, ty);
            out.push(b'}');
        }
        _ => value_text(out, raw),
    }
}

/// A stored JSON value as serde_json writes it once parsed.
fn value_text(out: &mut Vec<u8>, raw: &str) {
    if written_as_stored(raw) {
        out.extend_from_slice(raw.as_bytes());
        return;
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v) => {
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        Err(_) => out.extend_from_slice(b"null"),
    }
}

/// Whether serde_json writes the parsed `raw` as `raw` itself.
fn written_as_stored(raw: &str) -> bool {
    match raw.as_bytes().first() {
        Some(b'"') => canonical_string(raw.as_bytes()),
        Some(b'-' | b'0'..=b'9') => canonical_integer(raw),
        _ => matches!(raw, "true" | "false" | "null"),
    }
}

/// A JSON string (quotes included) whose every escape is the one serde_json writes for that
/// character: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00xx` (lowercase) for the other
/// control characters; nothing else escaped, and no control character unescaped.
fn canonical_string(s: &[u8]) -> bool {
    if s.len() < 2 || s[s.len() - 1] != b'"' {
        return false;
    }
    let body = &s[1..s.len() - 1];
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\\' => match body.get(i + 1) {
                Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    let hex = body.get(i + 2..i + 6);
                    let lower = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
                    let Some(hex) = hex.filter(|h| h.iter().all(lower)) else { return false };
                    let Ok(code) = u8::from_str_radix(std::str::from_utf8(hex).unwrap_or("ff"), 16) else {
                        return false;
                    };
                    // serde_json writes these short, and everything from 0x20 up as itself.
                    if code >= 0x20 || matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) || &hex[..2] != b"00" {
                        return false;
                    }
                    i += 6;
                }
                _ => return false,
            },
            b'"' => return false,
            c if c < 0x20 => return false,
            _ => i += 1,
        }
    }
    true
}

/// An integer serde_json keeps as it is: no sign but `-`, no leading zero, no fraction or
/// exponent, within i64 or u64 (`-0` is a float to serde_json).
fn canonical_integer(raw: &str) -> bool {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
    (plain && (raw.parse::<i64>().is_ok() || raw.parse::<u64>().is_ok())) || raw == "0"
}

/// A string as serde_json writes it.
fn string(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(resource_type: &str, changes: &str, seq: Option<i64>) -> Revision {
        Revision {
            seq,
            key: 0x0001_0000_0000_002a,
            resource_type: resource_type.into(),
            resource_id: "7d5f6b1e-1c1a-4a51-9c53-8d0b5f2a9e10".into(),
            number: 3,
            action: "update".into(),
            at: "2026-11-29T06:00:00.000Z".into(),
            by: "token:editor \"one\"".into(),
            changes: changes.into(),
        }
    }

    /// Every way a stored value may be written, each compared byte for byte with the tree.
    #[test]
    fn writes_the_bytes_serde_json_writes_for_the_tree() {
        let base = Base::new("https", "district.example:8443").unwrap();
        let values = [
            r#""plain""#,
            r#""line\nbreak\ttab \"quoted\" back\\slash""#,
            r#""\u0001\u001f control \b\f\r""#,
            r#""\u0001 as written by another""#,
            r#""\u00e9t\u00E9 escaped""#,
            r#""\u00e9 lowercase only""#,
            r#""\u001F uppercase only""#,
            r#""été as is, 😀""#,
            r#""a \/ slash""#,
            r#""\u0008 short form exists""#,
            r#""\ud83d\ude00 surrogates""#,
            "0",
            "-0",
            "42",
            "-17",
            "007",
            "1.50",
            "1e3",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "true",
            "false",
            "null",
            r#"{"z": 1, "a": [1, "x"]}"#,
            r#"[1,2,3]"#,
        ];
        let mut cases: Vec<Revision> = Vec::new();
        for v in values {
            for changes in
                [format!(r#"{{"title": [null, {v}], "content": [{v}, "after"]}}"#), format!(r#"{{"odd": {v}}}"#)]
            {
                cases.push(revision("subjects", &changes, Some(9)));
            }
        }
        // To-one relationships, odd pairs, no place in the feed, changes that are no object.
        for changes in [
            r#"{"module": [null, "0b9d2f0e-aaaa-4bbb-8ccc-123456789abc"], "title": ["A", "B"]}"#,
            r#"{"module": ["0b9d2f0e-aaaa-4bbb-8ccc-123456789abc", null]}"#,
            r#"{"module": [null, 5], "subject": [null, "x"]}"#,
            r#"{"title": [1, 2, 3], "external_id": []}"#,
            r#"{}"#,
            r#"[]"#,
            "not json",
            r#"{"b": [1, 2], "a": [3, 4], "é": [5, 6], "Z": [7, 8]}"#,
        ] {
            cases.push(revision("subjects", changes, None));
            cases.push(revision("chapters", changes, Some(1)));
            cases.push(revision("no such type", changes, Some(2)));
        }
        for r in &cases {
            let tree = serde_json::to_vec(&crate::http::revisions::object(&base, r)).unwrap();
            let mut text = Vec::new();
            write_object(&base, r, &mut text);
            assert_eq!(String::from_utf8_lossy(&text), String::from_utf8_lossy(&tree), "changes {}", r.changes);
        }
        let doc = serde_json::json!({"jsonapi": {"version": "1.0"}, "data": crate::http::revisions::object(&base, &cases[1])});
        assert_eq!(document(&base, &cases[1]), serde_json::to_vec(&doc).unwrap());
    }
}
