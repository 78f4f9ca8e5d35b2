//! Drift correction (issue 7 item 4, issue 16 item 3): watches on the objects an
//! extension installed trigger a reconcile of the extension as soon as one of them is
//! deleted or changed in its spec (or, with the rollout status on, changes readiness).
//!
//! Two kinds of watch ([`watch`]), chosen per kind once ([`DriftWatches::ensure`] asks
//! the API server whether the controller may `list` and `watch` the kind cluster-wide):
//! - **shared**: one watch per kind for every extension, as the controller, selected by
//!   `olm.operatorframework.io/owner-kind=ClusterExtension` — a few watches whatever the
//!   number of extensions (1,000 extensions cost the API server no more watches than
//!   one). `config/rbac` grants the controller `list, watch` on the kinds bundles
//!   usually hold (Deployments, ServiceAccounts, RBAC, CRDs, Services, webhook
//!   configurations, …) — never on Secrets or ConfigMaps;
//! - **the extension's own**: for every other kind, one watch per (extension, kind,
//!   namespace), as the extension's installer ServiceAccount (which the generated RBAC
//!   lets `list, watch` what it installed), on shared HTTP/2 connections.
//!
//! What counts as drift is decided by the pure [`tracker::Tracker`]. The triggers reach
//! the Controller through [`DriftWatches::trigger_stream`] (`Controller::reconcile_on`).
//! An extension whose watches have all listed since its last install and saw no drift
//! is *clean* ([`DriftWatches::unchanged`]): a reconcile that resolves to the same
//! revision again (a catalog update, a resync, the recheck of a rollout in progress)
//! then skips the pull, render and apply (a rollout's readiness is still read again).

pub mod tracker;
mod watch;

use super::plan::Installed;
use super::rollout;
use crate::api::ClusterExtension;
use crate::apply::{self, InstallerClients, WatchSlot, ownership};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, ApiResource, PostParams};
use kube::runtime::reflector::ObjectRef as ControllerRef;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;
use watch::{Managed, Reporting};

/// Reconciles triggered by drift since the process started (all [`DriftWatches`]).
static TRIGGERS: AtomicU64 = AtomicU64::new(0);
/// Extensions' own drift watch tasks running in this process.
static OWN_WATCHES: AtomicUsize = AtomicUsize::new(0);
/// Shared drift watch tasks running in this process.
static SHARED_WATCHES: AtomicUsize = AtomicUsize::new(0);
/// (extension, kind, namespace) followed, by either kind of watch.
static FOLLOWED: AtomicUsize = AtomicUsize::new(0);

/// Installs skipped as unchanged ([`DriftWatches::unchanged`]) since the process started.
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Number of installs skipped as unchanged in this process (for tests and metrics).
pub fn skipped_install_count() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

/// Number of reconciles triggered by drift in this process (for tests and metrics).
pub fn trigger_count() -> u64 {
    TRIGGERS.load(Ordering::Relaxed)
}

/// Number of drift watches running in this process (shared and extensions' own).
pub fn watch_count() -> usize {
    OWN_WATCHES.load(Ordering::Relaxed) + SHARED_WATCHES.load(Ordering::Relaxed)
}

/// Number of shared drift watches (one per kind, as the controller) running.
pub fn shared_watch_count() -> usize {
    SHARED_WATCHES.load(Ordering::Relaxed)
}

/// Number of extensions' own drift watches (as their installer accounts) running.
pub fn own_watch_count() -> usize {
    OWN_WATCHES.load(Ordering::Relaxed)
}

/// Number of (extension, kind, namespace) followed by a drift watch of either kind.
pub fn followed_count() -> usize {
    FOLLOWED.load(Ordering::Relaxed)
}

/// Capacity of the trigger channel; when full, further triggers are dropped (the
/// Controller already has reconciles queued then).
const TRIGGER_CAPACITY: usize = 1024;

/// What an extension follows: a kind in a namespace ("" for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchKey {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
}

