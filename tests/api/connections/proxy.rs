//! Behind a trusted proxy the client is the address the proxy appended, read over real HTTP/1.1
//! so that a header can come in several lines, as HAProxy sends it when the client wrote one of
//! its own: a client can neither escape throttling nor get another address throttled.

use super::*;
use coursed::tokens::{ProxyHeader, Throttle};

/// A GET from the trusted proxy (this test's own address) with `token` and these header lines.
fn via_proxy(addr: SocketAddr, token: &str, lines: &[(&str, &str)]) -> u16 {
    let extra: String = lines.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let mut s = connect(addr);
    let raw = head("GET", "/v1/modules", &extra).replace(TOKEN, token);
    s.write_all(raw.as_bytes()).unwrap();
    response(&mut s).0
}

fn behind(t: TestApp, header: ProxyHeader) -> TestApp {
    t.configured(|app| {
        app.auth.throttle = Throttle::new(2, Duration::from_secs(60));
        app.auth.proxies.trusted = vec!["127.0.0.1".parse().unwrap()];
        app.auth.proxies.header = header;
    })
}

on_both!(a_client_cannot_choose_its_address_with_lines_of_its_own);
async fn a_client_cannot_choose_its_address_with_lines_of_its_own() {
    let t = behind(TestApp::new().await, ProxyHeader::XForwardedFor);
    against(t, limits(10_000, 10_000, 100), SECOND, |addr| {
        let xff = "X-Forwarded-For";
        // The client names another address in a line of its own; the proxy's line comes last.
        for i in 0..2 {
            let own = format!("198.51.100.{i}");
            assert_eq!(via_proxy(addr, "guess", &[(xff, &own), (xff, "192.0.2.7")]), 401);
        }
        assert_eq!(via_proxy(addr, TOKEN, &[(xff, "203.0.113.1"), (xff, "192.0.2.7")]), 429, "not escaped");
        assert_eq!(via_proxy(addr, TOKEN, &[(xff, "198.51.100.0")]), 200, "the address it named is served");
        // Naming a victim does not throttle the victim.
        for _ in 0..2 {
            assert_eq!(via_proxy(addr, "guess", &[(xff, "192.0.2.99"), (xff, "192.0.2.8")]), 401);
        }
        assert_eq!(via_proxy(addr, TOKEN, &[(xff, "192.0.2.99")]), 200);
        // The other header is the client's own text.
        assert_eq!(via_proxy(addr, TOKEN, &[("Forwarded", "for=192.0.2.77"), (xff, "192.0.2.8")]), 429);
    })
    .await;
}

on_both!(a_proxy_that_writes_forwarded_names_the_client);
async fn a_proxy_that_writes_forwarded_names_the_client() {
    let t = behind(TestApp::new().await, ProxyHeader::Forwarded);
    against(t, limits(10_000, 10_000, 100), SECOND, |addr| {
        let fwd = "Forwarded";
        for _ in 0..2 {
            let lines = [(fwd, "for=198.51.100.5"), (fwd, "for=\"[2001:db8::7]:4711\";proto=http")];
            assert_eq!(via_proxy(addr, "guess", &lines), 401);
        }
        assert_eq!(via_proxy(addr, TOKEN, &[(fwd, "for=\"[2001:db8::9]\"")]), 429, "the same /64");
        assert_eq!(via_proxy(addr, TOKEN, &[(fwd, "for=198.51.100.5")]), 200);
        assert_eq!(via_proxy(addr, TOKEN, &[("X-Forwarded-For", "198.51.100.5"), (fwd, "for=2001:db8::1")]), 429);
    })
    .await;
}
