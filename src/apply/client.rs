//! Clients that act as an installer ServiceAccount (docs/concepts/installer-permissions.md A3), cached per account
//! and sharing a few HTTP/2 connections to the API server, and the controller's own
//! client. Each can count its requests into a [`RequestCounter`] the caller passes in
//! (the controller passes its metrics), so this module knows nothing of metrics.

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use kube::client::ConfigExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// Counts the requests a client sends, by verb: the HTTP method, or `WATCH` for a watch
/// request. The controller's metrics are one (`olmv1_kube_api_requests_total`).
pub trait RequestCounter: Send + Sync {
    fn request(&self, verb: &str);
    /// The answer to a request: its status code and HTTP method (client-go's
    /// `rest_client_requests_total`).
    fn response(&self, _code: u16, _method: &str) {}
}

/// Tower layer calling a [`RequestCounter`] for every request of a kube client:
/// `kube::client::ClientBuilder::try_from(config)?.with_layer(&CountRequests(counter)).build()`.
#[derive(Clone)]
pub struct CountRequests(pub Arc<dyn RequestCounter>);

impl<S> tower::Layer<S> for CountRequests {
    type Service = CountRequestsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountRequestsService {
            inner,
            counter: self.0.clone(),
        }
    }
}

/// The service of [`CountRequests`].
#[derive(Clone)]
pub struct CountRequestsService<S> {
    inner: S,
    counter: Arc<dyn RequestCounter>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for CountRequestsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    RB: 'static,
    S::Error: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.counter.request(&request_verb(&request));
        let method = request.method().as_str().to_string();
        let counter = self.counter.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await;
            if let Ok(response) = &result {
                counter.response(response.status().as_u16(), &method);
            }
            result
        })
    }
}

/// The HTTP method, or `WATCH` for a watch request.
fn request_verb<B>(request: &http::Request<B>) -> String {
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

/// The user name of a ServiceAccount: `system:serviceaccount:<ns>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups the API server gives a ServiceAccount.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_owned(),
    ]
}

/// `base` impersonating the ServiceAccount `namespace/name`.
///
/// Only `Impersonate-User` is sent: for a ServiceAccount user name without
/// `Impersonate-Group` headers the API server itself assigns exactly
/// [`service_account_groups`] (`system:serviceaccounts`, `system:serviceaccounts:<ns>`,
/// and `system:authenticated`), so the effective identity is the same, while sending the
/// groups explicitly would need `impersonate` on `groups` in the controller's ClusterRole.
/// The integration tests check the effective groups with a SelfSubjectReview.
pub fn installer_config(base: &kube::Config, namespace: &str, name: &str) -> kube::Config {
    let mut config = base.clone();
    config.auth_info.impersonate = Some(service_account_user(namespace, name));
    config.auth_info.impersonate_groups = None;
    config.auth_info.impersonate_uid = None;
    config.auth_info.impersonate_user_extra = None;
    config
}

/// [`installer_config`] as a client.
pub fn installer_client(
    base: &kube::Config,
    namespace: &str,
    name: &str,
) -> Result<kube::Client, kube::Error> {
    kube::Client::try_from(installer_config(base, namespace, name))
}

/// Drift watches one shared connection carries at most. kube-apiserver allows 100
/// concurrent HTTP/2 streams per connection unless `--http2-max-streams-per-connection`
/// says otherwise, and a request over the limit waits for a free stream: long-running
/// watches therefore get their own connections, filled up to this many, and never
/// starve the short requests of installs.
pub const WATCHES_PER_CONNECTION: usize = 64;

/// The HTTP client under the installer clients: connection pool, TLS, HTTP/2.
type Transport =
    hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, kube::client::Body>;

