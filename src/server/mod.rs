//! The accept loop: connections up to a cap, each watched for slow and idle clients (see
//! [`conn`] and [`watched`]), and a graceful stop.
//!
//! At the cap, a new connection makes room by closing a connection that serves no request:
//! first one that has not completed a request head 20 ms after it opened (the one connected
//! longest), else the one that has waited longest for its next request (idle since its last
//! answer, or sending a head since then). Thousands of slow or idle clients then cost each
//! other their places, never a client being served, nor (while such clients are there) an
//! active keep-alive client. When every connection is serving a request, accepting pauses (the
//! kernel's listen backlog holds new connections) until one of them is answered and can make
//! room.

mod bare;
mod conn;
pub mod tls;
mod watched;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{watch, Notify, Semaphore};

use crate::app::Limits;
use crate::metrics::{Refused, M};
use crate::App;
use conn::{Standing, Watch};
use watched::{Tracked, Watched};

/// A new connection is not closed to make room before it had this long (or a tenth of the
/// header timeout, when shorter) to send its first request: real clients send it with their
/// first packet. Short, because while only new connections could be closed, room is made no
/// faster than the cap per grace.
const FIRST_HEAD_GRACE: Duration = Duration::from_millis(20);

/// Descriptors kept for everything but client connections: database files and connections,
/// backups, logs.
const RESERVED_DESCRIPTORS: u64 = 256;

/// The open connections, and what the accept loop needs to make room.
pub struct Room {
    /// By id, the order they were accepted in.
    open: Mutex<BTreeMap<u64, Arc<Watch>>>,
    /// Set while the accept loop waits for room: then every answered request tells it.
    wanted: AtomicBool,
    freed: Notify,
}

impl Room {
    fn request_ended(&self) {
        if self.wanted.load(Relaxed) {
            self.freed.notify_one();
        }
    }

    /// Asks a connection to close to make room: a new one that has not made a request within
    /// `grace` (the one connected longest), else the one that has waited longest for its next
    /// request; never a new one in its grace. Says when to try again.
    fn evict_one(&self, grace: Duration) -> Retry {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.values().any(|w| w.evicting.load(Relaxed)) {
            return Retry::WhenFreed;
        }
        let (now, grace) = (conn::now(), grace.as_millis() as u64);
        let (mut silent, mut waiting, mut graced) = (None, None, None::<u64>);
        for w in open.values() {
            match w.standing() {
                Standing::Busy => {}
                Standing::New(since) if now.saturating_sub(since) < grace => {
                    graced = Some(graced.map_or(since, |g| g.min(since)));
                }
                Standing::New(since) => silent = silent.filter(|(s, _)| *s <= since).or(Some((since, w))),
                Standing::Waiting(since) => waiting = waiting.filter(|(s, _)| *s <= since).or(Some((since, w))),
            }
        }
        let victim = silent.or(waiting);
        if let Some((_, w)) = victim {
            M.refused(Refused::ForRoom);
            w.evicting.store(true, Relaxed);
            w.evict.notify_one();
            return Retry::WhenFreed;
        }
        match graced {
            Some(since) => Retry::After(Duration::from_millis((since + grace).saturating_sub(now).max(1))),
            None => Retry::WhenFreed,
        }
    }
}

/// When the accept loop, waiting for room, tries to make room again.
enum Retry {
    /// When a slot frees or a request ends.
    WhenFreed,
    /// Then too, or after this, when a new connection's grace ends.
    After(Duration),
}

