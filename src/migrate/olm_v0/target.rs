//! What the switch would create and remove: the ClusterExtension (olm-v0 reference
//! §3.1: package; the channel, the catalog's default made explicit; the version pinned
//! for Manual approval; `deploymentConfig` from the Subscription's `spec.config`;
//! `watchNamespace` from the OperatorGroup, OwnNamespace and SingleNamespace kept as
//! they are; a selector for the ClusterCatalog found), its installer account, and the
//! v0 objects of the operator with what happens to each (§3.4).

use super::V0Operator;
use super::catalog::Found;
use super::install_plans::InstallPlanView;
use super::read::{CsvView, SubscriptionView, WatchScope, operator_condition_in_use, text};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// Label every ClusterCatalog carries with its own name (what the selector matches).
pub const CATALOG_NAME_LABEL: &str = "olm.operatorframework.io/metadata.name";
/// Annotation on the ClusterExtension naming the Subscription it replaces.
pub const MIGRATED_FROM_ANNOTATION: &str = "olm.operatorframework.io/migrated-from-subscription";

/// The ClusterExtension for the Subscription.
pub fn cluster_extension(
    sub: &SubscriptionView,
    scope: &WatchScope,
    version: Option<&str>,
    found: &Found,
) -> Value {
    let mut catalog = json!({"packageName": sub.package});
    if let Some(channel) = found.channel.as_ref().or(sub.channel.as_ref()) {
        catalog["channels"] = json!([channel]);
    }
    if sub.manual
        && let Some(v) = version
    {
        catalog["version"] = json!(v);
    }
    if let Some(name) = &found.catalog {
        catalog["selector"] = json!({"matchLabels": {CATALOG_NAME_LABEL: name}});
    }
    let mut spec = json!({
        "namespace": sub.namespace,
        "serviceAccount": {"name": installer_name(&sub.name)},
        "source": {"sourceType": "Catalog", "catalog": catalog},
    });
    let inline = inline_config(sub, scope);
    if !inline.is_empty() {
        spec["config"] = json!({"configType": "Inline", "inline": inline});
    }
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {
            "name": sub.name,
            "annotations": {MIGRATED_FROM_ANNOTATION: format!("{}/{}", sub.namespace, sub.name)},
        },
        "spec": spec,
    })
}

/// `watchNamespace` (one namespace) and `deploymentConfig` (the SubscriptionConfig
/// minus `selector`, which a Deployment's selector cannot take over).
fn inline_config(sub: &SubscriptionView, scope: &WatchScope) -> Map<String, Value> {
    let mut inline = Map::new();
    if let WatchScope::One(ns) = scope.namespaces() {
        inline.insert("watchNamespace".into(), json!(ns));
    }
    if let Some(Value::Object(config)) = &sub.config {
        let mut config = config.clone();
        config.remove("selector");
        if !config.is_empty() {
            inline.insert("deploymentConfig".into(), Value::Object(config));
        }
    }
    inline
}

/// The installer ServiceAccount name (`<extension>-installer`, as `olmv1 rbac` prints).
pub fn installer_name(extension: &str) -> String {
    format!("{extension}-installer")
}

/// The least-privilege installer account: its name, and the `olmv1 rbac` command that
/// prints its ServiceAccount, ClusterRole and ClusterRoleBinding (the command line fills
/// `rbac` by running it).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installer {
    pub service_account: String,
    pub namespace: String,
    /// The bundle image the rules are computed from, when the catalog names it.
    pub bundle_image: Option<String>,
    pub rbac_command: Option<String>,
    /// The RBAC YAML, when computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rbac: Option<String>,
}

