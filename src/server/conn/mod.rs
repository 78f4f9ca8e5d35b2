//! The servers' own accept loop, in place of `axum::serve`, for every listener of the
//! controller: the catalog server, catalogd's admission webhook, metrics and profiling
//! ([`crate::metrics::serving`]) and the health probes ([`crate::server::health`]). This
//! module owns what a connection may hold — a slot, time, memory — and who loses a
//! slot when they run out:
//!
//! - **Slots.** At most [`Limits::max_connections`] connections are served at once, at
//!   most [`Limits::max_connections_per_peer`] from one source address. A full server
//!   does not stop accepting while someone holds a slot without using it: a new
//!   connection *evicts* the connection that has been idle between requests the
//!   longest; failing that the oldest one still waiting for its request head (or the
//!   rest of a request body) for longer than [`Limits::eviction_grace`]. Only when
//!   every slot is doing work (a response being produced or written, a fresh
//!   connection) does the loop wait, in the kernel's backlog as Go's
//!   `netutil.LimitListener`, and a connection that waited [`Limits::header_timeout`]
//!   for a slot is closed. A peer at its own limit has its own oldest evictable
//!   connection closed instead; with none (all of its connections busy) the new
//!   connection is closed at once, so that one peer can never make the loop wait for
//!   the others. The API server calls webhooks from one or a few addresses: its
//!   connections are never evicted while a request on them is in progress, and its
//!   idle ones are the ones it would reopen anyway.
//! - **Time**, as Go's `http.Server` has it, kept by a small per-connection [`Clock`]
//!   fed by the I/O and by the requests: the request head must arrive within
//!   [`Limits::header_timeout`] of the connection's start (TLS handshake included) or
//!   of its first byte after an idle pause (slow-loris clients are disconnected); a
//!   request body must be complete within [`Limits::body_timeout`] of its head, or the
//!   request is answered 408 and the connection closed (whether bytes arrive or not);
//!   a connection without requests is closed after [`Limits::idle_timeout`]; a
//!   response must be written within [`Limits::write_timeout`].
//! - **Memory.** Nothing large is allocated up front: hyper's read buffer starts at
//!   8 KiB and grows to [`Buffers::h1`] at most; TLS output, HTTP/2 send buffers and
//!   window are caps that fill only while a response is written or a body arrives.
//!   Each request body may hold [`BODY_FREE_BYTES`] as it is read; beyond that its
//!   bytes come from one server-wide budget of [`Limits::body_buffer_bytes`], and a
//!   body that finds the budget spent is not read further (TCP pushes back) until
//!   others finish or its deadline passes. Small bodies (AdmissionReviews of a
//!   ClusterCatalog are a few KiB) never wait for it.
//!
//! TLS (when configured) is negotiated in the connection's own task, then hyper
//! serves HTTP/1.1 (or HTTP/2 when ALPN chose it) with a bounded request head (431
//! above [`Limits::max_header_bytes`]); every connection gets `TCP_NODELAY`. Shutdown
//! stops accepting, asks every connection to finish gracefully and waits up to
//! [`SHUTDOWN_GRACE`]. The tests on a real socket are in `tests.rs` (a flood of a
//! thousand idle and slow connections among them); the defaults are listed in
//! docs/reference/limits.md.

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// Time given to open connections after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Bytes of a request body held outside the server-wide budget
/// ([`Limits::body_buffer_bytes`]): whole AdmissionReviews of a ClusterCatalog, and the
/// GET requests of the other servers, never wait for it.
pub const BODY_FREE_BYTES: usize = 64 << 10;

