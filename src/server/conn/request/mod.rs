//! Each request of a connection, from its head to the end of its response: the router
//! as a hyper service ([`service`]) that tells the connection's [`Clock`] when a
//! request starts, when its body is in ([`BodyOpen`]) and when its response ends
//! ([`Tracked`]); the request body's deadline ([`super::Limits::body_timeout`], then
//! 408) and its share of the server-wide body budget beyond [`BODY_FREE_BYTES`]
//! ([`Limited`]).

use super::clock::{Busy, Clock};
use super::{BODY_FREE_BYTES, Shared};
use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The router as a hyper service: each request body gets its deadline and budget
/// ([`Limited`]), and `clock` hears when each request starts, when its body is in and
/// when its response ends.
pub(super) fn service(
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

/// The answer to a request whose body did not arrive within
/// [`Limits::body_timeout`](super::Limits::body_timeout); an HTTP/1 connection is closed
/// after it (the rest of the body is never read).
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

/// A request body with its deadline ([`Limits::body_timeout`](super::Limits::body_timeout))
/// and its share of the server's body budget: past [`BODY_FREE_BYTES`], each frame is
/// passed on only once the budget holds its bytes (until then the body is not read
/// further).
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
