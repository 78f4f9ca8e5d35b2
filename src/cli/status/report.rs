//! The pure half of `olmv1 status`: from one ClusterExtension, the served catalog
//! content of its package, and its Events, the [`ExtensionReport`] — the installed
//! bundle, what resolution picks now, every newer bundle with its verdict
//! (available, excluded by the spec, blocked) and the resolver's reasons, and one
//! "next" sentence saying what to do. No I/O here; the structure is what `-o json|yaml`
//! prints, so its field names are part of the CLI's interface (docs/reference/commands.md).

use crate::api::{ClusterExtension, conditions};
use crate::content::CatalogContent;
use crate::controller::extension::plan::control::{
    ANNOTATION_APPROVED_VERSION, ANNOTATION_PAUSED, TYPE_PAUSED,
};
use crate::controller::extension::plan::notice::{
    REASON_APPROVAL_REQUIRED, TYPE_UPGRADE_AVAILABLE,
};
use crate::controller::extension::plan::resolve_request;
use crate::controller::extension::plan::rollback::{
    ANNOTATION_ROLLBACK_TO, REASON_ROLLBACK_REQUESTED, REASON_ROLLED_BACK, TYPE_ROLLED_BACK,
};
use crate::resolve::{BundleExplanation, InstalledBundle, Reason, explain};
use crate::version::BundleVersion;
use serde::Serialize;

/// One ClusterExtension, as `olmv1 status NAME -o json` prints it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionReport {
    pub name: String,
    pub package: String,
    pub namespace: String,
    /// `serviceaccount <namespace>/<name>` from spec.serviceAccount, else
    /// `controller policy` (the controller's `--default-installer-service-account` or
    /// `--allow-controller-identity` decides).
    pub installer: String,
    pub spec: SpecView,
    /// status.install.bundle; `None` before the first install.
    pub installed: Option<BundleView>,
    /// The Installed condition (`None` when not yet reported).
    pub installed_condition: Option<ConditionView>,
    /// The Progressing condition.
    pub progressing: Option<ConditionView>,
    /// The UpgradeAvailable condition (docs/how-to/upgrade-control.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_available: Option<ConditionView>,
    /// The Paused condition while True, with `since` (its lastTransitionTime).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedView>,
    /// The RolledBack condition (docs/how-to/upgrade-control.md, "Rollback").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<ConditionView>,
    /// What resolution against the served catalogs picks now (the controller's target).
    pub target: Option<BundleView>,
    /// Why resolution picks nothing (the controller's message), or why the catalogs
    /// could not be read.
    pub resolution_error: Option<String>,
    /// Every bundle of the package newer than the installed one, lowest version first.
    pub upgrades: Vec<Upgrade>,
    /// Number of `upgrades` with verdict `available`.
    pub available_upgrades: usize,
    /// The extension's last Events, oldest first.
    pub events: Vec<EventView>,
    /// What to do next, one sentence.
    pub next: String,
}

/// The parts of spec.source.catalog that decide resolution.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView {
    /// spec.source.catalog.version (empty: any).
    pub version: String,
    /// spec.source.catalog.channels (empty: all).
    pub channels: Vec<String>,
    pub upgrade_constraint_policy: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleView {
    pub bundle: String,
    pub version: String,
    /// The catalog that serves it (targets only).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub catalog: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// The verdicts the controller's upgrade notice uses too (one definition).
pub use crate::controller::extension::plan::notice::{Verdict, verdict};

/// A paused extension: since when, and what the controller reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedView {
    /// RFC 3339.
    pub since: String,
    pub message: String,
}

/// One newer bundle.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Upgrade {
    pub version: String,
    pub bundle: String,
    pub catalog: String,
    /// The channels of the catalog that hold the bundle.
    pub channels: Vec<String>,
    pub deprecated: bool,
    pub verdict: Verdict,
    /// The resolver's reasons (`olmv1 resolve --explain`), plus for the target what
    /// holds the controller back, if anything.
    pub reasons: Vec<String>,
}

/// One Event of the extension.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// RFC 3339, the last time it was seen.
    pub last_seen: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// The report of `ext`, from the package's content in every ClusterCatalog
