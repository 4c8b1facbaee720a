//! The answers hyper writes itself, to requests it cannot parse (a request target or header
//! section too long, more than 100 header lines, a malformed `Content-Length`, bytes a request
//! line may not hold): before any handler runs, hyper sends a status line, `connection: close`,
//! `content-length: 0` and the date, then closes the connection. So that every error leaves
//! the server as a JSON:API error document, the connection's writer (`watched.rs`) hands each
//! such head to [`rewrite`] and sends the document instead.
//!
//! The request was never read, so its `Origin` is unknown: these answers carry no CORS headers.

use warp::http::StatusCode;

use crate::error::{Error, Problem};

/// The response to send instead of `head`, when `head` is one of hyper's own error answers (a
/// whole response head, an error status, an empty body, the connection closing; every answer
/// of the handlers to an error has a body); `None` for any other bytes.
pub fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    // Cheap refusals first: this sees every write of every connection.
    if head.len() < 16 || head.len() > 512 || !head.starts_with(b"HTTP/1.") || !matches!(head[9], b'4' | b'5') {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?.strip_suffix("\r\n\r\n")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let status = StatusCode::from_bytes(status_line.get(9..12)?.as_bytes()).ok()?;
    let headers: Vec<&str> = lines.collect();
    let has = |line: &str| headers.iter().any(|h| h.eq_ignore_ascii_case(line));
    // HTTP/1.0 answers close the connection without saying so.
    let closes = status_line.starts_with("HTTP/1.0") || has("connection: close");
    if !has("content-length: 0") || !closes || headers.iter().any(|h| is(h, "content-type")) {
        return None;
    }
    let body = Error::from(problem(status)).to_document();
    let mut out = format!("{status_line}\r\n");
    for h in headers.iter().filter(|h| !is(h, "content-length")) {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str(&format!("content-type: application/vnd.api+json\r\ncontent-length: {}\r\n\r\n", body.len()));
    let mut out = out.into_bytes();
    out.extend_from_slice(&body);
    Some(out)
}

/// Whether the header line `line` is a `name` field.
fn is(line: &str, name: &str) -> bool {
    line.split_once(':').is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
}

fn problem(status: StatusCode) -> Problem {
    let (code, detail) = match status {
        StatusCode::URI_TOO_LONG => ("uri_too_long", "The request target is too long to be read."),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "header_fields_too_large",
            "The request has too many header fields, or a header section too large to be read.",
        ),
        StatusCode::BAD_REQUEST => (
            "malformed_request",
            "The request could not be read as HTTP/1.1: its request line, a header field or its \
             Content-Length is malformed.",
        ),
        _ => ("malformed_request", "The request could not be read."),
    };
    Problem::new(status, code, detail)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    const HYPER_400: &[u8] =
        b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 25 Nov 2026 17:15:42 GMT\r\n\r\n";

    #[test]
    fn hypers_own_error_heads_become_json_api_documents() {
        let out = String::from_utf8(rewrite(HYPER_400).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n"), "{head}");
        assert!(head.contains("\r\ndate: Wed, 25 Nov 2026 17:15:42 GMT"), "{head}");
        assert!(head.contains("\r\ncontent-type: application/vnd.api+json"), "{head}");
        assert!(head.ends_with(&format!("content-length: {}", body.len())), "{head}");
        let doc: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(doc["errors"][0]["status"], "400");
        assert_eq!(doc["errors"][0]["code"], "malformed_request");
        let long = b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert!(String::from_utf8(rewrite(long).unwrap()).unwrap().contains("\"code\":\"uri_too_long\""));
        let old_http = b"HTTP/1.0 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert!(String::from_utf8(rewrite(old_http).unwrap()).unwrap().starts_with("HTTP/1.0 400 Bad Request\r\n"));
    }

    #[test]
    fn every_other_write_is_left_alone() {
        let ours = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/vnd.api+json\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        let with_body = [HYPER_400, b"x"].concat();
        let kept_open = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let success = b"HTTP/1.1 204 No Content\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        for bytes in [&ours[..], &with_body, kept_open, success, b"{\"data\":[]}", b""] {
            assert_eq!(rewrite(bytes), None, "{}", String::from_utf8_lossy(bytes));
        }
    }
}