/// Time a connection closed for a late request body gets to write its 408 before it
/// is cut.
const BODY_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How often a full accept loop looks again for a connection to evict (besides every
/// time a connection ends).
const SLOT_POLL: Duration = Duration::from_millis(50);

/// Buffer caps of one connection. None is allocated up front: each fills only while a
/// response is written (TLS output, HTTP/2 send buffers) or a request arrives (hyper's
/// read buffer, which starts at 8 KiB; the HTTP/2 receive window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffers {
    /// Pending TLS output (rustls' default is 64 KiB): sixteen full 16 KiB records
    /// per flush keep large responses at full speed.
    pub tls: usize,
    /// hyper's HTTP/1 read buffer at most (and the queue of body chunks for one
    /// `writev`; chunks are queued by reference, not copied).
    pub h1: usize,
    /// HTTP/2 receive window per stream and per connection: what a client may send
    /// before the server reads it. The servers' requests carry no large bodies; how
    /// fast responses go is the client's window, not this one.
    pub h2_stream_window: u32,
    pub h2_connection_window: u32,
    /// HTTP/2 response bytes buffered per stream beyond the client's window.
    pub h2_send: usize,
    /// HTTP/2 streams open at once on one connection.
    pub h2_streams: u32,
}

impl Buffers {
    /// The defaults.
    pub const BOUNDED: Buffers = Buffers {
        tls: 256 << 10,
        h1: 64 << 10,
        h2_stream_window: 64 << 10,
        h2_connection_window: 256 << 10,
        h2_send: 256 << 10,
        h2_streams: 32,
    };
}

impl Default for Buffers {
    fn default() -> Self {
        Buffers::BOUNDED
    }
}

/// Bounds of a server's connections (the catalog server's are the `--catalog-server-*`
/// flags; the webhook, metrics, profiling and health servers use the defaults).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections served at once; above it idle ones are evicted, busy ones waited for.
    pub max_connections: usize,
    /// Connections from one source address at once; above it that address's own idle
    /// connections are evicted, else the new one is closed.
    pub max_connections_per_peer: usize,
    /// Largest request head (request line and headers), bytes; larger ⇒ 431.
    pub max_header_bytes: usize,
    /// Time to receive a whole request head (and to complete the TLS handshake).
    pub header_timeout: Duration,
    /// Time to receive a whole request body once its head is in; later ⇒ 408 and
    /// the connection closed.
    pub body_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Time to write one response.
    pub write_timeout: Duration,
    /// Age below which a connection waiting for its request head (or body) is not
    /// evicted: a client on its way gets this long to send it.
    pub eviction_grace: Duration,
    /// Request body bytes held at once by the whole server beyond
    /// [`BODY_FREE_BYTES`] per body; must exceed the largest accepted body.
    pub body_buffer_bytes: usize,
    /// Buffer caps of each connection.
    pub buffers: Buffers,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 512,
            max_connections_per_peer: 128,
            max_header_bytes: 32 << 10,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(300),
            eviction_grace: Duration::from_secs(1),
            body_buffer_bytes: 32 << 20,
            buffers: Buffers::BOUNDED,
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
    let (stop_tx, stop_rx) = watch::channel(false);
    let acceptor = tls.map(TlsAcceptor::from);
    let budget = limits.body_buffer_bytes.min(Semaphore::MAX_PERMITS);
    let shared = Arc::new(Shared {
        budget: Arc::new(Semaphore::new(budget)),
        limits,
    });
    let registry = Arc::new(Registry::default());
    let mut shutdown = std::pin::pin!(shutdown);
    'accept: loop {
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
        let peer = addr.ip().to_canonical();
        let waited = Instant::now();
        let (id, clock) = loop {
            let freed = registry.freed.notified();
            match registry.place(peer, &shared.limits) {
                Place::Admit(id, clock) => break (id, clock),
                Place::Refuse => {
                    tracing::debug!(%addr, "closing connection: its address is at its connection limit with every connection busy");
                    continue 'accept;
                }
                Place::Wait if waited.elapsed() >= shared.limits.header_timeout => {
                    tracing::debug!(%addr, "closing connection: no free slot in time");
                    continue 'accept;
                }
                Place::Wait => {}
            }
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep(SLOT_POLL) => {}
                () = &mut shutdown => break 'accept,
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%addr, error = %e, "setting TCP_NODELAY");
        }
        let slot = Slot {
            registry: registry.clone(),
            id,
        };
        let conn = Connection {
            addr,
            router: router.clone(),
            shared: shared.clone(),
            stop: stop_rx.clone(),
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            conn.run(tcp, acceptor, clock).await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    if tokio::time::timeout(SHUTDOWN_GRACE, registry.all_closed())
        .await
        .is_err()
    {
        tracing::warn!("graceful shutdown timed out, closing connections");
    }
    Ok(())
}

