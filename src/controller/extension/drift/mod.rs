//! Drift correction (docs/concepts/installer-permissions.md, `tests/drift.rs`): watches on the
//! objects an extension installed trigger a reconcile of the extension as soon as one of
//! them is deleted or changed in its spec (or, with the rollout status on, changes
//! readiness).
//!
//! Two kinds of watch (`watch`), chosen per kind once (`access` asks the API server
//! whether the controller may `list` and `watch` the kind cluster-wide):
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
//! One file per job: [`diff`] decides (pure) which watches an install needs and what to
//! start and stop; `runner` runs the tasks; `access` probes access; `clean` keeps
//! the clean installs; `counters` counts ([`Counters`]); [`tracker`] decides (pure) what counts as
//! drift — and when an OperatorCondition's hold changed, which triggers a reconcile
//! but is no drift: the install stays clean, since nothing installed changed and the
//! reconcile only decides the upgrade again (docs/how-to/upgrade-control.md, "The
//! operator's own say"). [`DriftWatches`] puts them together. The triggers reach the Controller through
//! [`DriftWatches::trigger_stream`] (`Controller::reconcile_on`). An extension whose
//! watches have all listed since its last install and saw no drift is *clean*
//! ([`DriftWatches::unchanged`]): a reconcile that resolves to the same revision again (a
//! catalog update, a resync, the recheck of a rollout in progress) then skips the pull,
//! render and apply (a rollout's readiness is still read again).

mod access;
mod clean;
mod counters;
pub mod diff;
mod runner;
pub mod tracker;
mod watch;

pub use access::Access;
pub use clean::Clean;
pub use counters::Counters;
pub use diff::{KindKey, WatchKey, plan};

use super::plan::Installed;
use super::rollout::Readiness;
use crate::api::ClusterExtension;
use crate::apply::{self, InstallerClients};
use access::AccessProbe;
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use kube::runtime::reflector::ObjectRef as ControllerRef;
use runner::Runner;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// Capacity of the trigger channel; when full, further triggers are dropped (the
/// Controller already has reconciles queued then).
const TRIGGER_CAPACITY: usize = 1024;