/// The installer of the ClusterExtension for `sub`.
pub fn installer(
    sub: &SubscriptionView,
    version: Option<&str>,
    scope: &WatchScope,
    found: &Found,
) -> Installer {
    let rbac_command = match (&found.catalog, version) {
        (Some(catalog), Some(v)) => {
            let watch = match scope.namespaces() {
                WatchScope::One(ns) => format!(" --watch-namespace {ns}"),
                _ => String::new(),
            };
            Some(format!(
                "olmv1 rbac --catalog {catalog} {}@{v} --namespace {} --extension {}{watch}",
                sub.package, sub.namespace, sub.name
            ))
        }
        _ => None,
    };
    Installer {
        service_account: installer_name(&sub.name),
        namespace: sub.namespace.clone(),
        bundle_image: found.bundle.as_ref().map(|b| b.image.clone()),
        rbac_command,
        rbac: None,
    }
}

/// What the switch does with a v0 object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum V0ObjectAction {
    /// Stopped and removed: olmv1 manages what it installed from then on.
    Remove,
    /// Its workload objects are taken over by the ClusterExtension in place.
    Replace,
    /// Left in place (other operators may use it).
    Keep,
}

/// One v0 object of the operator.
#[derive(Clone, Debug, Serialize)]
pub struct V0Object {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub action: V0ObjectAction,
    pub why: String,
}

fn object(kind: &str, ns: &str, name: &str, action: V0ObjectAction, why: &str) -> V0Object {
    V0Object {
        kind: kind.into(),
        namespace: ns.into(),
        name: name.into(),
        action,
        why: why.into(),
    }
}

/// The v0 objects of `op`, in the order the reference's stop sequence meets them.
pub fn v0_objects(op: &V0Operator, sub: &SubscriptionView, csv: Option<&CsvView>) -> Vec<V0Object> {
    use V0ObjectAction::{Keep, Remove, Replace};
    let ns = sub.namespace.as_str();
    let mut out = vec![object(
        "Subscription",
        ns,
        &sub.name,
        Remove,
        "replaced by the ClusterExtension (its spec kept as a backup for rollback)",
    )];
    if let Some(csv) = csv {
        out.push(object(
            "ClusterServiceVersion",
            ns,
            &csv.name,
            Replace,
            "its Deployments, RBAC, Services and webhooks are taken over by the ClusterExtension; the CSV is removed",
        ));
        for copy in &op.copied_csv_namespaces {
            out.push(object(
                "ClusterServiceVersion",
                copy,
                &csv.name,
                Remove,
                "copied CSV",
            ));
        }
        if let Some(condition) = &op.operator_condition {
            let in_use = operator_condition_in_use(condition);
            let note = if in_use.is_empty() {
                String::new()
            } else {
                format!(
                    " (set: {}; an Upgradeable=False still holds upgrades)",
                    in_use.join(", ")
                )
            };
            out.push(object(
                "OperatorCondition",
                ns,
                &csv.name,
                Replace,
                &format!("taken over by the ClusterExtension, which renders it and honours its Upgradeable condition{note}"),
            ));
        }
    }
    let installed = sub.installed_csv.as_deref().unwrap_or_default();
    for ip in op.install_plans.iter().map(InstallPlanView::of) {
        if !ip.name.is_empty() {
            let action = if ip.deleted_by_switch(&sub.name, installed) {
                Remove
            } else {
                Keep
            };
            let why = ip.why(&sub.name, installed);
            out.push(object("InstallPlan", ns, &ip.name, action, &why));
        }
    }
    if let Some(name) = &op.operator_object {
        out.push(object(
            "Operator",
            "",
            name,
            Remove,
            "v0's view of the operator's components",
        ));
    }
    for og in &op.operator_groups {
        if let Some(name) = text(og, "/metadata/name") {
            out.push(object(
                "OperatorGroup",
                ns,
                &name,
                Keep,
                "other Subscriptions of the namespace may need it",
            ));
        }
    }
    if let Some(cs) = &op.catalog_source
        && let Some(name) = text(cs, "/metadata/name")
    {
        let cs_ns = text(cs, "/metadata/namespace").unwrap_or_default();
        out.push(object(
            "CatalogSource",
            &cs_ns,
            &name,
            Keep,
            "other Subscriptions may use it",
        ));
    }
    out
}