/// Installer clients keyed by (namespace, ServiceAccount name), reused across reconciles.
///
/// All accounts share connections: an installer client is one shared transport with
/// the account's `Impersonate-User` header added per request. Against an API server
/// that speaks HTTP/2 (every kube-apiserver) that is one connection for the short
/// requests of all accounts plus one per [`WATCHES_PER_CONNECTION`] drift watches, instead of a connection pool (and TLS session) per account and a
/// connection per watch. Behind an HTTP proxy each account gets its own ordinary
/// client, as kube-rs builds it.
pub struct InstallerClients {
    base: kube::Config,
    shared: Option<Shared>,
    count: Option<CountRequests>,
    cache: Mutex<HashMap<(String, String), kube::Client>>,
}

struct Shared {
    requests: Transport,
    watches: Mutex<Vec<WatchConnection>>,
}

struct WatchConnection {
    transport: Transport,
    /// One clone per watch using this connection (plus this one).
    slots: Arc<()>,
    /// The accounts' clients on this connection (the watches of one extension share one).
    clients: HashMap<(String, String), kube::Client>,
}

/// A drift watch's place on a shared connection, given back when dropped.
#[derive(Debug)]
pub struct WatchSlot {
    _slot: Option<Arc<()>>,
}

impl InstallerClients {
    /// `base` is the controller's own configuration.
    pub fn new(base: kube::Config) -> Self {
        let shared = match &base.proxy_url {
            Some(_) => None,
            None => match transport(&base) {
                Ok(requests) => Some(Shared {
                    requests,
                    watches: Mutex::new(Vec::new()),
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot share connections between installer clients; each account gets its own");
                    None
                }
            },
        };
        InstallerClients {
            base,
            shared,
            count: None,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Counts the requests of the installer clients made from now on into `counter`
    /// (the controller's metrics: `olmv1_kube_api_requests_total`).
    pub fn count_requests(&mut self, counter: Arc<dyn RequestCounter>) {
        self.count = Some(CountRequests(counter));
    }

    /// Whether the installer clients share the controller's connections.
    pub fn shares_connections(&self) -> bool {
        self.shared.is_some()
    }

    fn client_on(
        &self,
        transport: Option<&Transport>,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, kube::Error> {
        let config = installer_config(&self.base, namespace, name);
        client_over(transport, &config, self.count.clone())
    }

    /// The client acting as `namespace/name` (created on first use).
    pub fn get(&self, namespace: &str, name: &str) -> Result<kube::Client, kube::Error> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(&key) {
            return Ok(c.clone());
        }
        let transport = self.shared.as_ref().map(|s| &s.requests);
        let client = self.client_on(transport, namespace, name)?;
        cache.insert(key, client.clone());
        Ok(client)
    }

    /// A client acting as `namespace/name` for one long-running watch, on a shared
    /// watch connection with a free stream (a new connection when all are full). Keep
    /// the slot as long as the watch runs.
    pub fn watch_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(kube::Client, WatchSlot), kube::Error> {
        let Some(shared) = &self.shared else {
            return Ok((self.get(namespace, name)?, WatchSlot { _slot: None }));
        };
        let mut connections = shared.watches.lock().unwrap_or_else(|p| p.into_inner());
        let index = match connections
            .iter()
            .position(|c| Arc::strong_count(&c.slots) <= WATCHES_PER_CONNECTION)
        {
            Some(i) => i,
            None => {
                connections.push(WatchConnection {
                    transport: transport(&self.base)?,
                    slots: Arc::new(()),
                    clients: HashMap::new(),
                });
                connections.len() - 1
            }
        };
        let connection = &mut connections[index];
        if Arc::strong_count(&connection.slots) == 1 {
            // No watch left: the clients of accounts gone meanwhile go too.
            connection.clients.clear();
        }
        let key = (namespace.to_owned(), name.to_owned());
        let client = match connection.clients.get(&key) {
            Some(c) => c.clone(),
            None => {
                let c = self.client_on(Some(&connection.transport), namespace, name)?;
                connection.clients.insert(key, c.clone());
                c
            }
        };
        let slot = connection.slots.clone();
        Ok((client, WatchSlot { _slot: Some(slot) }))
    }

    /// Watches per shared watch connection, in order (for tests and diagnostics).
    pub fn watch_connections(&self) -> Vec<usize> {
        self.shared
            .as_ref()
            .map(|s| {
                s.watches
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .map(|c| Arc::strong_count(&c.slots) - 1)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Drops the cached client of `namespace/name` (e.g. when the account was deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.remove(&key);
        if let Some(shared) = &self.shared {
            let mut connections = shared.watches.lock().unwrap_or_else(|p| p.into_inner());
            for c in connections.iter_mut() {
                c.clients.remove(&key);
            }
        }
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A client for `config` on `transport` (kube-rs's own client stack when `None`),
/// counting its requests into `count`.
fn client_over(
    transport: Option<&Transport>,
    config: &kube::Config,
    count: Option<CountRequests>,
) -> Result<kube::Client, kube::Error> {
    let Some(transport) = transport else {
        let builder = kube::client::ClientBuilder::try_from(config.clone())?;
        return Ok(match &count {
            Some(count) => builder.with_layer(count).build(),
            None => builder.build(),
        });
    };
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(count)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(transport.clone());
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// The controller's own client: like kube-rs builds it from `config`, but on one
/// HTTP/2 connection when the API server offers it (many concurrent requests — the
/// SubjectAccessReviews of a permission preflight — then share it instead of each
/// opening and keeping a TLS connection), counting requests into `count`.
pub fn controller_client(
    config: &kube::Config,
    count: Option<Arc<dyn RequestCounter>>,
) -> Result<kube::Client, kube::Error> {
    let count = count.map(CountRequests);
    if config.proxy_url.is_some() {
        return client_over(None, config, count);
    }
    client_over(Some(&transport(config)?), config, count)
}

/// An HTTP client for the API server of `config` (TLS as kube-rs configures it, HTTP/2
/// offered through ALPN, HTTP/2 keep-alive pings so that a dead connection is noticed
/// even while it only carries idle watches).
fn transport(config: &kube::Config) -> Result<Transport, kube::Error> {
    let tls = config.rustls_client_config()?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    // As Go's net/http: without it, Nagle holds back the second write of a request
    // (HTTP/2 HEADERS, then DATA) until the first is acknowledged.
    http.set_nodelay(true);
    let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(server_name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(server_name.clone()).map_err(|e| {
            kube::Error::Service(format!("invalid tls-server-name {server_name:?}: {e}").into())
        })?;
        builder =
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let connector = builder.enable_all_versions().wrap_connector(http);
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(15))
            .http2_keep_alive_while_idle(true)
            .build(connector),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> kube::Config {
        let url: http::Uri = "https://127.0.0.1:6443".parse().unwrap();
        let mut c = kube::Config::new(url);
        c.auth_info.impersonate_groups = Some(vec!["x".into()]);
        c
    }

    #[test]
    fn config_impersonates_the_service_account() {
        let c = installer_config(&base(), "ns", "sa");
        assert_eq!(
            c.auth_info.impersonate.as_deref(),
            Some("system:serviceaccount:ns:sa")
        );
        assert_eq!(c.auth_info.impersonate_groups, None);
        assert_eq!(c.cluster_url, base().cluster_url);
        assert_eq!(
            service_account_groups("ns"),
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn watches_are_counted_as_watch() {
        let get = http::Request::get("/api/v1/namespaces?limit=500")
            .body(())
            .unwrap();
        let watch = http::Request::get("/apis/x/v1/things?watch=true&resourceVersion=1")
            .body(())
            .unwrap();
        let patch = http::Request::patch("/apis/x/v1/things/a")
            .body(())
            .unwrap();
        assert_eq!(request_verb(&get), "GET");
        assert_eq!(request_verb(&watch), "WATCH");
        assert_eq!(request_verb(&patch), "PATCH");
    }

    #[tokio::test]
    async fn clients_are_cached_per_account() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let clients = InstallerClients::new(base());
        clients.get("ns", "a").unwrap();
        clients.get("ns", "a").unwrap();
        clients.get("ns", "b").unwrap();
        clients.get("other", "a").unwrap();
        assert_eq!(clients.len(), 3);
        clients.forget("ns", "a");
        assert_eq!(clients.len(), 2);
    }
}
