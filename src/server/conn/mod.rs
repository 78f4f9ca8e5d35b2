//! The catalog server's own accept loop, in place of `axum::serve`: every accepted
//! connection gets `TCP_NODELAY` (no Nagle + delayed-ACK stalls on small answers), a
//! slot among [`Limits::max_connections`] (above it the loop stops accepting, so new
//! connections wait in the kernel's backlog, as Go's `netutil.LimitListener`), the TLS
//! handshake (when configured) in the connection's own task, then hyper's HTTP/1.1 (or
//! HTTP/2 when ALPN chose it) with a bounded request head (431 above
//! [`Limits::max_header_bytes`]).
//!
//! Time limits, as Go's `http.Server` has them, are kept by a small per-connection
//! [`Clock`] fed by the I/O and by the requests: the request head must arrive within
//! [`Limits::header_timeout`] of the connection's start (TLS handshake included) or of
//! its first byte after an idle pause (slow-loris clients are disconnected); a
//! connection without requests is closed after [`Limits::idle_timeout`]; a response
//! must be written within [`Limits::write_timeout`]. Shutdown stops accepting, asks
//! every connection to finish gracefully and waits up to
//! [`SHUTDOWN_GRACE`].

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Time given to open connections after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// Pending TLS output a connection may buffer (rustls' default is 64 KiB): large
/// bodies go out in big writes of full 16 KiB records.
const TLS_BUFFER: usize = 1 << 20;
/// hyper's HTTP/1 buffer: body chunks up to this size are queued for one `writev`.
const H1_BUFFER: usize = 1 << 20;
/// HTTP/2 send window per stream and connection (large bodies need no window updates).
const H2_WINDOW: u32 = 8 << 20;

/// Bounds of the catalog server's connections (`--catalog-server-*` flags).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections served at once; more wait until one closes.
    pub max_connections: usize,
    /// Largest request head (request line and headers), bytes; larger ⇒ 431.
    pub max_header_bytes: usize,
    /// Time to receive a whole request head (and to complete the TLS handshake).
    pub header_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Time to write one response.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 512,
            max_header_bytes: 32 << 10,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(300),
        }
    }
}

/// Serves `router` on `listener` (TLS when `tls` is set) within `limits` until
/// `shutdown` completes, then gives open connections [`SHUTDOWN_GRACE`].
pub async fn serve<F>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    limits: Limits,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let slots = limits.max_connections.clamp(1, u32::MAX as usize >> 1);
    let permits = Arc::new(Semaphore::new(slots));
    let (stop_tx, stop_rx) = watch::channel(false);
    let acceptor = tls.map(TlsAcceptor::from);
    let limits = Arc::new(limits);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (tcp, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%addr, error = %e, "setting TCP_NODELAY");
        }
        let conn = Connection {
            addr,
            router: router.clone(),
            limits: limits.clone(),
            stop: stop_rx.clone(),
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            conn.run(tcp, acceptor).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let all = u32::try_from(slots).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("catalog server: graceful shutdown timed out, closing connections");
    }
    Ok(())
}

struct Connection {
    addr: SocketAddr,
    router: Router,
    limits: Arc<Limits>,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn run(self, tcp: TcpStream, acceptor: Option<TlsAcceptor>) {
        let clock = Arc::new(Clock::new(&self.limits));
        let Some(acceptor) = acceptor else {
            let io = Watched::new(tcp, clock.clone(), false);
            return self.http1(io, clock).await;
        };
        let mut tls =
            match tokio::time::timeout(self.limits.header_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    return tracing::debug!(addr = %self.addr, error = %e, "TLS handshake failed");
                }
                Err(_) => return tracing::debug!(addr = %self.addr, "TLS handshake timed out"),
            };
        tls.get_mut().1.set_buffer_limit(Some(TLS_BUFFER));
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        let io = Watched::new(tls, clock.clone(), h2);
        if h2 {
            self.http2(io, clock).await
        } else {
            self.http1(io, clock).await
        }
    }

    async fn http1<T>(self, io: Watched<T>, clock: Arc<Clock>)
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(None)
            .max_header_size(self.limits.max_header_bytes)
            .max_buf_size(H1_BUFFER.max(self.limits.max_header_bytes + 8192))
            .writev(true);
        let service = service(self.router.clone(), clock.clone());
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        self.drive(conn, |c| c.graceful_shutdown(), &clock).await;
    }

    async fn http2<T>(self, io: Watched<T>, clock: Arc<Clock>)
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(self.limits.max_header_bytes).unwrap_or(u32::MAX))
            .initial_stream_window_size(H2_WINDOW)
            .initial_connection_window_size(H2_WINDOW)
            .max_send_buf_size(H1_BUFFER);
        let service = service(self.router.clone(), clock.clone());
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        self.drive(conn, |c| c.graceful_shutdown(), &clock).await;
    }

    /// Runs `conn` to its end, closing it when the clock says a limit passed, and
    /// gracefully when the server stops.
    async fn drive<C, G>(mut self, mut conn: Pin<&mut C>, graceful: G, clock: &Clock)
    where
        C: Future<Output = hyper::Result<()>>,
        G: Fn(Pin<&mut C>),
    {
        let mut stopping = *self.stop.borrow();
        if stopping {
            graceful(conn.as_mut());
        }
        loop {
            let deadline = clock.deadline();
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(addr = %self.addr, error = %e, "catalog server connection");
                    }
                    return;
                }
                () = clock.changed.notified() => {}
                () = sleep_until(deadline) => {
                    if let Some(what) = clock.expired() {
                        tracing::debug!(addr = %self.addr, "closing connection: {what}");
                        if what == Expired::Idle {
                            graceful(conn.as_mut());
                            let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                        }
                        return;
                    }
                }
                r = self.stop.changed(), if !stopping => {
                    stopping = true;
                    if r.is_ok() {
                        graceful(conn.as_mut());
                    }
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The router as a hyper service that tells `clock` when each response starts and ends.
fn service(
    router: Router,
    clock: Arc<Clock>,
) -> impl hyper::service::Service<
    http::Request<Incoming>,
    Response = http::Response<Tracked>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<http::Response<Tracked>, std::convert::Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let guard = clock.begin();
        let router = router.clone();
        async move {
            let response = match tower::ServiceExt::oneshot(router, req.map(Body::new)).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok(response.map(|inner| Tracked {
                inner,
                _guard: guard,
            }))
        }
    })
}

