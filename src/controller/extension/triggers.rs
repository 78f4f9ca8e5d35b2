//! What makes a ClusterExtension reconcile, and what does not: the extension's own
//! changes ([`extension_trigger`]), ClusterCatalog changes that can change resolution
//! ([`catalog_trigger`], [`changed_only`]) and RBAC changes ([`rbac_events`]). Pure keys
//! over the watched objects plus the stream adapters that apply them; the wiring is in
//! [`super::run`].

use crate::api::{self, ClusterCatalog, ClusterExtension};
use futures::StreamExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use std::collections::HashMap;

/// What of a ClusterExtension asks for a reconcile: its generation (spec, and deletion:
/// the API server bumps it when setting `deletionTimestamp`), finalizers, whether it
/// is being deleted, and the upgrade-control annotations (docs/how-to/upgrade-control.md:
/// approving, pausing, resuming, rolling back). Status and other annotation updates do
/// not.
pub fn extension_trigger(e: &ClusterExtension) -> Option<u64> {
    use super::plan::control::{
        ANNOTATION_APPROVED_VERSION, ANNOTATION_PAUSED, ANNOTATION_UPGRADE_APPROVAL,
    };
    use super::plan::rollback::{ANNOTATION_ROLLBACK_TO, ANNOTATION_UPGRADE_REMEDIATION};
    let meta = e.meta();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
    Some(hash_of(&(
        meta.generation,
        meta.deletion_timestamp.is_some(),
        &meta.finalizers,
        [
            ANNOTATION_UPGRADE_APPROVAL,
            ANNOTATION_APPROVED_VERSION,
            ANNOTATION_PAUSED,
            ANNOTATION_ROLLBACK_TO,
            ANNOTATION_UPGRADE_REMEDIATION,
        ]
        .map(annotation),
    )))
}

/// What of a ClusterCatalog can change resolution: its spec (generation), labels (catalog
/// selectors), the digest it serves, whether it is Serving, and its deletion.
pub fn catalog_trigger(c: &ClusterCatalog) -> Option<u64> {
    let meta = c.meta();
    let status = c.status.as_ref();
    let resolved = status
        .and_then(|s| s.resolved_source.as_ref())
        .map(|r| r.image.ref_.as_str());
    let serving = status
        .and_then(|s| api::conditions::find(&s.conditions, "Serving").map(|c| c.status.as_str()));
    Some(hash_of(&(
        meta.generation,
        &meta.labels,
        meta.deletion_timestamp.is_some(),
        resolved,
        serving,
    )))
}

fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(value)
}

