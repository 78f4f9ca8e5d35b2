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
//! - **Time**, as Go's `http.Server` has it, kept by a small per-connection
//!   [`Clock`](clock::Clock) fed by the I/O and by the requests: the request head must
//!   arrive within [`Limits::header_timeout`] of the connection's start (TLS handshake
//!   included) or of its first byte after an idle pause (slow-loris clients are
//!   disconnected); a request body must be complete within [`Limits::body_timeout`] of
//!   its head, or the request is answered 408 and the connection closed (whether bytes
//!   arrive or not); a connection without requests is closed after
//!   [`Limits::idle_timeout`]; a response must be written within
//!   [`Limits::write_timeout`].
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
//!
//! This file holds the limits and the accept loop; `slots/` who holds a slot and whom a
//! new connection evicts; `clock/` a connection's time limits and the I/O that feeds
//! them; `connection/` one connection's task (TLS handshake, HTTP/1 or HTTP/2, closing
//! it when a limit passes or the server stops); `request/` each request's body
//! (deadline, budget, the 408) and its response.

mod clock;
mod connection;
mod request;
mod slots;

pub use request::Tracked;

use axum::Router;
use connection::Connection;
use slots::{Place, Registry, Slot};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// Time given to open connections after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Bytes of a request body held outside the server-wide budget
/// ([`Limits::body_buffer_bytes`]): whole AdmissionReviews of a ClusterCatalog, and the
/// GET requests of the other servers, never wait for it.
pub const BODY_FREE_BYTES: usize = 64 << 10;

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

#[cfg(test)]
mod tests;
