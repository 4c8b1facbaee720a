//! Requests to other servers (webhooks' receivers, the coursed a follower follows): hyper's
//! HTTP/1.1 client over TCP, or over TLS (rustls, the system's certificate authorities) for
//! `https://`, on a connection kept open from one request to the next; each exchange bounded
//! in time and in the bytes it reads.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use warp::http::{Method, Request, Response, Uri};

/// Where a URL points.
#[derive(Debug, Clone)]
pub struct Target {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// `host[:port]` as the `Host` header says it.
    pub authority: String,
    pub path: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        let bad = |why: &str| format!("{url:?}: {why}");
        let uri: Uri = url.parse().map_err(|_| bad("not a URL like https://lms.school.example/hooks/coursed"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("it must start with http:// or https://")),
        };
        let authority = uri.authority().ok_or_else(|| bad("it names no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("a user name or password in the URL would be logged; the signature says who sends"));
        }
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
        if host.is_empty() {
            return Err(bad("it names no host"));
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let path = uri.path_and_query().map_or("/".to_owned(), |p| p.as_str().to_owned());
        Ok(Target { tls, host, port, authority: authority.as_str().to_owned(), path })
    }
}

/// What a POST ended in: the status the receiver answered, or why there was none.
pub type Answer = Result<u16, String>;

/// How much of an answer's body a POST reads (and drops) so that its connection can carry the
/// next request; a longer body closes the connection instead.
const MOST_BODY: usize = 64 << 10;

/// A connection to one server, kept open from one request to the next (HTTP/1.1 keep-alive)
/// and made again when the server closed it.
pub struct Connection {
    target: Target,
    sender: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

impl Connection {
    pub fn new(target: Target) -> Connection {
        Connection { target, sender: None }
    }

    /// POSTs `body` with `headers` to the target's path, within `limit` (connecting and TLS
    /// included when a new connection is needed, the answer's status line, headers and a short
    /// body); only the status counts.
    pub async fn post(&mut self, headers: &[(&str, String)], body: Bytes, limit: Duration) -> Answer {
        let path = self.target.path.clone();
        let answer = within(limit, async {
            let response = self.send(Method::POST, &path, headers, body).await?;
            let status = response.status().as_u16();
            // The body is read (at most `MOST_BODY`) so that the connection can serve again.
            if read(response.into_body(), MOST_BODY).await.is_none() {
                self.sender = None;
            }
            Ok(status)
        })
        .await;
        if answer.is_err() {
            // Whatever state the connection is in, the next request starts on a new one.
            self.sender = None;
        }
        answer
    }

    /// GETs `path` with `headers` within `limit`: the status and the body, which may be at
    /// most `most` bytes (longer is an error, and the connection is closed).
    pub async fn get(
        &mut self,
        path: &str,
        headers: &[(&str, String)],
        limit: Duration,
        most: usize,
    ) -> Result<(u16, Bytes), String> {
        let got = within(limit, async {
            let response = self.send(Method::GET, path, headers, Bytes::new()).await?;
            let status = response.status().as_u16();
            let body = read(response.into_body(), most).await;
            body.map(|b| (status, b)).ok_or_else(|| format!("the answer was cut short or longer than {most} bytes"))
        })
        .await;
        if got.is_err() {
            self.sender = None;
        }
        got
    }

    /// GETs `path` for a body that streams for long (server-sent events): the status within
    /// `limit`, and the body to read as it comes. The connection is the body's until it ends.
    pub async fn open(
        &mut self,
        path: &str,
        headers: &[(&str, String)],
        limit: Duration,
    ) -> Result<(u16, Incoming), String> {
        let opened = within(limit, self.send(Method::GET, path, headers, Bytes::new())).await;
        // A streaming body holds its connection: the next request makes another.
        self.sender = None;
        opened.map(|r| (r.status().as_u16(), r.into_body()))
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Response<Incoming>, String> {
        let reusable = match self.sender.as_mut() {
            Some(sender) => sender.ready().await.is_ok(),
            None => false,
        };
        if !reusable {
            self.sender = Some(connect(&self.target).await?);
        }
        let Some(sender) = self.sender.as_mut() else { return Err("no connection".to_owned()) };
        let target = &self.target;
        let mut request = Request::builder().method(method).uri(path).header("host", target.authority.as_str());
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let request = request.body(Full::new(body)).map_err(|e| format!("cannot make the request: {e}"))?;
        sender.send_request(request).await.map_err(|e| format!("{} did not answer: {e}", target.authority))
    }
}

/// What `work` ended in, if it ended within `limit`.
async fn within<T>(limit: Duration, work: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::time::timeout(limit, work).await.unwrap_or_else(|_| Err(format!("no answer within {} s", limit.as_secs())))
}

/// The whole of `body`, if it ends well within `most` bytes.
async fn read(mut body: Incoming, most: usize) -> Option<Bytes> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.ok()?;
        if let Some(data) = frame.data_ref() {
            if out.len() + data.len() > most {
                return None;
            }
            out.extend_from_slice(data);
        }
    }
    Some(out.into())
}

/// One POST on a connection of its own (`coursed webhook test`).
pub async fn post(target: &Target, headers: &[(&str, String)], body: Bytes, limit: Duration) -> Answer {
    Connection::new(target.clone()).post(headers, body, limit).await
}

async fn connect(target: &Target) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String> {
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", target.authority))?;
    let _ = tcp.set_nodelay(true);
    if !target.tls {
        return handshake(tcp, target).await;
    }
    let name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|_| format!("{:?} is not a host name TLS can check", target.host))?;
    let tls = tokio_rustls::TlsConnector::from(tls_config()?)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {} failed: {e}", target.authority))?;
    handshake(tls, target).await
}

async fn handshake<S>(
    stream: S,
    target: &Target,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP with {} failed: {e}", target.authority))?;
    // The connection is driven beside its requests; it ends when its sender is dropped.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// TLS as browsers do it: the system's certificate authorities (Debian's `ca-certificates`, with
/// whatever the school added), TLS 1.2 and 1.3.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err("no certificate authority found on this system (install ca-certificates)".to_owned());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn urls_name_a_scheme_and_a_host_and_no_password() {
        let t = Target::parse("https://lms.example/hooks/coursed?x=1").unwrap();
        assert!(t.tls);
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("lms.example", 443, "/hooks/coursed?x=1"));
        let t = Target::parse("http://127.0.0.1:9000").unwrap();
        assert_eq!((t.tls, t.port, t.path.as_str(), t.authority.as_str()), (false, 9000, "/", "127.0.0.1:9000"));
        assert_eq!(Target::parse("http://[::1]:8/x").unwrap().host, "::1");
        for bad in ["ftp://x/", "lms.example/hook", "https://user:pw@lms.example/", "http:///x", ""] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
