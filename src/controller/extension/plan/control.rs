//! The opt-in upgrade controls of a ClusterExtension, read from its annotations
//! (docs/how-to/upgrade-control.md): manual approval (`upgrade-approval`,
//! `approved-version`), pause (`paused`) and rollback (`rollback-to`,
//! `upgrade-remediation`, decided in [`super::rollback`]); plus what the status said before this
//! reconcile that the notices and the pause report depend on ([`Controls::of`]).
//! [`held`] decides whether an approval holds the target.

use super::notice::{TYPE_UPGRADE_AVAILABLE, announced};
use super::rollback::{ANNOTATION_ROLLBACK_TO, ANNOTATION_UPGRADE_REMEDIATION, TYPE_ROLLED_BACK};
use crate::api::{BundleIdentity, ClusterExtension, conditions};

pub const ANNOTATION_UPGRADE_APPROVAL: &str = "olm.operatorframework.io/upgrade-approval";
pub const ANNOTATION_APPROVED_VERSION: &str = "olm.operatorframework.io/approved-version";
pub const ANNOTATION_PAUSED: &str = "olm.operatorframework.io/paused";
pub const TYPE_PAUSED: &str = "Paused";
/// Paused=True.
pub const REASON_PAUSED: &str = "Paused";
/// Paused=False after the annotation was removed.
pub const REASON_RESUMED: &str = "Resumed";

/// `olm.operatorframework.io/upgrade-approval`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Approval {
    /// Absent or `Automatic`: upgrades are installed as resolved.
    #[default]
    Automatic,
    /// `Manual`: upgrades wait for approval; the first install does not.
    Manual,
    /// `ManualIncludingInstall`: the first install waits for approval too.
    ManualIncludingInstall,
}

impl Approval {
    /// Any value but `Automatic` and `ManualIncludingInstall` (case-insensitive) holds
    /// upgrades: a misspelt value never lets an upgrade through.
    pub fn parse(value: Option<&str>) -> Approval {
        match value.map(|v| v.trim().to_ascii_lowercase()) {
            None => Approval::Automatic,
            Some(v) if v.is_empty() || v == "automatic" => Approval::Automatic,
            Some(v) if v == "manualincludinginstall" => Approval::ManualIncludingInstall,
            Some(_) => Approval::Manual,
        }
    }
}

/// The annotations, and what the status said before this reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Controls {
    pub approval: Approval,
    /// `olm.operatorframework.io/approved-version`.
    pub approved: Option<String>,
    /// `olm.operatorframework.io/paused: "true"`.
    pub paused: bool,
    /// The versions the UpgradeAvailable condition announced (no Event again).
    pub announced: Vec<String>,
    /// The Paused condition before this reconcile, when True: its message.
    pub paused_before: Option<String>,
    /// `olm.operatorframework.io/rollback-to`: the version to run (docs/how-to/upgrade-control.md, "Rollback").
    pub rollback_to: Option<String>,
    /// `olm.operatorframework.io/upgrade-remediation: Rollback`.
    pub remediation: bool,
    /// The RolledBack condition before this reconcile.
    pub rolled_back_before: Option<Before>,
}

/// A condition as it was before this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Before {
    pub status: bool,
    pub reason: String,
    pub message: String,
    pub generation: Option<i64>,
}

impl Controls {
    pub fn of(ext: &ClusterExtension) -> Controls {
        let annotation = |key: &str| {
            ext.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        let found = |type_: &str| {
            ext.status
                .as_ref()
                .and_then(|s| conditions::find(&s.conditions, type_))
        };
        Controls {
            approval: Approval::parse(annotation(ANNOTATION_UPGRADE_APPROVAL)),
            approved: annotation(ANNOTATION_APPROVED_VERSION)
                .map(|v| v.trim().trim_start_matches('v').to_string())
                .filter(|v| !v.is_empty()),
            paused: annotation(ANNOTATION_PAUSED)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            announced: found(TYPE_UPGRADE_AVAILABLE)
                .filter(|c| c.status == "True")
                .map(|c| announced(&c.message))
                .unwrap_or_default(),
            paused_before: found(TYPE_PAUSED)
                .filter(|c| c.status == "True")
                .map(|c| c.message.clone()),
            rollback_to: annotation(ANNOTATION_ROLLBACK_TO)
                .map(|v| v.trim().trim_start_matches('v').to_string())
                .filter(|v| !v.is_empty()),
            remediation: annotation(ANNOTATION_UPGRADE_REMEDIATION)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("rollback")),
            rolled_back_before: found(TYPE_ROLLED_BACK).map(|c| Before {
                status: c.status == "True",
                reason: c.reason.clone(),
                message: c.message.clone(),
                generation: c.observed_generation,
            }),
        }
    }
}

/// An upgrade (or first install) that waits for approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The resolved bundle waiting.
    pub target: BundleIdentity,
    /// The approved version when it is another one.
    pub approved: Option<String>,
    /// Held by the operator instead (its OperatorCondition says `Upgradeable=False`,
    /// [`super::operator`]): what it says.
    pub operator: Option<String>,
}

