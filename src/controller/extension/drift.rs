//! Drift correction (issue 7 item 4): watches on the kinds an extension manages, run as
//! the extension's installer ServiceAccount, that trigger a reconcile of the extension as
//! soon as one of its managed objects is deleted or changed in its spec.
//!
//! [`DriftWatches`] keeps at most one watch per (extension, group/version/kind,
//! namespace-or-cluster), label-selected by `olm.operatorframework.io/owner-name`. It is
//! told the managed objects after each successful install ([`DriftWatches::ensure`]) and
//! forgets an extension on uninstall ([`DriftWatches::stop`]). Watches are metadata-only
//! and keep nothing but (name → `metadata.generation`) of the managed objects — except,
//! when the rollout status is on ([`DriftWatches::with_readiness`]), watches on kinds that
//! report readiness ([`super::rollout::is_checked`]: Deployments, CRDs, …), which read
//! full objects and keep their readiness verdict too. What counts as drift is decided by
//! the pure [`Tracker`]: a deletion, a changed generation (status-only updates and no-op
//! applies do not change it), or a changed readiness verdict (a Deployment becoming
//! available or losing it — not every status update, and never a pod's). The triggers
//! reach the Controller through [`DriftWatches::trigger_stream`] (`Controller::reconcile_on`).

use super::rollout;
use crate::api::ClusterExtension;
use crate::apply::{self, InstallerClients, WatchSlot, ownership::OWNER_NAME_LABEL};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef as ControllerRef;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Reconciles triggered by drift since the process started (all [`DriftWatches`]).
static TRIGGERS: AtomicU64 = AtomicU64::new(0);
/// Drift watch tasks running in this process.
static WATCHES: AtomicUsize = AtomicUsize::new(0);

/// Number of reconciles triggered by drift in this process (for tests and metrics).
pub fn trigger_count() -> u64 {
    TRIGGERS.load(Ordering::Relaxed)
}

/// Number of drift watches running in this process.
pub fn watch_count() -> usize {
    WATCHES.load(Ordering::Relaxed)
}

/// Capacity of the trigger channel; when full, further triggers are dropped (the
/// Controller already has reconciles queued then).
const TRIGGER_CAPACITY: usize = 1024;
/// Longest wait between retries of discovering a kind.
const MAX_DISCOVERY_BACKOFF: Duration = Duration::from_secs(30);

/// One watch of an extension: a kind in a namespace ("" for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchKey {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
}

/// The watches `objects` need, each with the names of the managed objects it covers.
pub fn plan(objects: &[apply::ObjectRef]) -> BTreeMap<WatchKey, BTreeSet<String>> {
    let mut plan: BTreeMap<WatchKey, BTreeSet<String>> = BTreeMap::new();
    for o in objects {
        let key = WatchKey {
            group: o.group.clone(),
            version: o.version.clone(),
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
        };
        plan.entry(key).or_default().insert(o.name.clone());
    }
    plan
}

/// What a watch reported, reduced to what drift detection needs: the name, the
/// generation and, for kinds whose readiness is checked, the readiness verdict
/// ([`rollout::state_of`]: `None` when ready).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Apply {
        name: String,
        generation: Option<i64>,
        state: Option<String>,
    },
    Delete {
        name: String,
    },
    Init,
    InitApply {
        name: String,
        generation: Option<i64>,
        state: Option<String>,
    },
    InitDone,
}

/// (name, generation, readiness verdict) of a watched object.
type Identity = (String, Option<i64>, Option<String>);

impl Seen {
    fn of<K>(event: watcher::Event<K>, id: impl Fn(&K) -> Identity) -> Seen {
        match event {
            watcher::Event::Apply(m) => {
                let (name, generation, state) = id(&m);
                Seen::Apply {
                    name,
                    generation,
                    state,
                }
            }
            watcher::Event::Delete(m) => Seen::Delete { name: id(&m).0 },
            watcher::Event::Init => Seen::Init,
            watcher::Event::InitApply(m) => {
                let (name, generation, state) = id(&m);
                Seen::InitApply {
                    name,
                    generation,
                    state,
                }
            }
            watcher::Event::InitDone => Seen::InitDone,
        }
    }
}

