//! One connection's task, from its accept to its end: the TLS handshake (within
//! [`super::Limits::header_timeout`], its output capped at [`super::Buffers::tls`]),
//! then hyper serving HTTP/1.1, or HTTP/2 when ALPN chose it, with the request head and
//! buffers bounded by [`super::Limits`]; [`Connection::drive`] closes it when its
//! [`Clock`] says a limit passed or it was evicted, and gracefully when the server
//! stops.

use super::Shared;
use super::clock::{Clock, Expired, Watched};
use super::request::service;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// An accepted connection, with what it takes from its server.
pub(super) struct Connection {
    pub(super) addr: SocketAddr,
    pub(super) router: Router,
    pub(super) shared: Arc<Shared>,
    pub(super) stop: watch::Receiver<bool>,
}

impl Connection {
    pub(super) async fn run(
        self,
        tcp: TcpStream,
        acceptor: Option<TlsAcceptor>,
        clock: Arc<Clock>,
    ) {
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
