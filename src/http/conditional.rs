//! Conditional requests: `ETag` and `If-None-Match` on reads (304 Not Modified), `If-Match` on
//! writes (412 Precondition Failed, or 428 Precondition Required with `--require-if-match`).
//!
//! Tags come from [`crate::render::etag`]. A compressed response carries its tag with the
//! coding appended (`"…-gz"`, `"…-br"`: a strong tag names one exact byte sequence), and every
//! write's `If-Match` ignores that suffix (a tag of any coding names the document's state); a
//! read's `If-None-Match` takes a coded tag only for the coding the request would get now.

use warp::http::header::{HeaderValue, ACCEPT_ENCODING, ETAG, IF_MATCH, IF_NONE_MATCH};
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

use super::compress::{self, Coding};
use super::reply::document;
use crate::error::{Error, Problem, Result};
use crate::render::etag;

/// The suffixes compressed responses add to a tag.
pub const CODING_SUFFIXES: [&str; 2] = ["-gz", "-br"];

/// A 200 document tagged by its bytes, or 304 when the request's `If-None-Match` names it
/// (`compression`: whether the server compresses, see [`if_none_match`]).
pub fn tagged(headers: &HeaderMap, compression: bool, body: bytes::Bytes) -> Response {
    let tag = etag::bytes(&body);
    let inm = if_none_match(headers, compression);
    if names(inm.as_deref(), &tag) {
        return not_modified(&revalidated_tag(&tag, inm.as_deref()));
    }
    with_tag(document(StatusCode::OK, body), &tag)
}

/// 304 with `tag`, no body.
pub fn not_modified(tag: &str) -> Response {
    let mut r = Response::new(Default::default());
    *r.status_mut() = StatusCode::NOT_MODIFIED;
    with_tag(r, tag)
}

/// The `ETag` of a 304 for the document tagged `tag`: the member of `if_none_match` (as
/// [`if_none_match`] left it) that names `tag`, with that member's coding suffix if it has one.
/// That is the tag the request's 200 would carry when it names a coding (the one the request
/// accepts, of a body large enough to have been compressed), and the client's own copy
/// otherwise.
pub fn revalidated_tag(tag: &str, if_none_match: Option<&str>) -> String {
    let suffix = if_none_match.and_then(|v| tags(v).filter(|t| same(t, tag)).find_map(coding_suffix));
    match (suffix, tag.strip_suffix('"')) {
        (Some(suffix), Some(open)) => format!("{open}{suffix}\""),
        _ => tag.to_owned(),
    }
}

/// The coding suffix of an entity tag (`W/` and quotes aside), if it has one.
fn coding_suffix(t: &str) -> Option<&'static str> {
    let t = t.strip_prefix("W/").unwrap_or(t).trim_matches('"');
    CODING_SUFFIXES.iter().copied().find(|s| t.ends_with(s))
}

/// `r` with `ETag: tag`.
pub fn with_tag(mut r: Response, tag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(tag) {
        r.headers_mut().insert(ETAG, v);
    }
    r
}

/// The request's `If-None-Match`, to take along into a unit of work, without the members that
/// name a coding the request would not get now: a copy compressed in another coding (or at
/// all, when the request accepts none or `compression` is off) is not the representation a 200
/// would send, so it cannot be revalidated (RFC 9111 §4.3.4: a 304 must name the copy it
/// refreshes). A member without a coding names the document as it is, which every client
/// accepts.
pub fn if_none_match(headers: &HeaderMap, compression: bool) -> Option<String> {
    let value = headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok())?;
    if value.trim() == "*" || !tags(value).any(|t| coding_suffix(t).is_some()) {
        return Some(value.to_owned());
    }
    let accepted = headers.get(ACCEPT_ENCODING).and_then(|v| v.to_str().ok()).and_then(compress::negotiate);
    let now = accepted.filter(|_| compression).map(Coding::tag_suffix);
    let kept: Vec<&str> = tags(value).filter(|t| coding_suffix(t).is_none_or(|s| Some(s) == now)).collect();
    Some(kept.join(", "))
}

/// Whether an `If-None-Match` value names `tag` (or is `*`): weak comparison, as RFC 9110 asks.
pub fn names(if_none_match: Option<&str>, tag: &str) -> bool {
    let Some(v) = if_none_match else { return false };
    v.trim() == "*" || tags(v).any(|t| same(t, tag))
}

/// What a write's `If-Match` asks, read before the write runs.
#[derive(Debug, Clone)]
pub enum IfMatch {
    /// No `If-Match`: the write proceeds.
    Absent,
    /// `*`: proceeds when the resource exists.
    Any,
    /// Proceeds when the current tag is one of these (strong comparison).
    Tags(Vec<String>),
}

impl IfMatch {
    /// The request's `If-Match`; 428 when it has none and `required` is set.
    pub fn of(headers: &HeaderMap, required: bool) -> Result<IfMatch> {
        IfMatch::parse(headers.get(IF_MATCH).map(|v| v.to_str().unwrap_or("")), required)
    }

