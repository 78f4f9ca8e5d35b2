//! Upgrade notices (docs/how-to/upgrade-control.md): from resolution's explanation of
//! every bundle of the package, the bundles newer than the installed one and why each
//! is or is not taken ([`verdict`], the same verdicts `olmv1 status` prints), as the
//! `UpgradeAvailable` condition ([`Notice`], set on every ending by [`attach`]), one Event per newly available version
//! ([`new_versions`]) and the `olmv1_clusterextension_upgrade_available` metric.
//! Pure: the previously announced versions are read back from the condition.

use super::{Facts, Report, normal};
use crate::api::ClusterExtensionSpec;
use crate::controller::extension::status::Outcome;
use crate::resolve::{BundleExplanation, Reason};
use crate::version::BundleVersion;
use serde::Serialize;

pub const TYPE_UPGRADE_AVAILABLE: &str = "UpgradeAvailable";
/// False: no bundle newer than the installed one in the package and channels.
pub const REASON_UP_TO_DATE: &str = "UpToDate";
/// True: the controller is installing the newest allowed bundle.
pub const REASON_UPGRADING: &str = "Upgrading";
/// True: the newest allowed bundle waits for approval
/// (`olm.operatorframework.io/upgrade-approval`).
pub const REASON_APPROVAL_REQUIRED: &str = "ApprovalRequired";
/// True: the newest allowed bundle waits until the extension is unpaused.
pub const REASON_PAUSED: &str = "Paused";
/// True: the newest allowed bundle waits because the extension was rolled back
/// (`olm.operatorframework.io/rollback-to`, or a failed upgrade remediated).
pub const REASON_ROLLED_BACK: &str = "RolledBack";
/// True: newer bundles exist but the spec's version range, channels or catalog
/// selector exclude them.
pub const REASON_EXCLUDED_BY_SPEC: &str = "ExcludedBySpec";
/// True: newer bundles exist but none is reachable through the upgrade edges.
pub const REASON_NO_UPGRADE_PATH: &str = "NoUpgradePath";

/// At most this many Events per reconcile for newly available versions (the newest).
pub const MAX_EVENTS: usize = 5;

/// Whether a newer bundle can be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// In the spec's channels and range, and a successor of the installed bundle:
    /// the controller takes the best of these (the target).
    Available,
    /// A successor, but outside the spec's version range, channels or catalog
    /// selector: changing the spec takes it.
    Excluded,
    /// Not reachable from the installed bundle (not a successor in the catalog's
    /// upgrade graph), an unparseable version, or an unavailable catalog.
    Blocked,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Available => "available",
            Verdict::Excluded => "excluded",
            Verdict::Blocked => "blocked",
        }
    }
}

/// Not a successor (or unusable) blocks; only spec filters exclude; else available.
pub fn verdict(reasons: &[Reason]) -> Verdict {
    let blocked = reasons.iter().any(|r| {
        matches!(
            r,
            Reason::NotSuccessor { .. }
                | Reason::InvalidVersion { .. }
                | Reason::CatalogUnavailable
        )
    });
    let excluded = reasons.iter().any(|r| {
        matches!(
            r,
            Reason::OutsideRange { .. } | Reason::NotInChannels { .. } | Reason::CatalogNotSelected
        )
    });
    if blocked {
        Verdict::Blocked
    } else if excluded {
        Verdict::Excluded
    } else {
        Verdict::Available
    }
}

/// What holds the target back, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    None,
    Approval,
    Paused,
    /// A rollback holds the upgrade (`rollback-to`, or a failed upgrade rolled back).
    RolledBack,
    /// The operator's OperatorCondition says `Upgradeable=False`.
    Operator,
}

/// The `UpgradeAvailable` condition of one reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The installed version.
    pub installed: String,
    /// The newer versions, lowest first, each once, with the sentence saying why it is
    /// or is not taken.
    pub versions: Vec<(String, String)>,
    pub reason: &'static str,
    pub message: String,
}