impl WatchKey {
    fn kind(&self) -> KindKey {
        KindKey {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }

    /// An object reference of this kind and namespace (for discovery).
    fn probe(&self) -> apply::ObjectRef {
        apply::ObjectRef {
            namespace: self.namespace.clone(),
            ..self.kind().probe()
        }
    }
}

/// A kind, all namespaces (what a shared watch follows).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KindKey {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl KindKey {
    /// An object reference of this kind, no namespace (for discovery).
    fn probe(&self) -> apply::ObjectRef {
        apply::ObjectRef {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            namespace: String::new(),
            name: String::new(),
        }
    }
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

/// The key a shared watch tracks an object under.
fn shared_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The last install of an extension, kept while nothing drifted.
#[derive(Debug, Clone)]
pub struct Clean {
    /// What the install was made of ([`super::plan::fingerprint`]).
    pub fingerprint: String,
    /// Its result, as a reconcile that skips the install reports it.
    pub installed: Installed,
}

/// Extension → its clean last install.
type CleanMap = Arc<Mutex<HashMap<String, Clean>>>;

/// How a kind is watched.
#[derive(Debug, Clone)]
enum Access {
    /// By one shared watch, as the controller.
    Shared(ApiResource),
    /// By each extension, as its installer account.
    Own,
}

struct OwnWatch {
    managed: Managed,
    synced: Arc<AtomicBool>,
    task: JoinHandle<()>,
    /// The watch's stream on a shared connection (released after the task is aborted).
    _slot: WatchSlot,
}

impl Drop for OwnWatch {
    fn drop(&mut self) {
        self.task.abort();
        OWN_WATCHES.fetch_sub(1, Ordering::Relaxed);
    }
}

struct SharedWatch {
    managed: Managed,
    synced: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Drop for SharedWatch {
    fn drop(&mut self) {
        self.task.abort();
        SHARED_WATCHES.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What one extension follows, and the installer account its own watches run as.
struct ExtensionWatches {
    account: (String, String),
    own: HashMap<WatchKey, OwnWatch>,
    /// The kinds it follows through shared watches, with how many (kind, namespace) each.
    shared: BTreeMap<KindKey, usize>,
}

impl ExtensionWatches {
    fn followed(&self) -> usize {
        self.own.len() + self.shared.values().sum::<usize>()
    }
}

#[derive(Default)]
struct State {
    extensions: HashMap<String, ExtensionWatches>,
    shared: HashMap<KindKey, SharedWatch>,
    access: HashMap<KindKey, Access>,
}

impl State {
    /// Takes `extension` out of the shared watch of `kind`, which stops when nobody
    /// follows it any more.
    fn leave_shared(&mut self, extension: &str, kind: &KindKey) {
        let Some(watch) = self.shared.get(kind) else {
            return;
        };
        let mut managed = watch.managed.lock().unwrap_or_else(|p| p.into_inner());
        managed.remove(extension);
        let unused = managed.is_empty();
        drop(managed);
        if unused {
            self.shared.remove(kind);
        }
    }
}

/// The drift watches of all extensions.
pub struct DriftWatches {
    /// Whether watches on kinds that report readiness also trigger on readiness changes
    /// (full objects instead of metadata).
    readiness: bool,
    /// The controller's own client (shared watches); `None`: only extensions' own.
    controller: Option<kube::Client>,
    tx: mpsc::Sender<ControllerRef<ClusterExtension>>,
    rx: Mutex<Option<mpsc::Receiver<ControllerRef<ClusterExtension>>>>,
    clean: CleanMap,
    state: Mutex<State>,
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
            controller: None,
            tx,
            rx: Mutex::new(Some(rx)),
            clean: Arc::default(),
            state: Mutex::new(State::default()),
        }
    }

    /// Also reconcile when the readiness of an installed object that reports it changes
    /// ([`rollout::is_checked`]; those kinds are then watched as full objects).
    pub fn with_readiness(mut self, readiness: bool) -> Self {
        self.readiness = readiness;
        self
    }

    /// Watch the kinds the controller (`client`) may list and watch cluster-wide with
    /// one shared watch each.
    pub fn with_controller(mut self, client: kube::Client) -> Self {
        self.controller = Some(client);
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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How `kind` is to be watched: asked of the API server the first time (discovery,
    /// then whether the controller may list and watch it cluster-wide); `None` while it
    /// cannot be told (not served yet, API errors), which the next call asks again.
    async fn access(&self, kind: &KindKey) -> Option<Access> {
        if let Some(known) = self.state().access.get(kind) {
            return Some(known.clone());
        }
        let Some(client) = &self.controller else {
            return Some(Access::Own);
        };
        let (resource, _) = apply::Resolver::new(client.clone())
            .resolve(&kind.probe())
            .await
            .ok()??;
        let mut allowed = true;
        for verb in ["list", "watch"] {
            allowed &= may(client, &resource, verb).await?;
        }
        let access = if allowed {
            Access::Shared(resource)
        } else {
            tracing::info!(kind = %kind.kind, group = %kind.group, "the controller may not list and watch this kind cluster-wide: drift is watched as each installer account");
            Access::Own
        };
        self.state().access.insert(kind.clone(), access.clone());
        Some(access)
    }

    /// Makes the drift watches of `extension` match `objects` (its installed revision):
    /// kinds the controller may watch join their shared watch (started when missing);
    /// the others get the extension's own watches as the installer account
    /// `namespace/account` (clients from `clients`, on shared watch connections), all
    /// restarted when the account changed. What it no longer installs is no longer
    /// followed. `clean`: the install just made, which a reconcile that would make it
    /// again may skip while nothing drifts ([`DriftWatches::unchanged`]).
    pub async fn ensure(
        &self,
        extension: &str,
        account: (&str, &str),
        clients: &InstallerClients,
        objects: &[apply::ObjectRef],
        clean: Option<Clean>,
    ) {
        let plan = plan(objects);
        let kinds: BTreeSet<KindKey> = plan.keys().map(WatchKey::kind).collect();
        let mut access = HashMap::new();
        for kind in kinds {
            let how = self.access(&kind).await.unwrap_or(Access::Own);
            access.insert(kind, how);
        }
        // Split the plan: shared kinds (objects keyed `namespace/name`), own watches.
        let mut shared: BTreeMap<KindKey, (ApiResource, HashSet<String>, usize)> = BTreeMap::new();
        let mut own: BTreeMap<WatchKey, BTreeSet<String>> = BTreeMap::new();
        for (key, names) in plan {
            let kind = key.kind();
            match access.get(&kind) {
                Some(Access::Shared(resource)) => {
                    let entry = shared
                        .entry(kind)
                        .or_insert_with(|| (resource.clone(), HashSet::new(), 0));
                    entry
                        .1
                        .extend(names.iter().map(|n| shared_key(&key.namespace, n)));
                    entry.2 += 1;
                }
                _ => {
                    own.insert(key, names);
                }
            }
        }

        let account = (account.0.to_owned(), account.1.to_owned());
        let mut state = self.state();
        let state = &mut *state;
        let entry = state
            .extensions
            .entry(extension.to_owned())
            .or_insert_with(|| ExtensionWatches {
                account: account.clone(),
                own: HashMap::new(),
                shared: BTreeMap::new(),
            });
        FOLLOWED.fetch_sub(entry.followed(), Ordering::Relaxed);
        if entry.account != account {
            entry.own.clear();
            entry.account = account;
        }

        // Shared watches: leave the kinds no longer installed, join (or start) the others.
        let left: Vec<KindKey> = entry
            .shared
            .keys()
            .filter(|k| !shared.contains_key(*k))
            .cloned()
            .collect();
        entry.shared.clear();
        for (kind, (resource, keys, count)) in shared {
            entry.shared.insert(kind.clone(), count);
            let watch = state.shared.entry(kind.clone()).or_insert_with(|| {
                let report = Reporting {
                    managed: Arc::default(),
                    synced: Arc::default(),
                    clean: self.clean.clone(),
                    tx: self.tx.clone(),
                };
                SHARED_WATCHES.fetch_add(1, Ordering::Relaxed);
                let target = watch::Target {
                    selector: format!("{}={}", ownership::OWNER_KIND_LABEL, ownership::OWNER_KIND),
                    namespace: None,
                    extension: None,
                    readiness: self.readiness && rollout::is_checked(&kind.group, &kind.kind),
                    resource,
                };
                let client = self.controller.clone();
                let task = tokio::spawn({
                    let report = report.clone();
                    async move {
                        if let Some(client) = client {
                            watch::follow(client, target, report).await;
                        }
                    }
                });
                SharedWatch {
                    managed: report.managed,
                    synced: report.synced,
                    task,
                }
            });
            watch
                .managed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(extension.to_owned(), keys);
        }

        // The extension's own watches.
        entry.own.retain(|key, _| own.contains_key(key));
        for (key, names) in own {
            let names: HashSet<String> = names.into_iter().collect();
            if let Some(watch) = entry.own.get(&key) {
                *watch.managed.lock().unwrap_or_else(|p| p.into_inner()) =
                    HashMap::from([(extension.to_owned(), names)]);
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
            let report = Reporting {
                managed: Arc::new(Mutex::new(HashMap::from([(extension.to_owned(), names)]))),
                synced: Arc::default(),
                clean: self.clean.clone(),
                tx: self.tx.clone(),
            };
            OWN_WATCHES.fetch_add(1, Ordering::Relaxed);
            let readiness = self.readiness && rollout::is_checked(&key.group, &key.kind);
            let task = tokio::spawn(watch::own(
                extension.to_owned(),
                client,
                key.clone(),
                readiness,
                report.clone(),
            ));
            entry.own.insert(
                key,
                OwnWatch {
                    managed: report.managed,
                    synced: report.synced,
                    task,
                    _slot: slot,
                },
            );
        }
        FOLLOWED.fetch_add(entry.followed(), Ordering::Relaxed);
        for kind in left {
            state.leave_shared(extension, &kind);
        }

        let mut cleans = self.clean.lock().unwrap_or_else(|p| p.into_inner());
        match clean {
            Some(clean) => cleans.insert(extension.to_owned(), clean),
            None => cleans.remove(extension),
        };
    }

    /// The last install of `extension`, when it was made of `fingerprint`, every watch
    /// of the extension has listed since, and none saw drift: what a reconcile that
    /// would install the same again reports instead.
    pub fn unchanged(&self, extension: &str, fingerprint: &str) -> Option<Installed> {
        let installed = {
            let cleans = self.clean.lock().unwrap_or_else(|p| p.into_inner());
            let clean = cleans.get(extension)?;
            (clean.fingerprint == fingerprint).then(|| clean.installed.clone())?
        };
        let state = self.state();
        let entry = state.extensions.get(extension)?;
        let synced = |s: &AtomicBool| s.load(Ordering::Relaxed);
        let own = entry.own.values().all(|w| synced(&w.synced));
        let shared = entry
            .shared
            .keys()
            .all(|k| state.shared.get(k).is_some_and(|w| synced(&w.synced)));
        if !(own && shared) {
            return None;
        }
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        Some(installed)
    }

    /// Records the readiness read again for `extension`'s clean install (a rollout in
    /// progress, checked without installing again).
    pub fn note_readiness(&self, extension: &str, readiness: super::rollout::Readiness) {
        if let Some(clean) = self
            .clean
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(extension)
        {
            clean.installed.readiness = readiness;
        }
    }

    /// Forgets that `extension` is clean: its next reconcile installs again.
    pub fn forget_clean(&self, extension: &str) {
        self.clean
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(extension);
    }

    /// Stops following `extension` (uninstalled or deleted).
    pub fn stop(&self, extension: &str) {
        self.forget_clean(extension);
        let mut state = self.state();
        let Some(entry) = state.extensions.remove(extension) else {
            return;
        };
        FOLLOWED.fetch_sub(entry.followed(), Ordering::Relaxed);
        for kind in entry.shared.keys() {
            state.leave_shared(extension, kind);
        }
    }

    /// What `extension` follows through its own watches.
    pub fn watches_of(&self, extension: &str) -> Vec<WatchKey> {
        let state = self.state();
        let mut keys: Vec<WatchKey> = state
            .extensions
            .get(extension)
            .map(|e| e.own.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }

    /// The kinds `extension` follows through shared watches.
    pub fn shared_kinds_of(&self, extension: &str) -> Vec<KindKey> {
        let state = self.state();
        state
            .extensions
            .get(extension)
            .map(|e| e.shared.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Whether the controller (`client`) may `verb` `resource` in every namespace
/// (`None`: the review failed).
async fn may(client: &kube::Client, resource: &ApiResource, verb: &str) -> Option<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(resource.group.clone()),
                resource: Some(resource.plural.clone()),
                verb: Some(verb.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
    {
        Ok(r) => Some(r.status.is_some_and(|s| s.allowed)),
        Err(e) => {
            tracing::debug!(kind = %resource.kind, error = %e, "asking whether the controller may watch a kind");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn r(k: &str, n: &str) -> apply::ObjectRef {
        apply::ObjectRef {
            group: "".into(),
            version: "v1".into(),
            kind: k.into(),
            namespace: "ns".into(),
            name: n.into(),
        }
    }

    fn unreachable_clients() -> InstallerClients {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        // An address nothing listens on: the watch tasks just back off.
        let url: http::Uri = "https://127.0.0.1:9".parse().unwrap();
        InstallerClients::new(kube::Config::new(url))
    }

    #[tokio::test]
    async fn ensure_keeps_one_watch_per_kind_and_stops_unmanaged_ones() {
        let client = unreachable_clients();
        assert!(client.shares_connections());
        let drift = DriftWatches::new();
        let objects = [r("ConfigMap", "a"), r("ConfigMap", "b"), r("Service", "s")];
        drift
            .ensure("e", ("ns", "sa"), &client, &objects, None)
            .await;
        assert_eq!(drift.watches_of("e").len(), 2);
        assert!(
            drift.shared_kinds_of("e").is_empty(),
            "no controller client"
        );
        assert_eq!(client.watch_connections(), vec![2], "one connection");
        drift
            .ensure("e", ("ns", "sa"), &client, &objects, None)
            .await;
        assert_eq!(drift.watches_of("e").len(), 2, "idempotent");
        drift
            .ensure("e", ("ns", "sa"), &client, &[r("ConfigMap", "a")], None)
            .await;
        let keys = drift.watches_of("e");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kind, "ConfigMap");
        drift
            .ensure("f", ("ns", "sa"), &client, &[r("ConfigMap", "a")], None)
            .await;
        assert_eq!(client.watch_connections(), vec![2]);
        drift.stop("e");
        assert!(drift.watches_of("e").is_empty());
        assert_eq!(drift.watches_of("f").len(), 1);
        assert_eq!(client.watch_connections(), vec![1], "slots given back");
        let _first = drift.trigger_stream();
        let mut again = drift.trigger_stream();
        assert!(again.next().await.is_none(), "second stream is empty");
    }

    #[tokio::test]
    async fn an_install_is_unchanged_only_while_every_watch_listed_and_nothing_drifted() {
        let client = unreachable_clients();
        let drift = DriftWatches::new();
        let clean = |fingerprint: &str| Clean {
            fingerprint: fingerprint.into(),
            installed: Installed {
                image: "img@sha256:1".into(),
                ..Default::default()
            },
        };
        let objects = [r("ConfigMap", "a"), r("Service", "s")];
        drift
            .ensure("e", ("ns", "sa"), &client, &objects, Some(clean("one")))
            .await;
        assert_eq!(drift.unchanged("e", "one"), None, "watches have not listed");
        let set_synced = |value: bool| {
            for w in drift.state().extensions["e"].own.values() {
                w.synced.store(value, Ordering::Relaxed);
            }
        };
        set_synced(true);
        assert_eq!(
            drift.unchanged("e", "one").map(|i| i.image),
            Some("img@sha256:1".to_string())
        );
        assert_eq!(drift.unchanged("e", "two"), None, "another install");
        assert_eq!(drift.unchanged("f", "one"), None, "another extension");
        set_synced(false);
        assert_eq!(drift.unchanged("e", "one"), None, "a watch failed since");
        set_synced(true);
        // Drift (what a watch task does) forgets it.
        drift.forget_clean("e");
        assert_eq!(drift.unchanged("e", "one"), None);
        // An install without a clean result (not ready) forgets it too.
        drift
            .ensure("e", ("ns", "sa"), &client, &objects, Some(clean("one")))
            .await;
        assert!(drift.unchanged("e", "one").is_some());
        drift
            .ensure("e", ("ns", "sa"), &client, &objects, None)
            .await;
        assert_eq!(drift.unchanged("e", "one"), None);
        drift.stop("e");
        assert_eq!(drift.unchanged("e", "one"), None);
    }
}
