//! Taking over an OLM v0 installation in place (docs/how-to/switch-from-olm-v0.md,
//! "The takeover"): a ClusterExtension `olmv1 migrate convert` created carries the
//! annotations naming the Subscription it replaces and the backup ConfigMap convert
//! wrote ([`Migration::of`]). While nothing is installed yet, the backup is read (a
//! fact, [`super::Facts::v0_backup`]: in the extension's own namespace only, as its
//! installer account, never as the controller) and the install adopts existing objects
//! that no ClusterExtension owns only when the resolved bundle is exactly the
//! backed-up CSV (name and version, [`takeover`]) and only those objects that carry
//! the mark convert wrote on what it handed over, naming this extension and the
//! backup's UID ([`crate::apply::ownership::adoption_mark`]): a backup proves nothing
//! about the objects, only their marks do (SECURITY.md, "Takeovers"). Otherwise the
//! reconcile reports the difference (Progressing `Retrying`, a Warning Event
//! `AdoptionRefused`) and touches nothing. Later reconciles that keep the backed-up
//! CSV installed adopt such objects too ([`kept_on_v0_csv`]). Until the takeover, the
//! resolution is pinned to the backed-up CSV's version ([`resolve`]): a catalog that
//! already serves a newer bundle would otherwise resolve past the installation and
//! leave it to nobody; from the reconcile after the takeover the extension's own range
//! and upgrade edges apply. Pure.

use super::{Facts, Plan, deprecation, end, failed_report, warning};
use crate::api::{BundleIdentity, ClusterExtension, ClusterExtensionSpec};
use crate::apply::ownership::adoption_mark;
use crate::controller::extension::status::Outcome;
use crate::migrate::olm_v0::MIGRATED_FROM_ANNOTATION;
use crate::migrate::olm_v0::backup::{BACKUP_ANNOTATION, BACKUP_LABEL, Backup};
use crate::resolve::ResolveRequest;
use crate::version::Constraints;
use kube::ResourceExt;
use serde_json::Value;

/// The extension's migration annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    /// The ClusterExtension's name (what the objects' marks must name).
    pub extension: String,
    /// Its install namespace (`spec.namespace`): the only place its backup may be.
    pub namespace: String,
    /// The Subscription replaced (`<namespace>/<name>`).
    pub subscription: String,
    /// The backup ConfigMap (`<namespace>/<name>`; empty when the annotation is missing).
    pub backup: String,
}

impl Migration {
    /// The migration `ext` is marked as, if any.
    pub fn of(ext: &ClusterExtension) -> Option<Migration> {
        let annotations = ext.annotations();
        let subscription = annotations.get(MIGRATED_FROM_ANNOTATION)?;
        Some(Migration {
            extension: ext.name_any(),
            namespace: ext.spec.namespace.clone(),
            subscription: subscription.clone(),
            backup: annotations
                .get(BACKUP_ANNOTATION)
                .cloned()
                .unwrap_or_default(),
        })
    }
}

/// The OLM v0 installation being taken over, from its backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V0Takeover {
    /// The Subscription replaced (`<namespace>/<name>`).
    pub subscription: String,
    /// The backup ConfigMap (`<namespace>/<name>`).
    pub backup: String,
    /// The CSV OLM v0 installed (the bundle name).
    pub csv: String,
    /// Its version.
    pub version: String,
    /// The mark an object must carry to be adopted ([`adoption_mark`]: this extension
    /// and the backup's UID).
    pub mark: String,
}

/// Reads the backup ConfigMap `configmap` (as JSON) of `migration`; the error says
/// what is wrong with it. The backup must be convert's (its label), in the extension's
/// namespace, of a Subscription of that namespace.
pub fn from_backup(migration: &Migration, configmap: &Value) -> Result<V0Takeover, String> {
    let at = |path: &str| configmap.pointer(path).and_then(Value::as_str);
    if at(&format!(
        "/metadata/labels/{}",
        BACKUP_LABEL.replace('/', "~1")
    )) != Some("true")
    {
        return Err(format!(
            "ConfigMap {} is not a migration backup (label {BACKUP_LABEL}=true, written by `olmv1 migrate convert`)",
            migration.backup
        ));
    }
    let uid = at("/metadata/uid").unwrap_or_default();
    if uid.is_empty() {
        return Err(format!("backup ConfigMap {} has no uid", migration.backup));
    }
    let backup = Backup::from_configmap(configmap)
        .map_err(|e| format!("backup ConfigMap {}: {e}", migration.backup))?;
    let of = format!("{}/{}", backup.namespace(), backup.name());
    if of != migration.subscription {
        return Err(format!(
            "backup ConfigMap {} is of Subscription {of}, not {}",
            migration.backup, migration.subscription
        ));
    }
    if backup.namespace() != migration.namespace {
        return Err(format!(
            "backup ConfigMap {} is of Subscription {of}, outside the extension's namespace {}: a migration takes over an installation of its own namespace only",
            migration.backup, migration.namespace
        ));
    }
    Ok(V0Takeover {
        subscription: migration.subscription.clone(),
        backup: migration.backup.clone(),
        csv: backup.installed_csv,
        version: backup.version,
        mark: adoption_mark(&migration.extension, uid),
    })
}

