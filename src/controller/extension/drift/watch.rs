//! The drift watch tasks. An extension's own watch follows one kind in one namespace
//! (or cluster-wide for cluster-scoped kinds), run as its installer ServiceAccount and
//! selected by `olm.operatorframework.io/owner-name=<extension>`; a shared watch follows
//! one kind across the cluster for every extension, run as the controller and selected
//! by `olm.operatorframework.io/owner-kind=ClusterExtension`, each object reported to the
//! extension its `owner-name` label names. Both are metadata-only, except on kinds whose
//! readiness is tracked and on OperatorConditions (then full objects, of which only the
//! readiness verdict, or the hold verdict of
//! [`crate::bundle::operator_condition::upgradeable`], is kept), and decide what is drift
//! with the pure [`Tracker`]. A held upgrade thus follows its OperatorCondition through
//! the watch (docs/how-to/upgrade-control.md, "The operator's own say"): a changed hold
//! triggers a reconcile without forgetting the clean install. Watch errors back off (the
//! watcher's default backoff); a task runs until aborted.

use super::clean::{CleanInstalls, Witnessed};
use super::counters::Counters;
use super::diff::WatchKey;
use super::tracker::{Cause, Object, Seen, Tracker};
use crate::api::ClusterExtension;
use crate::apply::{self, ownership::OWNER_NAME_LABEL};
use crate::bundle::operator_condition;
use crate::controller::extension::rollout;
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef as ControllerRef;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest wait between retries of discovering a kind.
const MAX_DISCOVERY_BACKOFF: Duration = Duration::from_secs(30);

/// Extension → the tracking keys of the objects of this watch it installed.
pub(super) type Managed = Arc<Mutex<HashMap<String, HashSet<String>>>>;

/// Where a watch task reports.
#[derive(Clone)]
pub(super) struct Reporting {
    pub managed: Managed,
    /// True once a complete list arrived, false again after a watch error (drift may
    /// then be missed until the next list).
    pub synced: Arc<AtomicBool>,
    pub clean: CleanInstalls,
    pub counters: Counters,
    pub tx: mpsc::Sender<ControllerRef<ClusterExtension>>,
}

/// What one watch follows.
pub(super) struct Target {
    pub resource: ApiResource,
    /// `Some`: only this namespace.
    pub namespace: Option<String>,
    pub selector: String,
    /// `Some(extension)`: an extension's own watch (objects keyed by name); `None`: a
    /// shared watch (keyed by `namespace/name`, owner from the label).
    pub extension: Option<String>,
    /// Full objects, for their readiness verdict.
    pub readiness: bool,
    /// Full objects, for their hold verdict ([`is_hold_kind`]).
    pub hold: bool,
}

/// Whether objects of the kind `group`/`kind` carry a hold verdict (OperatorCondition).
pub(super) fn is_hold_kind(group: &str, kind: &str) -> bool {
    group == operator_condition::GROUP && kind == operator_condition::KIND
}

/// The hold verdict of an OperatorCondition (`None`: upgradeable).
fn hold_of(value: &serde_json::Value) -> Option<String> {
    operator_condition::upgradeable(value).err()
}

impl Target {
    /// The tracked form of an object (`None`: a shared watch saw an object without an
    /// owner name).
    fn object(
        &self,
        meta: &ObjectMeta,
        state: Option<String>,
        hold: Option<String>,
    ) -> Option<Object> {
        let name = meta.name.clone().unwrap_or_default();
        let (key, owner) = match &self.extension {
            Some(extension) => (name, extension.clone()),
            None => {
                let owner = meta.labels.as_ref()?.get(OWNER_NAME_LABEL)?.clone();
                let namespace = meta.namespace.as_deref().unwrap_or_default();
                (format!("{namespace}/{name}"), owner)
            }
        };
        Some(Object {
            key,
            owner,
            generation: meta.generation,
            state,
            hold,
        })
    }

    /// The drift of the object tracked as `key`, as an install in progress keeps it
    /// (`shown`: the key and generation of the update that caused it, if one did).
    fn witnessed(&self, key: &str, shown: Option<&(String, Option<i64>)>) -> Witnessed {
        let (namespace, name) = match (&self.extension, key.split_once('/')) {
            (None, Some((namespace, name))) => (namespace.to_owned(), name.to_owned()),
            _ => (self.namespace.clone().unwrap_or_default(), key.to_owned()),
        };
        Witnessed {
            group: self.resource.group.clone(),
            kind: self.resource.kind.clone(),
            namespace,
            name,
            generation: shown.filter(|(k, _)| k == key).and_then(|(_, g)| *g),
        }
    }
}