/// (`contents`; `Err` = the catalogs could not be listed) and its Events.
pub fn build(
    ext: &ClusterExtension,
    contents: &Result<Vec<CatalogContent>, String>,
    events: Vec<EventView>,
) -> ExtensionReport {
    let spec = &ext.spec;
    let filter = spec.source.catalog.clone().unwrap_or_default();
    let status = ext.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| conditions::find(&s.conditions, type_))
            .map(|c| ConditionView {
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
    };
    let installed = status
        .and_then(|s| s.install.as_ref())
        .map(|i| i.bundle.clone());
    let mut report = ExtensionReport {
        name: ext.metadata.name.clone().unwrap_or_default(),
        package: filter.package_name.clone(),
        namespace: spec.namespace.clone(),
        installer: installer_view(
            status.and_then(|s| s.install.as_ref()?.installer.as_ref()),
            spec.service_account.as_ref().map(|sa| sa.name.as_str()),
            &spec.namespace,
        ),
        spec: SpecView {
            version: filter.version.clone().unwrap_or_default(),
            channels: filter.channels.clone().unwrap_or_default(),
            upgrade_constraint_policy: format!("{:?}", filter.upgrade_constraint_policy),
        },
        installed: installed.as_ref().map(|b| BundleView {
            bundle: b.name.clone(),
            version: b.version.clone(),
            catalog: String::new(),
        }),
        installed_condition: condition(conditions::TYPE_INSTALLED),
        progressing: condition(conditions::TYPE_PROGRESSING),
        upgrade_available: condition(TYPE_UPGRADE_AVAILABLE),
        rolled_back: condition(TYPE_ROLLED_BACK),
        paused: status
            .and_then(|s| conditions::find(&s.conditions, TYPE_PAUSED))
            .filter(|c| c.status == "True")
            .map(|c| PausedView {
                since: c.last_transition_time.0.to_string(),
                message: c.message.clone(),
            }),
        events,
        ..Default::default()
    };
    match contents {
        Err(e) => report.resolution_error = Some(e.clone()),
        Ok(contents) => {
            let mut request = resolve_request(spec, None);
            request.installed = installed.as_ref().map(|b| InstalledBundle {
                name: b.name.clone(),
                version: b.version.clone(),
                release: b.release.clone(),
            });
            let inputs: Vec<_> = contents.iter().map(CatalogContent::input).collect();
            let explanation = explain(&request, &inputs);
            match &explanation.result {
                Ok(r) => {
                    report.target = Some(BundleView {
                        bundle: r.bundle.name.clone(),
                        version: r.bundle.version.to_string(),
                        catalog: r.bundle.catalog.clone(),
                    })
                }
                Err(e) => report.resolution_error = Some(e.to_string()),
            }
            if let Some(installed) = &installed {
                report.upgrades = upgrades(
                    &installed.version,
                    installed.release.as_deref(),
                    &explanation.bundles,
                    contents,
                    report.progressing.as_ref(),
                );
            }
        }
    }
    report.available_upgrades = report
        .upgrades
        .iter()
        .filter(|u| u.verdict == Verdict::Available)
        .count();
    report.next = next_step(&report);
    report
}

/// The explained bundles newer than the installed version, lowest first.
fn upgrades(
    installed_version: &str,
    installed_release: Option<&str>,
    rows: &[BundleExplanation],
    contents: &[CatalogContent],
    progressing: Option<&ConditionView>,
) -> Vec<Upgrade> {
    let Ok(current) = BundleVersion::new_lenient(installed_version, installed_release) else {
        return Vec::new();
    };
    let mut out: Vec<(BundleVersion, Upgrade)> = rows
        .iter()
        .filter_map(|row| {
            let v = BundleVersion::new_lenient(row.version.as_deref()?, None).ok()?;
            (v > current).then(|| (v, upgrade(row, contents, progressing)))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.catalog.cmp(&b.1.catalog)));
    out.into_iter().map(|(_, u)| u).collect()
}

fn upgrade(
    row: &BundleExplanation,
    contents: &[CatalogContent],
    progressing: Option<&ConditionView>,
) -> Upgrade {
    let verdict = verdict(&row.reasons);
    let mut reasons: Vec<String> = row.reasons.iter().map(ToString::to_string).collect();
    if row.reasons.contains(&Reason::Chosen)
        && let Some(p) = progressing.filter(|p| p.reason != conditions::REASON_SUCCEEDED)
    {
        let first = p.message.lines().next().unwrap_or_default();
        let first = first.trim_end().trim_end_matches(':');
        reasons.push(format!("the controller reports {}: {first}", p.reason));
    }
    let channels = contents
        .iter()
        .filter(|c| c.name == row.catalog)
        .filter_map(|c| c.content.as_ref().ok())
        .flat_map(|c| &c.channels)
        .filter(|ch| ch.entries.iter().any(|e| e.name == row.bundle))
        .map(|ch| ch.name.clone())
        .collect();
    Upgrade {
        version: row.version.clone().unwrap_or_default(),
        bundle: row.bundle.clone(),
        catalog: row.catalog.clone(),
        channels,
        deprecated: row.deprecated,
        verdict,
        reasons,
    }
}

