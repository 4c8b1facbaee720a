//! A connection's socket and service, watched: their reads, writes and requests reported to
//! the connection's [`Watch`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use warp::http::Request;

use super::conn::Watch;

/// The connection's socket, its reads and writes reported to its [`Watch`]; hyper's own error
/// answers are sent as JSON:API documents (see `bare.rs`).
pub struct Watched<T> {
    io: T,
    watch: Arc<Watch>,
    /// A document being sent in place of one of hyper's error heads.
    instead: Option<Instead>,
}

struct Instead {
    bytes: Vec<u8>,
    sent: usize,
    /// The length of hyper's head, reported written once the document is.
    of: usize,
}

impl<T> Watched<T> {
    pub fn new(io: T, watch: Arc<Watch>) -> Watched<T> {
        Watched { io, watch, instead: None }
    }
}

impl<T: AsyncWrite + Unpin> Watched<T> {
    /// Sends what replaces hyper's head, then reports the head written.
    fn poll_instead(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some(instead) = self.instead.as_mut().filter(|i| i.sent < i.bytes.len()) {
            match Pin::new(&mut self.io).poll_write(cx, &instead.bytes[instead.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    instead.sent += n;
                    self.watch.wrote(n);
                }
                other => return other,
            }
        }
        Poll::Ready(Ok(self.instead.take().map_or(0, |i| i.of)))
    }

    /// Whether `head` is one of hyper's error answers, now to be replaced (hyper presents the
    /// same head again until it is reported written).
    fn replaces(&mut self, head: &[u8]) -> io::Result<bool> {
        match &self.instead {
            Some(instead) if instead.of != head.len() => {
                Err(io::Error::new(io::ErrorKind::InvalidInput, "a write while an error answer was being sent"))
            }
            Some(_) => Ok(true),
            None => {
                self.instead = super::bare::rewrite(head).map(|bytes| Instead { bytes, sent: 0, of: head.len() });
                Ok(self.instead.is_some())
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.replaces(buf)? {
            return self.poll_instead(cx);
        }
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // hyper's error heads come as one buffer.
        let mut written = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(head), None) = (written.next(), written.next()) {
            if self.replaces(head)? {
                return self.poll_instead(cx);
            }
        }
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T> Watched<T> {
    fn wrote(&self, polled: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n @ 1..)) = polled {
            self.watch.wrote(*n);
        }
    }
}

/// A service whose requests are counted as in flight from their call until their handler's
/// future is done (or dropped).
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    watch: Arc<Watch>,
    /// The client's address, known to each request's handler (see [`crate::http::with_peer`]).
    peer: SocketAddr,
}

impl<S> Tracked<S> {
    pub fn new(inner: S, watch: Arc<Watch>, peer: SocketAddr) -> Tracked<S> {
        Tracked { inner, watch, peer }
    }
}

impl<S, B, RB> warp::hyper::service::Service<Request<B>> for Tracked<S>
where
    S: warp::hyper::service::Service<Request<B>, Response = warp::http::Response<RB>>,
    RB: http_body::Body,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = InFlight<S::Future>;

    fn call(&self, mut req: Request<B>) -> Self::Future {
        self.watch.begin(req.version());
        let busy = Busy::new(self.watch.clone());
        absolute_form(&mut req);
        let inner = crate::http::with_peer(self.peer, || self.inner.call(req));
        InFlight { inner, peer: self.peer, _busy: busy }
    }
}

/// A request whose target is in absolute form (`GET http://host/v1/... HTTP/1.1`, as sent to a
/// proxy) names its host there, and its `Host` header is to be ignored (RFC 9112, 3.2.2): the
/// target's authority becomes the `Host` that links are built from. HTTP/1 still needs one
/// valid `Host` line (3.2): without one, or with two, the request is left as it came, to be
/// refused. (HTTP/2 has no `Host` line: its `:authority` is the target's.)
fn absolute_form<B>(req: &mut Request<B>) {
    use warp::http::header::HOST;
    let Some(authority) = req.uri().authority().and_then(|a| warp::http::HeaderValue::from_str(a.as_str()).ok()) else {
        return;
    };
    if req.version() < warp::http::Version::HTTP_2 && !matches!(crate::app::host(req.headers()), Ok(Some(_))) {
        return;
    }
    req.headers_mut().insert(HOST, authority);
}

/// A request in flight: ended on its connection's watch, and in the process's count of
/// requests in flight (see [`crate::priority::Saturation`]), when dropped.
struct Busy(Arc<Watch>);

impl Busy {
    fn new(watch: Arc<Watch>) -> Busy {
        crate::priority::request_began();
        Busy(watch)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end();
        crate::priority::request_ended();
    }
}

pin_project_lite::pin_project! {
    /// A request's handler, counted as in flight until it is dropped.
    pub struct InFlight<F> {
        #[pin]
        inner: F,
        peer: SocketAddr,
        _busy: Busy,
    }
}

impl<F, B, E> Future for InFlight<F>
where
    F: Future<Output = Result<warp::http::Response<B>, E>>,
    B: http_body::Body,
{
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let hook: Arc<dyn crate::app::ConnHook> = this._busy.0.clone();
        let polled = crate::http::with_conn(*this.peer, hook, || this.inner.poll(cx));
        if let Poll::Ready(Ok(response)) = &polled {
            // What the connection owes the client from now on (see `Watch::wrote`).
            this._busy.0.respond(http_body::Body::size_hint(response.body()).upper().unwrap_or(0));
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    use super::*;

    /// A socket that takes at most 7 bytes a write and is not ready every other time.
    #[derive(Default)]
    struct Slow {
        got: Vec<u8>,
        ready: bool,
    }

    impl AsyncWrite for Slow {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.ready = !self.ready;
            if !self.ready {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = buf.len().min(7);
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn watched() -> Watched<Slow> {
        let room =
            super::super::Room { open: Mutex::default(), wanted: AtomicBool::new(false), freed: Default::default() };
        Watched::new(Slow::default(), Arc::new(Watch::new(Arc::new(room))))
    }

    /// Writes `buf` as hyper does: the same buffer again after `Pending`, the rest after a
    /// partial write.
    fn write_all(w: &mut Watched<Slow>, mut buf: &[u8], vectored: bool) {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        while !buf.is_empty() {
            let polled = if vectored {
                Pin::new(&mut *w).poll_write_vectored(&mut cx, &[io::IoSlice::new(buf)])
            } else {
                Pin::new(&mut *w).poll_write(&mut cx, buf)
            };
            match polled {
                Poll::Ready(Ok(n)) => buf = &buf[n..],
                Poll::Ready(Err(e)) => panic!("{e}"),
                Poll::Pending => {}
            }
        }
    }

    #[test]
    fn hypers_error_head_goes_out_whole_as_a_document_through_a_slow_socket() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        for vectored in [false, true] {
            let mut w = watched();
            write_all(&mut w, head, vectored);
            assert_eq!(w.io.got, super::super::bare::rewrite(head).unwrap(), "vectored: {vectored}");
            assert!(w.instead.is_none());
            // Anything else passes as it is.
            let mut w = watched();
            write_all(&mut w, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", vectored);
            assert_eq!(w.io.got, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
        }
    }
}
