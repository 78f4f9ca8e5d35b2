//! [`CountApiRequests`]: a tower layer around the controller's Kubernetes client that
//! counts every request by verb (`WATCH` for watches) into [`Metrics::api_request`].

use super::Metrics;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Tower layer counting the requests of a kube client into [`Metrics::api_request`]:
/// `kube::client::ClientBuilder::try_from(config)?.with_layer(&CountApiRequests(metrics)).build()`.
#[derive(Clone)]
pub struct CountApiRequests(pub Arc<Metrics>);

impl<S> tower::Layer<S> for CountApiRequests {
    type Service = CountApiRequestsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountApiRequestsService {
            inner,
            metrics: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct CountApiRequestsService<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B> tower::Service<http::Request<B>> for CountApiRequestsService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.metrics.api_request(&request_verb(&request));
        self.inner.call(request)
    }
}

/// The HTTP method, or `WATCH` for a watch request.
pub(super) fn request_verb<B>(request: &http::Request<B>) -> String {
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    if watch {
        "WATCH".to_string()
    } else {
        request.method().as_str().to_string()
    }
}
