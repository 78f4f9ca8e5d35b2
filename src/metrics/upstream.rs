//! Upstream OLM v1's metric names, served next to ours on the same `/metrics`
//! (docs/how-to/switch-from-upstream.md): controller-runtime's reconcile families
//! (`controller_runtime_reconcile_total{controller,result}`,
//! `controller_runtime_reconcile_errors_total{controller}`,
//! `controller_runtime_reconcile_time_seconds{controller}` with controller-runtime's
//! buckets), the work-queue families this controller has a measure for
//! (`workqueue_adds_total`, `workqueue_retries_total`, `workqueue_work_duration_seconds`,
//! and from the reconcile scheduler's state ([`super::workqueue`]) `workqueue_depth`,
//! `workqueue_queue_duration_seconds`, `workqueue_unfinished_work_seconds`,
//! `workqueue_longest_running_processor_seconds`; labels `controller` and `name`), client-go's `rest_client_requests_total{code,host,method}`
//! and catalogd's `catalogd_http_request_duration_seconds{code}` (its buckets). The
//! series are fed by the same calls as ours ([`super::Metrics`]).

use super::workqueue::WorkQueue;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets
/// (pkg/internal/controller/metrics, v0.15 and later).
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// catalogd's `catalogd_http_request_duration_seconds` buckets (internal/catalogd/metrics).
pub const CATALOGD_HTTP_BUCKETS: [f64; 19] = [
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.6, 2.0, 2.4, 2.8, 3.2, 3.6, 4.0, 10.0,
];

