//! What a ClusterExtension's status says after a reconcile (docs/reference/api-and-status.md §2.1, §3 step 9):
//! a pure function of the current status, what is installed, how this reconcile ended
//! and the deprecation data of the winning catalog. Messages are capped and cleaned by
//! [`crate::api::conditions::set_condition`]; transition times only move on flips.

use super::plan::control::{ANNOTATION_PAUSED, REASON_PAUSED, REASON_RESUMED, TYPE_PAUSED};
use super::plan::notice::{Notice, TYPE_UPGRADE_AVAILABLE};
use super::plan::rollback::{RolledBack, TYPE_ROLLED_BACK};
use crate::api::conditions::{self, *};
use crate::api::{
    BundleIdentity, ClusterExtensionInstallStatus, ClusterExtensionStatus, InstallerStatus,
};
use crate::resolve::deprecation::{ConditionStatus, DeprecationCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const MSG_DESIRED_STATE: &str = "Desired state reached";
pub const MSG_NO_BUNDLE: &str = "No bundle installed";

/// How the reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The desired bundle is installed.
    Succeeded,
    /// The installed bundle is maintained although no catalog provides its package any
    /// more (docs/reference/api-and-status.md §3 step 4); the message says so. Progressing stays True/Succeeded.
    Maintained(String),
    /// A transient failure; retried with backoff.
    Retrying(String),
    /// A failure that retrying cannot fix; `reason` is `Blocked` or `InvalidConfiguration`.
    Blocked {
        reason: &'static str,
        message: String,
    },
    /// The extension cannot be worked on (e.g. its ServiceAccount is missing).
    ValidationFailed(String),
    /// A failure or a rollout outlasted `progressDeadlineMinutes`.
    DeadlineExceeded { minutes: i32, last: String },
    /// The bundle at `version` is applied, but what it installed is not ready yet
    /// (`waiting`: the rollout messages, [`super::rollout`]). Installed stays True.
    RollingOut { version: String, waiting: String },
    /// Opt-in controls hold the reconcile (docs/how-to/upgrade-control.md): waiting for
    /// approval (`ApprovalRequired`) or paused (`Paused`). Progressing stays True.
    Held {
        reason: &'static str,
        message: String,
    },
}

impl Outcome {
    /// Whether retrying cannot help (Progressing=False with `Blocked` or
    /// `InvalidConfiguration`): nothing is retried until something changes.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Outcome::Blocked { .. })
    }

    /// The Progressing message that `progressDeadlineMinutes` applies to: a retrying
    /// failure or a rollout still in progress; `None` for every other outcome.
    pub fn pending(&self) -> Option<String> {
        match self {
            Outcome::Retrying(message) => Some(message.clone()),
            Outcome::RollingOut { version, waiting } => Some(rolling_out(version, waiting)),
            _ => None,
        }
    }
}

/// Everything the status is computed from.
#[derive(Clone, Debug)]
pub struct Observation {
    pub generation: Option<i64>,
    /// The bundle installed after this reconcile (its image digest-pinned).
    pub installed: Option<BundleIdentity>,
    /// Who applied it (`status.install.installer`), when known.
    pub installer: Option<InstallerStatus>,
    pub outcome: Outcome,
    /// The deprecation conditions; `None` when the reconcile did not reach resolution.
    pub deprecation: Option<[DeprecationCondition; 4]>,
    /// The opt-in upgrade controls' conditions.
    pub control: ControlStatus,
}

/// The conditions of the opt-in upgrade controls (docs/how-to/upgrade-control.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlStatus {
    /// The UpgradeAvailable condition; `None`: left as it is (nothing installed, or
    /// the reconcile did not reach resolution).
    pub upgrade: Option<Notice>,
    /// The Paused condition's message while paused; `None`: not paused (a Paused=True
    /// condition turns False, `Resumed`).
    pub paused: Option<String>,
    /// The RolledBack condition; `None`: left as it is (it appears only once a rollback
    /// was asked for or made, [`super::plan::rollback`]).
    pub rolled_back: Option<RolledBack>,
}

