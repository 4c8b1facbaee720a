//! HTTP/2 (cleartext, prior knowledge), spoken frame by frame: what a client sends between
//! requests keeps no connection open past the idle timeout.

use super::*;

/// A frame: its 9-byte header and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// `GET path` on stream 1: HPACK with the static table's `:method GET` and `:scheme http`,
/// `:path` and `:authority` as literals.
fn get_request(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 9]);
    block.extend_from_slice(b"localhost");
    // END_STREAM | END_HEADERS
    frame(1, 0x5, 1, &block)
}

on_both!(pings_between_requests_do_not_keep_an_http2_connection_open);
async fn pings_between_requests_do_not_keep_an_http2_connection_open() {
    against(TestApp::new().await, limits(10_000, 400, 100), SECOND, |addr| {
        let mut client = connect(addr);
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(frame(4, 0, 0, &[]));
        hello.extend(get_request("/healthz"));
        client.write_all(&hello).unwrap();
        // A PING every 100 ms, each acknowledged by the server, for longer than the idle timeout.
        let mut pinging = client.try_clone().unwrap();
        let pings = std::thread::spawn(move || {
            for i in 0..100u64 {
                std::thread::sleep(Duration::from_millis(100));
                if pinging.write_all(&frame(6, 0, 0, &i.to_be_bytes())).is_err() {
                    break;
                }
            }
        });
        let started = Instant::now();
        assert_between(closed_after(&mut client, started), Duration::from_millis(350), 3 * SECOND);
        pings.join().unwrap();
    })
    .await;
}
