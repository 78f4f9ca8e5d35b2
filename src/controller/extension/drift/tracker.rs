//! What counts as drift, decided from what one watch reports ([`Tracker`], pure): a
//! deletion, a changed `metadata.generation` (status-only updates and no-op applies do
//! not change it), a changed readiness verdict (a Deployment becoming available or
//! losing it — not every status update), and, across a re-list, a managed object gone or
//! changed while the watch was down. Each object is tracked under a key (its name in an
//! extension's own watch, `namespace/name` in a shared watch) with the extension that
//! owns it, so that one shared watch can report drift to many extensions.
//!
//! A changed readiness verdict alone (the object's spec and owner unchanged: a rollout
//! progressing, or kube-controller-manager catching up with a Deployment's status) is
//! [`Cause::Readiness`]: the extension's readiness is read again without installing
//! again, unless what it installed was ready (then it lost readiness, and that is
//! treated as drift; docs/concepts/rollout-status.md, "Readiness from events").
//!
//! An OperatorCondition's hold verdict ([`crate::bundle::operator_condition::upgradeable`],
//! kept in [`Object::hold`]) changing — the operator setting or lifting
//! `Upgradeable=False` in its status, which changes no generation — also triggers a
//! reconcile, as [`Cause::Hold`]: the extension's upgrade is decided again
//! (docs/how-to/upgrade-control.md, "The operator's own say"), but nothing of what it
//! installed changed, so it stays clean and nothing is applied again. A change that is
//! also drift is reported as [`Cause::Drift`].

use std::collections::{HashMap, HashSet};

/// What a watch reported of one object, reduced to what drift detection needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The tracking key: the name, or `namespace/name` when a watch spans namespaces.
    pub key: String,
    /// The ClusterExtension that owns it (its `olm.operatorframework.io/owner-name`).
    pub owner: String,
    pub generation: Option<i64>,
    /// The readiness verdict ([`super::super::rollout::state_of`]: `None` when ready, or
    /// when the kind reports none).
    pub state: Option<String>,
    /// An OperatorCondition's hold verdict: `Some(why)` while it says
    /// `Upgradeable=False`; `None` otherwise and for every other kind.
    pub hold: Option<String>,
}

/// A watch event, reduced ([`Object`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Apply(Object),
    Delete(Object),
    Init,
    InitApply(Object),
    InitDone,
}

/// Why an object triggers a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// Deleted or changed in its spec: the extension is no longer clean (its next
    /// reconcile installs again).
    Drift,
    /// Only the readiness verdict changed: the readiness is read again; the install
    /// stays clean while it was rolling out.
    Readiness,
    /// Only an OperatorCondition's hold verdict changed: the upgrade is decided again,
    /// the install stays clean.
    Hold,
}

/// An object that drifted (or whose hold changed), and the extension to reconcile for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Drift {
    pub owner: String,
    pub key: String,
    pub cause: Cause,
}

/// What the tracker remembers of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    owner: String,
    generation: Option<i64>,
    state: Option<String>,
    hold: Option<String>,
}

impl Known {
    /// What changed from `previous` to `self` (`None`: nothing that triggers).
    fn change_from(&self, previous: &Known) -> Option<Cause> {
        let drifted = self.owner != previous.owner || self.generation != previous.generation;
        if drifted {
            Some(Cause::Drift)
        } else if self.state != previous.state {
            Some(Cause::Readiness)
        } else if self.hold != previous.hold {
            Some(Cause::Hold)
        } else {
            None
        }
    }
}

impl From<Object> for (String, Known) {
    fn from(o: Object) -> Self {
        (
            o.key,
            Known {
                owner: o.owner,
                generation: o.generation,
                state: o.state,
                hold: o.hold,
            },
        )
    }
}

/// Remembers the generation (and readiness verdict) of each object one watch sees and
/// says which events are drift. Creations are not drift (they are our applies).
#[derive(Debug, Default)]
pub struct Tracker {
    known: HashMap<String, Known>,
    relist: Option<HashMap<String, Known>>,
    listed: bool,
}