/// The status to write.
pub fn next_status(
    current: &ClusterExtensionStatus,
    observation: &Observation,
    now: &Time,
) -> ClusterExtensionStatus {
    let mut status = current.clone();
    let generation = observation.generation;
    let mut set = |c: Condition| {
        conditions::set_condition(&mut status.conditions, c, now.clone());
    };

    set(installed_condition(observation));
    set(progressing_condition(&observation.outcome, generation));

    if let Some(deprecation) = &observation.deprecation {
        for d in deprecation {
            let c = match d.status {
                ConditionStatus::True => {
                    condition(d.type_, true, d.reason, d.message.clone(), generation)
                }
                ConditionStatus::False => {
                    condition(d.type_, false, d.reason, d.message.clone(), generation)
                }
                ConditionStatus::Unknown => {
                    unknown(d.type_, d.reason, d.message.clone(), generation)
                }
            };
            set(c);
        }
    }

    control_conditions(
        &mut status.conditions,
        &observation.control,
        generation,
        now,
    );

    status.install = observation
        .installed
        .as_ref()
        .map(|b| ClusterExtensionInstallStatus {
            bundle: b.metadata(),
            installer: observation.installer.clone(),
        });
    status.observed_generation = generation;
    status
}

/// The UpgradeAvailable, RolledBack and Paused conditions; a Paused condition appears
/// only once the extension was paused, a RolledBack one once a rollback was asked for.
fn control_conditions(
    list: &mut Vec<Condition>,
    control: &ControlStatus,
    generation: Option<i64>,
    now: &Time,
) {
    if let Some(n) = &control.upgrade {
        let available = !n.versions.is_empty();
        let c = condition(
            TYPE_UPGRADE_AVAILABLE,
            available,
            n.reason,
            n.message.clone(),
            generation,
        );
        conditions::set_condition(list, c, now.clone());
    }
    if let Some(r) = &control.rolled_back {
        let c = condition(
            TYPE_ROLLED_BACK,
            r.status,
            r.reason,
            r.message.clone(),
            generation,
        );
        conditions::set_condition(list, c, now.clone());
    }
    let c = match &control.paused {
        Some(message) => condition(
            TYPE_PAUSED,
            true,
            REASON_PAUSED,
            message.clone(),
            generation,
        ),
        None if conditions::find(list, TYPE_PAUSED).is_some_and(|c| c.status == "True") => {
            condition(
                TYPE_PAUSED,
                false,
                REASON_RESUMED,
                format!(
                    "resumed: annotation {ANNOTATION_PAUSED} removed; the controller applies and upgrades again"
                ),
                generation,
            )
        }
        None => return,
    };
    conditions::set_condition(list, c, now.clone());
}

/// The Installed condition: True with the installed bundle's image, False without one,
/// Unknown when validation failed.
fn installed_condition(observation: &Observation) -> Condition {
    let generation = observation.generation;
    match (&observation.outcome, &observation.installed) {
        (Outcome::ValidationFailed(message), _) => {
            unknown(TYPE_INSTALLED, REASON_FAILED, message.clone(), generation)
        }
        (_, Some(bundle)) => condition(
            TYPE_INSTALLED,
            true,
            REASON_SUCCEEDED,
            format!("Installed bundle {} successfully", bundle.image),
            generation,
        ),
        (_, None) => condition(
            TYPE_INSTALLED,
            false,
            REASON_FAILED,
            MSG_NO_BUNDLE,
            generation,
        ),
    }
}

/// The Progressing condition of `outcome`.
fn progressing_condition(outcome: &Outcome, generation: Option<i64>) -> Condition {
    match outcome {
        Outcome::Succeeded => condition(
            TYPE_PROGRESSING,
            true,
            REASON_SUCCEEDED,
            MSG_DESIRED_STATE,
            generation,
        ),
        Outcome::Maintained(why) => condition(
            TYPE_PROGRESSING,
            true,
            REASON_SUCCEEDED,
            format!("{MSG_DESIRED_STATE}; {why}"),
            generation,
        ),
        Outcome::Retrying(message) | Outcome::ValidationFailed(message) => condition(
            TYPE_PROGRESSING,
            true,
            REASON_RETRYING,
            message.clone(),
            generation,
        ),
        Outcome::Blocked { reason, message } => {
            condition(TYPE_PROGRESSING, false, reason, message.clone(), generation)
        }
        Outcome::RollingOut { version, waiting } => condition(
            TYPE_PROGRESSING,
            true,
            REASON_ROLLING_OUT,
            rolling_out(version, waiting),
            generation,
        ),
        Outcome::Held { reason, message } => {
            condition(TYPE_PROGRESSING, true, reason, message.clone(), generation)
        }
        Outcome::DeadlineExceeded { minutes, last } => condition(
            TYPE_PROGRESSING,
            false,
            REASON_PROGRESS_DEADLINE_EXCEEDED,
            deadline_exceeded(*minutes, last),
            generation,
        ),
    }
}

