//! The client's address behind trusted proxies, from the header they append to.
//!
//! A proxy such as HAProxy appends the address it took the request from to `X-Forwarded-For`
//! (`option forwardfor`) or to `Forwarded` (RFC 7239, `option forwarded`), after whatever the
//! client sent in it: only the entries our own proxies appended can be believed. So the chain
//! (every line of the header, in order) is walked back from its end over the entries that name
//! a trusted proxy, and the first other entry is the client. Only the header the proxies are
//! said to write is read: the other one is the client's own text.

use std::net::{IpAddr, SocketAddr};

use warp::http::HeaderMap;

/// The header trusted proxies append the client's address to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProxyHeader {
    /// `X-Forwarded-For: client, proxy1` (HAProxy's `option forwardfor`, nginx, most balancers)
    #[default]
    #[value(name = "x-forwarded-for")]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239; HAProxy's `option forwarded`)
    #[value(name = "forwarded")]
    Forwarded,
}

/// Proxies in front whose forwarding header names the client.
#[derive(Debug, Clone, Default)]
pub struct Proxies {
    pub trusted: Vec<IpAddr>,
    pub header: ProxyHeader,
}

impl Proxies {
    /// The address a request from `peer` with `headers` comes from: the peer, or, when the peer
    /// is a trusted proxy, the last address in the chain that is not one. An entry that is no
    /// address (`unknown`, an obfuscated name, junk) ends the walk: the hop that appended it is
    /// the nearest address known.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusted.contains(&peer) {
            return peer;
        }
        let name = match self.header {
            ProxyHeader::XForwardedFor => "x-forwarded-for",
            ProxyHeader::Forwarded => "forwarded",
        };
        let lines: Vec<_> = headers.get_all(name).iter().collect();
        let mut known = peer;
        for line in lines.iter().rev() {
            let Ok(line) = line.to_str() else { return known };
            for entry in elements(line).rev() {
                let addr = match self.header {
                    ProxyHeader::XForwardedFor => address(entry),
                    ProxyHeader::Forwarded => forwarded_for(entry).and_then(address),
                };
                match addr {
                    Some(a) if self.trusted.contains(&a) => known = a,
                    Some(a) => return a,
                    None => return known,
                }
            }
        }
        known
    }
}

/// The comma-separated elements of a header line; a comma inside a quoted string (RFC 9110
/// §5.6.4) separates nothing.
fn elements(line: &str) -> impl DoubleEndedIterator<Item = &str> {
    let mut cuts = vec![0];
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in line.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => cuts.push(i + 1),
            _ => {}
        }
    }
    cuts.push(line.len() + 1);
    let spans: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1] - 1)).collect();
    spans.into_iter().map(move |(a, b)| line[a..b].trim()).filter(|e| !e.is_empty())
}

/// The value of the `for` parameter of a `Forwarded` element (`for=192.0.2.1;proto=https`),
/// unquoted.
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then(|| value.trim().trim_matches('"'))
    })
}

/// An address as proxies write it: `192.0.2.1`, `2001:db8::1`, with a port `192.0.2.1:4711` or
/// `[2001:db8::1]:4711`, or bracketed `[2001:db8::1]`.
fn address(s: &str) -> Option<IpAddr> {
    let s = s.trim();
    s.parse()
        .ok()
        .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| s.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(header: ProxyHeader, peer: &str, lines: &[(&'static str, &'static str)]) -> IpAddr {
        let proxies = Proxies { trusted: vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()], header };
        let mut headers = HeaderMap::new();
        for (name, value) in lines {
            headers.append(*name, value.parse().unwrap());
        }
        proxies.client(peer.parse().unwrap(), &headers)
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    const XFF: ProxyHeader = ProxyHeader::XForwardedFor;

    #[test]
    fn the_client_is_the_last_address_a_trusted_proxy_appended() {
        assert_eq!(client(XFF, "10.0.0.1", &[("x-forwarded-for", "192.0.2.7")]), ip("192.0.2.7"));
        assert_eq!(client(XFF, "10.0.0.1", &[("x-forwarded-for", "1.1.1.1, 2001:db8::5")]), ip("2001:db8::5"));
        assert_eq!(client(XFF, "10.0.0.1", &[]), ip("10.0.0.1"));
        assert_eq!(client(XFF, "192.0.2.1", &[("x-forwarded-for", "203.0.113.9")]), ip("192.0.2.1"), "untrusted peer");
    }

    #[test]
    fn a_line_the_client_sent_before_the_proxys_own_is_not_believed() {
        // HAProxy adds a line of its own after the client's.
        let lines = [("x-forwarded-for", "198.51.100.66"), ("x-forwarded-for", "192.0.2.7")];
        assert_eq!(client(XFF, "10.0.0.1", &lines), ip("192.0.2.7"));
        let lines = [("x-forwarded-for", "198.51.100.66, 198.51.100.67"), ("x-forwarded-for", "192.0.2.7")];
        assert_eq!(client(XFF, "10.0.0.1", &lines), ip("192.0.2.7"));
    }

    #[test]
    fn trusted_proxies_in_the_chain_are_walked_over() {
        let lines = [("x-forwarded-for", "198.51.100.66, 192.0.2.7, 10.0.0.2")];
        assert_eq!(client(XFF, "10.0.0.1", &lines), ip("192.0.2.7"));
        assert_eq!(client(XFF, "10.0.0.1", &[("x-forwarded-for", "10.0.0.2")]), ip("10.0.0.2"));
        assert_eq!(client(XFF, "10.0.0.1", &[("x-forwarded-for", "192.0.2.7:4711")]), ip("192.0.2.7"));
    }

    #[test]
    fn an_entry_that_is_no_address_stops_at_the_hop_that_wrote_it() {
        assert_eq!(client(XFF, "10.0.0.1", &[("x-forwarded-for", "1.1.1.1, junk")]), ip("10.0.0.1"));
        assert_eq!(client(XFF, "10.0.0.1", &[("x-forwarded-for", "junk, 10.0.0.2")]), ip("10.0.0.2"));
    }

    #[test]
    fn forwarded_is_read_as_rfc_7239_writes_it() {
        let f = ProxyHeader::Forwarded;
        let lines = [("forwarded", "for=198.51.100.66"), ("forwarded", "for=192.0.2.60;proto=http;by=10.0.0.1")];
        assert_eq!(client(f, "10.0.0.1", &lines), ip("192.0.2.60"));
        let lines = [("forwarded", "for=\"[2001:db8:cafe::17]:4711\", For=10.0.0.2")];
        assert_eq!(client(f, "10.0.0.1", &lines), ip("2001:db8:cafe::17"));
        assert_eq!(client(f, "10.0.0.1", &[("forwarded", "for=\"192.0.2.43:47011\"")]), ip("192.0.2.43"));
        assert_eq!(client(f, "10.0.0.1", &[("forwarded", "for=unknown")]), ip("10.0.0.1"));
        assert_eq!(client(f, "10.0.0.1", &[("forwarded", "proto=https;by=\"a,b\"")]), ip("10.0.0.1"));
    }

    #[test]
    fn only_the_header_the_proxies_write_is_read() {
        let lines = [("forwarded", "for=198.51.100.66"), ("x-forwarded-for", "192.0.2.7")];
        assert_eq!(client(XFF, "10.0.0.1", &lines), ip("192.0.2.7"));
        assert_eq!(client(ProxyHeader::Forwarded, "10.0.0.1", &lines), ip("198.51.100.66"));
    }
}