/// Serves the API on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (for at most [`crate::DRAIN`]) and writes out the access log.
///
/// The accept loop is ours rather than `warp::serve`'s so that every connection gets
/// `TCP_NODELAY` (without it the last segment of a large response waits for the client's
/// delayed ACK) and is watched for the limits of [`Limits`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let limits = Limits { max_connections: descriptors_for(app.connections.max_connections), ..app.connections };
    let grace = (limits.header_timeout / 10).min(FIRST_HEAD_GRACE);
    // Boxed: hyper clones the service for every request, and a boxed filter is one reference
    // count where the whole tree of filters would be copied (and dropped) each time.
    let routes = warp::Filter::boxed(crate::http::routes(app.clone()));
    // HTTP/1 heads are timed by our watchdog, not by hyper's `header_read_timeout` (it would
    // run from the end of the previous request, cutting idle keep-alive at the head's limit;
    // and it needs a timer, which the builder is not given).
    let builder = Arc::new(Builder::new(TokioExecutor::new()));
    let tls = match &app.tls {
        Some(tls) => match tls.acceptor() {
            Ok(acceptor) => Some(acceptor),
            Err(e) => {
                log::error!("{e}");
                return;
            }
        },
        None => None,
    };
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let room = Arc::new(Room { open: Mutex::default(), wanted: AtomicBool::new(false), freed: Notify::new() });
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut next_id = 0u64;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    log::warn!("accept failed: {e}");
                    M.accept_errors.inc();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                room.wanted.store(true, Relaxed);
                let slot = loop {
                    let retry = match room.evict_one(grace) {
                        Retry::WhenFreed => None,
                        Retry::After(wait) => Some(wait),
                    };
                    tokio::select! {
                        slot = slots.clone().acquire_owned() => break slot.ok(),
                        // A request was answered: its connection may make room now.
                        () = room.freed.notified() => {}
                        () = tokio::time::sleep(retry.unwrap_or_default()), if retry.is_some() => {}
                        () = &mut shutdown => break None,
                    }
                };
                room.wanted.store(false, Relaxed);
                match slot {
                    Some(slot) => slot,
                    None => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        M.connections_accepted.inc();
        M.connections_open.add(1);
        let watch = Arc::new(Watch::new(room.clone()));
        let id = next_id;
        next_id += 1;
        room.open.lock().unwrap_or_else(|e| e.into_inner()).insert(id, watch.clone());
        let service = Tracked::new(TowerToHyperService::new(warp::service(routes.clone())), watch.clone(), peer);
        // Boxed here, outside the task: the compiler cannot prove a task that builds the
        // connection itself `Send` (a higher-ranked lifetime in warp's filters).
        let serve_on = {
            let (builder, watch, stopped) = (builder.clone(), watch.clone(), stopped.clone());
            move |io: Box<dyn Io>| -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
                let io = TokioIo::new(Watched::new(io, watch.clone()));
                let connection = builder.serve_connection_with_upgrades(io, service).into_owned();
                Box::pin(conn::run(connection, watch, limits, stopped))
            }
        };
        let (room, tls, stopped) = (room.clone(), tls.clone(), stopped.clone());
        tokio::spawn(async move {
            let io = match tls {
                None => Some(Box::new(stream) as Box<dyn Io>),
                Some(tls) => handshake(&tls, stream, peer, &watch, limits, stopped).await,
            };
            if let Some(io) = io {
                serve_on(io).await;
            }
            room.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            M.connections_open.add(-1);
            drop(slot);
        });
    }
    drop(listener);
    log::info!("shutting down: finishing in-flight requests");
    // Live streams never finish by themselves.
    app.streams.close();
    let _ = stop.send(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    tokio::select! {
        _ = slots.acquire_many(all) => {}
        () = tokio::time::sleep(crate::DRAIN) => log::warn!("in-flight requests did not finish within {} s; stopping anyway", crate::DRAIN.as_secs()),
    }
    if let Some(log) = &app.access_log {
        log.flush();
    }
}

/// The TLS handshake on a new connection: it is part of the first request's head, with the
/// head's time, and a connection in it may be closed to make room like one sending a head.
async fn handshake(
    tls: &tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    watch: &Watch,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) -> Option<Box<dyn Io>> {
    tokio::select! {
        shaken = tokio::time::timeout(limits.header_timeout, tls.accept(stream)) => match shaken {
            Ok(Ok(stream)) => Some(Box::new(stream)),
            Ok(Err(e)) => {
                log::debug!("TLS handshake with {peer} failed: {e}");
                M.refused(Refused::Handshake);
                None
            }
            Err(_) => {
                log::debug!("TLS handshake with {peer} not done in time");
                M.refused(Refused::Handshake);
                None
            }
        },
        () = watch.evict.notified() => None,
        _ = stopped.changed() => None,
    }
}

/// A connection's byte stream: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// `wanted` connections, or fewer when the process may not open that many descriptors: the soft
/// limit is raised as far as the hard limit allows first.
fn descriptors_for(wanted: usize) -> usize {
    let needed = wanted as u64 + RESERVED_DESCRIPTORS;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return wanted;
    }
    if limit.rlim_cur < needed {
        let raised = libc::rlimit { rlim_cur: needed.min(limit.rlim_max), rlim_max: limit.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = raised.rlim_cur;
        }
    }
    if limit.rlim_cur >= needed {
        return wanted;
    }
    let possible = limit.rlim_cur.saturating_sub(RESERVED_DESCRIPTORS).max(1) as usize;
    log::warn!(
        "--max-connections {wanted} needs {needed} file descriptors and the limit is {} (ulimit -n); serving at most {possible} connections",
        limit.rlim_cur
    );
    possible
}