/// `error for resolved bundle "<name>" with version "<version>": <err>` (docs/reference/api-and-status.md §2.1).
pub fn for_resolved_bundle(name: &str, version: &str, error: impl std::fmt::Display) -> String {
    format!("error for resolved bundle \"{name}\" with version \"{version}\": {error}")
}

/// `Revision has not rolled out for <N> minute(s). Last status: <last>` (§2.1, §2.4).
pub fn deadline_exceeded(minutes: i32, last: &str) -> String {
    format!(
        "Revision has not rolled out for {minutes} minute{}. Last status: {last}",
        if minutes == 1 { "" } else { "(s)" }
    )
}

/// `Revision <version> is rolling out: <what is not ready>` (docs/reference/api-and-status.md §2.1).
pub fn rolling_out(version: &str, waiting: &str) -> String {
    format!("Revision {version} is rolling out: {waiting}")
}

/// The validation failure message (docs/reference/api-and-status.md §3 step 2).
pub fn validation_failed(errors: &[String]) -> String {
    format!(
        "operation cannot proceed due to the following validation error(s): {}",
        errors.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::deprecation::{CatalogData, deprecation_conditions};

    fn t(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).expect("time"))
    }

    fn bundle() -> BundleIdentity {
        BundleIdentity {
            package: "argocd-operator".into(),
            name: "argocd-operator.v0.6.0".into(),
            version: "0.6.0".into(),
            release: None,
            image: "quay.io/operatorhubio/argocd-operator@sha256:abc".into(),
        }
    }

    fn get<'a>(s: &'a ClusterExtensionStatus, t: &str) -> &'a Condition {
        conditions::find(&s.conditions, t).expect("condition")
    }

    fn triple(c: &Condition) -> (&str, &str, &str) {
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn success_matches_the_seed_example() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(1),
            installed: Some(bundle()),
            outcome: Outcome::Succeeded,
            deprecation: Some(deprecation_conditions(
                CatalogData::Available(None),
                &[],
                Some("argocd-operator.v0.6.0"),
            )),
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(
            triple(get(&s, "Installed")),
            (
                "True",
                "Succeeded",
                "Installed bundle quay.io/operatorhubio/argocd-operator@sha256:abc successfully"
            )
        );
        assert_eq!(
            triple(get(&s, "Progressing")),
            ("True", "Succeeded", "Desired state reached")
        );
        assert_eq!(
            triple(get(&s, "Deprecated")),
            ("False", "NotDeprecated", "not deprecated")
        );
        assert_eq!(
            triple(get(&s, "PackageDeprecated")),
            ("False", "NotDeprecated", "package not deprecated")
        );
        assert_eq!(
            triple(get(&s, "ChannelDeprecated")),
            ("False", "NotDeprecated", "channel not deprecated")
        );
        assert_eq!(
            triple(get(&s, "BundleDeprecated")),
            ("False", "NotDeprecated", "bundle not deprecated")
        );
        let bundle = &s.install.as_ref().expect("install").bundle;
        assert_eq!(
            (bundle.name.as_str(), bundle.version.as_str()),
            ("argocd-operator.v0.6.0", "0.6.0")
        );
        assert_eq!(s.observed_generation, Some(1));
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(1))
        );
    }

    #[test]
    fn retrying_without_an_installed_bundle() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(2),
            installed: None,
            outcome: Outcome::Retrying("no bundles found for package \"p\"".into()),
            deprecation: Some(deprecation_conditions(CatalogData::Unavailable, &[], None)),
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(
            triple(get(&s, "Installed")),
            ("False", "Failed", "No bundle installed")
        );
        assert_eq!(
            triple(get(&s, "Progressing")),
            ("True", "Retrying", "no bundles found for package \"p\"")
        );
        assert_eq!(
            triple(get(&s, "Deprecated")),
            (
                "Unknown",
                "DeprecationStatusUnknown",
                "deprecation status unknown: catalog data unavailable"
            )
        );
        assert_eq!(
            triple(get(&s, "BundleDeprecated")),
            ("Unknown", "Absent", "no bundle installed yet")
        );
        assert!(s.install.is_none());
    }

    #[test]
    fn failures_keep_the_installed_bundle_reported() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(3),
            installed: Some(bundle()),
            outcome: Outcome::Blocked {
                reason: REASON_INVALID_CONFIGURATION,
                message: "invalid ClusterExtension configuration: x".into(),
            },
            deprecation: None,
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(get(&s, "Installed").status, "True");
        assert_eq!(
            triple(get(&s, "Progressing")),
            (
                "False",
                "InvalidConfiguration",
                "invalid ClusterExtension configuration: x"
            )
        );
        assert!(conditions::find(&s.conditions, "Deprecated").is_none());
    }

    #[test]
    fn validation_failure_makes_installed_unknown() {
        let msg = validation_failed(&["service account \"sa\" not found in namespace \"ns\": unable to authenticate with the Kubernetes cluster.".into()]);
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(1),
            installed: None,
            outcome: Outcome::ValidationFailed(msg.clone()),
            deprecation: None,
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(
            triple(get(&s, "Installed")),
            ("Unknown", "Failed", msg.as_str())
        );
        assert_eq!(
            triple(get(&s, "Progressing")),
            ("True", "Retrying", msg.as_str())
        );
        assert!(msg.starts_with(
            "operation cannot proceed due to the following validation error(s): service account"
        ));
    }

    #[test]
    fn deadline_message() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(1),
            installed: None,
            outcome: Outcome::DeadlineExceeded {
                minutes: 10,
                last: "boom".into(),
            },
            deprecation: None,
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(
            triple(get(&s, "Progressing")),
            (
                "False",
                "ProgressDeadlineExceeded",
                "Revision has not rolled out for 10 minute(s). Last status: boom"
            )
        );
    }

    #[test]
    fn rolling_out_keeps_installed_true_and_names_what_is_not_ready() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(2),
            installed: Some(bundle()),
            outcome: Outcome::RollingOut {
                version: "0.6.0".into(),
                waiting: "deployment/foo 0/1 available: ImagePullBackOff".into(),
            },
            deprecation: None,
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(get(&s, "Installed").status, "True");
        assert_eq!(
            triple(get(&s, "Progressing")),
            (
                "True",
                "RollingOut",
                "Revision 0.6.0 is rolling out: deployment/foo 0/1 available: ImagePullBackOff"
            )
        );
    }

    #[test]
    fn maintained_without_catalog_says_why() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(2),
            installed: Some(bundle()),
            outcome: Outcome::Maintained(
                "no ClusterCatalog provides package \"argocd-operator\" any more".into(),
            ),
            deprecation: None,
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(
            triple(get(&s, "Progressing")),
            (
                "True",
                "Succeeded",
                "Desired state reached; no ClusterCatalog provides package \"argocd-operator\" any more"
            )
        );
        assert_eq!(get(&s, "Installed").status, "True");
    }

    #[test]
    fn unchanged_observation_writes_nothing_new() {
        let obs = Observation {
            installer: None,
            control: Default::default(),
            generation: Some(1),
            installed: Some(bundle()),
            outcome: Outcome::Succeeded,
            deprecation: None,
        };
        let s = next_status(&Default::default(), &obs, &t(1));
        assert_eq!(next_status(&s, &obs, &t(50)), s);
    }

    #[test]
    fn resolved_bundle_prefix() {
        assert_eq!(
            for_resolved_bundle("p.v1", "1.0.0", "boom"),
            "error for resolved bundle \"p.v1\" with version \"1.0.0\": boom"
        );
    }
}