/// Where the backup of `migration` is read: `(namespace, name)`, the namespace the
/// extension's own (`spec.namespace`, where convert writes it); a reference elsewhere
/// is refused before anything is read.
pub fn backup_location(migration: &Migration) -> Result<(&str, &str), String> {
    let (namespace, name) = split_reference(&migration.backup)?;
    if namespace != migration.namespace {
        return Err(format!(
            "annotation {BACKUP_ANNOTATION} names {}, outside the extension's namespace {}: the backup of a migration is read in that namespace only, as the installer account",
            migration.backup, migration.namespace
        ));
    }
    Ok((namespace, name))
}

/// `<namespace>/<name>` of a backup reference.
pub fn split_reference(reference: &str) -> Result<(&str, &str), String> {
    match reference.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns, name))
        }
        _ => Err(format!(
            "annotation {BACKUP_ANNOTATION} must be <namespace>/<name>, not {reference:?}"
        )),
    }
}

/// Why OLM v0's installation is not taken over (condition and Event message).
pub fn refused_message(subscription: &str, why: &str) -> String {
    format!(
        "not taking over OLM v0's installation (Subscription {subscription}): {why}; nothing was changed"
    )
}

/// The resolution of `request`: for a migration with nothing installed yet, after the
/// backup is read, exactly the backed-up CSV's version when the extension's range
/// allows it (`=<version>`, shown in the request and in any resolution failure), so
/// that the takeover adopts what OLM v0 installed. A backup that cannot be read, or a
/// version outside the range, resolves as the spec says and the takeover refuses with
/// the difference ([`takeover`]).
pub(super) fn resolve(facts: &Facts, mut request: ResolveRequest) -> Plan {
    let (Some(migration), None) = (&facts.migration, &request.installed) else {
        return Plan::Resolve(request);
    };
    match &facts.v0_backup {
        None => Plan::LoadV0Backup(migration.clone()),
        Some(Ok(v0)) if within(request.version_range.as_deref(), &v0.version) => {
            request.version_range = Some(format!("={}", v0.version));
            Plan::Resolve(request)
        }
        Some(_) => Plan::Resolve(request),
    }
}

/// Whether `version` is within `range` (none: any version).
fn within(range: Option<&str>, version: &str) -> bool {
    let Ok(version) = semver::Version::parse(version.trim_start_matches('v')) else {
        return false;
    };
    match range.filter(|r| !r.trim().is_empty()) {
        None => true,
        Some(range) => Constraints::parse(range).is_ok_and(|c| c.matches(&version)),
    }
}

/// The v0 installation the install of `target` takes over: none when the extension is
/// not a migration or already has an installed revision; `Err`: the next step (read
/// the backup) or the refusal.
pub(super) fn takeover(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    target: &BundleIdentity,
) -> Result<Option<V0Takeover>, Box<Plan>> {
    let Some(migration) = &facts.migration else {
        return Ok(None);
    };
    if let Some(installed) = facts.installed() {
        return kept_on_v0_csv(migration, facts, installed, target);
    }
    let why = match &facts.v0_backup {
        None => return Err(Box::new(Plan::LoadV0Backup(migration.clone()))),
        Some(Err(why)) => why.clone(),
        Some(Ok(v0)) if v0.csv == target.name && v0.version == target.version => {
            return Ok(Some(v0.clone()));
        }
        Some(Ok(v0)) => format!(
            "the resolved bundle {} version {} is not the installed CSV {} version {} (backup ConfigMap {})",
            target.name, target.version, v0.csv, v0.version, v0.backup
        ),
    };
    let message = refused_message(&migration.subscription, &why);
    let mut refused = failed_report(
        facts,
        None,
        Outcome::Retrying(message.clone()),
        Some(deprecation(spec, facts, None)),
        "AdoptionRefused",
    );
    refused
        .events
        .push(warning("AdoptionRefused", "Adopt", message));
    refused.next = super::Next::Failed;
    Err(Box::new(end(spec, facts, refused)))
}