impl Notice {
    /// The newest newer version.
    pub fn newest(&self) -> Option<&str> {
        self.versions.last().map(|(v, _)| v.as_str())
    }
}

/// The notice for an extension with `installed` (version, release) installed, from
/// resolution's explanation `rows`; `target`: the version resolution picked (`None` when
/// it failed); `range`: spec.source.catalog.version.
pub fn notice(
    installed: (&str, Option<&str>),
    rows: &[BundleExplanation],
    target: Option<&str>,
    hold: Hold,
    range: Option<&str>,
) -> Notice {
    let current = BundleVersion::new_lenient(installed.0, installed.1).ok();
    // Each newer version once, with its best verdict (available over excluded over
    // blocked) and that row's reasons.
    let mut newer: Vec<(BundleVersion, String, Verdict, &[Reason])> = Vec::new();
    for row in rows {
        let Some(text) = row.version.as_deref() else {
            continue;
        };
        let Ok(v) = BundleVersion::new_lenient(text, None) else {
            continue;
        };
        if current.as_ref().is_some_and(|c| &v <= c) || current.is_none() {
            continue;
        }
        let verdict = verdict(&row.reasons);
        match newer.iter_mut().find(|(seen, ..)| *seen == v) {
            Some(entry) if verdict < entry.2 => {
                entry.2 = verdict;
                entry.3 = &row.reasons;
            }
            Some(_) => {}
            None => newer.push((v, text.to_string(), verdict, &row.reasons)),
        }
    }
    newer.sort_by(|a, b| a.0.cmp(&b.0));
    let is_target = |v: &str, verdict| verdict == Verdict::Available && Some(v) == target;
    let versions: Vec<(String, String)> = newer
        .iter()
        .map(|(_, v, verdict, reasons)| {
            let why = if is_target(v, *verdict) {
                match hold {
                    Hold::Approval => "the upgrade waits for approval".to_string(),
                    Hold::Paused => "the extension is paused".to_string(),
                    Hold::RolledBack => format!(
                        "the extension was rolled back to {}: the upgrade waits",
                        installed.0
                    ),
                    Hold::Operator => {
                        "the operator's OperatorCondition says Upgradeable=False: the upgrade waits"
                            .to_string()
                    }
                    Hold::None => "the controller is upgrading to it".to_string(),
                }
            } else {
                why_not(*verdict, reasons, installed.0, target, range)
            };
            (v.clone(), format!("{v} is available; {why}"))
        })
        .collect();
    let target_newer = newer
        .iter()
        .any(|(_, v, verdict, _)| is_target(v, *verdict));
    let has = |verdict| newer.iter().any(|n| n.2 == verdict);
    let reason = match hold {
        _ if newer.is_empty() => REASON_UP_TO_DATE,
        Hold::Approval if target_newer => REASON_APPROVAL_REQUIRED,
        Hold::Paused if target_newer => REASON_PAUSED,
        Hold::RolledBack if target_newer => REASON_ROLLED_BACK,
        Hold::Operator if target_newer => super::operator::REASON_NOT_UPGRADEABLE,
        _ if target_newer || has(Verdict::Available) => REASON_UPGRADING,
        _ if has(Verdict::Excluded) => REASON_EXCLUDED_BY_SPEC,
        _ => REASON_NO_UPGRADE_PATH,
    };
    let message = if versions.is_empty() {
        format!(
            "no bundle newer than {} in the package's channels",
            installed.0
        )
    } else {
        versions
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join(". ")
    };
    Notice {
        installed: installed.0.to_string(),
        versions,
        reason,
        message,
    }
}

