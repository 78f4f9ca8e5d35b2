//! Retries during a registry outage cost no API requests (docs/concepts/rollout-status.md,
//! "Retries during a registry outage"). A reconcile that failed only because the bundle
//! image could not be pulled leaves a [`PullMemo`]: which image, with which credentials,
//! and the error. The next retry of the same extension — nothing about it changed (same
//! `resourceVersion`, so neither spec, annotations nor the status it wrote), no catalog,
//! RBAC or drift event since ([`Epoch`]), the credentials the same — first pulls that image
//! again ([`probe`]): the same error means the full reconcile would read the same objects,
//! resolve the same bundle and write the same status, so it ends there and backs off. Any
//! other result (the pull works, fails differently) runs the full reconcile. The
//! credentials of those pulls are at most [`SECRETS_MAX_AGE`] old. Extensions
//! with `progressDeadlineMinutes` always run it (their status changes with time).
//!
//! The decisions are pure ([`probe`], [`unchanged`]); the memos and the epoch are kept in
//! [`Memos`], and the reconciler does the pull.

use crate::api::ClusterExtension;
use crate::image::DockerConfig;
use kube::ResourceExt;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How old the credentials of a retry's pull may be: they are read for all extensions
/// together, at most once a minute (a full reconcile reads them at each pull).
pub const SECRETS_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// What a reconcile that failed on its pull leaves for the next retry.
#[derive(Clone, Debug, PartialEq)]
pub struct PullMemo {
    /// The extension's `resourceVersion` when that reconcile started.
    pub resource_version: Option<String>,
    /// The [`Epoch`] when that reconcile started.
    pub epoch: u64,
    /// The bundle image it pulled, and with which credentials.
    pub image: String,
    pub secrets: DockerConfig,
    /// The pull error (the message of `Progressing=Retrying`).
    pub error: String,
}

/// Counts the events that may change a reconcile's outcome without changing the
/// extension itself: catalog changes, RBAC changes, drift of managed objects.
#[derive(Default, Debug)]
pub struct Epoch(AtomicU64);

impl Epoch {
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether the retry of `ext` may start with a pull of `memo`'s image alone: nothing
/// changed since the reconcile that left the memo.
pub fn probe(memo: &PullMemo, ext: &ClusterExtension, epoch: u64) -> bool {
    memo.epoch == epoch
        && memo.resource_version.is_some()
        && memo.resource_version == ext.metadata.resource_version
        && ext.metadata.deletion_timestamp.is_none()
        && ext.spec.progress_deadline_minutes.is_none()
}

/// Whether the probe pull, with `secrets` read now, failed exactly as `memo` records
/// (`Err` of a retryable failure with the same message): then the reconcile ends.
pub fn unchanged(memo: &PullMemo, secrets: &DockerConfig, pulled: &Result<(), String>) -> bool {
    *secrets == memo.secrets && matches!(pulled, Err(e) if *e == memo.error)
}

/// The memos per extension and the epoch, in the reconciler's context.
#[derive(Default, Debug)]
pub struct Memos {
    memos: Mutex<HashMap<String, PullMemo>>,
    pub epoch: Epoch,
}

impl Memos {
    /// Takes the memo of `name` (a full reconcile leaves a new one or none).
    pub fn take(&self, name: &str) -> Option<PullMemo> {
        self.lock().remove(name)
    }

    /// Keeps the memo of `name` for its next retry.
    pub fn keep(&self, name: &str, memo: PullMemo) {
        self.lock().insert(name.to_string(), memo);
    }

    /// Whether `name` has a memo (tests).
    pub fn has(&self, name: &str) -> bool {
        self.lock().contains_key(name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PullMemo>> {
        self.memos.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The memo of `ext` for a pull of `image` with `secrets` that failed with `error`,
/// started at `epoch`.
pub fn memo(
    ext: &ClusterExtension,
    epoch: u64,
    image: &str,
    secrets: &DockerConfig,
    error: &str,
) -> (String, PullMemo) {
    let memo = PullMemo {
        resource_version: ext.metadata.resource_version.clone(),
        epoch,
        image: image.to_string(),
        secrets: secrets.clone(),
        error: error.to_string(),
    };
    (ext.name_any(), memo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ext(rv: &str) -> ClusterExtension {
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "a", "resourceVersion": rv},
            "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                     "source": {"sourceType": "Catalog", "catalog": {"packageName": "a"}}},
        }))
        .expect("extension")
    }

    fn failed(ext: &ClusterExtension, epoch: u64) -> PullMemo {
        memo(ext, epoch, "reg/a:v1", &DockerConfig::default(), "503").1
    }

    #[test]
    fn a_retry_with_nothing_changed_probes_the_pull() {
        let e = ext("7");
        assert!(probe(&failed(&e, 3), &e, 3));
    }

    #[test]
    fn any_change_runs_the_full_reconcile() {
        let e = ext("7");
        let m = failed(&e, 3);
        // the extension changed (spec, annotations, its status)
        assert!(!probe(&m, &ext("8"), 3));
        // a catalog, RBAC or drift event since
        assert!(!probe(&m, &e, 4));
        // being deleted
        let mut deleting = e.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(!probe(&m, &deleting, 3));
        // a deadline: the status changes with time
        let mut deadline = e.clone();
        deadline.spec.progress_deadline_minutes = Some(10);
        assert!(!probe(&m, &deadline, 3));
        // no resourceVersion known
        let mut unknown = m.clone();
        unknown.resource_version = None;
        assert!(!probe(&unknown, &e, 3));
    }

    #[test]
    fn only_the_same_failure_with_the_same_credentials_ends_the_retry() {
        let e = ext("7");
        let m = failed(&e, 3);
        let none = DockerConfig::default();
        assert!(unchanged(&m, &none, &Err("503".into())));
        assert!(!unchanged(&m, &none, &Err("401".into())));
        assert!(!unchanged(&m, &none, &Ok(())));
        let other =
            DockerConfig::parse("s", br#"{"auths":{"reg":{"auth":"dTpw"}}}"#).expect("config");
        assert!(!unchanged(&m, &other, &Err("503".into())));
    }

    #[test]
    fn memos_are_taken_once() {
        let memos = Memos::default();
        let e = ext("7");
        let (name, m) = memo(
            &e,
            memos.epoch.now(),
            "reg/a:v1",
            &DockerConfig::default(),
            "503",
        );
        memos.keep(&name, m.clone());
        memos.epoch.bump();
        assert_eq!(memos.take("a"), Some(m));
        assert!(!memos.has("a"));
        assert_eq!(memos.epoch.now(), 1);
    }
}
