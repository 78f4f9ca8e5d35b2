//! The pure part of the drift watches: which watches an extension's installed objects
//! need ([`plan`], [`wanted`]) and what to start and stop so that the watches running
//! match them ([`diff`]). No I/O; the runner (`runner.rs`) applies the
//! [`Changes`].

use super::access::Access;
use crate::apply;
use kube::api::ApiResource;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What an extension follows: a kind in a namespace ("" for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchKey {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
}

impl WatchKey {
    pub(super) fn kind(&self) -> KindKey {
        KindKey {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }

    /// An object reference of this kind and namespace (for discovery).
    pub(super) fn probe(&self) -> apply::ObjectRef {
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
    pub(super) fn probe(&self) -> apply::ObjectRef {
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
pub(super) fn shared_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What one extension follows through the shared watch of a kind.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedFollow {
    pub resource: ApiResource,
    /// The tracking keys (`namespace/name`) of its objects of the kind.
    pub keys: HashSet<String>,
    /// How many (kind, namespace) they span.
    pub namespaces: usize,
}

/// The watches one extension's installed objects need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wanted {
    /// Kinds followed through their shared watch.
    pub shared: BTreeMap<KindKey, SharedFollow>,
    /// The extension's own watches, with the names of the objects each covers.
    pub own: BTreeMap<WatchKey, HashSet<String>>,
}

/// The watches `plan` needs, given how each kind is watched (`access`; kinds missing
/// from it get the extension's own watches).
pub fn wanted(
    plan: BTreeMap<WatchKey, BTreeSet<String>>,
    access: &HashMap<KindKey, Access>,
) -> Wanted {
    let mut wanted = Wanted::default();
    for (key, names) in plan {
        let kind = key.kind();
        match access.get(&kind) {
            Some(Access::Shared(resource)) => {
                let follow = wanted.shared.entry(kind).or_insert_with(|| SharedFollow {
                    resource: resource.clone(),
                    keys: HashSet::new(),
                    namespaces: 0,
                });
                follow
                    .keys
                    .extend(names.iter().map(|n| shared_key(&key.namespace, n)));
                follow.namespaces += 1;
            }
            _ => {
                wanted.own.insert(key, names.into_iter().collect());
            }
        }
    }
    wanted
}

/// The watches that exist for one extension, and the shared watches running.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Existing {
    /// The installer account its own watches run as (`None`: it has no watches).
    pub account: Option<(String, String)>,
    pub own: BTreeSet<WatchKey>,
    /// The kinds it follows through shared watches.
    pub shared: BTreeSet<KindKey>,
    /// Every shared watch running → how many *other* extensions follow it.
    pub running: BTreeMap<KindKey, usize>,
}

/// What to start, change and stop so that one extension's watches become the
/// [`Wanted`] ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// Own watches to stop: no longer needed, or all of them when the account changed.
    pub stop_own: Vec<WatchKey>,
    /// Own watches kept, with the names they cover now.
    pub update_own: Vec<(WatchKey, HashSet<String>)>,
    /// Own watches to start (as the new account).
    pub start_own: Vec<(WatchKey, HashSet<String>)>,
    /// Shared watches to start (no extension followed their kind).
    pub start_shared: Vec<(KindKey, ApiResource)>,
    /// Shared watches the extension follows, with its keys and namespace count.
    pub follow_shared: Vec<(KindKey, HashSet<String>, usize)>,
    /// Shared watches the extension no longer follows.
    pub leave_shared: Vec<KindKey>,
    /// Of those, the ones nobody follows any more: to stop.
    pub stop_shared: Vec<KindKey>,
}

/// The changes that make `existing` into `wanted`, the own watches running as
/// `account` (all restarted when it changed).
pub fn diff(existing: &Existing, wanted: Wanted, account: &(String, String)) -> Changes {
    let mut changes = Changes::default();
    let same_account = existing.account.as_ref().is_none_or(|a| a == account);
    for key in &existing.own {
        if !same_account || !wanted.own.contains_key(key) {
            changes.stop_own.push(key.clone());
        }
    }
    for (key, names) in wanted.own {
        if same_account && existing.own.contains(&key) {
            changes.update_own.push((key, names));
        } else {
            changes.start_own.push((key, names));
        }
    }
    for kind in &existing.shared {
        if !wanted.shared.contains_key(kind) {
            changes.leave_shared.push(kind.clone());
            if existing.running.get(kind).copied().unwrap_or_default() == 0 {
                changes.stop_shared.push(kind.clone());
            }
        }
    }
    for (kind, follow) in wanted.shared {
        if !existing.running.contains_key(&kind) {
            changes.start_shared.push((kind.clone(), follow.resource));
        }
        changes
            .follow_shared
            .push((kind, follow.keys, follow.namespaces));
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(g: &str, k: &str, ns: &str, n: &str) -> apply::ObjectRef {
        apply::ObjectRef {
            group: g.into(),
            version: "v1".into(),
            kind: k.into(),
            namespace: ns.into(),
            name: n.into(),
        }
    }

    fn kind(g: &str, k: &str) -> KindKey {
        KindKey {
            group: g.into(),
            version: "v1".into(),
            kind: k.into(),
        }
    }

    fn key(k: &str, ns: &str) -> WatchKey {
        WatchKey {
            group: "".into(),
            version: "v1".into(),
            kind: k.into(),
            namespace: ns.into(),
        }
    }

    fn resource(k: &str) -> ApiResource {
        ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: k.into(),
            plural: format!("{}s", k.to_lowercase()),
        }
    }

    fn names(n: &[&str]) -> HashSet<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    fn account(name: &str) -> (String, String) {
        ("ns".into(), name.into())
    }

    #[test]
    fn plan_groups_objects_by_kind_and_namespace() {
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

    #[test]
    fn shared_kinds_are_keyed_by_namespace_and_the_others_are_own_watches() {
        let objects = [
            r("apps", "Deployment", "x", "d"),
            r("apps", "Deployment", "y", "d"),
            r("", "ConfigMap", "x", "c"),
            r("", "Secret", "x", "s"),
        ];
        let access = HashMap::from([
            (
                kind("apps", "Deployment"),
                Access::Shared(resource("Deployment")),
            ),
            (kind("", "ConfigMap"), Access::Own),
        ]);
        let w = wanted(plan(&objects), &access);
        let deployments = &w.shared[&kind("apps", "Deployment")];
        assert_eq!(deployments.keys, names(&["x/d", "y/d"]));
        assert_eq!(deployments.namespaces, 2);
        assert_eq!(
            w.own.keys().cloned().collect::<Vec<_>>(),
            vec![key("ConfigMap", "x"), key("Secret", "x")],
            "unknown access: own watch"
        );
    }

    #[test]
    fn a_first_install_starts_everything_it_needs() {
        let w = Wanted {
            shared: BTreeMap::from([(
                kind("apps", "Deployment"),
                SharedFollow {
                    resource: resource("Deployment"),
                    keys: names(&["x/d"]),
                    namespaces: 1,
                },
            )]),
            own: BTreeMap::from([(key("ConfigMap", "x"), names(&["c"]))]),
        };
        let c = diff(&Existing::default(), w, &account("sa"));
        assert_eq!(c.start_own, vec![(key("ConfigMap", "x"), names(&["c"]))]);
        assert_eq!(
            c.start_shared,
            vec![(kind("apps", "Deployment"), resource("Deployment"))]
        );
        assert_eq!(
            c.follow_shared,
            vec![(kind("apps", "Deployment"), names(&["x/d"]), 1)]
        );
        assert!(c.stop_own.is_empty() && c.update_own.is_empty());
        assert!(c.leave_shared.is_empty() && c.stop_shared.is_empty());
    }

    #[test]
    fn running_watches_are_kept_and_unneeded_ones_stopped() {
        let existing = Existing {
            account: Some(account("sa")),
            own: BTreeSet::from([key("ConfigMap", "x"), key("Service", "x")]),
            shared: BTreeSet::from([kind("apps", "Deployment"), kind("rbac", "Role")]),
            running: BTreeMap::from([
                (kind("apps", "Deployment"), 3),
                (kind("rbac", "Role"), 0),
                (kind("apps", "DaemonSet"), 1),
            ]),
        };
        let w = Wanted {
            shared: BTreeMap::from([(
                kind("apps", "DaemonSet"),
                SharedFollow {
                    resource: resource("DaemonSet"),
                    keys: names(&["x/ds"]),
                    namespaces: 1,
                },
            )]),
            own: BTreeMap::from([(key("ConfigMap", "x"), names(&["a", "b"]))]),
        };
        let c = diff(&existing, w, &account("sa"));
        assert_eq!(c.stop_own, vec![key("Service", "x")]);
        assert_eq!(
            c.update_own,
            vec![(key("ConfigMap", "x"), names(&["a", "b"]))]
        );
        assert!(c.start_own.is_empty());
        assert!(
            c.start_shared.is_empty(),
            "the DaemonSet watch runs already"
        );
        assert_eq!(
            c.follow_shared,
            vec![(kind("apps", "DaemonSet"), names(&["x/ds"]), 1)]
        );
        assert_eq!(
            c.leave_shared,
            vec![kind("apps", "Deployment"), kind("rbac", "Role")]
        );
        assert_eq!(
            c.stop_shared,
            vec![kind("rbac", "Role")],
            "others still follow Deployments"
        );
    }

    #[test]
    fn another_account_restarts_every_own_watch() {
        let existing = Existing {
            account: Some(account("old")),
            own: BTreeSet::from([key("ConfigMap", "x")]),
            ..Default::default()
        };
        let w = Wanted {
            own: BTreeMap::from([(key("ConfigMap", "x"), names(&["c"]))]),
            ..Default::default()
        };
        let c = diff(&existing, w, &account("new"));
        assert_eq!(c.stop_own, vec![key("ConfigMap", "x")]);
        assert_eq!(c.start_own, vec![(key("ConfigMap", "x"), names(&["c"]))]);
        assert!(c.update_own.is_empty());
    }

    #[test]
    fn nothing_wanted_stops_and_leaves_everything() {
        let existing = Existing {
            account: Some(account("sa")),
            own: BTreeSet::from([key("ConfigMap", "x")]),
            shared: BTreeSet::from([kind("apps", "Deployment")]),
            running: BTreeMap::from([(kind("apps", "Deployment"), 0)]),
        };
        let c = diff(&existing, Wanted::default(), &account("sa"));
        assert_eq!(c.stop_own, vec![key("ConfigMap", "x")]);
        assert_eq!(c.leave_shared, vec![kind("apps", "Deployment")]);
        assert_eq!(c.stop_shared, vec![kind("apps", "Deployment")]);
        assert!(c.start_own.is_empty() && c.start_shared.is_empty());
        assert!(c.follow_shared.is_empty());
    }
}