/// Why a newer version that is not the target is not taken.
fn why_not(
    verdict: Verdict,
    reasons: &[Reason],
    installed: &str,
    target: Option<&str>,
    range: Option<&str>,
) -> String {
    let mut why = Vec::new();
    for r in reasons {
        match r {
            Reason::OutsideRange { range: r } => {
                let pinned = range.is_some_and(|s| s.trim().trim_start_matches('=') == installed);
                why.push(if pinned {
                    format!("spec.source.catalog.version pins {installed}")
                } else {
                    format!("outside spec.source.catalog.version {r:?}")
                });
            }
            Reason::NotInChannels { channels } => why.push(format!(
                "not in spec.source.catalog.channels [{}]",
                channels.join(", ")
            )),
            Reason::CatalogNotSelected => {
                why.push("its catalog is not selected by spec.source.catalog.selector".into())
            }
            Reason::NotSuccessor { .. } => why.push(format!(
                "not reachable from {installed} through the catalog's upgrade edges"
            )),
            Reason::CatalogUnavailable => why.push("its catalog is unavailable".into()),
            _ => {}
        }
    }
    if why.is_empty() {
        return match (verdict, target) {
            (Verdict::Available, Some(t)) => format!("{t} is taken instead"),
            _ => "not taken".to_string(),
        };
    }
    why.join(", ")
}

/// The versions a notice message announced (each sentence starts `<version> is available`).
pub fn announced(message: &str) -> Vec<String> {
    message
        .split(". ")
        .filter_map(|s| s.split_once(" is available"))
        .map(|(v, _)| v.trim().to_string())
        .collect()
}

/// The sentences of the versions in `notice` not in `before` (announced earlier), the
/// newest [`MAX_EVENTS`] of them, lowest first.
pub fn new_versions<'a>(notice: &'a Notice, before: &[String]) -> Vec<&'a (String, String)> {
    let fresh: Vec<_> = notice
        .versions
        .iter()
        .filter(|(v, _)| !before.contains(v))
        .collect();
    let skip = fresh.len().saturating_sub(MAX_EVENTS);
    fresh.into_iter().skip(skip).collect()
}