/// An extension's own watch of `key`, as `client` (its installer account): discovers
/// the kind (retrying with backoff while it is not served), then follows it.
pub(super) async fn own(
    extension: String,
    client: kube::Client,
    key: WatchKey,
    readiness: bool,
    report: Reporting,
) {
    let (resource, namespaced) = discover(&extension, &client, &key).await;
    let hold = is_hold_kind(&key.group, &key.kind);
    let target = Target {
        resource,
        namespace: (namespaced && !key.namespace.is_empty()).then(|| key.namespace.clone()),
        selector: format!("{OWNER_NAME_LABEL}={extension}"),
        extension: Some(extension),
        readiness,
        hold,
    };
    follow(client, target, report).await;
}

/// Follows `target` as `client` and reports drift of managed objects.
pub(super) async fn follow(client: kube::Client, target: Target, report: Reporting) {
    let config = crate::controller::common::watch_config()
        .labels(&target.selector)
        // The first list must show what was just applied (a list served from the
        // watch cache may be older: managed objects missing from it count as drift).
        .list_semantic(watcher::ListSemantic::MostRecent);
    let target = Arc::new(target);
    if target.readiness || target.hold {
        let api: Api<DynamicObject> = match &target.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &target.resource),
            None => Api::all_with(client, &target.resource),
        };
        let t = target.clone();
        let events = watcher(api, config).default_backoff().map(move |e| {
            e.map(|e| {
                seen(e, |o: &DynamicObject| {
                    let mut value = serde_json::to_value(o).unwrap_or_default();
                    // Listed items may lack apiVersion and kind.
                    value["apiVersion"] = t.resource.api_version.clone().into();
                    value["kind"] = t.resource.kind.clone().into();
                    let state = t.readiness.then(|| rollout::state_of(&value)).flatten();
                    let hold = t.hold.then(|| hold_of(&value)).flatten();
                    t.object(&o.metadata, state, hold)
                })
            })
        });
        run(&target, events, report).await;
    } else {
        let api: Api<PartialObjectMeta<DynamicObject>> = match &target.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &target.resource),
            None => Api::all_with(client, &target.resource),
        };
        let t = target.clone();
        let events = watcher(api, config).default_backoff().map(move |e| {
            e.map(|e| {
                seen(e, |m: &PartialObjectMeta<DynamicObject>| {
                    t.object(&m.metadata, None, None)
                })
            })
        });
        run(&target, events, report).await;
    }
}

/// A watch event, reduced (`None`: an object that is not tracked).
fn seen<K>(event: watcher::Event<K>, object: impl Fn(&K) -> Option<Object>) -> Option<Seen> {
    Some(match event {
        watcher::Event::Apply(o) => Seen::Apply(object(&o)?),
        watcher::Event::Delete(o) => Seen::Delete(object(&o)?),
        watcher::Event::Init => Seen::Init,
        watcher::Event::InitApply(o) => Seen::InitApply(object(&o)?),
        watcher::Event::InitDone => Seen::InitDone,
    })
}

