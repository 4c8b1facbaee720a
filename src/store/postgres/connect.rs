//! Connecting to PostgreSQL: the URL, TLS (rustls, so that one static binary serves both
//! engines), per-session settings, and the pool's connection manager.

use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::client::{ConnectError, PgConn};

/// Opens connections for the pool.
pub struct Manager {
    config: Config,
    tls: MakeRustlsConnect,
    /// Session options every connection gets (timeouts), before its counter slot.
    options: String,
    /// The next counter slot to give a connection (see `coursed_slot()` in the schema).
    next_slot: AtomicU32,
}

/// Counter slots (see `row_counts` in the schema).
const SLOTS: u32 = 64;

impl Manager {
    /// Parses `url` (`postgres://user:password@host:port/database?sslmode=...`). Every write
    /// waits at most `lock_wait` for a lock held by another session before failing (503).
    pub fn new(url: &str, lock_wait: Duration, statement_limit: Duration) -> Result<Manager, String> {
        let mut config = Config::from_str(url).map_err(|e| format!("{}: {e}", redact(url)))?;
        let lock_ms = lock_wait.as_millis();
        config
            .application_name("coursed")
            .connect_timeout(Duration::from_secs(5))
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        // Bounded waits: a lock held elsewhere, or a statement that runs away, end in a 503
        // instead of holding a request (and a connection) indefinitely.
        // Memory for a search's bitmap of matches: at the default (4 MB) the bitmap of a word in
        // a million rows turns lossy, and counting them reads every row again.
        let options = format!(
            "-c lock_timeout={lock_ms} -c statement_timeout={} -c work_mem=32MB",
            statement_limit.as_millis().max(lock_ms).max(1)
        );
        // Connections of one process take consecutive slots from a random start, so that no two
        // of them, and rarely two of different replicas, add to the same counter row.
        let start = uuid::Uuid::new_v4().as_u128() as u32 % SLOTS;
        Ok(Manager { config, tls: MakeRustlsConnect::new(tls_config()), options, next_slot: AtomicU32::new(start) })
    }

    /// `host:port/database` for messages (never the password).
    pub fn describe(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        format!("{host}:{port}/{}", self.config.get_dbname().or(self.config.get_user()).unwrap_or(""))
    }

    pub fn ssl_mode(&self) -> SslMode {
        self.config.get_ssl_mode()
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = PgConn;
    type Error = ConnectError;

    fn connect(&self) -> Result<PgConn, ConnectError> {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed) % SLOTS;
        let mut config = self.config.clone();
        config.options(format!("{} -c coursed.slot={slot}", self.options));
        PgConn::connect(&config, self.tls.clone())
    }

    fn is_valid(&self, conn: &mut PgConn) -> Result<(), ConnectError> {
        conn.batch("").map_err(ConnectError::Pg)
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        conn.broken || conn.is_closed()
    }
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// TLS as libpq does it for `sslmode=prefer` and `require`: the connection is encrypted, the
/// server's certificate is not checked against a CA (libpq checks it only for `verify-ca` and
/// `verify-full`, which coursed does not offer). Handshake signatures are still verified.
fn tls_config() -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
        .with_no_client_auth()
}

#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_and_passwords_never_shown() {
        let m = Manager::new(
            "postgres://u:secret@db.example:5433/school?sslmode=require",
            Duration::from_secs(5),
            Duration::from_secs(10),
        );
        let m = m.unwrap();
        assert_eq!(m.describe(), "db.example:5433/school");
        assert_eq!(m.ssl_mode(), SslMode::Require);
        assert_eq!(redact("postgresql://u:secret@h/d"), "postgresql://u@h/d");
        assert!(
            Manager::new("postgres://h/d?sslmode=sometimes", Duration::from_secs(1), Duration::from_secs(1)).is_err()
        );
    }
}