/// The UpgradeAvailable condition and its Events, once resolution ran and a bundle is
/// installed (docs/how-to/upgrade-control.md).
pub(super) fn attach(spec: &ClusterExtensionSpec, facts: &Facts, report: &mut Report) {
    let (Some(resolution), Some(installed)) = (&facts.resolution, &report.observation.installed)
    else {
        return;
    };
    let target = resolution
        .as_ref()
        .ok()
        .map(|r| r.bundle.version.to_string());
    let hold = match &report.observation.outcome {
        _ if facts.controls.paused => Hold::Paused,
        Outcome::Held { reason, .. } if *reason == REASON_APPROVAL_REQUIRED => Hold::Approval,
        Outcome::Held { reason, .. } if *reason == super::operator::REASON_NOT_UPGRADEABLE => {
            Hold::Operator
        }
        _ if report
            .observation
            .control
            .rolled_back
            .as_ref()
            .is_some_and(|r| r.status) =>
        {
            Hold::RolledBack
        }
        _ => Hold::None,
    };
    let range = spec
        .source
        .catalog
        .as_ref()
        .and_then(|c| c.version.as_deref());
    let n = notice(
        (&installed.version, installed.release.as_deref()),
        &facts.candidates,
        target.as_deref(),
        hold,
        range,
    );
    for (version, sentence) in new_versions(&n, &facts.controls.announced) {
        report.events.push(normal(
            "UpgradeAvailable",
            "Resolve",
            format!("{sentence} (installed: {}, newer: {version})", n.installed),
        ));
    }
    report.observation.control.upgrade = Some(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(version: &str, reasons: Vec<Reason>) -> BundleExplanation {
        BundleExplanation {
            catalog: "c".into(),
            bundle: format!("p.v{version}"),
            version: Some(version.into()),
            deprecated: false,
            reasons,
        }
    }

    fn outside(range: &str) -> Reason {
        Reason::OutsideRange {
            range: range.into(),
        }
    }

    #[test]
    fn a_pinned_extension_says_what_pins_it() {
        let rows = [
            row("1.2.0", vec![Reason::Chosen]),
            row("1.3.0", vec![outside("1.2.0")]),
        ];
        let n = notice(
            ("1.2.0", None),
            &rows,
            Some("1.2.0"),
            Hold::None,
            Some("1.2.0"),
        );
        assert_eq!(n.reason, REASON_EXCLUDED_BY_SPEC);
        assert_eq!(
            n.message,
            "1.3.0 is available; spec.source.catalog.version pins 1.2.0"
        );
        assert_eq!(announced(&n.message), vec!["1.3.0"]);
    }

    #[test]
    fn the_target_is_upgrading_waiting_for_approval_or_paused() {
        let rows = [
            row("1.0.0", vec![]),
            row("1.1.0", vec![Reason::Chosen]),
            row(
                "2.0.0",
                vec![Reason::NotSuccessor {
                    installed: "p.v1.0.0".into(),
                }],
            ),
        ];
        let of = |hold| notice(("1.0.0", None), &rows, Some("1.1.0"), hold, None);
        assert_eq!(of(Hold::None).reason, REASON_UPGRADING);
        let held = of(Hold::Approval);
        assert_eq!(held.reason, REASON_APPROVAL_REQUIRED);
        assert_eq!(
            held.message,
            "1.1.0 is available; the upgrade waits for approval. 2.0.0 is available; not reachable from 1.0.0 through the catalog's upgrade edges"
        );
        assert_eq!(held.newest(), Some("2.0.0"));
        assert_eq!(of(Hold::Paused).reason, REASON_PAUSED);
        assert_eq!(announced(&held.message), vec!["1.1.0", "2.0.0"]);
    }

    #[test]
    fn only_unreachable_versions_and_up_to_date() {
        let blocked = [row(
            "2.0.0",
            vec![Reason::NotSuccessor {
                installed: "x".into(),
            }],
        )];
        let n = notice(
            ("1.0.0", None),
            &blocked,
            Some("1.0.0"),
            Hold::Approval,
            None,
        );
        assert_eq!(n.reason, REASON_NO_UPGRADE_PATH, "nothing to approve");
        let none = notice(("2.0.0", None), &blocked, Some("2.0.0"), Hold::None, None);
        assert_eq!(none.reason, REASON_UP_TO_DATE);
        assert!(none.versions.is_empty());
        assert_eq!(
            none.message,
            "no bundle newer than 2.0.0 in the package's channels"
        );
        assert!(announced(&none.message).is_empty());
    }

    #[test]
    fn one_event_per_newly_available_version_capped() {
        let rows: Vec<_> = (1..=8)
            .map(|i| row(&format!("1.{i}.0"), vec![outside("1.0.0")]))
            .collect();
        let n = notice(("1.0.0", None), &rows, None, Hold::None, Some("1.0.0"));
        assert_eq!(n.versions.len(), 8);
        let before = vec!["1.1.0".to_string(), "1.2.0".to_string()];
        let fresh: Vec<&str> = new_versions(&n, &before)
            .iter()
            .map(|(v, _)| v.as_str())
            .collect();
        assert_eq!(fresh, vec!["1.4.0", "1.5.0", "1.6.0", "1.7.0", "1.8.0"]);
        let all: Vec<String> = n.versions.iter().map(|(v, _)| v.clone()).collect();
        assert!(new_versions(&n, &all).is_empty(), "nothing new: no Event");
    }

    #[test]
    fn the_best_verdict_of_a_version_in_several_catalogs_wins() {
        let rows = [
            row("1.1.0", vec![outside(">=1.0.0 <1.1.0")]),
            row("1.1.0", vec![Reason::Chosen]),
        ];
        let n = notice(("1.0.0", None), &rows, Some("1.1.0"), Hold::None, None);
        assert_eq!(n.versions.len(), 1);
        assert_eq!(n.reason, REASON_UPGRADING);
    }
}
