//! Taking over an OLM v0 installation in place (docs/how-to/switch-from-olm-v0.md,
//! "The takeover"): a ClusterExtension `olmv1 migrate convert` created carries the
//! annotations naming the Subscription it replaces and the backup ConfigMap convert
//! wrote ([`Migration::of`]). While nothing is installed yet, the backup is read (a
//! fact, [`super::Facts::v0_backup`]) and the install adopts the existing objects that
//! no ClusterExtension owns only when the resolved bundle is exactly the backed-up CSV
//! (name and version, [`takeover`]); otherwise the reconcile reports the difference
//! (Progressing `Retrying`, a Warning Event `AdoptionRefused`) and touches nothing.
//! Later reconciles that keep the backed-up CSV installed adopt such objects too
//! ([`kept_on_v0_csv`]). Pure.

use super::{Facts, Plan, deprecation, end, failed_report, warning};
use crate::api::{BundleIdentity, ClusterExtension, ClusterExtensionSpec};
use crate::controller::extension::status::Outcome;
use crate::migrate::olm_v0::MIGRATED_FROM_ANNOTATION;
use crate::migrate::olm_v0::backup::{BACKUP_ANNOTATION, Backup};
use kube::ResourceExt;
use serde_json::Value;

/// The extension's migration annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
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
}

/// Reads the backup ConfigMap `configmap` (as JSON) of `migration`; the error says
/// what is wrong with it.
pub fn from_backup(migration: &Migration, configmap: &Value) -> Result<V0Takeover, String> {
    let backup = Backup::from_configmap(configmap)
        .map_err(|e| format!("backup ConfigMap {}: {e}", migration.backup))?;
    let of = format!("{}/{}", backup.namespace(), backup.name());
    if of != migration.subscription {
        return Err(format!(
            "backup ConfigMap {} is of Subscription {of}, not {}",
            migration.backup, migration.subscription
        ));
    }
    Ok(V0Takeover {
        subscription: migration.subscription.clone(),
        backup: migration.backup.clone(),
        csv: backup.installed_csv,
        version: backup.version,
    })
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
            subscription: "ops/demo".into(),
            backup: "ops/olmv1-migration-demo".into(),
        }
    }

    fn configmap(sub_ns: &str) -> Value {
        json!({"data": {
            "subscription.json": json!({"metadata": {"name": "demo", "namespace": sub_ns}}).to_string(),
            "installedCSV": "demo.v1.0.0", "version": "1.0.0",
            "clusterExtension.json": "{}", "installer.json": "[]"}})
    }

    #[test]
    fn the_backup_names_the_installed_csv_of_its_subscription() {
        let v0 = from_backup(&migration(), &configmap("ops")).expect("backup");
        assert_eq!(
            (v0.csv.as_str(), v0.version.as_str()),
            ("demo.v1.0.0", "1.0.0")
        );
        let other = from_backup(&migration(), &configmap("dev")).expect_err("other");
        assert!(
            other.contains("is of Subscription dev/demo, not ops/demo"),
            "{other}"
        );
        let broken = from_backup(&migration(), &json!({"data": {}})).expect_err("broken");
        assert!(
            broken.starts_with("backup ConfigMap ops/olmv1-migration-demo: data."),
            "{broken}"
        );
    }

    #[test]
    fn a_backup_reference_is_namespace_and_name() {
        assert_eq!(split_reference("ops/cm"), Ok(("ops", "cm")));
        for bad in ["", "cm", "/cm", "ops/", "a/b/c"] {
            assert!(split_reference(bad).is_err(), "{bad}");
        }
    }
}
