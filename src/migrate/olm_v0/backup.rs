//! The backup `olmv1 migrate convert` writes before it touches OLM v0
//! (docs/how-to/switch-from-olm-v0.md, "The backup"): a ConfigMap
//! `olmv1-migration-<subscription>` in the Subscription's namespace holding the
//! Subscription as it was (metadata and spec), the installed CSV and version, and what
//! the switch creates (the ClusterExtension, the installer account's objects), and
//! what was set in the OperatorCondition. Once it
//! exists, a convert continues from it even when the Subscription is gone, and
//! `migrate rollback` re-creates the Subscription from it (olm-v0 reference §3.5,
//! `startingCSV` = the installed CSV). Pure: building it and reading it back.

use super::read::text;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Label on the backup ConfigMap (value `"true"`).
pub const BACKUP_LABEL: &str = "olm.operatorframework.io/migration-backup";
/// Annotation on the ClusterExtension naming its backup ConfigMap (`<namespace>/<name>`).
pub const BACKUP_ANNOTATION: &str = "olm.operatorframework.io/migration-backup";

const PREFIX: &str = "olmv1-migration-";

/// Everything a convert needs once v0 may already be partly stopped, and a rollback
/// needs to bring v0 back.
#[derive(Clone, Debug, PartialEq)]
pub struct Backup {
    /// The Subscription: apiVersion, kind, metadata (name, namespace, labels,
    /// annotations) and spec, as it was before the switch.
    pub subscription: Value,
    /// `status.installedCSV` at the switch.
    pub installed_csv: String,
    /// The installed bundle's version.
    pub version: String,
    /// The ClusterExtension the switch creates.
    pub extension: Value,
    /// The installer ServiceAccount and its RBAC (`olmv1 rbac`).
    pub installer: Vec<Value>,
    /// The OperatorCondition named like the CSV, when it exists: its `uid` and what
    /// an administrator or the operator set in it (`spec.overrides`,
    /// `spec.conditions`; [`operator_condition_snapshot`]). Absent in older backups.
    pub operator_condition: Option<Value>,
}

/// What the backup keeps of an OperatorCondition: its `uid` and the `spec.overrides`
/// and `spec.conditions` it has. OLM v0's operator-condition-generator puts the CSV's
/// ownerReference back on the OperatorCondition while the CSV still exists; when the
/// CSV is then gone, garbage collection can delete the OperatorCondition, and the
/// takeover re-creates it empty (seen with the real OLM v0, e2e/migrate_v0.rs): the
/// convert then restores these ([`super::convert::restore_operator_condition`]).
pub fn operator_condition_snapshot(cond: &Value) -> Value {
    let mut spec = Map::new();
    for key in ["overrides", "conditions"] {
        if let Some(v) = cond
            .pointer(&format!("/spec/{key}"))
            .filter(|v| !v.is_null())
        {
            spec.insert(key.into(), v.clone());
        }
    }
    json!({
        "uid": cond.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        "spec": spec,
    })
}

/// The backup ConfigMap's name for Subscription `subscription`
/// (`olmv1-migration-<name>`, shortened with a hash past 253 characters).
pub fn configmap_name(subscription: &str) -> String {
    let name = format!("{PREFIX}{subscription}");
    if name.len() <= 253 {
        return name;
    }
    let hash = data_encoding::HEXLOWER.encode(&Sha256::digest(subscription.as_bytes()));
    let mut cut: String = subscription.chars().take(200).collect();
    while cut.ends_with(['-', '.']) {
        cut.pop();
    }
    format!("{PREFIX}{cut}-{}", &hash[..16])
}

