//! The operator's own say over its upgrades (docs/how-to/upgrade-control.md, "The
//! operator's own say"): when the cluster serves `operators.coreos.com/v2`
//! `OperatorCondition`, every install renders one named like the bundle
//! ([`crate::bundle::operator_condition`]), and an upgrade — not the first
//! install, not a rollback — waits while the installed bundle's OperatorCondition says
//! `Upgradeable=False` (an administrator's `spec.overrides` wins, as in OLM v0).
//! [`hold`] names the lookups it needs and decides; [`attach`] adds the Event (once per
//! hold) and [`recheck`] the safety re-check. The hold is followed by the drift watch of
//! the OperatorCondition (`drift::tracker`): the operator setting or lifting
//! `Upgradeable=False` (a status update) triggers a reconcile, so a held upgrade costs
//! no API request while nothing changes (docs/concepts/rollout-status.md, "Readiness
//! from events").

use super::control::Held;
use super::{Facts, Plan, Report, SAFETY_RECHECK, normal};
use crate::api::{BundleIdentity, ClusterExtensionSpec};
use crate::controller::extension::status::Outcome;
use std::time::Duration;

/// Progressing (True) and UpgradeAvailable reason while the operator holds an upgrade.
pub const REASON_NOT_UPGRADEABLE: &str = "NotUpgradeable";

/// How soon a held upgrade is checked again while no listed watch follows its
/// OperatorCondition yet (right after the controller started, or after a watch error):
/// one read of the OperatorCondition per check. Once watches follow it, only the
/// [`SAFETY_RECHECK`] remains.
pub const UNFOLLOWED_RECHECK: Duration = Duration::from_secs(15);

/// Whether the operator holds `resolved` back from replacing `installed`: `Err` is the
/// lookup to make first (discovery, then the OperatorCondition).
pub(super) fn hold(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    installed: Option<&BundleIdentity>,
    resolved: &BundleIdentity,
) -> Result<Option<Held>, Box<Plan>> {
    let Some(installed) = installed else {
        return Ok(None);
    };
    if installed.name == resolved.name && installed.version == resolved.version {
        return Ok(None);
    }
    match facts.operator_conditions {
        None => return Err(Box::new(Plan::DiscoverOperatorConditions)),
        Some(false) => return Ok(None),
        Some(true) => {}
    }
    let says = match &facts.operator_condition {
        None => {
            let read = Plan::ReadOperatorCondition(installed.name.clone());
            return Err(Box::new(read));
        }
        Some(Ok(())) => return Ok(None),
        Some(Err(says)) => says,
    };
    Ok(Some(Held {
        target: resolved.clone(),
        approved: None,
        operator: Some(format!(
            "OperatorCondition {} in namespace {} says {says}",
            installed.name, spec.namespace
        )),
    }))
}

/// On every ending: while the operator holds an upgrade, an Event when the hold begins;
/// whether it holds one ([`recheck`]).
pub(super) fn attach(facts: &Facts, report: &mut Report) -> bool {
    let Outcome::Held { reason, message } = &report.observation.outcome else {
        return false;
    };
    if *reason != REASON_NOT_UPGRADEABLE {
        return false;
    }
    if facts.progressing.as_deref() != Some(REASON_NOT_UPGRADEABLE) {
        let note = normal(REASON_NOT_UPGRADEABLE, "Upgrade", message.clone());
        report.events.push(note);
    }
    true
}

/// A held upgrade is checked again after the [`SAFETY_RECHECK`] at the latest while
/// `followed` (watches that have listed follow its OperatorCondition: the hold changing
/// triggers a reconcile), else after [`UNFOLLOWED_RECHECK`].
pub(super) fn recheck(held: bool, followed: bool, ending: &mut super::Ending) {
    if held {
        let delay = if followed {
            SAFETY_RECHECK
        } else {
            UNFOLLOWED_RECHECK
        };
        let soon = ending.requeue.map_or(delay, |r| r.min(delay));
        ending.requeue = Some(soon);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::extension::installer::InstallerAccount;

    fn bundle(version: &str) -> BundleIdentity {
        BundleIdentity {
            package: "p".into(),
            name: format!("p.v{version}"),
            version: version.into(),
            release: None,
            image: String::new(),
        }
    }

    fn spec() -> ClusterExtensionSpec {
        serde_json::from_value(serde_json::json!({
            "namespace": "ns", "source": {"sourceType": "Catalog"}
        }))
        .expect("spec")
    }

    fn facts() -> Facts {
        Facts::new(Some(1), false, true, Err::<InstallerAccount, _>("x".into()))
    }

    #[test]
    fn only_an_upgrade_on_a_cluster_serving_operator_conditions_is_held() {
        let (v1, v2) = (bundle("1.0.0"), bundle("1.1.0"));
        let mut f = facts();
        assert!(
            matches!(hold(&spec(), &f, None, &v1), Ok(None)),
            "first install"
        );
        assert!(
            matches!(hold(&spec(), &f, Some(&v1), &v1), Ok(None)),
            "no upgrade"
        );
        let lookup = |f: &Facts| hold(&spec(), f, Some(&v1), &v2).err().map(|p| *p);
        assert!(matches!(lookup(&f), Some(Plan::DiscoverOperatorConditions)));
        f.operator_conditions = Some(false);
        assert!(
            matches!(hold(&spec(), &f, Some(&v1), &v2), Ok(None)),
            "not served"
        );
        f.operator_conditions = Some(true);
        assert!(matches!(
            lookup(&f),
            Some(Plan::ReadOperatorCondition(name)) if name == "p.v1.0.0"
        ));
        f.operator_condition = Some(Ok(()));
        assert!(
            matches!(hold(&spec(), &f, Some(&v1), &v2), Ok(None)),
            "upgradeable"
        );
        f.operator_condition = Some(Err("Upgradeable=False: migrating".into()));
        let held = hold(&spec(), &f, Some(&v1), &v2)
            .ok()
            .flatten()
            .expect("held");
        let message = held.message("e", Some("1.0.0"));
        assert_eq!(
            message,
            "Desired state reached for installed version 1.0.0; the upgrade to 1.1.0 (p.v1.1.0) is held by the operator: OperatorCondition p.v1.0.0 in namespace ns says Upgradeable=False: migrating"
        );
    }
}
