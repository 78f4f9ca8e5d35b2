//! Prometheus metrics of the controller process, served on `/metrics`
//! (`--metrics-bind-address`; HTTPS and only to authorized bearer tokens by default,
//! see [`serving`] and [`auth`]): what the reconcilers report through [`Metrics`]
//! (per-extension info and condition gauges, phase durations, catalog ingest time and
//! size, errors by reason), the catalog HTTP server's request durations, leadership,
//! and a count of Kubernetes API requests (`Metrics` is the
//! [`RequestCounter`](crate::apply::client::RequestCounter) of the controller's and the
//! installers' clients) so that the idle request rate can be checked.
//!
//! The reconcilers only call methods here; the registry and the label bookkeeping
//! (removing series of deleted objects or of a replaced installed version) live here.

pub mod auth;
mod labels;
pub mod profiling;
pub mod serving;
pub mod tls;
pub mod upstream;
pub mod workqueue;

use labels::{
    CatalogCondition, CatalogLabel, CodeLabel, ControllerLabel, ErrorLabels, ExtensionCondition,
    ExtensionInfo, PhaseLabel, UpgradeAvailable, VerbLabel,
};

use crate::api::{ClusterCatalogStatus, ClusterExtensionStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The three condition statuses; each condition is exported as one series per status,
/// 1 for the current one and 0 for the others (as kube-state-metrics does).
const STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// Which reconciler reports.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Controller {
    clusterextension,
    clustercatalog,
}

impl Controller {
    /// The label value (controller-runtime's controller name).
    pub fn name(self) -> &'static str {
        match self {
            Controller::clusterextension => "clusterextension",
            Controller::clustercatalog => "clustercatalog",
        }
    }
}

/// A timed step of a ClusterExtension reconcile.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Phase {
    resolve,
    pull,
    render,
    preflight,
    apply,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 5 ms … ~82 s
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// What the series of one extension were last set to, so that stale series go away.
#[derive(Default)]
struct Known {
    /// Extension name → (bundle name, catalog it was last resolved from).
    resolved_from: HashMap<String, (String, String)>,
    extension_info: HashMap<String, ExtensionInfo>,
    extension_conditions: HashMap<String, Vec<ExtensionCondition>>,
    upgrades: HashMap<String, UpgradeAvailable>,
    catalog_conditions: HashMap<String, Vec<CatalogCondition>>,
}

