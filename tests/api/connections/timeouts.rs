//! Each deadline of a connection: the head, the body, idleness, and a client that stops reading.

use super::*;

on_both!(a_client_that_sends_its_head_too_slowly_is_disconnected_at_the_header_timeout);
async fn a_client_that_sends_its_head_too_slowly_is_disconnected_at_the_header_timeout() {
    against(TestApp::new().await, limits(400, 10_000, 100), SECOND, |addr| {
        // One header line every 100 ms: the head is never complete.
        let mut slow = connect(addr);
        let started = Instant::now();
        let mut dripping = slow.try_clone().unwrap();
        let drip = std::thread::spawn(move || {
            let _ = dripping.write_all(b"GET /v1/subjects HTTP/1.1\r\nHost: localhost\r\n");
            for i in 0..100 {
                std::thread::sleep(Duration::from_millis(100));
                if dripping.write_all(format!("X-Slow-{i}: 1\r\n").as_bytes()).is_err() {
                    break;
                }
            }
        });
        assert_between(closed_after(&mut slow, started), Duration::from_millis(380), 2 * SECOND);
        drip.join().unwrap();

        // A connection that says nothing, one that opens HTTP/2 and makes no request, and one
        // that sends part of a second head after a first request.
        let mut silent = connect(addr);
        let mut h2 = connect(addr);
        h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").unwrap();
        let mut second = connect(addr);
        assert_eq!(get(&mut second, "/v1/subjects"), 200);
        second.write_all(b"GET /v1/subjects HTTP/1.1\r\n").unwrap();
        let started = Instant::now();
        for s in [&mut silent, &mut h2, &mut second] {
            assert_between(closed_after(s, started), Duration::from_millis(350), 2 * SECOND);
        }
    })
    .await;
}

on_both!(an_idle_keep_alive_connection_is_closed_at_the_idle_timeout_and_does_not_hold_up_a_stop);
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout_and_does_not_hold_up_a_stop() {
    let (_t, server) = serve(TestApp::new().await, limits(10_000, 400, 100), SECOND).await;
    let addr = server.addr;
    let mut kept = tokio::task::spawn_blocking(move || {
        let mut idle = connect(addr);
        assert_eq!(get(&mut idle, "/v1/subjects"), 200);
        let answered = Instant::now();
        assert_between(closed_after(&mut idle, answered), Duration::from_millis(380), 2 * SECOND);
        // Another one, left open while the server stops.
        let mut kept = connect(addr);
        assert_eq!(get(&mut kept, "/v1/modules"), 200);
        kept
    })
    .await
    .unwrap();
    assert!(server.stop().await < SECOND, "an idle connection held up the stop");
    let mut buf = [0u8; 16];
    assert!(matches!(kept.read(&mut buf), Ok(0) | Err(_)), "the idle connection is closed at the stop");
}

on_both!(a_keep_alive_client_and_a_slow_upload_are_not_cut_by_the_header_or_idle_timeout);
async fn a_keep_alive_client_and_a_slow_upload_are_not_cut_by_the_header_or_idle_timeout() {
    let t = TestApp::new().await;
    let subject = t.subject("S", None).await;
    against(t, limits(200, 300, 100), 5 * SECOND, move |addr| {
        // Eight requests 100 ms apart on one connection: longer in all than either timeout.
        let mut client = connect(addr);
        for _ in 0..8 {
            assert_eq!(get(&mut client, &format!("/v1/subjects/{subject}")), 200);
            std::thread::sleep(Duration::from_millis(100));
        }
        // A body sent over 800 ms, in pieces 100 ms apart: the request is in flight all along.
        let body = json!({"data": {"type": "modules", "attributes": {"title": "Slow"}}}).to_string();
        let extra = format!("Content-Type: application/vnd.api+json\r\nContent-Length: {}\r\n", body.len());
        client.write_all(head("POST", "/v1/modules", &extra).as_bytes()).unwrap();
        for piece in body.as_bytes().chunks(body.len().div_ceil(8)) {
            std::thread::sleep(Duration::from_millis(100));
            client.write_all(piece).unwrap();
        }
        let (status, _, answer) = response(&mut client);
        assert_eq!(status, 201, "{answer}");
        assert_eq!(get(&mut client, "/v1/modules"), 200);
    })
    .await;
}

on_both!(a_body_slower_than_the_body_timeout_is_answered_408_and_its_connection_closed);
async fn a_body_slower_than_the_body_timeout_is_answered_408_and_its_connection_closed() {
    against(TestApp::new().await, limits(10_000, 10_000, 100), Duration::from_millis(300), |addr| {
        let mut client = connect(addr);
        let extra = "Content-Type: application/vnd.api+json\r\nContent-Length: 1000\r\n";
        client.write_all(head("POST", "/v1/modules", extra).as_bytes()).unwrap();
        client.write_all(br#"{"data": {"#).unwrap();
        let started = Instant::now();
        let (status, head, body) = response(&mut client);
        assert_between(started.elapsed(), Duration::from_millis(280), 2 * SECOND);
        assert_eq!(status, 408, "{body}");
        assert!(head.to_ascii_lowercase().contains("connection: close"), "{head}");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        crate::helpers::assert_valid_jsonapi(&doc);
        assert_eq!(doc["errors"][0]["status"], "408");
        assert!(closed_after(&mut client, started) < 3 * SECOND);
    })
    .await;
}

on_both!(a_client_that_stops_reading_its_responses_is_disconnected_at_the_idle_timeout);
async fn a_client_that_stops_reading_its_responses_is_disconnected_at_the_idle_timeout() {
    against(TestApp::new().await, limits(10_000, 300, 100), SECOND, |addr| {
        // 300 pipelined requests for the OpenAPI document (about 200 KB each): far more than the
        // sockets' buffers hold, so writing stalls while the client reads nothing.
        let mut client = connect(addr);
        let pipelined = "GET /v1/openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(300);
        client.write_all(pipelined.as_bytes()).unwrap();
        let document = 150_000;
        std::thread::sleep(Duration::from_secs(2));
        // Reading at last: the server gave up long before the 300th answer.
        let (mut received, mut buf) = (0, vec![0u8; 1 << 16]);
        while let Ok(n @ 1..) = client.read(&mut buf) {
            received += n;
        }
        assert!(received < 200 * document, "received {received} bytes: every answer was kept waiting");
    })
    .await;
}