impl Tracker {
    /// The objects that drifted (or changed readiness) with this event. After a
    /// complete list ([`Seen::InitDone`]), `managed` (extension → keys it installed)
    /// also reports every managed object the list did not contain: deleted before the
    /// watch saw it, or while the watch was down.
    pub fn observe(
        &mut self,
        seen: Seen,
        managed: &HashMap<String, HashSet<String>>,
    ) -> Vec<Drift> {
        match seen {
            Seen::Apply(object) => {
                let (key, now) = object.into();
                let previous = self.known.insert(key.clone(), now.clone());
                match previous.and_then(|p| now.change_from(&p)) {
                    Some(cause) => vec![Drift {
                        owner: now.owner,
                        key,
                        cause,
                    }],
                    None => Vec::new(),
                }
            }
            Seen::Delete(object) => {
                self.known.remove(&object.key);
                vec![Drift {
                    owner: object.owner,
                    key: object.key,
                    cause: Cause::Drift,
                }]
            }
            Seen::Init => {
                self.relist = Some(HashMap::new());
                Vec::new()
            }
            Seen::InitApply(object) => {
                let (key, known) = object.into();
                self.relist
                    .get_or_insert_with(HashMap::new)
                    .insert(key, known);
                Vec::new()
            }
            Seen::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                let mut drifted = Vec::new();
                if self.listed {
                    for (key, known) in &self.known {
                        let cause = match fresh.get(key) {
                            None => Some(Cause::Drift),
                            Some(now) => now.change_from(known),
                        };
                        if let Some(cause) = cause {
                            drifted.push(Drift {
                                owner: known.owner.clone(),
                                key: key.clone(),
                                cause,
                            });
                        }
                    }
                }
                for (owner, keys) in managed {
                    for key in keys {
                        let reported = drifted.iter().any(|d| &d.key == key);
                        if !fresh.contains_key(key) && !reported {
                            drifted.push(Drift {
                                owner: owner.clone(),
                                key: key.clone(),
                                cause: Cause::Drift,
                            });
                        }
                    }
                }
                drifted.sort();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str, generation: i64) -> Object {
        Object {
            key: key.into(),
            owner: "e".into(),
            generation: Some(generation),
            state: None,
            hold: None,
        }
    }
    fn apply(key: &str, generation: i64) -> Seen {
        Seen::Apply(object(key, generation))
    }
    /// Why each drift of one event triggers.
    fn causes(drifts: Vec<Drift>) -> Vec<Cause> {
        drifts.into_iter().map(|d| d.cause).collect()
    }

    fn delete(key: &str) -> Seen {
        Seen::Delete(object(key, 0))
    }
    fn keys(drifts: Vec<Drift>) -> Vec<String> {
        drifts.into_iter().map(|d| d.key).collect()
    }
    fn none() -> HashMap<String, HashSet<String>> {
        HashMap::new()
    }

    fn listed(objects: &[(&str, i64)]) -> Tracker {
        let mut t = Tracker::default();
        assert!(t.observe(Seen::Init, &none()).is_empty());
        for (n, g) in objects {
            assert!(
                t.observe(Seen::InitApply(object(n, *g)), &none())
                    .is_empty()
            );
        }
        assert!(
            t.observe(Seen::InitDone, &none()).is_empty(),
            "first list is no drift"
        );
        t
    }

    #[test]
    fn deletion_and_generation_change_are_drift() {
        let mut t = listed(&[("a", 1), ("b", 3)]);
        assert_eq!(t.len(), 2);
        assert_eq!(keys(t.observe(delete("a"), &none())), vec!["a"]);
        assert_eq!(keys(t.observe(apply("b", 4), &none())), vec!["b"]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn status_updates_creations_and_no_op_applies_are_not_drift() {
        let mut t = listed(&[("a", 1)]);
        assert!(
            t.observe(apply("a", 1), &none()).is_empty(),
            "same generation"
        );
        assert!(t.observe(apply("new", 1), &none()).is_empty(), "creation");
        assert!(t.observe(apply("new", 1), &none()).is_empty());
        // Kinds without generation (ConfigMaps): updates cannot be told apart.
        let mut t = Tracker::default();
        let cm = || {
            Seen::Apply(Object {
                generation: None,
                ..object("cm", 0)
            })
        };
        assert!(t.observe(cm(), &none()).is_empty());
        assert!(t.observe(cm(), &none()).is_empty());
        assert_eq!(keys(t.observe(delete("cm"), &none())), vec!["cm"]);
    }

    #[test]
    fn readiness_changes_trigger_but_repeated_verdicts_do_not() {
        let seen = |state: Option<&str>| {
            Seen::Apply(Object {
                state: state.map(str::to_owned),
                ..object("d", 1)
            })
        };
        let mut t = listed(&[]);
        let n = none();
        assert!(
            t.observe(seen(Some("0/1 available")), &n).is_empty(),
            "creation"
        );
        assert!(
            t.observe(seen(Some("0/1 available")), &n).is_empty(),
            "a status update with the same verdict"
        );
        assert_eq!(
            causes(t.observe(seen(None), &n)),
            vec![Cause::Readiness],
            "became ready"
        );
        assert!(t.observe(seen(None), &n).is_empty());
        assert_eq!(
            causes(t.observe(seen(Some("0/1 available")), &n)),
            vec![Cause::Readiness],
            "lost it"
        );
        let respecced = Seen::Apply(Object {
            state: Some("waiting for the controller to observe generation 2".into()),
            ..object("d", 2)
        });
        assert_eq!(
            causes(t.observe(respecced, &n)),
            vec![Cause::Drift],
            "a spec change is drift, readiness changed or not"
        );
    }

    #[test]
    fn a_changed_hold_triggers_a_re_evaluation_but_the_same_hold_does_not() {
        let seen = |generation: i64, hold: Option<&str>| {
            Seen::Apply(Object {
                hold: hold.map(str::to_owned),
                ..object("ns/p.v1", generation)
            })
        };
        let mut t = listed(&[]);
        let n = none();
        assert!(t.observe(seen(1, None), &n).is_empty(), "creation");
        let held = Some("Upgradeable=False: migrating");
        assert_eq!(
            causes(t.observe(seen(1, held), &n)),
            vec![Cause::Hold],
            "the operator holds (a status update: same generation)"
        );
        assert!(
            t.observe(seen(1, held), &n).is_empty(),
            "a status update that does not change the hold (another condition, a heartbeat)"
        );
        assert_eq!(
            causes(t.observe(seen(1, None), &n)),
            vec![Cause::Hold],
            "lifted"
        );
        assert!(t.observe(seen(1, None), &n).is_empty());
        assert_eq!(
            causes(t.observe(seen(2, held), &n)),
            vec![Cause::Drift],
            "a spec change (an override) is drift, hold or not"
        );
        // Changed while the watch was down: the relist reports it as a hold change.
        assert!(t.observe(Seen::Init, &n).is_empty());
        let relisted = Object {
            hold: None,
            ..object("ns/p.v1", 2)
        };
        assert!(t.observe(Seen::InitApply(relisted), &n).is_empty());
        assert_eq!(causes(t.observe(Seen::InitDone, &n)), vec![Cause::Hold]);
    }

    #[test]
    fn relist_reports_what_changed_while_the_watch_was_down() {
        let mut t = listed(&[("a", 1), ("b", 1), ("c", 2)]);
        let n = none();
        assert!(t.observe(Seen::Init, &n).is_empty());
        assert!(t.observe(Seen::InitApply(object("a", 1)), &n).is_empty());
        assert!(t.observe(Seen::InitApply(object("c", 5)), &n).is_empty());
        assert!(t.observe(Seen::InitApply(object("d", 1)), &n).is_empty());
        assert_eq!(keys(t.observe(Seen::InitDone, &n)), vec!["b", "c"]);
        assert_eq!(t.len(), 3);
        assert_eq!(keys(t.observe(apply("d", 2), &n)), vec!["d"]);
    }

    #[test]
    fn a_list_without_a_managed_object_reports_it_to_its_owner() {
        // Deleted between the apply and the watch's first list: no event ever shows it.
        let managed = HashMap::from([
            (
                "e".to_string(),
                HashSet::from(["ns/a".to_string(), "ns/b".to_string()]),
            ),
            ("f".to_string(), HashSet::from(["ns/c".to_string()])),
        ]);
        let mut t = Tracker::default();
        assert!(t.observe(Seen::Init, &managed).is_empty());
        assert!(
            t.observe(Seen::InitApply(object("ns/a", 1)), &managed)
                .is_empty()
        );
        assert_eq!(
            t.observe(Seen::InitDone, &managed),
            vec![
                Drift {
                    owner: "e".into(),
                    key: "ns/b".into(),
                    cause: Cause::Drift,
                },
                Drift {
                    owner: "f".into(),
                    key: "ns/c".into(),
                    cause: Cause::Drift,
                },
            ]
        );
    }

    #[test]
    fn drift_names_the_owner_the_object_carried() {
        let mut t = listed(&[]);
        let owned = |owner: &str, generation| {
            Seen::Apply(Object {
                owner: owner.into(),
                ..object("ns/x", generation)
            })
        };
        assert!(t.observe(owned("e1", 1), &none()).is_empty());
        assert_eq!(
            t.observe(owned("e1", 2), &none()),
            vec![Drift {
                owner: "e1".into(),
                key: "ns/x".into(),
                cause: Cause::Drift,
            }]
        );
        // Gone while the watch was down: reported to the owner it had.
        assert!(t.observe(Seen::Init, &none()).is_empty());
        assert_eq!(
            t.observe(Seen::InitDone, &none()),
            vec![Drift {
                owner: "e1".into(),
                key: "ns/x".into(),
                cause: Cause::Drift,
            }]
        );
    }
}