/// The controller's metrics; share one `Arc<Metrics>` between the reconcilers and servers.
pub struct Metrics {
    registry: Registry,
    extension_info: Family<ExtensionInfo, Gauge>,
    extension_condition: Family<ExtensionCondition, Gauge>,
    upgrade_available: Family<UpgradeAvailable, Gauge>,
    phase_duration: HistogramFamily<PhaseLabel>,
    reconcile_duration: HistogramFamily<ControllerLabel>,
    errors: Family<ErrorLabels, Counter>,
    catalog_condition: Family<CatalogCondition, Gauge>,
    catalog_ingest: Histogram,
    catalog_bytes: Family<CatalogLabel, Gauge>,
    catalog_size: Histogram,
    http_duration: HistogramFamily<CodeLabel>,
    leader: Gauge,
    api_requests: Family<VerbLabel, Counter>,
    active_workers: Family<ControllerLabel, Gauge>,
    active_workers_peak: Family<ControllerLabel, Gauge>,
    max_workers: Family<ControllerLabel, Gauge>,
    cache_gc_removed: Counter,
    known: Mutex<Known>,
    /// Upstream's names for the same measures ([`upstream`]).
    pub upstream: upstream::Upstream,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut metrics = Metrics {
            registry: Registry::with_prefix("olmv1"),
            extension_info: Family::default(),
            extension_condition: Family::default(),
            upgrade_available: Family::default(),
            phase_duration: Family::new_with_constructor(duration_histogram),
            reconcile_duration: Family::new_with_constructor(duration_histogram),
            errors: Family::default(),
            catalog_condition: Family::default(),
            catalog_ingest: duration_histogram(),
            catalog_bytes: Family::default(),
            // 64 KiB … 4 GiB
            catalog_size: Histogram::new(exponential_buckets(65536.0, 4.0, 9)),
            http_duration: Family::new_with_constructor(duration_histogram),
            leader: Gauge::default(),
            api_requests: Family::default(),
            active_workers: Family::default(),
            active_workers_peak: Family::default(),
            max_workers: Family::default(),
            cache_gc_removed: Counter::default(),
            known: Mutex::default(),
            upstream: upstream::Upstream::new(),
        };
        metrics.register();
        metrics
    }

    /// Registers every metric (a registered clone shares the values).
    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "clusterextension_info",
            "Installed bundle of each ClusterExtension (value 1)",
            self.extension_info.clone(),
        );
        r.register(
            "clusterextension_condition",
            "ClusterExtension conditions: 1 for the current status, 0 for the others",
            self.extension_condition.clone(),
        );
        r.register(
            "clusterextension_upgrade_available",
            "1 when a bundle newer than the installed one exists: the newest, and the UpgradeAvailable reason",
            self.upgrade_available.clone(),
        );
        r.register_with_unit(
            "clusterextension_phase_duration",
            "Duration of the resolve, pull, render and apply steps of ClusterExtension reconciles",
            Unit::Seconds,
            self.phase_duration.clone(),
        );
        r.register_with_unit(
            "reconcile_duration",
            "Duration of whole reconciles",
            Unit::Seconds,
            self.reconcile_duration.clone(),
        );
        r.register(
            "reconcile_errors",
            "Failed reconciles by reason",
            self.errors.clone(),
        );
        r.register(
            "clustercatalog_condition",
            "ClusterCatalog conditions: 1 for the current status, 0 for the others",
            self.catalog_condition.clone(),
        );
        r.register_with_unit(
            "clustercatalog_ingest_duration",
            "Time to pull, validate and store a catalog's content",
            Unit::Seconds,
            self.catalog_ingest.clone(),
        );
        r.register_with_unit(
            "clustercatalog_content_size",
            "Size of the FBC content stored for each ClusterCatalog",
            Unit::Bytes,
            self.catalog_bytes.clone(),
        );
        r.register_with_unit(
            "clustercatalog_ingest_size",
            "Size of the FBC content of each ingest",
            Unit::Bytes,
            self.catalog_size.clone(),
        );
        r.register_with_unit(
            "catalog_http_request_duration",
            "Requests to the catalog content server by status code",
            Unit::Seconds,
            self.http_duration.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the leader lease (or leader election is off)",
            self.leader.clone(),
        );
        r.register(
            "kube_api_requests",
            "Requests the controller's own client sent to the API server",
            self.api_requests.clone(),
        );
        r.register(
            "active_workers",
            "Reconciles running now (bounded by --max-concurrent-reconciles)",
            self.active_workers.clone(),
        );
        r.register(
            "active_workers_peak",
            "Most reconciles that ran at once since the start",
            self.active_workers_peak.clone(),
        );
        r.register(
            "max_concurrent_reconciles",
            "The reconcile worker limit (--max-concurrent-reconciles)",
            self.max_workers.clone(),
        );
        r.register(
            "cache_gc_removed",
            "Unreferenced image and catalog cache entries removed by the cache GC",
            self.cache_gc_removed.clone(),
        );
    }

    /// The OpenMetrics text exposition of everything.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)?;
        self.upstream.encode(&mut out)?;
        prometheus_client::encoding::text::encode_eof(&mut out)?;
        Ok(out)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolution picked `bundle` from `catalog` for extension `name` (the info
    /// series carries the catalog once that bundle is installed).
    pub fn resolved_from(&self, name: &str, bundle: &str, catalog: &str) {
        self.known()
            .resolved_from
            .insert(name.to_string(), (bundle.to_string(), catalog.to_string()));
    }

    /// The status just written (or found unchanged) for an extension: its info series
    /// (when a bundle is installed) and its condition series.
    pub fn extension_status(&self, name: &str, package: &str, status: &ClusterExtensionStatus) {
        let mut known = self.known();
        let previous = known.extension_info.get(name).cloned();
        let info = status.install.as_ref().map(|i| {
            // The catalog of the latest resolution of this bundle, else the one known before.
            let catalog = match known.resolved_from.get(name) {
                Some((bundle, catalog)) if *bundle == i.bundle.name => catalog.clone(),
                _ => previous
                    .as_ref()
                    .filter(|p| p.bundle == i.bundle.name)
                    .map(|p| p.catalog.clone())
                    .unwrap_or_default(),
            };
            ExtensionInfo {
                name: name.to_string(),
                package: package.to_string(),
                version: i.bundle.version.clone(),
                bundle: i.bundle.name.clone(),
                catalog,
            }
        });
        if previous != info {
            if let Some(p) = previous {
                self.extension_info.remove(&p);
            }
            match info {
                Some(i) => {
                    self.extension_info.get_or_create(&i).set(1);
                    known.extension_info.insert(name.to_string(), i);
                }
                None => {
                    known.extension_info.remove(name);
                }
            }
        }
        let series = condition_series(&status.conditions, |type_, status| ExtensionCondition {
            name: name.to_string(),
            r#type: type_,
            status,
        });
        replace_series(
            &self.extension_condition,
            known
                .extension_conditions
                .entry(name.to_string())
                .or_default(),
            series,
        );
    }

    /// An extension's upgrade notice: (installed, newest available, reason); `None`: none.
    pub fn upgrade_available(&self, name: &str, package: &str, notice: Option<(&str, &str, &str)>) {
        let mut known = self.known();
        let next = notice.map(|(installed, available, reason)| UpgradeAvailable {
            name: name.to_string(),
            package: package.to_string(),
            installed_version: installed.to_string(),
            available_version: available.to_string(),
            reason: reason.to_string(),
        });
        if let Some(old) = known.upgrades.remove(name) {
            self.upgrade_available.remove(&old);
        }
        if let Some(series) = next {
            self.upgrade_available.get_or_create(&series).set(1);
            known.upgrades.insert(name.to_string(), series);
        }
    }

    /// The extension is gone: drop all its series.
    pub fn forget_extension(&self, name: &str) {
        let mut known = self.known();
        known.resolved_from.remove(name);
        if let Some(i) = known.extension_info.remove(name) {
            self.extension_info.remove(&i);
        }
        for s in known.extension_conditions.remove(name).unwrap_or_default() {
            self.extension_condition.remove(&s);
        }
        if let Some(s) = known.upgrades.remove(name) {
            self.upgrade_available.remove(&s);
        }
    }

    /// How long one step of an extension reconcile took.
    pub fn phase(&self, phase: Phase, took: Duration) {
        self.phase_duration
            .get_or_create(&PhaseLabel { phase })
            .observe(took.as_secs_f64());
    }

    /// A whole reconcile took `took` and ended without an error (`ok`) or with one:
    /// ours and upstream's reconcile families.
    pub fn reconcile_finished(&self, controller: Controller, took: Duration, ok: bool) {
        self.reconciled(controller, took);
        self.upstream
            .reconciled(controller.name(), took.as_secs_f64(), ok);
    }

    /// How long a whole reconcile took.
    pub fn reconciled(&self, controller: Controller, took: Duration) {
        self.reconcile_duration
            .get_or_create(&ControllerLabel { controller })
            .observe(took.as_secs_f64());
    }

    /// A reconcile failed for `reason` (a condition reason or a short CamelCase cause).
    pub fn error(&self, controller: Controller, reason: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller,
                reason: reason.to_string(),
            })
            .inc();
    }

    /// The status just written (or found unchanged) for a catalog.
    pub fn catalog_status(&self, name: &str, status: &ClusterCatalogStatus) {
        let mut known = self.known();
        let series = condition_series(&status.conditions, |type_, status| CatalogCondition {
            catalog: name.to_string(),
            r#type: type_,
            status,
        });
        replace_series(
            &self.catalog_condition,
            known
                .catalog_conditions
                .entry(name.to_string())
                .or_default(),
            series,
        );
    }

    /// A catalog's content was stored: `bytes` of FBC in `took`.
    pub fn catalog_ingested(&self, name: &str, took: Duration, bytes: u64) {
        self.catalog_ingest.observe(took.as_secs_f64());
        self.catalog_size.observe(bytes as f64);
        self.catalog_bytes
            .get_or_create(&CatalogLabel {
                catalog: name.to_string(),
            })
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The catalog is gone or its content removed: drop its series.
    pub fn forget_catalog(&self, name: &str) {
        let mut known = self.known();
        for s in known.catalog_conditions.remove(name).unwrap_or_default() {
            self.catalog_condition.remove(&s);
        }
        self.catalog_bytes.remove(&CatalogLabel {
            catalog: name.to_string(),
        });
    }

    /// One request served by the catalog HTTP server.
    pub fn http_request(&self, code: u16, took: Duration) {
        self.upstream.catalog_http_request(code, took.as_secs_f64());
        self.http_duration
            .get_or_create(&CodeLabel {
                code: code.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// The worker gauges of `controller`: (running now, peak, limit).
    pub fn worker_gauges(&self, controller: Controller) -> workqueue::WorkerGauges {
        let label = ControllerLabel { controller };
        workqueue::WorkerGauges {
            running: self.active_workers.get_or_create(&label).clone(),
            peak: self.active_workers_peak.get_or_create(&label).clone(),
            max: self.max_workers.get_or_create(&label).clone(),
            queue: self.upstream.work_queue(controller.name()),
        }
    }

    /// The cache GC removed `n` entries.
    pub fn cache_gc_removed(&self, n: u64) {
        self.cache_gc_removed.inc_by(n);
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// One request to the API server (`verb`: the HTTP method, `WATCH` for watches).
    pub fn api_request(&self, verb: &str) {
        self.api_requests
            .get_or_create(&VerbLabel {
                verb: verb.to_string(),
            })
            .inc();
    }

    /// All API requests counted so far.
    pub fn api_requests_total(&self) -> u64 {
        ["GET", "WATCH", "POST", "PUT", "PATCH", "DELETE"]
            .iter()
            .map(|v| {
                self.api_requests
                    .get_or_create(&VerbLabel {
                        verb: v.to_string(),
                    })
                    .get()
            })
            .sum()
    }
}

/// One series per (condition type, status), 1 for the condition's status.
fn condition_series<L>(
    conditions: &[Condition],
    label: impl Fn(String, String) -> L,
) -> Vec<(L, i64)> {
    let mut out = Vec::new();
    for c in conditions {
        for s in STATUSES {
            let value = i64::from(c.status == s);
            out.push((label(c.type_.clone(), s.to_string()), value));
        }
    }
    out
}

fn replace_series<L>(family: &Family<L, Gauge>, known: &mut Vec<L>, series: Vec<(L, i64)>)
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug,
{
    for old in known.iter() {
        if !series.iter().any(|(l, _)| l == old) {
            family.remove(old);
        }
    }
    known.clear();
    for (labels, value) in series {
        family.get_or_create(&labels).set(value);
        known.push(labels);
    }
}

/// The controller's and the installers' clients count their requests here
/// ([`Metrics::api_request`]).
impl crate::apply::client::RequestCounter for Metrics {
    fn request(&self, verb: &str) {
        self.api_request(verb);
    }

    fn response(&self, code: u16, method: &str) {
        self.upstream.rest_request(code, method);
    }
}

/// Axum middleware timing every request of a router into [`Metrics::http_request`]:
/// `router.layer(axum::middleware::from_fn_with_state(metrics, metrics::track_http))`.
pub async fn track_http(
    axum::extract::State(metrics): axum::extract::State<Arc<Metrics>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    metrics.http_request(response.status().as_u16(), started.elapsed());
    response
}

/// The `/metrics` route.
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    use axum::http::{StatusCode, header};
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                match metrics.encode() {
                    Ok(body) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        body,
                    ),
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                        format!("encoding metrics: {e}"),
                    ),
                }
            }
        }),
    )
}

/// Serves `/metrics` with `protection` until the future is dropped, within the
/// connection limits of every server ([`crate::server::conn::Limits`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    protection: serving::Protection,
) -> std::io::Result<()> {
    protection.serve(listener, router(metrics)).await
}

#[cfg(test)]
mod tests;
