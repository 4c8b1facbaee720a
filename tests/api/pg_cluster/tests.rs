//! The harness's own checks: fresh databases, a cluster that stops and restarts, TLS.

use super::*;

#[test]
fn a_shared_server_gives_fresh_databases() {
    let Some(server) = server() else { return };
    let (a, b) = (server.fresh_database(), server.fresh_database());
    assert_ne!(a, b);
    for url in [a, b] {
        assert_eq!(sql(&url, "SELECT 1").unwrap().as_deref(), Some("1"), "{url}");
    }
}

#[test]
fn a_private_cluster_stops_and_restarts() {
    let Some(cluster) = Private::start(false) else { return };
    let url = cluster.fresh_database();
    assert_eq!(sql(&url, "SELECT 1").unwrap().as_deref(), Some("1"));
    cluster.stop();
    assert!(sql(&url, "SELECT 1").is_err(), "connected to a stopped server");
    cluster.restart();
    assert_eq!(sql(&url, "SELECT 1").unwrap().as_deref(), Some("1"));
}

#[test]
fn a_private_cluster_with_ssl_accepts_tls() {
    let Some(cluster) = Private::start(true) else { return };
    assert!(!cluster.url().contains("sslmode"));
    let url = format!("{}?sslmode=disable", cluster.url());
    assert_eq!(sql(&url, "SHOW ssl").unwrap().as_deref(), Some("on"));
}