/// A response body that ends its request on the [`Clock`] when dropped (written, or
/// the connection went away).
pub struct Tracked {
    inner: Body,
    _guard: Busy,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expired {
    Header,
    Idle,
    Write,
}

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expired::Header => "request head not received in time",
            Expired::Idle => "idle",
            Expired::Write => "response not written in time",
        })
    }
}

/// What a connection is doing, for its time limits.
enum Phase {
    /// Waiting for (the rest of) a request head since then.
    Head(Instant),
    /// Responses being written: (id, started) of each.
    Busy(Vec<(u64, Instant)>),
    /// No request since then.
    Idle(Instant),
}

/// The time limits of one connection: its [`Phase`], moved by the I/O ([`Watched`])
/// and by requests ([`Clock::begin`], [`Busy`]); [`Connection::drive`] sleeps until
/// the current deadline and is woken by every change.
struct Clock {
    header: Duration,
    idle: Duration,
    write: Duration,
    phase: Mutex<(Phase, u64)>,
    changed: Notify,
}

impl Clock {
    fn new(limits: &Limits) -> Self {
        Clock {
            header: limits.header_timeout,
            idle: limits.idle_timeout,
            write: limits.write_timeout,
            phase: Mutex::new((Phase::Head(Instant::now()), 0)),
            changed: Notify::new(),
        }
    }

    fn update<R>(&self, f: impl FnOnce(&mut Phase, &mut u64) -> R) -> R {
        let mut guard = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        let (phase, next_id) = &mut *guard;
        let r = f(phase, next_id);
        drop(guard);
        self.changed.notify_one();
        r
    }

    /// Bytes arrived: an idle connection starts receiving a request head.
    fn on_read(&self) {
        let idle = matches!(
            self.phase.lock().map(|g| matches!(g.0, Phase::Idle(_))),
            Ok(true)
        );
        if idle {
            self.update(|phase, _| {
                if matches!(phase, Phase::Idle(_)) {
                    *phase = Phase::Head(Instant::now());
                }
            });
        }
    }

    /// A request head is complete: its response starts.
    fn begin(self: &Arc<Self>) -> Busy {
        let id = self.update(|phase, next_id| {
            *next_id += 1;
            let id = *next_id;
            match phase {
                Phase::Busy(list) => list.push((id, Instant::now())),
                _ => *phase = Phase::Busy(vec![(id, Instant::now())]),
            }
            id
        });
        Busy {
            clock: self.clone(),
            id,
        }
    }

    fn end(&self, id: u64) {
        self.update(|phase, _| {
            if let Phase::Busy(list) = phase {
                list.retain(|(i, _)| *i != id);
                if list.is_empty() {
                    *phase = Phase::Idle(Instant::now());
                }
            }
        });
    }

    fn deadline(&self) -> Option<Instant> {
        let guard = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        match &guard.0 {
            Phase::Head(t) => Some(*t + self.header),
            Phase::Idle(t) => Some(*t + self.idle),
            Phase::Busy(list) => list.iter().map(|(_, t)| *t + self.write).min(),
        }
    }

    fn expired(&self) -> Option<Expired> {
        let what = {
            let guard = self.phase.lock().unwrap_or_else(|e| e.into_inner());
            match &guard.0 {
                Phase::Head(_) => Expired::Header,
                Phase::Idle(_) => Expired::Idle,
                Phase::Busy(_) => Expired::Write,
            }
        };
        self.deadline()
            .filter(|d| *d <= Instant::now())
            .map(|_| what)
    }
}

/// One response in progress; dropping it ends it on the clock.
struct Busy {
    clock: Arc<Clock>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.clock.end(self.id);
    }
}

/// A connection's I/O that reports arriving bytes to its [`Clock`] (HTTP/1 only: on
/// HTTP/2, pings and window updates arrive between requests).
struct Watched<T> {
    io: T,
    clock: Arc<Clock>,
    h2: bool,
}

impl<T> Watched<T> {
    fn new(io: T, clock: Arc<Clock>, h2: bool) -> Self {
        Watched { io, clock, h2 }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if !self.h2 && matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.on_read();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