/// What every connection of one server shares.
struct Shared {
    limits: Limits,
    /// Request body bytes beyond [`BODY_FREE_BYTES`] each ([`Limits::body_buffer_bytes`]).
    budget: Arc<Semaphore>,
}

/// The slots of one server: the connections holding one (evicted ones give theirs up
/// at once, while they close) and how many each peer holds.
#[derive(Default)]
struct Registry {
    table: Mutex<Table>,
    /// A connection ended.
    freed: Notify,
}

#[derive(Default)]
struct Table {
    next: u64,
    /// Connections holding a slot.
    live: HashMap<u64, Entry>,
    per_peer: HashMap<IpAddr, usize>,
    /// Connection tasks still running, evicted ones included.
    running: usize,
}

struct Entry {
    peer: IpAddr,
    clock: Arc<Clock>,
}

enum Place {
    Admit(u64, Arc<Clock>),
    /// The peer is at its limit with every connection busy.
    Refuse,
    /// Every slot is busy.
    Wait,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection from `peer`, evicting for it when `limits` are
    /// reached (the module docs say whom).
    fn place(&self, peer: IpAddr, limits: &Limits) -> Place {
        let mut table = self.lock();
        let now = Instant::now();
        let grace = limits.eviction_grace;
        let per_peer = table.per_peer.get(&peer).copied().unwrap_or(0);
        if per_peer >= limits.max_connections_per_peer.max(1) {
            match table.victim(Some(peer), now, grace) {
                Some(id) => table.evict(id, "its address is at its connection limit"),
                None => return Place::Refuse,
            }
        }
        if table.live.len() >= limits.max_connections.max(1) {
            match table.victim(None, now, grace) {
                Some(id) => table.evict(id, "the server is at its connection limit"),
                None => return Place::Wait,
            }
        }
        table.next += 1;
        let id = table.next;
        let clock = Arc::new(Clock::new(limits));
        table.live.insert(
            id,
            Entry {
                peer,
                clock: clock.clone(),
            },
        );
        *table.per_peer.entry(peer).or_insert(0) += 1;
        table.running += 1;
        Place::Admit(id, clock)
    }

    /// Ends connection `id`'s hold on its slot (if it still has one).
    fn close(&self, id: u64) {
        let mut table = self.lock();
        table.release(id);
        table.running = table.running.saturating_sub(1);
        drop(table);
        self.freed.notify_waiters();
    }

    async fn all_closed(&self) {
        loop {
            let freed = self.freed.notified();
            if self.lock().running == 0 {
                return;
            }
            freed.await;
        }
    }
}

impl Table {
    /// The connection to evict first, among `peer`'s when given: the longest idle,
    /// then the oldest waiting for its head past `grace`, then the oldest waiting
    /// for the rest of a body past `grace`; none doing other work.
    fn victim(&self, peer: Option<IpAddr>, now: Instant, grace: Duration) -> Option<u64> {
        self.live
            .iter()
            .filter(|(_, e)| peer.is_none_or(|p| e.peer == p))
            .filter_map(|(id, e)| e.clock.evictable(now, grace).map(|rank| (rank, *id)))
            .min()
            .map(|(_, id)| id)
    }

    fn evict(&mut self, id: u64, why: &'static str) {
        if let Some(entry) = self.release(id) {
            tracing::debug!(peer = %entry.peer, "evicting a connection: {why}");
            entry.clock.evict();
        }
    }

    fn release(&mut self, id: u64) -> Option<Entry> {
        let entry = self.live.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&entry.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }
}

/// A connection task's slot: given back when the task ends.
struct Slot {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.close(self.id);
    }
}