/// The Subscription's identity and intent, without status and server-set metadata.
pub fn subscription_snapshot(sub: &Value) -> Value {
    let mut meta = Map::new();
    for key in ["name", "namespace", "labels", "annotations"] {
        if let Some(v) = sub.pointer(&format!("/metadata/{key}")) {
            meta.insert(key.into(), v.clone());
        }
    }
    if let Some(Value::Object(a)) = meta.get_mut("annotations") {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": meta,
        "spec": sub.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

impl Backup {
    /// The Subscription's namespace.
    pub fn namespace(&self) -> String {
        text(&self.subscription, "/metadata/namespace").unwrap_or_default()
    }

    /// The Subscription's name.
    pub fn name(&self) -> String {
        text(&self.subscription, "/metadata/name").unwrap_or_default()
    }

    /// The ConfigMap holding this backup.
    pub fn configmap(&self) -> Value {
        let (ns, name) = (self.namespace(), self.name());
        let json = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let mut cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": configmap_name(&name),
                "namespace": ns,
                "labels": {BACKUP_LABEL: "true"},
                "annotations": {super::target::MIGRATED_FROM_ANNOTATION: format!("{ns}/{name}")},
            },
            "data": {
                "subscription.json": json(&self.subscription),
                "installedCSV": self.installed_csv,
                "version": self.version,
                "clusterExtension.json": json(&self.extension),
                "installer.json": json(&Value::Array(self.installer.clone())),
            },
        });
        if let Some(cond) = &self.operator_condition {
            cm["data"]["operatorCondition.json"] = json!(json(cond));
        }
        cm
    }

    /// Reads a backup ConfigMap back; the error names what is missing or unreadable.
    pub fn from_configmap(cm: &Value) -> Result<Backup, String> {
        let field = |key: &str| -> Result<String, String> {
            cm.pointer(&format!("/data/{key}"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("data.{key} is missing"))
        };
        let parsed = |key: &str| -> Result<Value, String> {
            serde_json::from_str(&field(key)?).map_err(|e| format!("data.{key}: {e}"))
        };
        let installer = match parsed("installer.json")? {
            Value::Array(items) => items,
            _ => return Err("data.installer.json is not a list".into()),
        };
        let subscription = parsed("subscription.json")?;
        if text(&subscription, "/metadata/name").is_none()
            || text(&subscription, "/metadata/namespace").is_none()
        {
            return Err("data.subscription.json has no metadata.name or namespace".into());
        }
        Ok(Backup {
            subscription,
            installed_csv: field("installedCSV")?,
            version: field("version")?,
            extension: parsed("clusterExtension.json")?,
            installer,
            operator_condition: match cm.pointer("/data/operatorCondition.json") {
                None => None,
                Some(_) => Some(parsed("operatorCondition.json")?),
            },
        })
    }

    /// The Subscription a rollback creates: as backed up, starting at the installed CSV.
    pub fn restored_subscription(&self) -> Value {
        let mut sub = self.subscription.clone();
        sub["spec"]["startingCSV"] = json!(self.installed_csv);
        sub
    }
}

/// The name of the Role (and RoleBinding) that lets installer account `account` read
/// its backup ConfigMap ([`backup_reader`]).
pub fn reader_role_name(account: &str) -> String {
    let mut name = format!("{account}-migration-backup");
    name.truncate(253);
    name
}

/// The Role and RoleBinding that let the installer account `account` of namespace
/// `namespace` read (`get`) the backup ConfigMap `configmap` there, and nothing else:
/// the controller reads a ClusterExtension's backup as its installer, never as itself
/// (SECURITY.md, "Takeovers").
pub fn backup_reader(namespace: &str, account: &str, configmap: &str) -> [Value; 2] {
    let name = reader_role_name(account);
    [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": [configmap], "verbs": ["get"]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }),
    ]
}

/// The backup a first convert writes, from `check` of the live Subscription `sub` and
/// the installer account's objects; the error says what is missing.
pub fn propose(
    check: &super::Check,
    sub: &Value,
    installer: Result<Vec<Value>, String>,
    operator_condition: Option<&Value>,
) -> Result<Backup, String> {
    let installer =
        installer.map_err(|e| format!("the installer RBAC could not be computed: {e}"))?;
    if installer.is_empty() {
        return Err("the installer RBAC is empty".into());
    }
    let (Some(installed_csv), Some(version)) = (&check.installed_csv, &check.version) else {
        return Err(format!(
            "Subscription {} has no installed CSV with a version",
            check.subscription
        ));
    };
    let mut installer = installer;
    let namespace = text(sub, "/metadata/namespace").unwrap_or_default();
    let name = text(sub, "/metadata/name").unwrap_or_default();
    if let Some(account) = text(&check.cluster_extension, "/spec/serviceAccount/name") {
        installer.extend(backup_reader(&namespace, &account, &configmap_name(&name)));
    }
    Ok(Backup {
        subscription: subscription_snapshot(sub),
        installed_csv: installed_csv.clone(),
        version: version.clone(),
        extension: check.cluster_extension.clone(),
        installer,
        operator_condition: operator_condition.map(operator_condition_snapshot),
    })
}
