//! The life of the drift watch tasks ([`Runner`]): what runs for each extension and
//! which shared watches run, the [`Changes`] of [`super::diff`] applied to them (tasks
//! spawned, aborted when dropped), and whether an extension's watches have all listed.
//! The counts of what runs go to the [`Counters`] after every change.

use super::clean::CleanInstalls;
use super::counters::{Counters, Running};
use super::diff::{Changes, Existing, KindKey, Wanted, WatchKey, diff};
use super::watch::{self, Managed, Reporting};
use crate::api::ClusterExtension;
use crate::apply::{InstallerClients, WatchSlot, ownership};
use crate::controller::extension::rollout;
use futures::channel::mpsc;
use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef as ControllerRef;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::task::JoinHandle;

/// One watch task; aborted when dropped.
pub(super) struct Task {
    managed: Managed,
    pub(super) synced: Arc<AtomicBool>,
    task: JoinHandle<()>,
    /// An own watch's stream on a shared connection (released after the task is aborted).
    _slot: Option<WatchSlot>,
}

impl Drop for Task {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Task {
    fn managed(&self) -> MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.managed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }
}

/// What one extension follows, and the installer account its own watches run as.
pub(super) struct ExtensionWatches {
    account: (String, String),
    pub(super) own: HashMap<WatchKey, Task>,
    /// The kinds it follows through shared watches, with how many (kind, namespace) each.
    shared: BTreeMap<KindKey, usize>,
}

impl ExtensionWatches {
    fn followed(&self) -> usize {
        self.own.len() + self.shared.values().sum::<usize>()
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) extensions: HashMap<String, ExtensionWatches>,
    shared: HashMap<KindKey, Task>,
}

impl State {
    /// What runs for `extension`, and the shared watches with their other followers.
    fn existing(&self, extension: &str) -> Existing {
        let entry = self.extensions.get(extension);
        let running = self
            .shared
            .iter()
            .map(|(kind, task)| {
                let managed = task.managed();
                let others = managed.len() - usize::from(managed.contains_key(extension));
                (kind.clone(), others)
            })
            .collect();
        Existing {
            account: entry.map(|e| e.account.clone()),
            own: entry
                .map(|e| e.own.keys().cloned().collect())
                .unwrap_or_default(),
            shared: entry
                .map(|e| e.shared.keys().cloned().collect())
                .unwrap_or_default(),
            running,
        }
    }

    fn running(&self) -> Running {
        Running {
            own: self.extensions.values().map(|e| e.own.len()).sum(),
            shared: self.shared.len(),
            followed: self
                .extensions
                .values()
                .map(ExtensionWatches::followed)
                .sum(),
        }
    }
}

/// Where the tasks report, and how they are started.
pub(super) struct Runner {
    /// Whether watches on kinds that report readiness also trigger on readiness changes
    /// (full objects instead of metadata).
    pub readiness: bool,
    /// The controller's own client (shared watches).
    pub controller: Option<kube::Client>,
    pub counters: Counters,
    pub clean: CleanInstalls,
    pub tx: mpsc::Sender<ControllerRef<ClusterExtension>>,
    state: Mutex<State>,
}

