//! The time limits of one connection, as Go's `http.Server` has them
//! ([`super::Limits::header_timeout`], `body_timeout`, `idle_timeout`,
//! `write_timeout`): a [`Clock`] that knows what the connection is doing ([`Phase`]),
//! its next deadline and whether it may be evicted, moved by the I/O ([`Watched`]) and
//! by the requests ([`Busy`]); [`super::connection`] sleeps on it and closes the
//! connection when it says so.

use super::Limits;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Time a connection closed for a late request body gets to write its 408 before it
/// is cut.
const BODY_CLOSE_GRACE: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expired {
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
/// and by requests ([`Clock::begin`], [`Busy`], [`BodyOpen`](super::request::BodyOpen));
/// [`Connection::drive`](super::connection::Connection::drive) sleeps until the current
/// deadline and is woken by every change, and by an eviction ([`Clock::evict`]).
pub(super) struct Clock {
    header: Duration,
    body: Duration,
    idle: Duration,
    write: Duration,
    phase: Mutex<(Phase, u64)>,
    evicted: AtomicBool,
    pub(super) changed: Notify,
}

impl Clock {
    pub(super) fn new(limits: &Limits) -> Self {
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
    pub(super) fn begin(self: &Arc<Self>, body: bool) -> Busy {
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

    pub(super) fn body_done(&self, id: u64) {
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
    pub(super) fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// Completes once [`Clock::evict`] was called.
    pub(super) async fn evicted(&self) {
        loop {
            let changed = self.changed.notified();
            if self.evicted.load(Ordering::SeqCst) {
                return;
            }
            changed.await;
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        matches!(self.lock().0, Phase::Idle(_))
    }

    /// Where this connection stands in the eviction order (lower first), or `None`
    /// when it is doing work or is younger than `grace` in its wait.
    pub(super) fn evictable(&self, now: Instant, grace: Duration) -> Option<(u8, Instant)> {
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

    pub(super) fn deadline(&self) -> Option<Instant> {
        self.next().map(|(t, _)| t)
    }

    pub(super) fn expired(&self) -> Option<Expired> {
        if self.evicted.load(Ordering::SeqCst) {
            return Some(Expired::Evicted);
        }
        self.next()
            .filter(|(t, _)| *t <= Instant::now())
            .map(|(_, what)| what)
    }
}

/// One response in progress; dropping it ends it on the clock.
pub(super) struct Busy {
    clock: Arc<Clock>,
    pub(super) id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.clock.end(self.id);
    }
}

/// A connection's I/O that reports arriving bytes to its [`Clock`] (HTTP/1 only: on
/// HTTP/2, pings and window updates arrive between requests).
pub(super) struct Watched<T> {
    io: T,
    clock: Arc<Clock>,
    h2: bool,
}

impl<T> Watched<T> {
    pub(super) fn new(io: T, clock: Arc<Clock>, h2: bool) -> Self {
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
