//! What the access log says of a request: one line each, with the route's template (never the
//! raw path or the query), the status, the duration, the bytes of the body sent and the name of
//! the caller's token (never the token, never a body). The log itself, its buffer and its
//! thread, is [`crate::app::AccessLog`].

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::AccessLog;

use warp::http::Method;

use crate::tokens::Caller;
use warp::reply::Response;
use warp::Filter;

/// The route a request took, as the access log shows it: `/v1/subjects/{id}/chapters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    Fixed(&'static str),
    Collection(&'static str),
    Item(&'static str),
    Related(&'static str, &'static str),
    Relationship(&'static str, &'static str),
}

impl Template {
    fn push(&self, line: &mut Vec<u8>) {
        let parts: [&str; 4] = match *self {
            Template::Fixed(path) => [path, "", "", ""],
            Template::Collection(t) => ["/v1/", t, "", ""],
            Template::Item(t) => ["/v1/", t, "/{id}", ""],
            Template::Related(t, rel) => ["/v1/", t, "/{id}/", rel],
            Template::Relationship(t, rel) => ["/v1/", t, "/{id}/relationships/", rel],
        };
        for part in parts {
            line.extend_from_slice(part.as_bytes());
        }
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut line = Vec::new();
        self.push(&mut line);
        f.write_str(&String::from_utf8_lossy(&line))
    }
}

/// `r` marked, for the access log and the metrics, with the route it took (`None`: a path that
/// names nothing) and the caller (`None`: refused or unauthenticated). Only when either is on (`on`):
/// extensions are a map allocated on first insert, and nothing else reads these.
pub fn marked(mut r: Response, on: bool, template: Option<Template>, caller: Option<Caller>) -> Response {
    if on {
        if let Some(template) = template {
            r.extensions_mut().insert(template);
        }
        if let Some(caller) = caller {
            r.extensions_mut().insert(caller);
        }
    }
    r
}

/// Records one answered request in `log`: formatted straight into the log's buffer.
pub fn record(log: &AccessLog, method: &Method, r: &Response, took: Duration) {
    let template = r.extensions().get::<Template>();
    if !log.health_checks && matches!(template, Some(Template::Fixed("/healthz" | "/readyz"))) {
        return;
    }
    // The caller's token name, which authentication puts into the response's extensions.
    let name = r.extensions().get::<Caller>().map_or("-", |c| &*c.name);
    let bytes = http_body::Body::size_hint(r.body()).exact();
    let micros = took.as_micros() as u64;
    log.line(crate::time::now_ms(), |buf| {
        buf.extend_from_slice(b"method=");
        value(buf, method.as_str());
        buf.extend_from_slice(b" route=");
        match template {
            Some(t) => t.push(buf),
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" status=");
        digits(buf, u64::from(r.status().as_u16()), 1);
        buf.extend_from_slice(b" ms=");
        digits(buf, micros / 1000, 1);
        buf.push(b'.');
        digits(buf, micros % 1000, 3);
        buf.extend_from_slice(b" bytes=");
        match bytes {
            Some(n) => digits(buf, n, 1),
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" caller=");
        value(buf, name);
    });
}

/// `v` as a logfmt value: as it is, or quoted when it holds a space, a quote or `=`.
fn value(line: &mut Vec<u8>, v: &str) {
    if !v.is_empty() && !v.bytes().any(|b| b <= b' ' || b == b'"' || b == b'=' || b == 0x7f) {
        line.extend_from_slice(v.as_bytes());
    } else {
        let _ = write!(line, "{v:?}");
    }
}

/// `n` in decimal, zero-padded to at least `width` digits.
fn digits(line: &mut Vec<u8>, mut n: u64, width: usize) {
    let mut text = [b'0'; 20];
    let mut start = text.len();
    while n > 0 || text.len() - start < width {
        start -= 1;
        text[start] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    line.extend_from_slice(&text[start..]);
}

/// `inner` with each answer recorded in `log` (when there is one).
pub fn logged<F>(
    inner: F,
    log: Option<Arc<AccessLog>>,
) -> impl Filter<Extract = (Response,), Error = std::convert::Infallible> + Clone
where
    F: Filter<Extract = (Response,), Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
{
    let metrics = crate::metrics::enabled();
    let on = log.is_some() || metrics;
    warp::any().map(move || on.then(Instant::now)).and(warp::method()).and(inner).map(
        move |start: Option<Instant>, method: Method, r: Response| {
            if let Some(start) = start {
                let took = start.elapsed();
                if let Some(log) = &log {
                    record(log, &method, &r, took);
                }
                if metrics {
                    let compressed = r.headers().contains_key(warp::http::header::CONTENT_ENCODING);
                    let template = r.extensions().get::<Template>().copied();
                    crate::metrics::M.request(template, &method, r.status().as_u16(), took, compressed);
                }
            }
            r
        },
    )
}

#[cfg(test)]
mod tests {
    use super::{digits, value};

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut line = Vec::new();
        f(&mut line);
        String::from_utf8(line).unwrap()
    }

    #[test]
    fn numbers_are_written_in_decimal_padded_to_their_width() {
        assert_eq!(text(|l| digits(l, 0, 1)), "0");
        assert_eq!(text(|l| digits(l, 7, 3)), "007");
        assert_eq!(text(|l| digits(l, 1234, 3)), "1234");
        assert_eq!(text(|l| digits(l, u64::MAX, 1)), u64::MAX.to_string());
    }

    #[test]
    fn values_with_spaces_quotes_or_equals_signs_are_quoted() {
        assert_eq!(text(|l| value(l, "config")), "config");
        assert_eq!(text(|l| value(l, "a b")), r#""a b""#);
        assert_eq!(text(|l| value(l, "k=v")), r#""k=v""#);
        assert_eq!(text(|l| value(l, "say \"x\"\n")), r#""say \"x\"\n""#);
        assert_eq!(text(|l| value(l, "")), r#""""#);
    }
}