/// What the tracker remembers of one object: generation and readiness verdict.
type Known = (Option<i64>, Option<String>);

/// Remembers the generation (and readiness verdict) of each object one watch sees and
/// says which events need a reconcile: a deletion, a changed generation, a changed
/// readiness verdict, or (across a re-list after a watch error) an object gone or
/// changed meanwhile. Creations are not drift (they are our applies).
#[derive(Debug, Default)]
pub struct Tracker {
    known: HashMap<String, Known>,
    relist: Option<HashMap<String, Known>>,
    listed: bool,
}

impl Tracker {
    /// The names of the objects that drifted (or changed readiness) with this event.
    pub fn observe(&mut self, seen: Seen) -> Vec<String> {
        match seen {
            Seen::Apply {
                name,
                generation,
                state,
            } => {
                let now = (generation, state);
                match self.known.insert(name.clone(), now.clone()) {
                    Some(previous) if previous != now => vec![name],
                    _ => Vec::new(),
                }
            }
            Seen::Delete { name } => {
                self.known.remove(&name);
                vec![name]
            }
            Seen::Init => {
                self.relist = Some(HashMap::new());
                Vec::new()
            }
            Seen::InitApply {
                name,
                generation,
                state,
            } => {
                self.relist
                    .get_or_insert_with(HashMap::new)
                    .insert(name, (generation, state));
                Vec::new()
            }
            Seen::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                let mut drifted = Vec::new();
                if self.listed {
                    for (name, known) in &self.known {
                        match fresh.get(name) {
                            None => drifted.push(name.clone()),
                            Some(k) if k != known => drifted.push(name.clone()),
                            Some(_) => {}
                        }
                    }
                    drifted.sort();
                }
                self.known = fresh;
                self.listed = true;
                drifted
            }
        }
    }

    /// Objects remembered.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }
}

struct Watch {
    managed: Arc<Mutex<HashSet<String>>>,
    task: JoinHandle<()>,
    /// The watch's stream on a shared connection (released after the task is aborted).
    _slot: WatchSlot,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
        WATCHES.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The watches of one extension, and the installer account they run as.
struct ExtensionWatches {
    account: (String, String),
    watches: HashMap<WatchKey, Watch>,
}

/// The drift watches of all extensions.
pub struct DriftWatches {
    /// Whether watches on kinds that report readiness also trigger on readiness changes
    /// (full objects instead of metadata).
    readiness: bool,
    tx: mpsc::Sender<ControllerRef<ClusterExtension>>,
    rx: Mutex<Option<mpsc::Receiver<ControllerRef<ClusterExtension>>>>,
    extensions: Mutex<HashMap<String, ExtensionWatches>>,
}

impl Default for DriftWatches {
    fn default() -> Self {
        Self::new()
    }
}

impl DriftWatches {
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel(TRIGGER_CAPACITY);
        DriftWatches {
            readiness: false,
            tx,
            rx: Mutex::new(Some(rx)),
            extensions: Mutex::new(HashMap::new()),
        }
    }

    /// Also reconcile when the readiness of an installed object that reports it changes
    /// ([`rollout::is_checked`]; those kinds are then watched as full objects).
    pub fn with_readiness(mut self, readiness: bool) -> Self {
        self.readiness = readiness;
        self
    }

    /// The reconcile requests drift causes, for `Controller::reconcile_on`. Only the first
    /// call gets them; later calls get an empty stream.
    pub fn trigger_stream(&self) -> impl Stream<Item = ControllerRef<ClusterExtension>> + use<> {
        let rx = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take();
        match rx {
            Some(rx) => rx.left_stream(),
            None => futures::stream::empty().right_stream(),
        }
    }