struct Connection {
    addr: SocketAddr,
    router: Router,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn run(self, tcp: TcpStream, acceptor: Option<TlsAcceptor>, clock: Arc<Clock>) {
        let Some(acceptor) = acceptor else {
            let io = Watched::new(tcp, clock.clone(), false);
            return self.http1(io, clock).await;
        };
        let header_timeout = self.shared.limits.header_timeout;
        let handshake = tokio::select! {
            r = tokio::time::timeout(header_timeout, acceptor.accept(tcp)) => r,
            () = clock.evicted() => {
                return tracing::debug!(addr = %self.addr, "closing connection: evicted during the TLS handshake");
            }
        };
        let mut tls = match handshake {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                return tracing::debug!(addr = %self.addr, error = %e, "TLS handshake failed");
            }
            Err(_) => return tracing::debug!(addr = %self.addr, "TLS handshake timed out"),
        };
        let buffers = self.shared.limits.buffers;
        tls.get_mut().1.set_buffer_limit(Some(buffers.tls));
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
        let limits = &self.shared.limits;
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(None)
            .max_header_size(limits.max_header_bytes)
            .max_buf_size(limits.buffers.h1.max(limits.max_header_bytes + 8192))
            .writev(true);
        let service = service(self.router.clone(), clock.clone(), self.shared.clone());
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        self.drive(conn, |c| c.graceful_shutdown(), &clock).await;
    }

    async fn http2<T>(self, io: Watched<T>, clock: Arc<Clock>)
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let limits = &self.shared.limits;
        let buffers = limits.buffers;
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .initial_stream_window_size(buffers.h2_stream_window)
            .initial_connection_window_size(buffers.h2_connection_window)
            .max_concurrent_streams(buffers.h2_streams)
            .max_send_buf_size(buffers.h2_send);
        let service = service(self.router.clone(), clock.clone(), self.shared.clone());
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        self.drive(conn, |c| c.graceful_shutdown(), &clock).await;
    }

    /// Runs `conn` to its end, closing it when the clock says a limit passed or the
    /// connection was evicted, and gracefully when the server stops.
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
            let changed = clock.changed.notified();
            if let Some(what) = clock.expired() {
                tracing::debug!(addr = %self.addr, "closing connection: {what}");
                if what == Expired::Idle || (what == Expired::Evicted && clock.is_idle()) {
                    graceful(conn.as_mut());
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                }
                return;
            }
            let deadline = clock.deadline();
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(addr = %self.addr, error = %e, "connection");
                    }
                    return;
                }
                () = changed => {}
                () = sleep_until(deadline) => {}
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

/// The router as a hyper service: each request body gets its deadline and budget
/// ([`Limited`]), and `clock` hears when each request starts, when its body is in and
/// when its response ends.
fn service(
    router: Router,
    clock: Arc<Clock>,
    shared: Arc<Shared>,
) -> impl hyper::service::Service<
    http::Request<Incoming>,
    Response = http::Response<Tracked>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<http::Response<Tracked>, std::convert::Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let has_body = !req.body().is_end_stream();
        let guard = clock.begin(has_body);
        let late = Arc::new(AtomicBool::new(false));
        let http1 = req.version() < http::Version::HTTP_2;
        let req = req.map(|inner| {
            Body::new(Limited {
                inner,
                open: has_body.then(|| BodyOpen {
                    clock: clock.clone(),
                    id: guard.id,
                }),
                deadline: Box::pin(tokio::time::sleep(shared.limits.body_timeout)),
                late: late.clone(),
                budget: shared.budget.clone(),
                received: 0,
                charged: 0,
                held: None,
                waiting: None,
            })
        });
        let router = router.clone();
        async move {
            let response = match tower::ServiceExt::oneshot(router, req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            let response = if late.load(Ordering::Relaxed) {
                request_timeout(http1)
            } else {
                response
            };
            Ok(response.map(|inner| Tracked {
                inner,
                _guard: guard,
            }))
        }
    })
}

