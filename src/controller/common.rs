//! What both reconcilers (ClusterCatalog, ClusterExtension) share: adding and removing
//! their finalizer, writing their status (server-side apply with the project's field
//! manager, only when it changed), failure bookkeeping (consecutive failures → backoff;
//! when the failures began, for `progressDeadlineMinutes`) and the instrumented
//! reconcile (a tracing span naming the object, the duration metric).
//!
//! Nothing here decides anything about catalogs or extensions.

use crate::metrics::{Controller as MetricsController, Metrics};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// The pause of a controller's merged trigger stream after a watch error: short and
/// constant. kube's default (exponential up to 30 s, reset only after 120 s without an
/// error) pauses *every* trigger — the primary watch included — whenever *any* watcher
/// fails; after an API server restart each of the watchers fails in turn and the
/// controller stopped reacting to spec changes for minutes (found by
/// `e2e/faults.rs`). Every watcher already backs off on its own (`default_backoff`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TriggerBackoff;

impl TriggerBackoff {
    pub const PAUSE: Duration = Duration::from_millis(200);
}

impl Iterator for TriggerBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Self::PAUSE)
    }
}

impl kube::runtime::utils::Backoff for TriggerBackoff {
    fn reset(&mut self) {}
}

/// Whether watches may stay open for long ([`watch_config`]): their connections carry
/// HTTP/2 keep-alive pings (not through an HTTP proxy, see
/// [`crate::apply::client::controller_client`]).
static LONG_WATCHES: AtomicBool = AtomicBool::new(true);

/// Says whether the controller's connections notice a dead peer by themselves (HTTP/2
/// keep-alive pings): only then do its watches stay open for long.
pub fn set_long_watches(allowed: bool) {
    LONG_WATCHES.store(allowed, Ordering::Relaxed);
}

/// How long the API server keeps one of the controller's watches open: 30 to 60
/// minutes (random per watch), what it chooses itself for clients that ask for nothing
/// (`--min-request-timeout` 1800 s × [1, 2)), instead of kube-rs's 290 s — an idle
/// controller re-opens each watch every ~45 minutes instead of every ~5, which is most
/// of its idle API traffic. Dead connections are still noticed within 45 s (HTTP/2
/// keep-alive pings) and bookmarks keep each watch's resourceVersion current. Through
/// an HTTP proxy (no pings), kube-rs's 290 s.
pub fn watch_timeout_seconds() -> u32 {
    if LONG_WATCHES.load(Ordering::Relaxed) {
        rand::random_range(1800..3600)
    } else {
        290
    }
}

/// The configuration of every watch of the controller ([`watch_timeout_seconds`]).
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(watch_timeout_seconds())
}

/// How a reconcile error is logged by the error policies: a 409 Conflict (the object
/// changed since it was read; the change itself triggers the next reconcile) is routine
/// and logged at debug level, anything else as a warning.
pub fn log_reconcile_error(kind: &str, name: &str, error: &kube::Error) {
    let conflict = matches!(error, kube::Error::Api(status) if status.is_conflict());
    if conflict {
        tracing::debug!(kind, name, error = %error, "reconcile raced with a change of the object; retrying");
    } else {
        tracing::warn!(kind, name, error = %error, "reconcile failed");
    }
}

/// Adds `finalizer` to `obj` (a merge patch guarded by the resource version). Returns
/// whether a patch was sent: the reconcile then stops and runs again on the update.
pub async fn add_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(false);
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(finalizer.to_string());
    patch_finalizers(api, obj, &finalizers).await?;
    Ok(true)
}

/// Removes `finalizer` from `obj`; an object that is already gone is fine.
pub async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    remove_finalizers(api, obj, &[finalizer]).await
}

/// Removes every finalizer of `remove` that `obj` has, in one patch.
pub async fn remove_finalizers<K>(api: &Api<K>, obj: &K, remove: &[&str]) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if !obj
        .finalizers()
        .iter()
        .any(|f| remove.contains(&f.as_str()))
    {
        return Ok(());
    }
    let finalizers: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| !remove.contains(&f.as_str()))
        .cloned()
        .collect();
    match patch_finalizers(api, obj, &finalizers).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other,
    }
}

async fn patch_finalizers<K>(
    api: &Api<K>,
    obj: &K,
    finalizers: &[String],
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.resource_version()}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// Writes `next` as the status of `obj` when it differs from `current` (server-side
/// apply of the status subresource with the project's field manager). Returns whether
/// it wrote.
pub async fn write_status<K, S>(
    api: &Api<K>,
    obj: &K,
    current: &S,
    next: &S,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    apply_status(api, obj, current, next, false).await
}

/// [`write_status`] guarded by `obj`'s resourceVersion: the API server refuses the
/// write (409 Conflict, retried by the caller's error policy) when the object changed
/// since it was read. A reconcile working from a stale cache (after a watch was cut
/// or the API server restarted) then cannot overwrite a newer status with one computed
/// from an older one — which rewrote `lastTransitionTime` of unchanged conditions
/// (found by `e2e/faults.rs`).
pub async fn write_status_guarded<K, S>(
    api: &Api<K>,
    obj: &K,
    current: &S,
    next: &S,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    apply_status(api, obj, current, next, true).await
}