/// The next step of a paused extension, a rollback, or an upgrade waiting for approval
/// or held by the operator (docs/how-to/upgrade-control.md).
fn control_step(r: &ExtensionReport, reason: &str) -> Option<String> {
    if let Some(p) = &r.paused {
        return Some(format!(
            "paused since {}: remove annotation {ANNOTATION_PAUSED} to resume (drift is then corrected)",
            p.since
        ));
    }
    if reason == REASON_ROLLED_BACK {
        return Some(match r.rolled_back.as_ref().map(|c| c.reason.as_str()) {
            Some(REASON_ROLLBACK_REQUESTED) => format!(
                "rolled back by annotation {ANNOTATION_ROLLBACK_TO}: `olmv1 rollback {} --clear` lets upgrades resume",
                r.name
            ),
            _ => "a failed upgrade was rolled back: it is retried once the catalog or the spec changes".to_string(),
        });
    }
    if reason == crate::controller::extension::plan::operator::REASON_NOT_UPGRADEABLE {
        let condition = r.installed.as_ref().map_or("", |i| i.bundle.as_str());
        return Some(format!(
            "the operator holds the upgrade (OperatorCondition {condition} in namespace {} says Upgradeable=False): it proceeds once the operator sets Upgradeable=True, or an administrator sets an Upgradeable override in its spec.overrides",
            r.namespace
        ));
    }
    if reason == REASON_APPROVAL_REQUIRED
        && let Some(t) = &r.target
    {
        return Some(format!(
            "approve the upgrade: `olmv1 approve {} {}` (or set annotation {ANNOTATION_APPROVED_VERSION}: {} in Git)",
            r.name, t.version, t.version
        ));
    }
    None
}

/// What to do next: the controller's own blocking message first, then the spec change
/// that takes the newest excluded upgrade, then what the catalog's graph allows.
pub fn next_step(r: &ExtensionReport) -> String {
    let progressing = r.progressing.as_ref();
    let reason = progressing.map(|p| p.reason.as_str()).unwrap_or_default();
    let message = progressing.map(|p| p.message.as_str()).unwrap_or_default();
    let first_line = message.lines().next().unwrap_or_default();
    if message.contains("pre-authorization failed") {
        let diff = r
            .installed
            .as_ref()
            .map(|i| format!(" --diff {}", i.version))
            .unwrap_or_default();
        let target = r
            .target
            .as_ref()
            .map(|t| {
                format!(
                    " (`olmv1 rbac {}@{} --catalog {}{diff} --namespace {} --extension {}` prints them)",
                    r.package, t.version, t.catalog, r.namespace, r.name
                )
            })
            .unwrap_or_default();
        return format!(
            "grant the installer ({}) the missing rules Progressing lists{target}; the controller retries as soon as RBAC changes",
            r.installer
        );
    }
    if let Some(step) = control_step(r, reason) {
        return step;
    }
    if progressing.is_none() {
        return "wait: the controller has not reported on this extension yet (is it running?)"
            .to_string();
    }
    match reason {
        conditions::REASON_ROLLING_OUT => return format!("wait for the rollout: {first_line}"),
        conditions::REASON_BLOCKED
        | conditions::REASON_FAILED
        | conditions::REASON_INVALID_CONFIGURATION
        | conditions::REASON_PROGRESS_DEADLINE_EXCEEDED => {
            return format!("fix what Progressing {reason} says: {first_line}");
        }
        conditions::REASON_RETRYING => {
            return format!("the controller is retrying: {first_line}");
        }
        _ => {}
    }
    let newest = |v: Verdict| r.upgrades.iter().rev().find(|u| u.verdict == v);
    if let Some(u) = newest(Verdict::Available) {
        let installed = r.installed.as_ref().map(|i| i.version.as_str());
        if r.target.as_ref().map(|t| t.version.as_str()) != installed {
            return format!("wait: the controller is moving to {}", u.version);
        }
    }
    if let Some(u) = newest(Verdict::Excluded) {
        let mut changes = Vec::new();
        for reason in &u.reasons {
            if reason.starts_with("outside version range") {
                changes.push(format!(
                    "widen spec.source.catalog.version (now {:?}) to take {}",
                    r.spec.version, u.version
                ));
            } else if reason.starts_with("not in channels") {
                changes.push(format!(
                    "add one of its channels [{}] to spec.source.catalog.channels to take {}",
                    u.channels.join(" "),
                    u.version
                ));
            } else if reason.starts_with("catalog not selected") {
                changes.push(format!(
                    "widen spec.source.catalog.selector to include catalog {} to take {}",
                    u.catalog, u.version
                ));
            }
        }
        if !changes.is_empty() {
            return changes.join("; and ");
        }
    }
    if let Some(u) = newest(Verdict::Blocked) {
        if r.spec.upgrade_constraint_policy == "CatalogProvided"
            && u.reasons.iter().any(|x| x.starts_with("not a successor"))
        {
            return format!(
                "nothing to do: up to date along the catalog's upgrade graph ({} is not a successor; upgradeConstraintPolicy: SelfCertified would allow it)",
                u.version
            );
        }
        return format!(
            "nothing to do: up to date ({} is blocked: {})",
            u.version,
            u.reasons.join("; ")
        );
    }
    if let Some(e) = &r.resolution_error {
        return format!("check the catalogs: {e}");
    }
    "nothing to do: up to date".to_string()
}

