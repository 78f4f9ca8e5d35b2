//! Authentication and authorization of the requests to `/metrics` (and the profiling
//! endpoints), as controller-runtime's `filters.WithAuthenticationAndAuthorization`:
//! the bearer token of a request must pass a TokenReview (`authentication.k8s.io/v1`),
//! and the user it names a SubjectAccessReview (`authorization.k8s.io/v1`) for the
//! non-resource URL of the request (its path) with the lowercase HTTP method as verb —
//! `get` on `/metrics` for a scrape. No or an invalid token: 401; not authorized: 403;
//! the API server failing to answer the review: 500.
//!
//! Decisions are cached per token (a SHA-256 of it, never the token itself), path and
//! verb — [`ALLOWED_TTL`] for an allowed request, [`DENIED_TTL`] for a refused one, at
//! most [`MAX_ENTRIES`] entries — so that a Prometheus scraping every few seconds costs
//! the API server two reviews a minute, and a newly bound role takes effect quickly.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use sha2::Digest;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an allowed request is remembered.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused request (401 or 403) is remembered.
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// The most decisions remembered; when full, expired ones are dropped, then all.
pub const MAX_ENTRIES: usize = 1024;

/// What a request with a given token may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// The token is not valid (401).
    Unauthenticated,
    /// The token is valid, its user may not `verb` the path (403).
    Denied {
        user: String,
    },
}

/// An error of the API server answering a review.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("TokenReview failed: {0}")]
    TokenReview(kube::Error),
    #[error("SubjectAccessReview for user {user} failed: {source}")]
    SubjectAccessReview { user: String, source: kube::Error },
}

type CacheKey = ([u8; 32], String, String);

/// Decides requests with TokenReviews and SubjectAccessReviews, caching the decisions.
pub struct Authorizer {
    client: kube::Client,
    cache: Mutex<HashMap<CacheKey, (Instant, Decision)>>,
}

impl Authorizer {
    /// Reviews with `client`, whose identity needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`.
    pub fn new(client: kube::Client) -> Self {
        Authorizer {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// May the bearer of `token` send `verb` (lowercase) to `path`?
    pub async fn decide(
        &self,
        token: &str,
        path: &str,
        verb: &str,
    ) -> Result<Decision, ReviewError> {
        let key: CacheKey = (
            sha2::Sha256::digest(token.as_bytes()).into(),
            path.to_string(),
            verb.to_string(),
        );
        if let Some(decision) = self.cached(&key) {
            return Ok(decision);
        }
        let decision = self.review(token, path, verb).await?;
        self.remember(key, decision.clone());
        Ok(decision)
    }

    fn cached(&self, key: &CacheKey) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (until, decision) = cache.get(key)?;
        (Instant::now() < *until).then(|| decision.clone())
    }

    fn remember(&self, key: CacheKey, decision: Decision) {
        let ttl = if decision == Decision::Allowed {
            ALLOWED_TTL
        } else {
            DENIED_TTL
        };
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_ENTRIES {
            cache.retain(|_, (until, _)| *until > now);
            if cache.len() >= MAX_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (now + ttl, decision));
    }

    /// The TokenReview, then the SubjectAccessReview of the user it returned.
    async fn review(&self, token: &str, path: &str, verb: &str) -> Result<Decision, ReviewError> {
        let reviews: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = reviews
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(ReviewError::TokenReview)?;
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Decision::Unauthenticated),
        };
        let username = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let accesses: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let answer = accesses
            .create(&kube::api::PostParams::default(), &access)
            .await
            .map_err(|source| ReviewError::SubjectAccessReview {
                user: username.clone(),
                source,
            })?;
        if answer.status.is_some_and(|s| s.allowed) {
            Ok(Decision::Allowed)
        } else {
            Ok(Decision::Denied { user: username })
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Axum middleware answering 401/403/500 unless [`Authorizer::decide`] allows the
/// request: `router.layer(from_fn_with_state(authorizer, require_authorization))`.
pub async fn require_authorization(
    axum::extract::State(authorizer): axum::extract::State<Arc<Authorizer>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(token) = bearer_token(request.headers()) else {
        return unauthorized();
    };
    let path = request.uri().path().to_string();
    let verb = request.method().as_str().to_ascii_lowercase();
    match authorizer.decide(token, &path, &verb).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => unauthorized(),
        Ok(Decision::Denied { user }) => (
            StatusCode::FORBIDDEN,
            format!("Authorization denied for user {user}\n"),
        )
            .into_response(),
        Err(e @ ReviewError::TokenReview(_)) => {
            tracing::warn!(error = %e, %path, "authenticating a metrics request");
            unauthorized()
        }
        Err(e) => {
            tracing::warn!(error = %e, %path, "authorizing a metrics request");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Authorization failed\n".to_string(),
            )
                .into_response()
        }
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "Unauthorized\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().expect("header value"));
        headers
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(&headers("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwYXNz")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }
}