/// The drift watches of all extensions.
pub struct DriftWatches {
    access: AccessProbe,
    runner: Runner,
    rx: Mutex<Option<mpsc::Receiver<ControllerRef<ClusterExtension>>>>,
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
            access: AccessProbe::default(),
            runner: Runner::new(tx),
            rx: Mutex::new(Some(rx)),
        }
    }

    /// Also reconcile when the readiness of an installed object that reports it changes
    /// ([`super::rollout::is_checked`]; those kinds are then watched as full objects).
    pub fn with_readiness(mut self, readiness: bool) -> Self {
        self.runner.readiness = readiness;
        self
    }

    /// Watch the kinds the controller (`client`) may list and watch cluster-wide with
    /// one shared watch each.
    pub fn with_controller(mut self, client: kube::Client) -> Self {
        self.access.controller = Some(client.clone());
        self.runner.controller = Some(client);
        self
    }

    /// Count into `counters` (shared with whoever reads them).
    pub fn with_counters(mut self, counters: Counters) -> Self {
        self.runner.counters = counters;
        self
    }

    /// What these watches did and hold.
    pub fn counters(&self) -> &Counters {
        &self.runner.counters
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

    /// Makes the drift watches of `extension` match `objects` (its installed revision):
    /// kinds the controller may watch join their shared watch (started when missing);
    /// the others get the extension's own watches as the installer account
    /// `namespace/account` (clients from `clients`, on shared watch connections), all
    /// restarted when the account changed. What it no longer installs is no longer
    /// followed. `clean`: the install just made, which a reconcile that would make it
    /// again may skip while nothing drifts ([`DriftWatches::unchanged`]), unless drift
    /// seen since [`DriftWatches::begin_install`] is not the install's own (`generations`:
    /// what its apply returned, see `clean`).
    pub async fn ensure(
        &self,
        extension: &str,
        account: (&str, &str),
        clients: &InstallerClients,
        objects: &[apply::ObjectRef],
        clean: Option<Clean>,
        generations: &[(apply::ObjectRef, i64)],
    ) {
        let plan = plan(objects);
        let kinds: BTreeSet<KindKey> = plan.keys().map(WatchKey::kind).collect();
        let wanted = diff::wanted(plan, &self.access.of(kinds).await);
        let account = (account.0.to_owned(), account.1.to_owned());
        self.runner
            .change(extension, account.clone(), clients, |existing| {
                diff::diff(existing, wanted, &account)
            });
        self.runner.clean.finish(extension, clean, |w| {
            clean::covered(w, objects, generations)
        });
    }

    /// An install of `extension` begins: it is no longer clean, and what drifts until
    /// its [`DriftWatches::ensure`] is kept, so that the install does not hide it.
    pub fn begin_install(&self, extension: &str) {
        self.runner.clean.begin(extension);
    }

    /// The last install of `extension`, when it was made of `fingerprint`, every watch
    /// of the extension has listed since, and none saw drift: what a reconcile that
    /// would install the same again reports instead.
    pub fn unchanged(&self, extension: &str, fingerprint: &str) -> Option<Installed> {
        let installed = self.runner.clean.matching(extension, fingerprint)?;
        if !self.runner.synced(extension) {
            return None;
        }
        self.runner.counters.count_skipped();
        Some(installed)
    }

    /// Records the readiness read again for `extension`'s clean install (a rollout in
    /// progress, checked without installing again).
    pub fn note_readiness(&self, extension: &str, readiness: Readiness) {
        self.runner.clean.note_readiness(extension, readiness);
    }

    /// Whether watches that have listed follow the readiness of what `extension`
    /// installed (every readiness change of it then triggers a reconcile).
    pub fn follows(&self, extension: &str) -> bool {
        self.runner.readiness && self.runner.synced(extension)
    }

    /// Whether `extension` has watches and all of them have listed since they last
    /// failed: every later change of what it installed (an OperatorCondition's hold
    /// among it) triggers a reconcile.
    pub fn listed(&self, extension: &str) -> bool {
        self.runner.synced(extension)
    }

    /// Forgets that `extension` is clean: its next reconcile installs again.
    pub fn forget_clean(&self, extension: &str) {
        self.runner.clean.forget(extension);
    }

    /// Stops following `extension` (uninstalled or deleted).
    pub fn stop(&self, extension: &str) {
        self.forget_clean(extension);
        self.runner.remove(extension);
    }

    /// What `extension` follows through its own watches.
    pub fn watches_of(&self, extension: &str) -> Vec<WatchKey> {
        self.runner.own_of(extension)
    }

    /// The kinds `extension` follows through shared watches.
    pub fn shared_kinds_of(&self, extension: &str) -> Vec<KindKey> {
        self.runner.shared_of(extension)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

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
            .ensure("e", ("ns", "sa"), &client, &objects, None, &[])
            .await;
        assert_eq!(drift.watches_of("e").len(), 2);
        assert!(
            drift.shared_kinds_of("e").is_empty(),
            "no controller client"
        );
        assert_eq!(client.watch_connections(), vec![2], "one connection");
        assert_eq!(drift.counters().own_watches(), 2, "counted per instance");
        assert_eq!(drift.counters().followed(), 2);
        drift
            .ensure("e", ("ns", "sa"), &client, &objects, None, &[])
            .await;
        assert_eq!(drift.watches_of("e").len(), 2, "idempotent");
        drift
            .ensure(
                "e",
                ("ns", "sa"),
                &client,
                &[r("ConfigMap", "a")],
                None,
                &[],
            )
            .await;
        let keys = drift.watches_of("e");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kind, "ConfigMap");
        drift
            .ensure(
                "f",
                ("ns", "sa"),
                &client,
                &[r("ConfigMap", "a")],
                None,
                &[],
            )
            .await;
        assert_eq!(client.watch_connections(), vec![2]);
        drift.stop("e");
        assert!(drift.watches_of("e").is_empty());
        assert_eq!(drift.watches_of("f").len(), 1);
        assert_eq!(client.watch_connections(), vec![1], "slots given back");
        assert_eq!(drift.counters().watches(), 1);
        assert_eq!(drift.counters().shared_watches(), 0);
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
        let install =
            |clean: Option<Clean>| drift.ensure("e", ("ns", "sa"), &client, &objects, clean, &[]);
        install(Some(clean("one"))).await;
        assert_eq!(drift.unchanged("e", "one"), None, "watches have not listed");
        let set_synced = |value: bool| {
            for w in drift.runner.state().extensions["e"].own.values() {
                w.synced.store(value, Ordering::Relaxed);
            }
        };
        set_synced(true);
        assert_eq!(
            drift.unchanged("e", "one").map(|i| i.image),
            Some("img@sha256:1".to_string())
        );
        assert_eq!(drift.counters().skipped_installs(), 1);
        assert_eq!(drift.unchanged("e", "two"), None, "another install");
        assert_eq!(drift.unchanged("f", "one"), None, "another extension");
        set_synced(false);
        assert_eq!(drift.unchanged("e", "one"), None, "a watch failed since");
        set_synced(true);
        // Drift (what a watch task does) forgets it.
        drift.forget_clean("e");
        assert_eq!(drift.unchanged("e", "one"), None);
        install(Some(clean("one"))).await;
        assert!(drift.unchanged("e", "one").is_some());
        // So does the start of the next install, until it ends clean.
        drift.begin_install("e");
        assert_eq!(drift.unchanged("e", "one"), None, "installing");
        install(Some(clean("one"))).await;
        assert!(drift.unchanged("e", "one").is_some(), "no drift meanwhile");
        // An install without a clean result (not ready) forgets it too.
        install(None).await;
        assert_eq!(drift.unchanged("e", "one"), None);
        drift.stop("e");
        assert_eq!(drift.unchanged("e", "one"), None);
    }
}