/// After the takeover, while the installed bundle is still OLM v0's CSV (and stays
/// installed), objects no ClusterExtension owns are adopted as at the takeover: OLM v0's
/// OperatorCondition controller, still running for other operators, re-creates the
/// OperatorCondition's Role and RoleBinding (same names as olmv1 renders) when the
/// garbage collector removed them with the v0 OperatorCondition they belonged to
/// (e2e/migrate_v0.rs). An upgrade, or a backup that cannot be read, ends this.
fn kept_on_v0_csv(
    migration: &Migration,
    facts: &Facts,
    installed: &BundleIdentity,
    target: &BundleIdentity,
) -> Result<Option<V0Takeover>, Box<Plan>> {
    if target.name != installed.name || target.version != installed.version {
        return Ok(None);
    }
    match &facts.v0_backup {
        None => Err(Box::new(Plan::LoadV0Backup(migration.clone()))),
        Some(Ok(v0)) if v0.csv == installed.name && v0.version == installed.version => {
            Ok(Some(v0.clone()))
        }
        Some(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn migration() -> Migration {
        Migration {
            extension: "demo".into(),
            namespace: "ops".into(),
            subscription: "ops/demo".into(),
            backup: "ops/olmv1-migration-demo".into(),
        }
    }

    fn configmap(sub_ns: &str) -> Value {
        json!({"metadata": {"uid": "b-uid", "labels": {BACKUP_LABEL: "true"}},
            "data": {
            "subscription.json": json!({"metadata": {"name": "demo", "namespace": sub_ns}}).to_string(),
            "installedCSV": "demo.v1.0.0", "version": "1.0.0",
            "clusterExtension.json": "{}", "installer.json": "[]"}})
    }

    #[test]
    fn the_backup_names_the_installed_csv_of_its_subscription() {
        let v0 = from_backup(&migration(), &configmap("ops")).expect("backup");
        assert_eq!(
            (v0.csv.as_str(), v0.version.as_str(), v0.mark.as_str()),
            ("demo.v1.0.0", "1.0.0", "demo/b-uid")
        );
        let other = from_backup(&migration(), &configmap("dev")).expect_err("other");
        assert!(
            other.contains("is of Subscription dev/demo, not ops/demo"),
            "{other}"
        );
        let broken = from_backup(
            &migration(),
            &json!({"metadata": {"uid": "u", "labels": {BACKUP_LABEL: "true"}}, "data": {}}),
        )
        .expect_err("broken");
        assert!(
            broken.starts_with("backup ConfigMap ops/olmv1-migration-demo: data."),
            "{broken}"
        );
        // Not convert's: no backup label.
        let mut unlabelled = configmap("ops");
        unlabelled["metadata"]["labels"] = json!({});
        let why = from_backup(&migration(), &unlabelled).expect_err("unlabelled");
        assert!(why.contains("is not a migration backup"), "{why}");
        // A backup of another namespace's Subscription, named by an extension of that
        // other namespace's Subscription but installing elsewhere.
        let elsewhere = Migration {
            namespace: "tenant".into(),
            ..migration()
        };
        let why = from_backup(&elsewhere, &configmap("ops")).expect_err("elsewhere");
        assert!(
            why.contains("outside the extension's namespace tenant"),
            "{why}"
        );
    }

    #[test]
    fn the_backup_is_read_in_the_extensions_namespace_only() {
        assert_eq!(
            backup_location(&migration()),
            Ok(("ops", "olmv1-migration-demo"))
        );
        let other = Migration {
            backup: "kube-system/cm".into(),
            ..migration()
        };
        let why = backup_location(&other).expect_err("elsewhere");
        assert!(
            why.contains("names kube-system/cm, outside the extension's namespace ops"),
            "{why}"
        );
    }

    #[test]
    fn the_pin_applies_only_within_the_extensions_range() {
        assert!(within(None, "1.0.0"));
        assert!(within(Some(""), "1.0.0"));
        assert!(within(Some(">=1.0.0 <2.0.0"), "1.0.0"));
        assert!(within(Some("1.0.x || 3.x"), "v1.0.0"));
        assert!(!within(Some(">=1.1.0"), "1.0.0"));
        assert!(!within(Some("not a range"), "1.0.0"));
        assert!(!within(None, "not a version"));
        // The pre-release rule: only a range that names a pre-release admits one.
        assert!(!within(Some(">=1.0.0"), "1.1.0-rc.1"));
        assert!(within(Some(">=1.1.0-rc.0"), "1.1.0-rc.1"));
    }

    #[test]
    fn a_backup_reference_is_namespace_and_name() {
        assert_eq!(split_reference("ops/cm"), Ok(("ops", "cm")));
        for bad in ["", "cm", "/cm", "ops/", "a/b/c"] {
            assert!(split_reference(bad).is_err(), "{bad}");
        }
    }
}
