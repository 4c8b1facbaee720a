//! `GET /metrics` on an address of its own (`--metrics-listen`): plain HTTP/1.1, no token
//! (bind it where only the scraper reaches), a few connections at a time, each bounded in time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use warp::http::{header, Method, Response, StatusCode};

use crate::App;

/// Scrapers served at once; more wait in the listen backlog.
const CONNECTIONS: usize = 8;
/// How long a scraper's connection may stay open, whatever it does.
const CONNECTION_TIME: Duration = Duration::from_secs(30);

/// Serves the figures on `listener` for as long as the future runs.
pub async fn serve(listener: tokio::net::TcpListener, app: Arc<App>) {
    super::enable();
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                log::warn!("metrics: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: warp::http::Request<hyper::body::Incoming>| {
                let app = app.clone();
                async move { Ok::<_, Infallible>(answer(req.method(), req.uri().path(), &app).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIME, connection).await;
            drop(slot);
        });
    }
}

async fn answer(method: &Method, path: &str, app: &App) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
        r
    };
    if path != "/metrics" {
        return text(StatusCode::NOT_FOUND, "Not found: the figures are at /metrics.\n".into());
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "Only GET and HEAD.\n".into());
        r.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let streams = &app.streams;
    let lag = match tokio::time::timeout(Duration::from_secs(2), app.follow.meta(&app.db)).await {
        Ok(Some(meta)) => meta["lag"].as_f64(),
        _ => None,
    };
    let now = super::Now {
        streams_open: (streams.max - streams.permits.available_permits()) as i64,
        throttled_addresses: app.auth.throttle.throttled_now() as i64,
        follow_lag_seconds: lag,
        pool: app.db.pool_use(),
    };
    let mut r = text(StatusCode::OK, super::render(&now));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}