/// The objects of `events` (a watcher) whose `key` changed since they were last seen,
/// and every deleted one.
pub fn changed_only<K>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    key: fn(&K) -> Option<u64>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Send + 'static,
{
    let mut seen: HashMap<String, Option<u64>> = HashMap::new();
    events.flat_map(move |event| {
        let changed: Vec<Result<K, watcher::Error>> = match event {
            Err(e) => vec![Err(e)],
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                let k = key(&o);
                if seen.insert(o.name_any(), k) == Some(k) {
                    Vec::new()
                } else {
                    vec![Ok(o)]
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                seen.remove(&o.name_any());
                vec![Ok(o)]
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => Vec::new(),
        };
        futures::stream::iter(changed)
    })
}

/// Every change of an RBAC kind, metadata only.
pub fn rbac_events<K>(
    client: &kube::Client,
) -> futures::stream::BoxStream<'static, Result<PartialObjectMeta<K>, watcher::Error>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watcher(
        Api::<PartialObjectMeta<K>>::all(client.clone()),
        crate::controller::common::watch_config(),
    )
    .default_backoff()
    .touched_objects()
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::{Value, json};

    fn now() -> Time {
        Time(jiff::Timestamp::now())
    }

    fn ext(status: Value, generation: i64) -> ClusterExtension {
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "e", "generation": generation, "finalizers": ["f"]},
            "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                     "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}},
            "status": status,
        }))
        .unwrap()
    }

    fn catalog(resolved: &str, serving: &str, last_unpacked: &str) -> ClusterCatalog {
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": "c", "generation": 1, "labels": {"a": "b"}},
            "spec": {"source": {"type": "Image", "image": {"ref": "r:1"}}},
            "status": {
                "conditions": [{"type": "Serving", "status": serving, "reason": "Available",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "resolvedSource": {"type": "Image", "image": {"ref": resolved}},
                "lastUnpacked": last_unpacked,
            },
        }))
        .unwrap()
    }

    #[test]
    fn own_status_writes_do_not_trigger_but_spec_finalizers_and_deletion_do() {
        let base = extension_trigger(&ext(json!({}), 1));
        assert_eq!(
            base,
            extension_trigger(&ext(json!({"observedGeneration": 1}), 1))
        );
        assert_ne!(base, extension_trigger(&ext(json!({}), 2)));
        let mut no_finalizer = ext(json!({}), 1);
        no_finalizer.metadata.finalizers = None;
        assert_ne!(base, extension_trigger(&no_finalizer));
        let mut deleting = ext(json!({}), 1);
        deleting.metadata.deletion_timestamp = Some(now());
        assert_ne!(base, extension_trigger(&deleting));
        let annotated = |key: &str| {
            let mut e = ext(json!({}), 1);
            e.metadata.annotations = Some([(key.to_string(), "x".to_string())].into());
            extension_trigger(&e)
        };
        assert_eq!(base, annotated("example.com/other"));
        assert_ne!(base, annotated("olm.operatorframework.io/approved-version"));
        assert_ne!(base, annotated("olm.operatorframework.io/paused"));
        assert_ne!(base, annotated("olm.operatorframework.io/rollback-to"));
        assert_ne!(
            base,
            annotated("olm.operatorframework.io/upgrade-remediation")
        );
    }

    #[test]
    fn catalog_bookkeeping_does_not_trigger_but_content_and_serving_do() {
        let base = catalog_trigger(&catalog("r@sha256:1", "True", "2026-01-01T00:00:00Z"));
        assert_eq!(
            base,
            catalog_trigger(&catalog("r@sha256:1", "True", "2026-01-02T00:00:00Z")),
            "lastUnpacked"
        );
        assert_ne!(
            base,
            catalog_trigger(&catalog("r@sha256:2", "True", "2026-01-01T00:00:00Z"))
        );
        assert_ne!(
            base,
            catalog_trigger(&catalog("r@sha256:1", "False", "2026-01-01T00:00:00Z"))
        );
        let mut relabelled = catalog("r@sha256:1", "True", "2026-01-01T00:00:00Z");
        relabelled.metadata.labels = None;
        assert_ne!(base, catalog_trigger(&relabelled));
    }

    #[tokio::test]
    async fn changed_only_passes_changes_and_deletions() {
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(catalog(
                "d1",
                "True",
                "2026-01-01T00:00:01Z",
            ))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(catalog(
                "d1",
                "True",
                "2026-01-01T00:00:02Z",
            ))),
            Ok(watcher::Event::Apply(catalog(
                "d2",
                "True",
                "2026-01-01T00:00:02Z",
            ))),
            Ok(watcher::Event::Apply(catalog(
                "d2",
                "True",
                "2026-01-01T00:00:03Z",
            ))),
            Ok(watcher::Event::Delete(catalog(
                "d2",
                "True",
                "2026-01-01T00:00:03Z",
            ))),
        ]);
        let passed: Vec<String> = changed_only(events, catalog_trigger)
            .map(|r| {
                r.unwrap()
                    .status
                    .and_then(|s| s.resolved_source)
                    .map(|r| r.image.ref_)
                    .unwrap_or_default()
            })
            .collect()
            .await;
        assert_eq!(passed, vec!["d1", "d2", "d2"]);
    }
}