impl Held {
    /// The Progressing message (`installed`: the installed version, if any).
    pub fn message(&self, name: &str, installed: Option<&str>) -> String {
        let t = &self.target;
        if let Some(operator) = &self.operator {
            let v = installed.unwrap_or_default();
            return format!(
                "Desired state reached for installed version {v}; the upgrade to {} ({}) is held by the operator: {operator}",
                t.version, t.name
            );
        }
        let what = match installed {
            Some(v) => format!(
                "Desired state reached for installed version {v}; the upgrade to {} ({}) waits for approval",
                t.version, t.name
            ),
            None => format!(
                "the install of {} ({}) waits for approval",
                t.version, t.name
            ),
        };
        let stale = self
            .approved
            .as_ref()
            .map(|a| format!(" (the approved version {a} is not the one resolved)"))
            .unwrap_or_default();
        format!(
            "{what}{stale}: `kubectl olmv1 approve {name} {}` sets annotation {ANNOTATION_APPROVED_VERSION}: {}",
            t.version, t.version
        )
    }
}

/// Whether `controls` hold `target` (resolved) back from replacing `installed`: an
/// approval is for exactly one version; the first install needs none unless
/// `ManualIncludingInstall`.
pub fn held(
    controls: &Controls,
    installed: Option<&BundleIdentity>,
    target: &BundleIdentity,
) -> Option<Held> {
    let asks = match (controls.approval, installed) {
        (Approval::Automatic, _) => false,
        (Approval::Manual, None) => false,
        (_, Some(i)) => i.name != target.name || i.version != target.version,
        (Approval::ManualIncludingInstall, None) => true,
    };
    let approved = controls.approved.as_deref();
    (asks && approved != Some(target.version.as_str())).then(|| Held {
        target: target.clone(),
        approved: approved.map(str::to_string),
        operator: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(version: &str) -> BundleIdentity {
        BundleIdentity {
            package: "p".into(),
            name: format!("p.v{version}"),
            version: version.into(),
            release: None,
            image: String::new(),
        }
    }

    #[test]
    fn approval_values() {
        assert_eq!(Approval::parse(None), Approval::Automatic);
        assert_eq!(Approval::parse(Some("Automatic")), Approval::Automatic);
        assert_eq!(Approval::parse(Some("Manual")), Approval::Manual);
        assert_eq!(
            Approval::parse(Some("manaul")),
            Approval::Manual,
            "typo holds"
        );
        assert_eq!(
            Approval::parse(Some("ManualIncludingInstall")),
            Approval::ManualIncludingInstall
        );
    }

    #[test]
    fn an_approval_is_for_exactly_one_version() {
        let manual = Controls {
            approval: Approval::Manual,
            ..Default::default()
        };
        let (v1, v2, v3) = (bundle("1.0.0"), bundle("1.1.0"), bundle("1.2.0"));
        assert_eq!(held(&manual, None, &v1), None, "first install: no approval");
        assert_eq!(held(&manual, Some(&v1), &v1), None, "nothing to upgrade");
        let waiting = held(&manual, Some(&v1), &v2).expect("held");
        assert_eq!(waiting.approved, None);
        let approved = Controls {
            approved: Some("1.1.0".into()),
            ..manual.clone()
        };
        assert_eq!(held(&approved, Some(&v1), &v2), None);
        let stale = held(&approved, Some(&v1), &v3).expect("a newer one waits again");
        assert_eq!(stale.approved.as_deref(), Some("1.1.0"));
        assert!(
            stale
                .message("e", Some("1.0.0"))
                .contains("the approved version 1.1.0 is not the one resolved"),
            "{}",
            stale.message("e", Some("1.0.0"))
        );
        let automatic = Controls::default();
        assert_eq!(held(&automatic, Some(&v1), &v2), None);
        let install = Controls {
            approval: Approval::ManualIncludingInstall,
            ..Default::default()
        };
        assert!(held(&install, None, &v1).is_some());
    }

    #[test]
    fn read_from_annotations_and_status() {
        let ext: ClusterExtension = serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "e", "annotations": {
                ANNOTATION_UPGRADE_APPROVAL: "Manual",
                ANNOTATION_APPROVED_VERSION: "v1.3.0",
                ANNOTATION_PAUSED: "True"}},
            "spec": {"namespace": "ns", "source": {"sourceType": "Catalog"}},
            "status": {"conditions": [{"type": "UpgradeAvailable", "status": "True",
                "reason": "ExcludedBySpec", "message": "1.3.0 is available; x. 1.4.0 is available; y",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .expect("extension");
        let c = Controls::of(&ext);
        assert_eq!(c.approval, Approval::Manual);
        assert_eq!(c.approved.as_deref(), Some("1.3.0"));
        assert!(c.paused);
        assert_eq!(c.announced, vec!["1.3.0", "1.4.0"]);
        assert_eq!(c.paused_before, None);
    }
}
