//! The cap on open connections: which connection makes room for a new client, and when none can.

use super::*;

on_both!(at_the_cap_a_new_client_is_served_by_closing_the_oldest_connection_that_serves_no_request);
async fn at_the_cap_a_new_client_is_served_by_closing_the_oldest_connection_that_serves_no_request() {
    // Timeouts far beyond the test: only the cap makes room.
    against(TestApp::new().await, limits(60_000, 60_000, 3), 60 * SECOND, |addr| {
        // Three connections, each answered once (so surely accepted), in this order: one idle,
        // two that then send part of a head and stall.
        let mut idle = connect(addr);
        assert_eq!(get(&mut idle, "/v1/subjects"), 200);
        let mut slow: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = connect(addr);
                assert_eq!(get(&mut s, "/v1/subjects"), 200);
                s.write_all(b"GET /v1/subjects HTTP/1.1\r\nHost: localhost\r\n").unwrap();
                s
            })
            .collect();
        // A new client is served at once; the oldest of them made room.
        let started = Instant::now();
        let mut fresh = connect(addr);
        assert_eq!(get(&mut fresh, "/v1/modules"), 200);
        assert!(started.elapsed() < 2 * SECOND);
        assert!(closed_after(&mut idle, started) < 2 * SECOND);
        // The next new one takes the place of the next oldest.
        let mut another = connect(addr);
        assert_eq!(get(&mut another, "/v1/modules"), 200);
        assert!(closed_after(&mut slow[0], started) < 2 * SECOND);
        assert!(still_open(&mut slow[1]) && still_open(&mut fresh) && still_open(&mut another));
    })
    .await;
}

on_both!(at_the_cap_a_connection_that_never_made_a_request_makes_room_before_an_idle_keep_alive_client);
async fn at_the_cap_a_connection_that_never_made_a_request_makes_room_before_an_idle_keep_alive_client() {
    against(TestApp::new().await, limits(60_000, 60_000, 2), 60 * SECOND, |addr| {
        // A client served once and idle since, then a connection that only ever sends part of a
        // head: it waited less, but it never asked anything.
        let mut client = connect(addr);
        assert_eq!(get(&mut client, "/v1/subjects"), 200);
        let mut silent = connect(addr);
        silent.write_all(b"GET /v1/subjects HTTP/1.1\r\n").unwrap();
        // Past the 20 ms in which a new connection is not closed to make room.
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let mut fresh = connect(addr);
        assert_eq!(get(&mut fresh, "/v1/modules"), 200);
        assert!(closed_after(&mut silent, started) < 2 * SECOND);
        assert_eq!(get(&mut client, "/v1/subjects"), 200, "the keep-alive client kept its place");
    })
    .await;
}

on_both!(when_every_connection_serves_a_request_a_new_one_waits_for_the_first_answered);
async fn when_every_connection_serves_a_request_a_new_one_waits_for_the_first_answered() {
    against(TestApp::new().await, limits(60_000, 60_000, 2), 60 * SECOND, |addr| {
        // Two uploads in flight (the server asked for their bodies: 100 Continue).
        let body = json!({"data": {"type": "modules", "attributes": {"title": "Upload"}}}).to_string();
        let extra = format!(
            "Content-Type: application/vnd.api+json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n",
            body.len()
        );
        let mut uploads: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(head("POST", "/v1/modules", &extra).as_bytes()).unwrap();
                assert_eq!(response(&mut s).0, 100);
                s
            })
            .collect();
        let mut waiting = connect(addr);
        waiting.write_all(head("GET", "/v1/modules", "").as_bytes()).unwrap();
        // The first upload answered, its connection makes room for the one waiting.
        uploads[0].write_all(body.as_bytes()).unwrap();
        assert_eq!(response(&mut uploads[0]).0, 201);
        assert_eq!(response(&mut waiting).0, 200);
        assert!(closed_after(&mut uploads[0], Instant::now()) < 2 * SECOND);
        // The other was never cut.
        uploads[1].write_all(body.as_bytes()).unwrap();
        assert_eq!(response(&mut uploads[1]).0, 201);
    })
    .await;
}
