//! HTTPS: the certificate and key of `--tls-cert` and `--tls-key` (PEM), served with rustls
//! (TLS 1.2 and 1.3; HTTP/2 or HTTP/1.1 by ALPN), and read again on `SIGHUP` and whenever
//! either file changes, as a renewal by certbot or acme.sh does. Each handshake takes the
//! certificate current at that moment: connections already open keep theirs, none is dropped.
//! A renewal that cannot be used (a file half written, a key of another certificate, a
//! certificate already expired) keeps the certificate being served, and the log says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often the files are looked at for a change.
const POLL: Duration = Duration::from_secs(2);

/// A certificate that expires within this long is served with a warning.
const SOON: Duration = Duration::from_secs(14 * 24 * 3600);

/// The certificate served, and where it is read from.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// What the files were when last read (successfully or not): a change is read again once.
    seen: RwLock<Stamps>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("cert", &self.cert).field("key", &self.key).finish_non_exhaustive()
    }
}

/// The modification time, size and inode of each file (a renewal that swaps a symbolic link,
/// as certbot's does, changes the inode).
type Stamps = [Option<(SystemTime, u64, u64)>; 2];

fn stamps(cert: &Path, key: &Path) -> Stamps {
    use std::os::unix::fs::MetadataExt;
    [cert, key]
        .map(|p| std::fs::metadata(p).ok().map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len(), m.ino())))
}

/// What a certificate says of itself, for the log and for refusing one out of its dates.
struct Described {
    subject: String,
    not_before: SystemTime,
    not_after: SystemTime,
}

impl Tls {
    /// Reads the certificate chain and key: a clear message when either cannot be read, when
    /// the key is not the certificate's, or when the certificate is expired or not valid yet.
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Tls>, String> {
        let seen = stamps(cert, key);
        let (certified, described) = read(cert, key)?;
        log_served(cert, &described);
        Ok(Arc::new(Tls {
            cert: cert.to_owned(),
            key: key.to_owned(),
            current: RwLock::new(Arc::new(certified)),
            seen: RwLock::new(seen),
        }))
    }

    /// rustls' settings: TLS 1.3 and 1.2, HTTP/2 preferred to HTTP/1.1, the certificate of
    /// this moment for each handshake.
    pub fn acceptor(self: &Arc<Self>) -> Result<tokio_rustls::TlsAcceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    /// Reads the files again: the new certificate is served from the next handshake on, or,
    /// when it cannot be, the one being served is kept and the log says why. Returns whether
    /// the new one is served.
    pub fn reload(&self, why: &str) -> bool {
        *self.seen.write().unwrap_or_else(|e| e.into_inner()) = stamps(&self.cert, &self.key);
        match read(&self.cert, &self.key) {
            Ok((certified, described)) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(certified);
                log::info!("{why}: certificate read again");
                log_served(&self.cert, &described);
                true
            }
            Err(e) => {
                log::warn!("{why}, but the new certificate cannot be used, so the one served is kept: {e}");
                false
            }
        }
    }

    /// Reads the files again on each `SIGHUP` and whenever they change, for as long as the
    /// returned future runs. The signal's handler is installed by this call (before a
    /// readiness line is printed, so that an early `SIGHUP` does not end the process).
    pub fn watch(self: Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = signal(SignalKind::hangup())
            .map_err(|e| {
                log::warn!("cannot watch SIGHUP ({e}): the certificate is read again only when its files change")
            })
            .ok();
        async move {
            let mut poll = tokio::time::interval(POLL);
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let hung_up = async {
                    match hangup.as_mut() {
                        Some(h) => h.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = hung_up => {
                        self.reload("SIGHUP");
                    }
                    _ = poll.tick() => {
                        let now = stamps(&self.cert, &self.key);
                        let changed = *self.seen.read().unwrap_or_else(|e| e.into_inner()) != now;
                        // Both files present: a renewal in the middle of replacing them is read
                        // once it has.
                        if changed && now.iter().all(Option::is_some) {
                            self.reload("the certificate's files changed");
                        }
                    }
                }
            }
        }
    }
}

impl ResolvesServerCert for Tls {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

fn log_served(cert: &Path, d: &Described) {
    let expires = crate::time::format_ms(crate::time::ms_of(d.not_after));
    log::info!("serving HTTPS with the certificate of {} for {} (expires {expires})", cert.display(), d.subject);
    if d.not_after.duration_since(SystemTime::now()).is_ok_and(|left| left < SOON) {
        log::warn!("the certificate in {} expires {expires}: renew it", cert.display());
    }
}

/// The certificate chain of `cert` with the key of `key`, checked.
fn read(cert: &Path, key: &Path) -> Result<(CertifiedKey, Described), String> {
    let pem = |path: &Path, flag: &str| {
        std::fs::read(path).map_err(|e| format!("cannot read the {flag} file {}: {e}", path.display()))
    };
    let chain_pem = pem(cert, "--tls-cert")?;
    let chain = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{} is not a PEM certificate chain: {e}", cert.display()))?;
    let Some(first) = chain.first() else {
        return Err(format!(
            "{} holds no certificate (PEM, -----BEGIN CERTIFICATE-----; the chain with the server's first)",
            cert.display()
        ));
    };
    let described =
        describe(first).map_err(|e| format!("{}: the first certificate cannot be read: {e}", cert.display()))?;
    let private = PrivateKeyDer::from_pem_slice(&pem(key, "--tls-key")?)
        .map_err(|e| format!("{} holds no private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC): {e}", key.display()))?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(chain, private, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            format!("the key in {} is not the key of the certificate in {}", key.display(), cert.display())
        }
        e => format!("the key in {} cannot be used: {e}", key.display()),
    })?;
    let now = SystemTime::now();
    let date = |t: SystemTime| crate::time::format_ms(crate::time::ms_of(t));
    if described.not_after < now {
        return Err(format!(
            "the certificate in {} (for {}) expired {}: renew it",
            cert.display(),
            described.subject,
            date(described.not_after)
        ));
    }
    if described.not_before > now {
        return Err(format!(
            "the certificate in {} (for {}) is valid only from {} (is the clock right?)",
            cert.display(),
            described.subject,
            date(described.not_before)
        ));
    }
    Ok((certified, described))
}

fn describe(der: &CertificateDer<'_>) -> Result<Described, String> {
    use x509_cert::der::Decode;
    let parsed = x509_cert::Certificate::from_der(der).map_err(|e| e.to_string())?;
    let tbs = &parsed.tbs_certificate;
    let at = |t: x509_cert::time::Time| SystemTime::UNIX_EPOCH + t.to_unix_duration();
    Ok(Described {
        subject: tbs.subject.to_string(),
        not_before: at(tbs.validity.not_before),
        not_after: at(tbs.validity.not_after),
    })
}