    /// An `If-Match` value (or none); 428 when there is none and `required` is set.
    pub fn parse(value: Option<&str>, required: bool) -> Result<IfMatch> {
        let Some(v) = value else {
            if required {
                return Err(Problem::new(
                    StatusCode::PRECONDITION_REQUIRED,
                    "precondition_required",
                    "This server requires `If-Match` on writes to existing resources and relationships: send the \
                     `ETag` of the document you read (or `*`).",
                )
                .into());
            }
            return Ok(IfMatch::Absent);
        };
        if v.trim() == "*" {
            return Ok(IfMatch::Any);
        }
        // A weak tag never matches strongly; it is kept so that the 412 says what was sent.
        Ok(IfMatch::Tags(tags(v).map(str::to_owned).collect()))
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, IfMatch::Absent)
    }

    /// Passes when the condition holds for the target's current tag; else the 412 to answer.
    /// A target that does not exist (`None`) passes: the write then answers 404, as it would
    /// without the header (RFC 9110 13.2.1: preconditions are ignored when the answer without
    /// them would be neither a 2xx nor a 412).
    pub fn check(&self, current: Option<&str>) -> Result<()> {
        let held = match (self, current) {
            (IfMatch::Absent | IfMatch::Any, _) | (_, None) => true,
            (IfMatch::Tags(tags), Some(current)) => tags.iter().any(|t| !t.starts_with("W/") && same(t, current)),
        };
        if held {
            return Ok(());
        }
        let detail = format!(
            "`If-Match` does not name the current version of the target (its ETag is now {}): it changed since you \
             read it. Nothing was changed; read it again and reapply your change.",
            current.unwrap_or_default()
        );
        Err(Error::from(Problem::new(StatusCode::PRECONDITION_FAILED, "precondition_failed", detail)))
    }
}

/// The entity tags of a list header, as sent (`W/` kept); malformed members are skipped.
fn tags(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|t| {
        let t = t.strip_prefix("W/").unwrap_or(t);
        t.len() >= 2 && t.starts_with('"') && t.ends_with('"')
    })
}

/// Whether two tags name the same document, ignoring weakness and the coding suffix.
fn same(a: &str, b: &str) -> bool {
    opaque(a) == opaque(b)
}

fn opaque(t: &str) -> &str {
    let t = t.strip_prefix("W/").unwrap_or(t).trim_matches('"');
    CODING_SUFFIXES.iter().find_map(|s| t.strip_suffix(s)).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: warp::http::header::HeaderName, v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn if_none_match_compares_weakly_and_takes_a_coded_tag_only_for_the_coding_accepted() {
        let tag = "\"abc\"";
        let names_tag = |inm: &str, accept: Option<&str>, compression: bool| {
            let mut h = headers(IF_NONE_MATCH, inm);
            if let Some(a) = accept {
                h.insert(ACCEPT_ENCODING, HeaderValue::from_str(a).unwrap());
            }
            names(if_none_match(&h, compression).as_deref(), tag)
        };
        for v in ["\"abc\"", "W/\"abc\"", "\"x\", \"abc\"", "*", "\"abc-br\", W/\"abc\""] {
            assert!(names_tag(v, None, true), "{v}");
        }
        for v in ["\"abd\"", "abc", "\"ab\"", ""] {
            assert!(!names_tag(v, Some("gzip"), true), "{v}");
        }
        assert!(names_tag("\"abc-gz\"", Some("gzip, br"), true));
        assert!(names_tag("\"x\", W/\"abc-br\"", Some("br"), true));
        // A copy in another coding, or compressed when nothing would be now: not this response.
        assert!(!names_tag("\"abc-gz\"", Some("br"), true));
        assert!(!names_tag("\"abc-gz\"", None, true));
        assert!(!names_tag("\"abc-gz\"", Some("gzip"), false));
        assert!(!names(if_none_match(&HeaderMap::new(), true).as_deref(), tag));
        // The 304 names the member that matched.
        assert_eq!(revalidated_tag(tag, Some("\"x\", W/\"abc-gz\"")), "\"abc-gz\"");
        assert_eq!(revalidated_tag(tag, Some("*")), tag);
    }

    #[test]
    fn if_match_compares_strongly() {
        let check = |v: &str, current: Option<&str>| IfMatch::of(&headers(IF_MATCH, v), false).unwrap().check(current);
        assert!(check("\"abc\"", Some("\"abc\"")).is_ok());
        assert!(check("\"x\" , \"abc-gz\"", Some("\"abc\"")).is_ok());
        assert!(check("*", Some("\"abc\"")).is_ok());
        assert!(check("*", None).is_ok(), "a missing target answers 404 from the write itself");
        assert!(check("\"abc\"", None).is_ok());
        assert_eq!(check("W/\"abc\"", Some("\"abc\"")).unwrap_err().status, StatusCode::PRECONDITION_FAILED);
        assert_eq!(check("\"abd\"", Some("\"abc\"")).unwrap_err().status, StatusCode::PRECONDITION_FAILED);
        assert!(IfMatch::of(&HeaderMap::new(), false).unwrap().check(None).is_ok());
        let required = IfMatch::of(&HeaderMap::new(), true).unwrap_err();
        assert_eq!(required.status, StatusCode::PRECONDITION_REQUIRED);
    }
}