/// The watch's loop: tracks what it sees and, for each extension a managed object of
/// which drifted, forgets that the extension is clean and asks for its reconcile; for
/// one whose objects only changed readiness ([`Cause::Readiness`]) while its rollout
/// was in progress, or whose OperatorCondition only changed its hold ([`Cause::Hold`]),
/// only asks for the reconcile (nothing to install again: the readiness is read again,
/// the upgrade decided again).
async fn run(
    target: &Target,
    events: impl Stream<Item = Result<Option<Seen>, watcher::Error>>,
    mut report: Reporting,
) {
    futures::pin_mut!(events);
    let kind = &target.resource.kind;
    let mut tracker = Tracker::default();
    while let Some(event) = events.next().await {
        let seen = match event {
            Ok(Some(seen)) => seen,
            Ok(None) => continue,
            Err(e) => {
                report.synced.store(false, Ordering::Relaxed);
                tracing::debug!(extension = ?target.extension, %kind, namespace = ?target.namespace, error = %e, "drift watch error");
                continue;
            }
        };
        let listed = matches!(seen, Seen::InitDone);
        // The generation an update showed (drift by any other event: gone).
        let shown = match &seen {
            Seen::Apply(o) => Some((o.key.clone(), o.generation)),
            _ => None,
        };
        let drifted: Vec<_> = {
            let managed = report.managed.lock().unwrap_or_else(|p| p.into_inner());
            tracker
                .observe(seen, &managed)
                .into_iter()
                .filter(|d| managed.get(&d.owner).is_some_and(|k| k.contains(&d.key)))
                .collect()
        };
        if listed {
            report.synced.store(true, Ordering::Relaxed);
        }
        let owners: BTreeSet<&str> = drifted.iter().map(|d| d.owner.as_str()).collect();
        for owner in owners {
            let objects: Vec<&str> = drifted
                .iter()
                .filter(|d| d.owner == owner)
                .map(|d| d.key.as_str())
                .collect();
            let cause = |c: Cause| drifted.iter().any(|d| d.owner == owner && d.cause == c);
            if cause(Cause::Drift) {
                tracing::info!(extension = %owner, %kind, ?objects, "drift detected; reconciling");
                let witnessed = drifted
                    .iter()
                    .filter(|d| d.owner == owner && d.cause == Cause::Drift)
                    .map(|d| target.witnessed(&d.key, shown.as_ref()));
                report.clean.drifted(owner, witnessed);
            } else if cause(Cause::Readiness) {
                if report.clean.rolling_out(owner) {
                    tracing::debug!(extension = %owner, %kind, ?objects, "readiness changed; reading it again");
                } else {
                    tracing::info!(extension = %owner, %kind, ?objects, "readiness lost; reconciling");
                    report.clean.drifted(owner, []);
                }
            } else {
                tracing::info!(extension = %owner, %kind, ?objects, "operator's hold changed; reconciling");
            }
            report.counters.count_trigger();
            if let Err(e) = report.tx.try_send(ControllerRef::new(owner)) {
                tracing::debug!(extension = %owner, error = %e, "drift trigger dropped");
            }
        }
    }
}

/// The resource and scope of the watch's kind, retrying with backoff while it is not
/// served.
async fn discover(extension: &str, client: &kube::Client, key: &WatchKey) -> (ApiResource, bool) {
    let resolver = apply::Resolver::new(client.clone());
    let probe = key.probe();
    let mut delay = Duration::from_millis(500);
    loop {
        match resolver.resolve(&probe).await {
            Ok(Some(found)) => return found,
            Ok(None) => {
                tracing::debug!(extension = %extension, kind = %key.kind, "drift watch: kind not served yet");
            }
            Err(e) => {
                tracing::debug!(extension = %extension, kind = %key.kind, error = %e, "drift watch: discovery failed");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_DISCOVERY_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::GroupVersionKind;

    fn target(extension: Option<&str>, namespace: Option<&str>) -> Target {
        let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
        Target {
            resource: ApiResource::from_gvk(&gvk),
            namespace: namespace.map(String::from),
            selector: String::new(),
            extension: extension.map(String::from),
            readiness: false,
            hold: false,
        }
    }

    #[test]
    fn drift_is_kept_with_the_object_it_names() {
        let update = ("ns/d".to_string(), Some(4));
        let shared = target(None, None).witnessed("ns/d", Some(&update));
        assert_eq!(
            (shared.group.as_str(), shared.kind.as_str()),
            ("apps", "Deployment")
        );
        assert_eq!(
            (shared.namespace.as_str(), shared.name.as_str()),
            ("ns", "d")
        );
        assert_eq!(shared.generation, Some(4), "the update's generation");
        let other = target(None, None).witnessed("ns/e", Some(&update));
        assert_eq!(other.generation, None, "another object's update: gone");
        let cluster = target(None, None).witnessed("/c", None);
        assert_eq!(
            (cluster.namespace.as_str(), cluster.name.as_str()),
            ("", "c")
        );
        let own = target(Some("ext"), Some("ns")).witnessed("d", None);
        assert_eq!((own.namespace.as_str(), own.name.as_str()), ("ns", "d"));
        let own_cluster = target(Some("ext"), None).witnessed("c", None);
        assert_eq!(
            (own_cluster.namespace.as_str(), own_cluster.name.as_str()),
            ("", "c")
        );
    }
}