/// The answer to a request whose body did not arrive within [`Limits::body_timeout`];
/// an HTTP/1 connection is closed after it (the rest of the body is never read).
fn request_timeout(http1: bool) -> http::Response<Body> {
    let mut response = http::Response::new(Body::from("request body not received in time\n"));
    *response.status_mut() = http::StatusCode::REQUEST_TIMEOUT;
    if http1 {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// Why a request body ended early.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("request body not received within the body timeout")]
    Late,
    #[error(transparent)]
    Read(#[from] hyper::Error),
}

/// A request body with its deadline ([`Limits::body_timeout`]) and its share of the
/// server's body budget: past [`BODY_FREE_BYTES`], each frame is passed on only once
/// the budget holds its bytes (until then the body is not read further).
struct Limited {
    inner: Incoming,
    /// Tells the clock when the body is complete or dropped; `None` once it is.
    open: Option<BodyOpen>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    late: Arc<AtomicBool>,
    budget: Arc<Semaphore>,
    received: usize,
    charged: usize,
    held: Option<OwnedSemaphorePermit>,
    /// A frame waiting for budget.
    waiting: Option<(Frame<Bytes>, PermitFuture)>,
}

type PermitFuture =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, tokio::sync::AcquireError>> + Send>>;

impl Limited {
    fn keep(&mut self, permit: OwnedSemaphorePermit) {
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
    }
}

impl HttpBody for Limited {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.open.is_none() && this.waiting.is_none() {
            return Pin::new(&mut this.inner).poll_frame(cx).map_err(Into::into);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.late.store(true, Ordering::Relaxed);
            this.waiting = None;
            return Poll::Ready(Some(Err(BodyError::Late)));
        }
        if let Some((_, acquire)) = &mut this.waiting {
            let permit = std::task::ready!(acquire.as_mut().poll(cx));
            let Some((frame, _)) = this.waiting.take() else {
                return Poll::Ready(None);
            };
            if let Ok(permit) = permit {
                this.keep(permit);
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        let frame = match std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            None => {
                this.open = None;
                return Poll::Ready(None);
            }
            Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
            Some(Ok(frame)) => frame,
        };
        if this.inner.is_end_stream() {
            this.open = None;
        }
        let Some(data) = frame.data_ref() else {
            return Poll::Ready(Some(Ok(frame)));
        };
        this.received = this.received.saturating_add(data.len());
        let owed = this
            .received
            .saturating_sub(BODY_FREE_BYTES)
            .saturating_sub(this.charged);
        if owed == 0 {
            return Poll::Ready(Some(Ok(frame)));
        }
        this.charged += owed;
        let n = u32::try_from(owed).unwrap_or(u32::MAX);
        match this.budget.clone().try_acquire_many_owned(n) {
            Ok(permit) => {
                this.keep(permit);
                Poll::Ready(Some(Ok(frame)))
            }
            Err(_) => {
                let acquire: PermitFuture = Box::pin(this.budget.clone().acquire_many_owned(n));
                this.waiting = Some((frame, acquire));
                // Polled again at once: registers the waker with the semaphore.
                Pin::new(this).poll_frame(cx)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.waiting.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body not yet complete, on the [`Clock`]; dropping it (body complete, or
/// dropped unread) tells the clock.
struct BodyOpen {
    clock: Arc<Clock>,
    id: u64,
}

impl Drop for BodyOpen {
    fn drop(&mut self) {
        self.clock.body_done(self.id);
    }
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
    Body,
    Idle,
    Write,
    Evicted,
}

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expired::Header => "request head not received in time",
            Expired::Body => "request body not received in time",
            Expired::Idle => "idle",
            Expired::Write => "response not written in time",
            Expired::Evicted => "evicted to make room for a new connection",
        })
    }
}

/// One request in progress.
struct Request {
    id: u64,
    started: Instant,
    /// Its body is not complete yet.
    body: bool,
}

/// What a connection is doing, for its time limits.
enum Phase {
    /// Waiting for (the rest of) a request head since then.
    Head(Instant),
    /// Requests being served (bodies read, responses written).
    Busy(Vec<Request>),
    /// No request since then.
    Idle(Instant),
}

/// The time limits of one connection: its [`Phase`], moved by the I/O ([`Watched`])
/// and by requests ([`Clock::begin`], [`Busy`], [`BodyOpen`]); [`Connection::drive`]
/// sleeps until the current deadline and is woken by every change, and by an eviction
/// ([`Clock::evict`]).
struct Clock {
    header: Duration,
    body: Duration,
    idle: Duration,
    write: Duration,
    phase: Mutex<(Phase, u64)>,
    evicted: AtomicBool,
    changed: Notify,
}

impl Clock {
    fn new(limits: &Limits) -> Self {
        Clock {
            header: limits.header_timeout,
            body: limits.body_timeout.saturating_add(BODY_CLOSE_GRACE),
            idle: limits.idle_timeout,
            write: limits.write_timeout,
            phase: Mutex::new((Phase::Head(Instant::now()), 0)),
            evicted: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Phase, u64)> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update<R>(&self, f: impl FnOnce(&mut Phase, &mut u64) -> R) -> R {
        let mut guard = self.lock();
        let (phase, next_id) = &mut *guard;
        let r = f(phase, next_id);
        drop(guard);
        self.changed.notify_one();
        r
    }

    /// Bytes arrived: an idle connection starts receiving a request head.
    fn on_read(&self) {
        if matches!(self.lock().0, Phase::Idle(_)) {
            self.update(|phase, _| {
                if matches!(phase, Phase::Idle(_)) {
                    *phase = Phase::Head(Instant::now());
                }
            });
        }
    }

    /// A request head is complete (with a body to come when `body`): its response
    /// starts.
    fn begin(self: &Arc<Self>, body: bool) -> Busy {
        let id = self.update(|phase, next_id| {
            *next_id += 1;
            let request = Request {
                id: *next_id,
                started: Instant::now(),
                body,
            };
            match phase {
                Phase::Busy(list) => list.push(request),
                _ => *phase = Phase::Busy(vec![request]),
            }
            *next_id
        });
        Busy {
            clock: self.clone(),
            id,
        }
    }

    fn body_done(&self, id: u64) {
        self.update(|phase, _| {
            if let Phase::Busy(list) = phase {
                for request in list.iter_mut().filter(|r| r.id == id) {
                    request.body = false;
                }
            }
        });
    }

    fn end(&self, id: u64) {
        self.update(|phase, _| {
            if let Phase::Busy(list) = phase {
                list.retain(|r| r.id != id);
                if list.is_empty() {
                    *phase = Phase::Idle(Instant::now());
                }
            }
        });
    }

    /// Asks the connection to close (it lost its slot).
    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// Completes once [`Clock::evict`] was called.
    async fn evicted(&self) {
        loop {
            let changed = self.changed.notified();
            if self.evicted.load(Ordering::SeqCst) {
                return;
            }
            changed.await;
        }
    }

    fn is_idle(&self) -> bool {
        matches!(self.lock().0, Phase::Idle(_))
    }

    /// Where this connection stands in the eviction order (lower first), or `None`
    /// when it is doing work or is younger than `grace` in its wait.
    fn evictable(&self, now: Instant, grace: Duration) -> Option<(u8, Instant)> {
        match &self.lock().0 {
            Phase::Idle(since) => Some((0, *since)),
            Phase::Head(since) if *since + grace <= now => Some((1, *since)),
            Phase::Head(_) => None,
            Phase::Busy(list) => {
                let oldest = list.iter().map(|r| r.started).min()?;
                let youngest = list.iter().map(|r| r.started).max()?;
                (list.iter().all(|r| r.body) && youngest + grace <= now).then_some((2, oldest))
            }
        }
    }

    /// The next deadline and what passing it means.
    fn next(&self) -> Option<(Instant, Expired)> {
        let guard = self.lock();
        match &guard.0 {
            Phase::Head(t) => Some((*t + self.header, Expired::Header)),
            Phase::Idle(t) => Some((*t + self.idle, Expired::Idle)),
            Phase::Busy(list) => list
                .iter()
                .flat_map(|r| {
                    let body = r.body.then_some((r.started + self.body, Expired::Body));
                    [Some((r.started + self.write, Expired::Write)), body]
                })
                .flatten()
                .min_by_key(|(t, _)| *t),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.next().map(|(t, _)| t)
    }

    fn expired(&self) -> Option<Expired> {
        if self.evicted.load(Ordering::SeqCst) {
            return Some(Expired::Evicted);
        }
        self.next()
            .filter(|(t, _)| *t <= Instant::now())
            .map(|(_, what)| what)
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