    /// Makes the watches of `extension` match `objects` (its installed revision): starts
    /// the missing ones as the installer account `namespace/account` (clients from
    /// `clients`, on shared watch connections), stops those of kinds no longer managed.
    /// All are restarted when the account changed.
    pub fn ensure(
        &self,
        extension: &str,
        account: (&str, &str),
        clients: &InstallerClients,
        objects: &[apply::ObjectRef],
    ) {
        let plan = plan(objects);
        let account = (account.0.to_owned(), account.1.to_owned());
        let mut extensions = self.extensions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = extensions
            .entry(extension.to_owned())
            .or_insert_with(|| ExtensionWatches {
                account: account.clone(),
                watches: HashMap::new(),
            });
        if entry.account != account {
            entry.watches.clear();
            entry.account = account;
        }
        entry.watches.retain(|key, _| plan.contains_key(key));
        for (key, names) in plan {
            let names: HashSet<String> = names.into_iter().collect();
            if let Some(watch) = entry.watches.get(&key) {
                *watch.managed.lock().unwrap_or_else(|p| p.into_inner()) = names;
                continue;
            }
            let (client, slot) = match clients.watch_client(&entry.account.0, &entry.account.1) {
                Ok(found) => found,
                Err(e) => {
                    // Not recorded: the next successful reconcile tries again.
                    tracing::warn!(extension = %extension, kind = %key.kind, error = %e, "cannot start drift watch");
                    continue;
                }
            };
            let managed = Arc::new(Mutex::new(names));
            WATCHES.fetch_add(1, Ordering::Relaxed);
            let readiness = self.readiness && rollout::is_checked(&key.group, &key.kind);
            let task = tokio::spawn(watch_kind(
                extension.to_owned(),
                client,
                (key.clone(), readiness),
                managed.clone(),
                self.tx.clone(),
            ));
            entry.watches.insert(
                key,
                Watch {
                    managed,
                    task,
                    _slot: slot,
                },
            );
        }
    }

    /// Stops all watches of `extension` (uninstalled or deleted).
    pub fn stop(&self, extension: &str) {
        self.extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(extension);
    }