impl Runner {
    /// A runner whose watches trigger reconciles through `tx`.
    pub fn new(tx: mpsc::Sender<ControllerRef<ClusterExtension>>) -> Self {
        Runner {
            readiness: false,
            controller: None,
            counters: Counters::default(),
            clean: CleanInstalls::default(),
            tx,
            state: Mutex::default(),
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reporting(&self, managed: Managed) -> Reporting {
        Reporting {
            managed,
            synced: Arc::default(),
            clean: self.clean.clone(),
            counters: self.counters.clone(),
            tx: self.tx.clone(),
        }
    }

    /// Makes `extension`'s watches those `decide` returns for what runs now, its own
    /// running as `account` (clients from `clients`). The decision and its application
    /// happen under one lock, so that concurrent calls see each other's shared watches.
    pub fn change(
        &self,
        extension: &str,
        account: (String, String),
        clients: &InstallerClients,
        decide: impl FnOnce(&Existing) -> Changes,
    ) {
        let mut state = self.state();
        let changes = decide(&state.existing(extension));
        self.apply(&mut state, extension, account, Some(clients), changes);
        self.counters.set_watches(state.running());
    }

    /// Stops every watch of `extension` (the [`Changes`] to nothing wanted) and forgets it.
    pub fn remove(&self, extension: &str) {
        let mut state = self.state();
        let existing = state.existing(extension);
        if let Some(account) = existing.account.clone() {
            let changes = diff(&existing, Wanted::default(), &account);
            self.apply(&mut state, extension, account, None, changes);
            state.extensions.remove(extension);
        }
        self.counters.set_watches(state.running());
    }

    /// Applies `changes` to `extension`'s watches (own ones started with `clients`).
    fn apply(
        &self,
        state: &mut State,
        extension: &str,
        account: (String, String),
        clients: Option<&InstallerClients>,
        changes: Changes,
    ) {
        for (kind, resource) in changes.start_shared {
            if let Some(task) = self.start_shared(&kind, resource) {
                state.shared.insert(kind, task);
            }
        }
        let entry = state
            .extensions
            .entry(extension.to_owned())
            .or_insert_with(|| ExtensionWatches {
                account: account.clone(),
                own: HashMap::new(),
                shared: BTreeMap::new(),
            });
        entry.account = account;
        for key in changes.stop_own {
            entry.own.remove(&key);
        }
        for (key, names) in changes.update_own {
            if let Some(task) = entry.own.get(&key) {
                *task.managed() = HashMap::from([(extension.to_owned(), names)]);
            }
        }
        for (key, names) in changes.start_own {
            let started =
                clients.and_then(|c| self.start_own(extension, &entry.account, c, &key, names));
            if let Some(task) = started {
                entry.own.insert(key, task);
            }
        }
        for (kind, keys, namespaces) in changes.follow_shared {
            if let Some(task) = state.shared.get(&kind) {
                task.managed().insert(extension.to_owned(), keys);
                entry.shared.insert(kind, namespaces);
            }
        }
        for kind in changes.leave_shared {
            entry.shared.remove(&kind);
            if let Some(task) = state.shared.get(&kind) {
                task.managed().remove(extension);
            }
        }
        for kind in changes.stop_shared {
            state.shared.remove(&kind);
        }
    }

    /// Whether `extension` has watches and all of them listed since they last failed.
    pub fn synced(&self, extension: &str) -> bool {
        let state = self.state();
        let Some(entry) = state.extensions.get(extension) else {
            return false;
        };
        entry.own.values().all(Task::synced)
            && entry
                .shared
                .keys()
                .all(|k| state.shared.get(k).is_some_and(Task::synced))
    }

    /// What `extension` follows through its own watches, sorted.
    pub fn own_of(&self, extension: &str) -> Vec<WatchKey> {
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
    pub fn shared_of(&self, extension: &str) -> Vec<KindKey> {
        let state = self.state();
        state
            .extensions
            .get(extension)
            .map(|e| e.shared.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The shared watch of `kind`, as the controller, for every extension.
    fn start_shared(&self, kind: &KindKey, resource: ApiResource) -> Option<Task> {
        let client = self.controller.clone()?;
        let report = self.reporting(Arc::default());
        let target = watch::Target {
            selector: format!("{}={}", ownership::OWNER_KIND_LABEL, ownership::OWNER_KIND),
            namespace: None,
            extension: None,
            readiness: self.readiness && rollout::is_checked(&kind.group, &kind.kind),
            hold: watch::is_hold_kind(&kind.group, &kind.kind),
            resource,
        };
        Some(Task {
            managed: report.managed.clone(),
            synced: report.synced.clone(),
            task: tokio::spawn(watch::follow(client, target, report)),
            _slot: None,
        })
    }

    /// `extension`'s own watch of `key` (its objects `names`) as `account`; `None` when
    /// no client can be had (not recorded: the next successful reconcile tries again).
    fn start_own(
        &self,
        extension: &str,
        account: &(String, String),
        clients: &InstallerClients,
        key: &WatchKey,
        names: HashSet<String>,
    ) -> Option<Task> {
        let (client, slot) = match clients.watch_client(&account.0, &account.1) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(extension = %extension, kind = %key.kind, error = %e, "cannot start drift watch");
                return None;
            }
        };
        let managed = Arc::new(Mutex::new(HashMap::from([(extension.to_owned(), names)])));
        let report = self.reporting(managed);
        let readiness = self.readiness && rollout::is_checked(&key.group, &key.kind);
        Some(Task {
            managed: report.managed.clone(),
            synced: report.synced.clone(),
            task: tokio::spawn(watch::own(
                extension.to_owned(),
                client,
                key.clone(),
                readiness,
                report,
            )),
            _slot: Some(slot),
        })
    }
}
