//! One POST to a webhook's URL: hyper's HTTP/1.1 client over TCP, or over TLS (rustls, the
//! system's certificate authorities) for `https://`; a new connection for each delivery, the
//! whole exchange bounded in time. Only the status is read of the answer.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use warp::http::{Request, Uri};

/// Where a webhook's URL points.
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
        let bad = |why: &str| format!("--url {url:?}: {why}");
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

/// POSTs `body` with `headers` to `target`, within `limit` (connecting, TLS, sending, and the
/// answer's status line and headers).
pub async fn post(target: &Target, headers: &[(&str, String)], body: Bytes, limit: Duration) -> Answer {
    match tokio::time::timeout(limit, exchange(target, headers, body)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer within {} s", limit.as_secs())),
    }
}

async fn exchange(target: &Target, headers: &[(&str, String)], body: Bytes) -> Answer {
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", target.authority))?;
    let _ = tcp.set_nodelay(true);
    if !target.tls {
        return send(tcp, target, headers, body).await;
    }
    let name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|_| format!("{:?} is not a host name TLS can check", target.host))?;
    let tls = tokio_rustls::TlsConnector::from(tls_config()?)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {} failed: {e}", target.authority))?;
    send(tls, target, headers, body).await
}

async fn send<S>(stream: S, target: &Target, headers: &[(&str, String)], body: Bytes) -> Answer
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP with {} failed: {e}", target.authority))?;
    // The connection is driven beside the request; it ends when the request is dropped.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut request = Request::post(target.path.as_str()).header("host", target.authority.as_str());
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    let request = request.body(Full::new(body)).map_err(|e| format!("cannot make the request: {e}"))?;
    let response =
        sender.send_request(request).await.map_err(|e| format!("{} did not answer: {e}", target.authority))?;
    Ok(response.status().as_u16())
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
