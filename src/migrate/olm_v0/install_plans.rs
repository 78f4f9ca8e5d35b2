//! OLM v0's InstallPlans of one Subscription, as a switch sees them (olm-v0 reference
//! §1.1, §1.4, §5.1). The catalog-operator resolves the Subscriptions of a namespace
//! together: one InstallPlan may install the CSVs of several of them, with a
//! (non-blocking) ownerReference to each, and a namespace with one Manual Subscription
//! gets Manual plans for all. So an InstallPlan is the switched Subscription's alone,
//! or **shared** with Subscriptions that stay on OLM v0 ([`InstallPlanView::shared_with`]).
//!
//! What the switch does with each (`check` says it, `convert` does it):
//! - its own, done (`Complete`, `Failed`): deleted, the history of v0's upgrades;
//! - its own, waiting for approval: deleted with the Subscription — the installed version
//!   is taken over and the upgrade it holds can never run later (the ClusterExtension
//!   of a Manual Subscription pins the installed version; approving means editing it);
//! - its own, being planned or installed: a blocker until OLM v0 has finished it;
//! - shared, done: left to OLM v0 — the other Subscriptions' `status.installPlanRef`
//!   names it, and deleting it would leave them pointing at nothing;
//! - shared, not done: a blocker. Approving it would have OLM v0 install the switched
//!   operator's CSV again beside its ClusterExtension; deleting it would drop the other
//!   operators' upgrade. Finish it with OLM v0 first (approve it, or let it run).
//!
//! Pure.

use super::read::{strings, text};
use serde_json::Value;

/// The phases of an InstallPlan that is finished (OLM v0 acts on it no more).
const DONE: [&str; 2] = ["Complete", "Failed"];

/// What the switch reads from an InstallPlan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallPlanView {
    pub name: String,
    /// `status.phase`; empty before the catalog-operator planned it.
    pub phase: String,
    /// `spec.clusterServiceVersionNames`: every CSV it installs.
    pub csvs: Vec<String>,
    /// The Subscriptions it serves (its ownerReferences of kind Subscription).
    pub subscriptions: Vec<String>,
}

impl InstallPlanView {
    pub fn of(ip: &Value) -> InstallPlanView {
        let subscriptions = ip
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter(|r| r["kind"] == "Subscription")
                    .filter_map(|r| r["name"].as_str())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        InstallPlanView {
            name: text(ip, "/metadata/name").unwrap_or_default(),
            phase: text(ip, "/status/phase").unwrap_or_default(),
            csvs: strings(ip, "/spec/clusterServiceVersionNames"),
            subscriptions,
        }
    }

    /// Whether OLM v0 is done with it.
    pub fn done(&self) -> bool {
        DONE.contains(&self.phase.as_str())
    }

    /// Who else it serves besides Subscription `subscription` (installed CSV `csv`):
    /// the other Subscriptions it names (`Subscription x`), or, when it names none, the
    /// other CSVs of a plan of several (`CSV y`: a dependency resolved with it); empty:
    /// it is the Subscription's own.
    pub fn shared_with(&self, subscription: &str, csv: &str) -> Vec<String> {
        let mut others: Vec<String> = self
            .subscriptions
            .iter()
            .filter(|s| s.as_str() != subscription)
            .map(|s| format!("Subscription {s}"))
            .collect();
        if others.is_empty() && self.csvs.len() > 1 {
            others = self
                .csvs
                .iter()
                .filter(|c| c.as_str() != csv)
                .map(|c| format!("CSV {c}"))
                .collect();
        }
        others.sort();
        others.dedup();
        others
    }

    /// Whether the switch of `subscription` (installed CSV `csv`) deletes it: its own.
    /// A shared one stays with OLM v0 (module documentation).
    pub fn deleted_by_switch(&self, subscription: &str, csv: &str) -> bool {
        self.shared_with(subscription, csv).is_empty()
    }

    /// Why it keeps the switch from starting, if it does (module documentation).
    pub fn blocks(&self, subscription: &str, csv: &str) -> Option<String> {
        if self.done() {
            return None;
        }
        let phase = if self.phase.is_empty() {
            "not planned yet"
        } else {
            self.phase.as_str()
        };
        if !self.deleted_by_switch(subscription, csv) {
            return Some(format!(
                "InstallPlan {} ({phase}, installing {}) is shared with {}, still on OLM v0",
                self.name,
                self.csvs.join(", "),
                self.shared_with(subscription, csv).join(", ")
            ));
        }
        (self.phase != "RequiresApproval").then(|| {
            format!(
                "InstallPlan {} ({phase}) is installing {} now",
                self.name,
                self.csvs.join(", ")
            )
        })
    }

