//! HTTPS, against the real binary with certificates made here (a test authority signs each
//! server certificate): HTTP/2 and HTTP/1.1 by ALPN, TLS 1.2 and 1.3, links in `https`, the
//! head's timeout kept, a clear refusal at start of a certificate or key that cannot serve,
//! and renewals (a file replaced, a `SIGHUP`, a broken file) under load without a request lost.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

use crate::helpers::{JSONAPI, TOKEN};
use crate::process::{Server, Starting};

/// A certificate authority of the test, and server certificates it signs for `localhost`.
struct Authority {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

/// A server certificate and its key, as PEM.
struct Issued {
    cert: String,
    key: String,
}

impl Authority {
    fn new() -> Authority {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "coursed test authority");
        let key = rcgen::KeyPair::generate().unwrap();
        Authority { cert: params.self_signed(&key).unwrap(), key }
    }

    /// A certificate for `localhost` valid from `from` to `to` days from today.
    fn issue_dated(&self, from: i64, to: i64) -> Issued {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now + time::Duration::days(from);
        params.not_after = now + time::Duration::days(to);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued { cert: cert.pem(), key: key.serialize_pem() }
    }

    fn issue(&self) -> Issued {
        self.issue_dated(-1, 90)
    }

    fn client(&self, alpn: &[&[u8]], tls12_only: bool) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] =
            if tls12_only { &[&rustls::version::TLS12] } else { &[&rustls::version::TLS13, &rustls::version::TLS12] };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// Writes `issued` into `dir` as `cert.pem` and `key.pem`, each replaced whole (a new file
/// renamed over the old, as renewal tools do).
fn install(dir: &Path, issued: &Issued) {
    for (name, text) in [("key.pem", &issued.key), ("cert.pem", &issued.cert)] {
        let next = dir.join(format!("{name}.next"));
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, dir.join(name)).unwrap();
    }
}

fn start(dir: &Path, extra: &[&str]) -> Server {
    let (cert, key, db) = (dir.join("cert.pem"), dir.join("key.pem"), dir.join("coursed.db"));
    let mut args = vec![
        "--database",
        db.to_str().unwrap(),
        "--token",
        TOKEN,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = Starting::spawn(&args).ready().unwrap();
    assert!(server.https, "the readiness line names https");
    server
}

/// What one request over a new TLS connection saw.
struct Answer {
    status: u16,
    body: Value,
    version: hyper::Version,
    protocol: rustls::ProtocolVersion,
    /// The server's certificate.
    served: CertificateDer<'static>,
    location: Option<String>,
}

/// A TLS connection to `addr` as `localhost`, and the certificate and protocol it got.
async fn connect(
    addr: &str,
    config: Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(config);
    connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.map_err(|e| format!("handshake: {e}"))
}

/// Sends requests on one connection, HTTP/2 or HTTP/1.1 as ALPN chose.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<bytes::Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<bytes::Bytes>>),
}

async fn open(addr: &str, config: Arc<rustls::ClientConfig>) -> Result<(Sender, Answer), String> {
    let tls = connect(addr, config).await?;
    let (_, session) = tls.get_ref();
    let seen = Answer {
        status: 0,
        body: Value::Null,
        version: hyper::Version::HTTP_11,
        protocol: session.protocol_version().unwrap(),
        served: session.peer_certificates().unwrap()[0].clone().into_owned(),
        location: None,
    };
    let h2 = session.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(tls);
    let sender = if h2 {
        let (send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Sender::H2(send)
    } else {
        let (send, conn) = hyper::client::conn::http1::handshake(io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Sender::H1(send)
    };
    Ok((sender, seen))
}

impl Sender {
    async fn send(&mut self, addr: &str, method: &str, path: &str, body: Option<&Value>) -> Result<Answer, String> {
        let port = addr.rsplit(':').next().unwrap();
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let builder = hyper::Request::builder()
            .method(method)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("accept", JSONAPI)
            .header("content-type", JSONAPI);
        let builder = match self {
            Sender::H2(_) => builder.uri(format!("https://localhost:{port}{path}")),
            Sender::H1(_) => builder.uri(path).header("host", format!("localhost:{port}")),
        };
        let request = builder.body(Full::new(bytes::Bytes::from(bytes))).unwrap();
        let response = match self {
            Sender::H1(s) => s.send_request(request).await,
            Sender::H2(s) => s.send_request(request).await,
        }
        .map_err(|e| e.to_string())?;
        let (status, version) = (response.status().as_u16(), response.version());
        let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        let body =
            if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).map_err(|e| e.to_string())? };
        Ok(Answer {
            status,
            body,
            version,
            location,
            protocol: rustls::ProtocolVersion::Unknown(0),
            served: CertificateDer::from(Vec::new()),
        })
    }
}

