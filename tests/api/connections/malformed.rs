//! What hyper cannot parse is answered with a JSON:API error document like every other error;
//! and a request names one host: two `Host` lines are refused, and an absolute-form target's
//! host is the one links are built from.

use super::*;

/// Sends `raw` on a connection of its own and reads the answer: status, head, body.
fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, String) {
    let mut s = connect(addr);
    let _ = s.write_all(raw);
    response(&mut s)
}

on_both!(requests_that_cannot_be_parsed_get_json_api_errors);
async fn requests_that_cannot_be_parsed_get_json_api_errors() {
    against(TestApp::new().await, limits(10_000, 10_000, 100), SECOND, |addr| {
        let host = "Host: localhost\r\n";
        let long_target = format!("GET /v1/{} HTTP/1.1\r\n{host}\r\n", "a".repeat(70_000));
        let lines: String = (0..120).map(|i| format!("X-Line-{i}: y\r\n")).collect();
        let many_lines = format!("GET /v1/subjects HTTP/1.1\r\n{host}{lines}\r\n");
        let cases: [(Vec<u8>, u16, &str); 5] = [
            (
                format!("GET /v1/subjects HTTP/1.1\r\n{host}Content-Length: abc\r\n\r\n").into_bytes(),
                400,
                "malformed_request",
            ),
            ([&b"GET /v1/\xff\xfe HTTP/1.1\r\n"[..], host.as_bytes(), b"\r\n"].concat(), 400, "malformed_request"),
            (format!("GET /v1/a b HTTP/1.1\r\n{host}\r\n").into_bytes(), 400, "malformed_request"),
            (long_target.into_bytes(), 414, "uri_too_long"),
            (many_lines.into_bytes(), 431, "header_fields_too_large"),
        ];
        for (raw, status, code) in cases {
            let (got, head, body) = exchange(addr, &raw);
            assert_eq!(got, status, "{head}");
            assert!(head.to_ascii_lowercase().contains("content-type: application/vnd.api+json"), "{head}");
            let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
            crate::helpers::assert_valid_jsonapi(&doc);
            assert_eq!(
                (doc["errors"][0]["status"].as_str(), doc["errors"][0]["code"].as_str()),
                (Some(&*status.to_string()), Some(code))
            );
        }
        // And the server goes on serving.
        assert_eq!(get(&mut connect(addr), "/v1/subjects"), 200);
    })
    .await;
}

on_both!(a_request_names_one_host_and_an_absolute_target_names_it_first);
async fn a_request_names_one_host_and_an_absolute_target_names_it_first() {
    against(TestApp::new().await, limits(10_000, 10_000, 100), SECOND, |addr| {
        let auth = format!("Authorization: Bearer {TOKEN}\r\n");
        let two = format!("GET /v1/subjects HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n{auth}\r\n");
        let (status, _, body) = exchange(addr, two.as_bytes());
        assert_eq!(status, 400);
        assert!(body.contains("\"code\":\"invalid_host\""), "{body}");
        // Whatever the request: a DELETE builds no links, and is refused all the same.
        let delete = two.replace("GET /v1/subjects", "DELETE /v1/subjects/01900000-0000-7000-8000-000000000001");
        let (status, _, body) = exchange(addr, delete.as_bytes());
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("\"code\":\"invalid_host\""), "{body}");
        // Absolute form, as sent to a proxy: its host wins over the Host line (RFC 9112, 3.2.2).
        let absolute =
            format!("GET http://school.example:8080/v1/subjects HTTP/1.1\r\nHost: other.example\r\n{auth}\r\n");
        let (status, _, body) = exchange(addr, absolute.as_bytes());
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"self\":\"http://school.example:8080/v1/subjects\""), "{body}");
        assert!(!body.contains("other.example"), "{body}");
        // It still needs one valid Host line, ignored as it is.
        let target = "GET http://school.example/v1/subjects HTTP/1.1\r\n";
        for hosts in ["", "Host: a.example\r\nHost: b.example\r\n", "Host: a b/c\r\n"] {
            let (status, _, body) = exchange(addr, format!("{target}{hosts}{auth}\r\n").as_bytes());
            assert_eq!(status, 400, "{hosts:?}: {body}");
            assert!(body.contains("\"code\":\"invalid_host\""), "{hosts:?}: {body}");
        }
    })
    .await;
}