    /// The watches of `extension`.
    pub fn watches_of(&self, extension: &str) -> Vec<WatchKey> {
        let extensions = self.extensions.lock().unwrap_or_else(|p| p.into_inner());
        let mut keys: Vec<WatchKey> = extensions
            .get(extension)
            .map(|e| e.watches.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }
}

/// One watch: discovers the kind (retrying with backoff while it is not served), then
/// follows the extension's objects of that kind — metadata only, or full objects when
/// `readiness` (the readiness verdict is kept, not the object) — and sends a reconcile
/// request for the extension when a managed object drifted. Watch errors back off
/// (the watcher's default backoff); the task runs until aborted.
async fn watch_kind(
    extension: String,
    client: kube::Client,
    (key, readiness): (WatchKey, bool),
    managed: Arc<Mutex<HashSet<String>>>,
    tx: mpsc::Sender<ControllerRef<ClusterExtension>>,
) {
    // Discovery state is not kept for the life of the watch.
    let (resource, namespaced) = discover(&extension, &client, &key).await;
    let selector = format!("{OWNER_NAME_LABEL}={extension}");
    let config = watcher::Config::default().labels(&selector);
    let scoped = namespaced && !key.namespace.is_empty();
    if readiness {
        let api: Api<DynamicObject> = if scoped {
            Api::namespaced_with(client, &key.namespace, &resource)
        } else {
            Api::all_with(client, &resource)
        };
        let (api_version, kind) = (resource.api_version.clone(), key.kind.clone());
        let events = watcher(api, config).default_backoff().map(move |e| {
            e.map(|e| {
                Seen::of(e, |o: &DynamicObject| {
                    let mut value = serde_json::to_value(o).unwrap_or_default();
                    // Listed items may lack apiVersion and kind.
                    value["apiVersion"] = api_version.clone().into();
                    value["kind"] = kind.clone().into();
                    let state = rollout::state_of(&value);
                    (
                        o.metadata.name.clone().unwrap_or_default(),
                        o.metadata.generation,
                        state,
                    )
                })
            })
        });
        follow(extension, events, key, managed, tx).await;
    } else {
        let api: Api<PartialObjectMeta<DynamicObject>> = if scoped {
            Api::namespaced_with(client, &key.namespace, &resource)
        } else {
            Api::all_with(client, &resource)
        };
        let events = watcher(api, config).default_backoff().map(|e| {
            e.map(|e| {
                Seen::of(e, |m: &PartialObjectMeta<DynamicObject>| {
                    let name = m.metadata.name.clone().unwrap_or_default();
                    (name, m.metadata.generation, None)
                })
            })
        });
        follow(extension, events, key, managed, tx).await;
    }
}

/// The resource and scope of the watch's kind, retrying with backoff while it is not
/// served.
async fn discover(
    extension: &str,
    client: &kube::Client,
    key: &WatchKey,
) -> (kube::discovery::ApiResource, bool) {
    let resolver = apply::Resolver::new(client.clone());
    let probe = apply::ObjectRef {
        group: key.group.clone(),
        version: key.version.clone(),
        kind: key.kind.clone(),
        namespace: key.namespace.clone(),
        name: String::new(),
    };
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

/// Follows the extension's objects of one kind and sends a reconcile request when a
/// managed one drifted.
async fn follow(
    extension: String,
    events: impl Stream<Item = Result<Seen, watcher::Error>>,
    key: WatchKey,
    managed: Arc<Mutex<HashSet<String>>>,
    mut tx: mpsc::Sender<ControllerRef<ClusterExtension>>,
) {
    futures::pin_mut!(events);
    let mut tracker = Tracker::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::debug!(extension = %extension, kind = %key.kind, namespace = %key.namespace, error = %e, "drift watch error");
                continue;
            }
        };
        let drifted = tracker.observe(event);
        let drifted: Vec<String> = {
            let managed = managed.lock().unwrap_or_else(|p| p.into_inner());
            drifted
                .into_iter()
                .filter(|n| managed.contains(n))
                .collect()
        };
        if drifted.is_empty() {
            continue;
        }
        tracing::info!(extension = %extension, kind = %key.kind, namespace = %key.namespace, objects = ?drifted, "drift detected; reconciling");
        TRIGGERS.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = tx.try_send(ControllerRef::new(&extension)) {
            tracing::debug!(extension = %extension, error = %e, "drift trigger dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(name: &str, generation: i64) -> Seen {
        Seen::Apply {
            name: name.into(),
            generation: Some(generation),
            state: None,
        }
    }
    fn init_apply(name: &str, generation: i64) -> Seen {
        Seen::InitApply {
            name: name.into(),
            generation: Some(generation),
            state: None,
        }
    }

    fn listed(objects: &[(&str, i64)]) -> Tracker {
        let mut t = Tracker::default();
        assert!(t.observe(Seen::Init).is_empty());
        for (n, g) in objects {
            assert!(t.observe(init_apply(n, *g)).is_empty());
        }
        assert!(
            t.observe(Seen::InitDone).is_empty(),
            "first list is no drift"
        );
        t
    }

    #[test]
    fn deletion_and_generation_change_are_drift() {
        let mut t = listed(&[("a", 1), ("b", 3)]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.observe(Seen::Delete { name: "a".into() }), vec!["a"]);
        assert_eq!(t.observe(apply("b", 4)), vec!["b"]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn status_updates_creations_and_no_op_applies_are_not_drift() {
        let mut t = listed(&[("a", 1)]);
        assert!(t.observe(apply("a", 1)).is_empty(), "same generation");
        assert!(t.observe(apply("new", 1)).is_empty(), "creation");
        assert!(t.observe(apply("new", 1)).is_empty());
        // Kinds without generation (ConfigMaps): updates cannot be told apart.
        let mut t = Tracker::default();
        let none = |n: &str| Seen::Apply {
            name: n.into(),
            generation: None,
            state: None,
        };
        assert!(t.observe(none("cm")).is_empty());
        assert!(t.observe(none("cm")).is_empty());
        assert_eq!(t.observe(Seen::Delete { name: "cm".into() }), vec!["cm"]);
    }

    #[test]
    fn readiness_changes_trigger_but_repeated_verdicts_do_not() {
        let seen = |state: Option<&str>| Seen::Apply {
            name: "d".into(),
            generation: Some(1),
            state: state.map(str::to_owned),
        };
        let mut t = listed(&[]);
        assert!(
            t.observe(seen(Some("0/1 available"))).is_empty(),
            "creation"
        );
        assert!(
            t.observe(seen(Some("0/1 available"))).is_empty(),
            "a status update with the same verdict"
        );
        assert_eq!(t.observe(seen(None)), vec!["d"], "became ready");
        assert!(t.observe(seen(None)).is_empty());
        assert_eq!(t.observe(seen(Some("0/1 available"))), vec!["d"], "lost it");
    }

    #[test]
    fn relist_reports_what_changed_while_the_watch_was_down() {
        let mut t = listed(&[("a", 1), ("b", 1), ("c", 2)]);
        assert!(t.observe(Seen::Init).is_empty());
        assert!(t.observe(init_apply("a", 1)).is_empty());
        assert!(t.observe(init_apply("c", 5)).is_empty());
        assert!(t.observe(init_apply("d", 1)).is_empty());
        assert_eq!(t.observe(Seen::InitDone), vec!["b", "c"]);
        assert_eq!(t.len(), 3);
        assert_eq!(t.observe(apply("d", 2)), vec!["d"]);
    }

    #[test]
    fn plan_groups_objects_by_kind_and_namespace() {
        let r = |g: &str, k: &str, ns: &str, n: &str| apply::ObjectRef {
            group: g.into(),
            version: "v1".into(),
            kind: k.into(),
            namespace: ns.into(),
            name: n.into(),
        };
        let objects = [
            r("apps", "Deployment", "x", "d1"),
            r("apps", "Deployment", "x", "d2"),
            r("apps", "Deployment", "y", "d1"),
            r("", "ConfigMap", "x", "c"),
            r("apiextensions.k8s.io", "CustomResourceDefinition", "", "w"),
        ];
        let p = plan(&objects);
        assert_eq!(p.len(), 4);
        let key = WatchKey {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: "x".into(),
        };
        assert_eq!(
            p[&key].iter().cloned().collect::<Vec<_>>(),
            vec!["d1".to_string(), "d2".to_string()]
        );
    }

    #[tokio::test]
    async fn ensure_keeps_one_watch_per_kind_and_stops_unmanaged_ones() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        // An address nothing listens on: the watch tasks just back off.
        let url: http::Uri = "https://127.0.0.1:9".parse().unwrap();
        let client = InstallerClients::new(kube::Config::new(url));
        assert!(client.shares_connections());
        let drift = DriftWatches::new();
        let r = |k: &str, n: &str| apply::ObjectRef {
            group: "".into(),
            version: "v1".into(),
            kind: k.into(),
            namespace: "ns".into(),
            name: n.into(),
        };
        drift.ensure(
            "e",
            ("ns", "sa"),
            &client,
            &[r("ConfigMap", "a"), r("ConfigMap", "b"), r("Service", "s")],
        );
        assert_eq!(drift.watches_of("e").len(), 2);
        assert_eq!(client.watch_connections(), vec![2], "one connection");
        drift.ensure(
            "e",
            ("ns", "sa"),
            &client,
            &[r("ConfigMap", "a"), r("ConfigMap", "b"), r("Service", "s")],
        );
        assert_eq!(drift.watches_of("e").len(), 2, "idempotent");
        drift.ensure("e", ("ns", "sa"), &client, &[r("ConfigMap", "a")]);
        let keys = drift.watches_of("e");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kind, "ConfigMap");
        drift.ensure("f", ("ns", "sa"), &client, &[r("ConfigMap", "a")]);
        assert_eq!(client.watch_connections(), vec![2]);
        drift.stop("e");
        assert!(drift.watches_of("e").is_empty());
        assert_eq!(drift.watches_of("f").len(), 1);
        assert_eq!(client.watch_connections(), vec![1], "slots given back");
        let _first = drift.trigger_stream();
        let mut again = drift.trigger_stream();
        assert!(again.next().await.is_none(), "second stream is empty");
    }
}