/// One request on a new connection.
async fn request(
    addr: &str,
    config: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, String> {
    let (mut sender, seen) = open(addr, config).await?;
    let answer = sender.send(addr, method, path, body).await?;
    Ok(Answer { protocol: seen.protocol, served: seen.served, ..answer })
}

/// A server started with a certificate of a new test authority: the folder of its files, the
/// authority, the certificate served, the server.
fn serving(extra: &[&str]) -> (tempfile::TempDir, Authority, Issued, Server) {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new();
    let issued = ca.issue();
    install(dir.path(), &issued);
    let server = start(dir.path(), extra);
    (dir, ca, issued, server)
}

fn der(pem: &str) -> CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_speaks_http2_and_http11_by_alpn_over_tls_13_and_12_with_https_links() {
    let (_dir, ca, issued, server) = serving(&["--header-timeout", "1s"]);
    let addr = server.addr.clone();

    let h2 = request(&addr, ca.client(&[b"h2", b"http/1.1"], false), "GET", "/v1/modules", None).await.unwrap();
    assert_eq!((h2.status, h2.version), (200, hyper::Version::HTTP_2));
    assert_eq!(h2.protocol, rustls::ProtocolVersion::TLSv1_3);
    assert_eq!(h2.served, der(&issued.cert));
    let port = addr.rsplit(':').next().unwrap();
    assert_eq!(h2.body["links"]["self"], format!("https://localhost:{port}/v1/modules"), "{}", h2.body);

    let module = json!({"data": {"type": "modules", "attributes": {"title": "Optics"}}});
    let made = request(&addr, ca.client(&[b"http/1.1"], false), "POST", "/v1/modules", Some(&module)).await.unwrap();
    assert_eq!((made.status, made.version), (201, hyper::Version::HTTP_11), "{}", made.body);
    let location = made.location.unwrap();
    assert!(location.starts_with(&format!("https://localhost:{port}/v1/modules/")), "{location}");
    assert_eq!(made.body["data"]["links"]["self"], location);

    // No ALPN at all: HTTP/1.1. TLS 1.2 is served too.
    let old = request(&addr, ca.client(&[], true), "GET", "/v1/modules", None).await.unwrap();
    assert_eq!(
        (old.status, old.version, old.protocol),
        (200, hyper::Version::HTTP_11, rustls::ProtocolVersion::TLSv1_2)
    );
    assert_eq!(old.body["data"].as_array().unwrap().len(), 1);

    // Plain HTTP on the HTTPS port gets no answer, and the server goes on.
    let plain = crate::process::try_call(&addr, "GET", "/v1/modules", TOKEN, None);
    assert!(plain.is_none(), "{plain:?}");
    // A client that never starts its handshake is closed at the head's timeout (1 s).
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let read =
        tokio::time::timeout(Duration::from_secs(10), tokio::io::AsyncReadExt::read(&mut silent, &mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    let after = request(&addr, ca.client(&[b"h2"], false), "GET", "/v1/modules", None).await.unwrap();
    assert_eq!(after.status, 200);
}

#[test]
fn a_certificate_or_key_that_cannot_serve_stops_the_start_with_a_clear_message() {
    let ca = Authority::new();
    let good = ca.issue();
    let other = ca.issue();
    let expired = ca.issue_dated(-30, -1);
    let future = ca.issue_dated(10, 90);
    let cases: [(&str, &str, &str, &str); 5] = [
        ("missing", "", &good.key, "cannot read the --tls-cert file"),
        ("not PEM", "hello", &good.key, "holds no certificate"),
        ("another key", &good.cert, &other.key, "is not the key of the certificate"),
        ("expired", &expired.cert, &expired.key, "expired"),
        ("not yet valid", &future.cert, &future.key, "is valid only from"),
    ];
    for (case, cert, key, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        if case != "missing" {
            std::fs::write(dir.path().join("cert.pem"), cert).unwrap();
        }
        std::fs::write(dir.path().join("key.pem"), key).unwrap();
        let started = Starting::spawn(&[
            "--database",
            dir.path().join("coursed.db").to_str().unwrap(),
            "--token",
            TOKEN,
            "--tls-cert",
            dir.path().join("cert.pem").to_str().unwrap(),
            "--tls-key",
            dir.path().join("key.pem").to_str().unwrap(),
        ]);
        let failed = started.ready().err().unwrap_or_else(|| panic!("{case}: served"));
        assert!(failed.contains(says), "{case}: {failed}");
    }
    // One without the other.
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), &good);
    let failed = Starting::spawn(&["--tls-cert", dir.path().join("cert.pem").to_str().unwrap()]).ready().err();
    let failed = failed.expect("served with a certificate and no key");
    assert!(failed.contains("--tls-key"), "{failed}");
}

/// Four clients make requests on new connections (a handshake each) and one keeps an HTTP/2
/// connection open, while the certificate is renewed three ways: files replaced (seen by
/// their change), a broken file (kept the old one), and a `SIGHUP`. Not one request fails, the
/// open connection lives through all of it, and each renewal is served from the next handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_under_load_are_served_from_the_next_handshake_and_lose_no_request() {
    let (dir, ca, first, server) = serving(&["--log-level", "info", "--access-log", "off"]);
    let addr = server.addr.clone();

    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::Mutex::new(Vec::new())));
    let mut clients = Vec::new();
    for i in 0..4 {
        let alpn: &[&[u8]] = if i % 2 == 0 { &[b"h2"] } else { &[b"http/1.1"] };
        let (config, addr, stop, done, failed) =
            (ca.client(alpn, false), addr.clone(), stop.clone(), done.clone(), failed.clone());
        clients.push(tokio::spawn(async move {
            while !stop.load(Relaxed) {
                match request(&addr, config.clone(), "GET", "/v1/modules?page[size]=1", None).await {
                    Ok(a) if a.status == 200 => done.fetch_add(1, Relaxed),
                    other => {
                        failed.lock().unwrap().push(format!("{:?}", other.map(|a| a.status)));
                        0
                    }
                };
            }
        }));
    }
    let (mut kept, _) = open(&addr, ca.client(&[b"h2"], false)).await.unwrap();
    let kept_requests = {
        let (addr, stop) = (addr.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Relaxed) {
                let a = kept.send(&addr, "GET", "/v1/subjects?page[size]=1", None).await.expect("the open connection");
                assert_eq!(a.status, 200);
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            n
        })
    };
    // Without resumption: a resumed session names the certificate of the session it resumes.
    let probe = {
        let mut config = (*ca.client(&[b"h2"], false)).clone();
        config.resumption = rustls::client::Resumption::disabled();
        Arc::new(config)
    };
    let served = || async { request(&addr, probe.clone(), "GET", "/healthz", None).await.unwrap().served };
    let until_served = |want: CertificateDer<'static>| async move {
        let deadline = Instant::now() + Duration::from_secs(15);
        while served().await != want {
            assert!(Instant::now() < deadline, "the renewed certificate was not served within 15 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    assert_eq!(served().await, der(&first.cert));
    let log = |text: &'static str| {
        let stderr = &server.stderr;
        async move {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let line = stderr.lock().unwrap().recv_timeout(Duration::from_millis(100));
                match line {
                    Ok(line) if line.contains(text) => return line,
                    _ => assert!(Instant::now() < deadline, "the log never said {text:?}"),
                }
            }
        }
    };

    // 1. Files replaced, as certbot or acme.sh do: seen by their change.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = ca.issue();
    install(dir.path(), &second);
    until_served(der(&second.cert)).await;
    log("the certificate's files changed: certificate read again").await;

    // 2. A renewal cut short: the certificate served is kept, and the log says why.
    std::fs::write(dir.path().join("cert.pem"), &second.cert[..second.cert.len() / 2]).unwrap();
    let line = log("the new certificate cannot be used, so the one served is kept").await;
    assert!(line.contains("WARN"), "{line}");
    assert_eq!(served().await, der(&second.cert));

    // 3. SIGHUP: read again at once (the broken file still there: kept), then a good one.
    server.signal("-HUP");
    log("SIGHUP, but the new certificate cannot be used").await;
    let third = ca.issue();
    install(dir.path(), &third);
    server.signal("-HUP");
    log("SIGHUP: certificate read again").await;
    assert_eq!(served().await, der(&third.cert));
    tokio::time::sleep(Duration::from_millis(300)).await;

    stop.store(true, Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let kept_requests = kept_requests.await.unwrap();
    let failed = failed.lock().unwrap().clone();
    let done = done.load(Relaxed);
    assert!(failed.is_empty(), "{} of {} requests failed: {failed:?}", failed.len(), done + failed.len());
    assert!(done >= 40, "only {done} requests made");
    assert!(kept_requests >= 10, "only {kept_requests} requests on the open connection");
    // The process is still serving: neither signal ended it.
    assert_eq!(served().await, der(&third.cert));
}