    /// What the switch does with it, in words (`check`'s list of v0 objects).
    pub fn why(&self, subscription: &str, csv: &str) -> String {
        if !self.deleted_by_switch(subscription, csv) {
            return format!(
                "shared with {}: left to OLM v0",
                self.shared_with(subscription, csv).join(", ")
            );
        }
        if self.phase == "RequiresApproval" {
            return format!(
                "waits for approval to install {}: deleted, so it can never run; the installed version is taken over",
                self.csvs.join(", ")
            );
        }
        "history of v0 upgrades".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ip(phase: &str, csvs: &[&str], subs: &[&str]) -> InstallPlanView {
        let refs: Vec<Value> = subs
            .iter()
            .map(|s| json!({"kind": "Subscription", "name": s, "apiVersion": "operators.coreos.com/v1alpha1", "uid": "u"}))
            .collect();
        InstallPlanView::of(&json!({
            "metadata": {"name": "install-abc", "ownerReferences": refs},
            "spec": {"clusterServiceVersionNames": csvs},
            "status": {"phase": phase}}))
    }

    #[test]
    fn an_installplan_is_read_defensively() {
        let v = InstallPlanView::of(&json!({"metadata": {"name": "x",
            "ownerReferences": [{"kind": "ConfigMap", "name": "c"}, {"kind": "Subscription"}]},
            "spec": {"clusterServiceVersionNames": ["a", 3]}}));
        assert_eq!(
            v,
            InstallPlanView {
                name: "x".into(),
                phase: String::new(),
                csvs: vec!["a".into()],
                subscriptions: Vec::new(),
            }
        );
        assert!(!v.done());
    }

    #[test]
    fn its_own_installplans_are_deleted_and_shared_ones_left_to_olm_v0() {
        let own = ip("Complete", &["a.v1"], &["a"]);
        assert!(own.deleted_by_switch("a", "a.v1"));
        assert_eq!(own.blocks("a", "a.v1"), None);
        assert_eq!(own.why("a", "a.v1"), "history of v0 upgrades");
        // An upgrade of its own (the next CSV) waiting for approval: deleted, no blocker.
        let pending = ip("RequiresApproval", &["a.v2"], &["a"]);
        assert!(pending.deleted_by_switch("a", "a.v1"));
        assert_eq!(pending.blocks("a", "a.v1"), None);
        assert!(pending.why("a", "a.v1").contains("can never run"));
        // Its own, being installed: wait for OLM v0.
        let running = ip("Installing", &["a.v2"], &["a"]);
        assert_eq!(
            running.blocks("a", "a.v1").as_deref(),
            Some("InstallPlan install-abc (Installing) is installing a.v2 now")
        );
        // Shared with another Subscription (OLM v0 resolved both together).
        let shared = ip("Complete", &["a.v1", "b.v1"], &["a", "b"]);
        assert!(!shared.deleted_by_switch("a", "a.v1"));
        assert_eq!(shared.shared_with("a", "a.v1"), ["Subscription b"]);
        assert_eq!(shared.blocks("a", "a.v1"), None);
        assert_eq!(
            shared.why("a", "a.v1"),
            "shared with Subscription b: left to OLM v0"
        );
        let shared_pending = ip("RequiresApproval", &["a.v2", "b.v2"], &["a", "b"]);
        assert_eq!(
            shared_pending.blocks("a", "a.v1").as_deref(),
            Some(
                "InstallPlan install-abc (RequiresApproval, installing a.v2, b.v2) is shared with Subscription b, still on OLM v0"
            )
        );
        // No other Subscription named, but several CSVs (a dependency resolved with
        // it, or ownerReferences removed): shared with those CSVs.
        let unowned = ip("Complete", &["a.v1", "b.v1"], &["a"]);
        assert_eq!(unowned.shared_with("a", "a.v1"), ["CSV b.v1"]);
        assert!(!ip("Complete", &["a.v1", "b.v1"], &[]).deleted_by_switch("a", "a.v1"));
        assert!(ip("Complete", &["a.v1"], &[]).deleted_by_switch("a", "a.v1"));
    }
}