/// controller-runtime's reconcile results (all four are exported from the start).
pub const RESULTS: [&str; 4] = ["error", "requeue_after", "requeue", "success"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerResult {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerOnly {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Queue {
    controller: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rest {
    code: String,
    host: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Code {
    code: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;
type Seconds = Family<Queue, Gauge<f64, std::sync::atomic::AtomicU64>>;

fn reconcile_time() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn queue_time() -> Histogram {
    // client-go's workqueue metrics: exponential buckets 10ns … 1000s
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

fn catalogd_http() -> Histogram {
    Histogram::new(CATALOGD_HTTP_BUCKETS)
}

/// Upstream's families, in a registry without our `olmv1_` prefix.
pub struct Upstream {
    registry: Registry,
    reconcile_total: Family<ControllerResult, Counter>,
    reconcile_errors: Family<ControllerOnly, Counter>,
    reconcile_time: Histograms<ControllerOnly>,
    queue_adds: Family<Queue, Counter>,
    queue_retries: Family<Queue, Counter>,
    work_duration: Histograms<Queue>,
    queue_depth: Family<Queue, Gauge>,
    queue_duration: Histograms<Queue>,
    unfinished_work: Seconds,
    longest_running: Seconds,
    /// Each controller's queue, read when scraped.
    queues: std::sync::Mutex<Vec<(Queue, Arc<WorkQueue>)>>,
    rest_requests: Family<Rest, Counter>,
    http_duration: Histograms<Code>,
    /// `host:port` of the API server (the `host` label), set at start.
    api_host: std::sync::OnceLock<String>,
}

impl Default for Upstream {
    fn default() -> Self {
        Self::new()
    }
}

impl Upstream {
    pub fn new() -> Self {
        let mut u = Upstream {
            registry: Registry::default(),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time),
            queue_adds: Family::default(),
            queue_retries: Family::default(),
            work_duration: Family::new_with_constructor(queue_time),
            queue_depth: Family::default(),
            queue_duration: Family::new_with_constructor(queue_time),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            queues: std::sync::Mutex::default(),
            rest_requests: Family::default(),
            http_duration: Family::new_with_constructor(catalogd_http),
            api_host: std::sync::OnceLock::new(),
        };
        let r = &mut u.registry;
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            u.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            u.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            u.reconcile_time.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            u.queue_adds.clone(),
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            u.queue_retries.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            u.work_duration.clone(),
        );
        r.register(
            "workqueue_depth",
            "Current depth of workqueue",
            u.queue_depth.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            u.queue_duration.clone(),
        );
        r.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            u.unfinished_work.clone(),
        );
        r.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            u.longest_running.clone(),
        );
        r.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            u.rest_requests.clone(),
        );
        r.register(
            "catalogd_http_request_duration_seconds",
            "Histogram of request duration in seconds",
            u.http_duration.clone(),
        );
        u
    }

    /// The series controller-runtime exports as soon as a controller starts (zeros).
    pub fn controller_started(&self, controller: &str) {
        for result in RESULTS {
            let _ = self.reconcile_total.get_or_create(&ControllerResult {
                controller: controller.to_string(),
                result: result.to_string(),
            });
        }
        let _ = self.reconcile_errors.get_or_create(&ControllerOnly {
            controller: controller.to_string(),
        });
        let _ = self.work_queue(controller);
    }

    /// `controller`'s queue (created on first use; its series are exported from then).
    pub fn work_queue(&self, controller: &str) -> Arc<WorkQueue> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, queue)) = queues.iter().find(|(q, _)| q.controller == controller) {
            return queue.clone();
        }
        let label = Queue {
            controller: controller.to_string(),
            name: controller.to_string(),
        };
        let queue = WorkQueue::new(self.queue_duration.get_or_create(&label).clone());
        queues.push((label, queue.clone()));
        queue
    }

    /// Sets the work-queue gauges from the queues' state at `now`.
    fn refresh_queues(&self, now: std::time::Instant) {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        for (label, queue) in queues.iter() {
            let s = queue.snapshot(now);
            self.queue_depth.get_or_create(label).set(s.depth);
            self.unfinished_work
                .get_or_create(label)
                .set(s.unfinished_seconds);
            self.longest_running
                .get_or_create(label)
                .set(s.longest_seconds);
        }
    }

    /// One finished reconcile of `controller` (`ok`: it returned no error).
    pub fn reconciled(&self, controller: &str, seconds: f64, ok: bool) {
        self.controller_started(controller);
        let result = if ok { "success" } else { "error" };
        self.reconcile_total
            .get_or_create(&ControllerResult {
                controller: controller.to_string(),
                result: result.to_string(),
            })
            .inc();
        let only = ControllerOnly {
            controller: controller.to_string(),
        };
        self.reconcile_time.get_or_create(&only).observe(seconds);
        let queue = Queue {
            controller: controller.to_string(),
            name: controller.to_string(),
        };
        self.queue_adds.get_or_create(&queue).inc();
        self.work_duration.get_or_create(&queue).observe(seconds);
        if !ok {
            self.reconcile_errors.get_or_create(&only).inc();
            // an error is requeued with backoff, as controller-runtime's AddRateLimited
            self.queue_retries.get_or_create(&queue).inc();
        }
    }

    /// The API server's `host:port`, the `host` label of `rest_client_requests_total`.
    pub fn set_api_host(&self, host: &str) {
        let _ = self.api_host.set(host.to_string());
    }

    /// One answered API request.
    pub fn rest_request(&self, code: u16, method: &str) {
        let host = self.api_host.get().map(String::as_str).unwrap_or_default();
        self.rest_requests
            .get_or_create(&Rest {
                code: code.to_string(),
                host: host.to_string(),
                method: method.to_string(),
            })
            .inc();
    }

    /// One request served by the catalog content server.
    pub fn catalog_http_request(&self, code: u16, seconds: f64) {
        self.http_duration
            .get_or_create(&Code {
                code: code.to_string(),
            })
            .observe(seconds);
    }

    /// The text exposition of upstream's families.
    pub fn encode(&self, out: &mut String) -> std::fmt::Result {
        self.refresh_queues(std::time::Instant::now());
        prometheus_client::encoding::text::encode_registry(out, &self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_families_with_their_labels_and_buckets() {
        let u = Upstream::new();
        u.set_api_host("10.96.0.1:443");
        u.controller_started("clustercatalog");
        u.reconciled("clusterextension", 0.2, true);
        u.reconciled("clusterextension", 0.3, false);
        u.rest_request(200, "GET");
        u.catalog_http_request(404, 0.05);
        let queue = u.work_queue("clusterextension");
        let _running = queue.enqueue().start();
        let _waiting = queue.enqueue();
        let mut out = String::new();
        u.encode(&mut out).expect("encode");
        for line in [
            r#"controller_runtime_reconcile_total{controller="clusterextension",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="clusterextension",result="error"} 1"#,
            r#"controller_runtime_reconcile_total{controller="clustercatalog",result="requeue_after"} 0"#,
            r#"controller_runtime_reconcile_errors_total{controller="clusterextension"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="clustercatalog"} 0"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.25",controller="clusterextension"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="60.0",controller="clusterextension"} 2"#,
            r#"workqueue_adds_total{controller="clusterextension",name="clusterextension"} 2"#,
            r#"workqueue_retries_total{controller="clusterextension",name="clusterextension"} 1"#,
            r#"workqueue_work_duration_seconds_count{controller="clusterextension",name="clusterextension"} 2"#,
            r#"rest_client_requests_total{code="200",host="10.96.0.1:443",method="GET"} 1"#,
            r#"catalogd_http_request_duration_seconds_bucket{le="0.1",code="404"} 1"#,
            r#"catalogd_http_request_duration_seconds_bucket{le="10.0",code="404"} 1"#,
            r#"workqueue_depth{controller="clusterextension",name="clusterextension"} 1"#,
            r#"workqueue_depth{controller="clustercatalog",name="clustercatalog"} 0"#,
            r#"workqueue_queue_duration_seconds_count{controller="clusterextension",name="clusterextension"} 1"#,
            r#"workqueue_unfinished_work_seconds{controller="clusterextension",name="clusterextension"} "#,
            r#"workqueue_longest_running_processor_seconds{controller="clustercatalog",name="clustercatalog"} 0.0"#,
        ] {
            assert!(out.contains(line), "missing {line} in\n{out}");
        }
    }
}