/// The one status write both of the above make; `guarded` adds `obj`'s resourceVersion
/// as a precondition. Status fields the served CRD refused (an olmv1 addition under
/// upstream's CRD: [`super::status_schema`]) are left out; a first refusal is retried
/// once without them.
async fn apply_status<K, S>(
    api: &Api<K>,
    obj: &K,
    current: &S,
    next: &S,
    guarded: bool,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    use super::status_schema;
    if next == current {
        return Ok(false);
    }
    let kind = K::kind(&()).to_string();
    let mut status = serde_json::to_value(next).map_err(kube::Error::SerdeError)?;
    let mut refused = status_schema::refused(&kind);
    if !refused.is_empty() {
        let mut was = serde_json::to_value(current).map_err(kube::Error::SerdeError)?;
        status_schema::strip(&mut status, &refused);
        status_schema::strip(&mut was, &refused);
        if status == was {
            return Ok(false);
        }
    }
    loop {
        let mut patch = json!({
            "apiVersion": K::api_version(&()),
            "kind": kind,
            "status": status,
        });
        if let Some(rv) = obj.resource_version().filter(|_| guarded) {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
        let written = api
            .patch_status(
                &obj.name_any(),
                &PatchParams::apply(crate::apply::FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await;
        let paths = match &written {
            Err(kube::Error::Api(e)) => status_schema::undeclared_paths(&e.message),
            _ => Default::default(),
        };
        let new = status_schema::remember(&kind, &paths);
        if new.is_empty() {
            return written.map(|_| true);
        }
        tracing::warn!(
            kind = %kind,
            fields = ?new,
            "the served CRD does not declare these status fields (upstream's CRD?): they are not written"
        );
        refused.extend(new);
        status_schema::strip(&mut status, &refused);
    }
}

/// Per object: consecutive failures (for the backoff) and since when, at which
/// generation, it has been failing (for `progressDeadlineMinutes`).
#[derive(Default)]
pub struct Failures {
    counts: Mutex<HashMap<String, u32>>,
    since: Mutex<HashMap<String, (Option<i64>, Instant)>>,
}

impl Failures {
    /// Counts one more failure of `name` and returns the delay before its retry.
    pub fn next_backoff(&self, name: &str) -> Duration {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(name.to_string()).or_default();
        *n = n.saturating_add(1);
        backoff(*n)
    }

    /// The objects whose last reconcile failed.
    pub fn failing(&self) -> Vec<String> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.keys().cloned().collect()
    }

    /// Forgets the failures of `name` (it succeeded, or it is gone).
    pub fn succeeded(&self, name: &str) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Forgets since when `name` has not reached its desired state (the next pending
    /// reconcile starts the clock anew), keeping its backoff.
    pub fn restart_clock(&self, name: &str) {
        self.since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Forgets the backoff of `name` but not since when it has not reached its desired
    /// state (a rollout in progress).
    pub fn reset_backoff(&self, name: &str) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Without changing anything: the delay [`Failures::next_backoff`] would return for
    /// `name`, and how long it has been failing at `generation` (zero when it is not, or
    /// was at another generation: what [`Failures::failing_for`] would return).
    pub fn peek(&self, name: &str, generation: Option<i64>) -> (Duration, Duration) {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let failures = counts.get(name).copied().unwrap_or_default();
        drop(counts);
        let since = self.since.lock().unwrap_or_else(|e| e.into_inner());
        let pending_for = since
            .get(name)
            .filter(|(at, _)| *at == generation)
            .map_or(Duration::ZERO, |(_, since)| since.elapsed());
        (backoff(failures.saturating_add(1)), pending_for)
    }

    /// How long `name` has been failing at `generation` (a new generation starts over).
    pub fn failing_for(&self, name: &str, generation: Option<i64>) -> Duration {
        let mut since = self.since.lock().unwrap_or_else(|e| e.into_inner());
        let entry = since
            .entry(name.to_string())
            .or_insert((generation, Instant::now()));
        if entry.0 != generation {
            *entry = (generation, Instant::now());
        }
        entry.1.elapsed()
    }
}

/// Requeue delay after `failures` consecutive failures of one object: 1 s, 2 s, 4 s …
/// capped at 30 s (both reconcilers).
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(8)).min(Duration::from_secs(30))
}

/// Runs one reconcile of `obj` inside a `reconcile` span carrying `field=<name>` and
/// records its duration for `controller`.
pub async fn instrumented<K, F, T, E>(
    controller: MetricsController,
    metrics: &Metrics,
    obj: &K,
    reconcile: F,
) -> Result<T, E>
where
    K: Resource,
    F: Future<Output = Result<T, E>>,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let span = match controller {
        MetricsController::clusterextension => {
            tracing::info_span!("reconcile", extension = %name)
        }
        MetricsController::clustercatalog => tracing::info_span!("reconcile", catalog = %name),
    };
    let started = Instant::now();
    let result = reconcile.instrument(span).await;
    metrics.reconcile_finished(controller, started.elapsed(), result.is_ok());
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(6), Duration::from_secs(30));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn failures_count_per_object_and_reset() {
        let f = Failures::default();
        assert_eq!(f.next_backoff("a"), Duration::from_secs(1));
        assert_eq!(f.next_backoff("a"), Duration::from_secs(2));
        assert_eq!(f.next_backoff("b"), Duration::from_secs(1));
        let mut failing = f.failing();
        failing.sort();
        assert_eq!(failing, ["a", "b"]);
        f.succeeded("a");
        assert_eq!(f.failing(), ["b"]);
        assert_eq!(f.next_backoff("a"), Duration::from_secs(1));
    }

    #[test]
    fn failing_for_starts_over_with_a_new_generation() {
        let f = Failures::default();
        let first = f.failing_for("a", Some(1));
        std::thread::sleep(Duration::from_millis(20));
        assert!(f.failing_for("a", Some(1)) >= first + Duration::from_millis(20));
        assert!(f.failing_for("a", Some(2)) < Duration::from_millis(20));
    }
}