/// Who installs, as a person reads it: the identity the installed revision was applied
/// as (`status.install.installer`) when the controller recorded it, else what the spec
/// names, else "controller policy" (the controller's flags decide).
fn installer_view(
    recorded: Option<&crate::api::InstallerStatus>,
    spec_account: Option<&str>,
    namespace: &str,
) -> String {
    use crate::api::InstallerSource;
    let Some(recorded) = recorded else {
        return match spec_account {
            Some(name) => format!("serviceaccount {namespace}/{name}"),
            None => "controller policy".to_string(),
        };
    };
    let account = recorded
        .username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, name)| format!("serviceaccount {ns}/{name}"));
    match (recorded.source, account) {
        (InstallerSource::ServiceAccount, Some(a)) => a,
        (InstallerSource::DefaultInstallerServiceAccount, Some(a)) => {
            format!("{a} (the controller's --default-installer-service-account)")
        }
        (InstallerSource::ControllerIdentity, Some(a)) => {
            format!("{a} (the controller's own identity, --allow-controller-identity)")
        }
        (_, None) => recorded.username.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::model::{Bundle, Channel, ChannelEntry, PackageContent, Property};
    use serde_json::json;
    use std::sync::Arc;

    fn ext(version: Option<&str>, installed: &str, progressing: (&str, &str)) -> ClusterExtension {
        let mut catalog = json!({"packageName": "p"});
        if let Some(v) = version {
            catalog["version"] = json!(v);
        }
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "e"},
            "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                     "source": {"sourceType": "Catalog", "catalog": catalog}},
            "status": {
                "install": {"bundle": {"name": format!("p.v{installed}"), "version": installed}},
                "conditions": [
                    {"type": "Installed", "status": "True", "reason": "Succeeded", "message": "ok",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Progressing", "status": "True", "reason": progressing.0,
                     "message": progressing.1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                ],
            },
        }))
        .unwrap()
    }

    /// 1.0.0 -> 1.1.0 (replaces 1.0.0) and 2.0.0 (replaces nothing), one channel.
    fn catalog() -> Result<Vec<CatalogContent>, String> {
        let b = |v: &str| Bundle {
            name: format!("p.v{v}"),
            package: "p".into(),
            image: format!("r/p:{v}"),
            properties: vec![Property {
                type_: "olm.package".into(),
                value: json!({"packageName": "p", "version": v}),
            }],
            ..Default::default()
        };
        let entry = |n: &str, r: Option<&str>| ChannelEntry {
            name: n.into(),
            replaces: r.map(Into::into),
            ..Default::default()
        };
        let content = PackageContent {
            channels: vec![Channel {
                schema: "olm.channel".into(),
                name: "stable".into(),
                package: "p".into(),
                entries: vec![
                    entry("p.v1.0.0", None),
                    entry("p.v1.1.0", Some("p.v1.0.0")),
                    entry("p.v2.0.0", None),
                ],
                properties: vec![],
            }],
            bundles: vec![b("1.0.0"), b("1.1.0"), b("2.0.0")],
            ..Default::default()
        };
        Ok(vec![CatalogContent {
            name: "cat".into(),
            priority: 0,
            availability: crate::api::AvailabilityMode::Available,
            labels: Default::default(),
            content: Ok(Arc::new(content)),
        }])
    }

    #[test]
    fn pinned_version_excludes_the_successor_and_the_next_step_widens_the_range() {
        let r = build(
            &ext(Some("1.0.0"), "1.0.0", ("Succeeded", "done")),
            &catalog(),
            vec![],
        );
        assert_eq!(r.installer, "serviceaccount ns/sa");
        assert_eq!(r.target.as_ref().map(|t| t.version.as_str()), Some("1.0.0"));
        let verdicts: Vec<_> = r
            .upgrades
            .iter()
            .map(|u| (u.version.as_str(), u.verdict))
            .collect();
        assert_eq!(
            verdicts,
            [("1.1.0", Verdict::Excluded), ("2.0.0", Verdict::Blocked)]
        );
        assert_eq!(r.available_upgrades, 0);
        assert_eq!(r.upgrades[0].channels, ["stable"]);
        assert!(
            r.upgrades[1]
                .reasons
                .contains(&"not a successor of p.v1.0.0 (1.0.0)".to_string()),
            "{:?}",
            r.upgrades[1].reasons
        );
        assert_eq!(
            r.next,
            "widen spec.source.catalog.version (now \"1.0.0\") to take 1.1.0"
        );
    }

    #[test]
    fn blocked_target_is_available_and_the_next_step_is_the_grant() {
        let r = build(
            &ext(
                None,
                "1.0.0",
                (
                    "Retrying",
                    "pre-authorization failed: service account requires the following permissions to manage cluster extension:\n  Namespace:\"ns\" …",
                ),
            ),
            &catalog(),
            vec![],
        );
        assert_eq!(r.target.as_ref().map(|t| t.version.as_str()), Some("1.1.0"));
        assert_eq!(r.available_upgrades, 1);
        assert_eq!(r.upgrades[0].verdict, Verdict::Available);
        assert!(
            r.upgrades[0].reasons[1]
                .starts_with("the controller reports Retrying: pre-authorization failed"),
            "{:?}",
            r.upgrades[0].reasons
        );
        assert_eq!(r.upgrades[1].verdict, Verdict::Blocked);
        assert!(
            r.next
                .starts_with("grant the installer (serviceaccount ns/sa)"),
            "{}",
            r.next
        );
        assert!(
            r.next.contains(
                "olmv1 rbac p@1.1.0 --catalog cat --diff 1.0.0 --namespace ns --extension e"
            ),
            "{}",
            r.next
        );
    }

    #[test]
    fn only_a_non_successor_left_means_up_to_date() {
        let r = build(
            &ext(None, "1.1.0", ("Succeeded", "done")),
            &catalog(),
            vec![],
        );
        assert_eq!(r.upgrades.len(), 1);
        assert!(r.next.starts_with("nothing to do"), "{}", r.next);
        assert!(r.next.contains("SelfCertified"), "{}", r.next);
    }

    #[test]
    fn unreadable_catalogs_are_reported_not_hidden() {
        let r = build(
            &ext(None, "1.0.0", ("Succeeded", "done")),
            &Err("listing ClusterCatalogs: forbidden".into()),
            vec![],
        );
        assert_eq!(
            r.resolution_error.as_deref(),
            Some("listing ClusterCatalogs: forbidden")
        );
        assert!(r.next.contains("forbidden"), "{}", r.next);
    }

    #[test]
    fn installer_names_the_recorded_identity_and_why() {
        use crate::api::{InstallerSource, InstallerStatus};
        let rec = |source| InstallerStatus {
            username: "system:serviceaccount:olmv1-system:installer".into(),
            source,
        };
        assert_eq!(
            installer_view(None, Some("sa"), "ns"),
            "serviceaccount ns/sa"
        );
        assert_eq!(installer_view(None, None, "ns"), "controller policy");
        assert_eq!(
            installer_view(
                Some(&rec(InstallerSource::DefaultInstallerServiceAccount)),
                None,
                "ns"
            ),
            "serviceaccount olmv1-system/installer (the controller's --default-installer-service-account)"
        );
        assert_eq!(
            installer_view(
                Some(&rec(InstallerSource::ServiceAccount)),
                Some("installer"),
                "olmv1-system"
            ),
            "serviceaccount olmv1-system/installer"
        );
    }

    #[test]
    fn an_upgrade_held_by_the_operator_says_what_lifts_the_hold() {
        let r = build(
            &ext(None, "1.0.0", ("NotUpgradeable", "held")),
            &catalog(),
            vec![],
        );
        assert!(
            r.next
                .contains("OperatorCondition p.v1.0.0 in namespace ns says Upgradeable=False"),
            "{}",
            r.next
        );
    }
}
