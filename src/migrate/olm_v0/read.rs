//! The fields of OLM v0's objects that the plan reads (olm-v0 reference §1.1), each
//! read defensively: a missing field or one of another shape reads as absent.

use serde_json::Value;

/// A string field, `None` when absent, not a string or empty.
pub fn text(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A list of strings, its other items skipped; empty when absent or not a list.
pub fn strings(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// What the plan reads from a Subscription.
#[derive(Clone, Debug, Default)]
pub struct SubscriptionView {
    pub name: String,
    pub namespace: String,
    /// `spec.name`: the package.
    pub package: String,
    pub channel: Option<String>,
    pub source: Option<String>,
    pub source_namespace: Option<String>,
    /// `spec.installPlanApproval` is `Manual`.
    pub manual: bool,
    /// `spec.config` (SubscriptionConfig), when set.
    pub config: Option<Value>,
    pub installed_csv: Option<String>,
    /// `status.state` (`AtLatestKnown`, `UpgradePending`, …).
    pub state: Option<String>,
    /// The `olm.generated-by` annotation: OLM made it to install a dependency.
    pub generated_by: Option<String>,
}

impl SubscriptionView {
    pub fn of(sub: &Value) -> SubscriptionView {
        SubscriptionView {
            name: text(sub, "/metadata/name").unwrap_or_default(),
            namespace: text(sub, "/metadata/namespace").unwrap_or_default(),
            package: text(sub, "/spec/name").unwrap_or_default(),
            channel: text(sub, "/spec/channel"),
            source: text(sub, "/spec/source"),
            source_namespace: text(sub, "/spec/sourceNamespace"),
            manual: text(sub, "/spec/installPlanApproval").as_deref() == Some("Manual"),
            config: sub
                .pointer("/spec/config")
                .filter(|c| c.as_object().is_some_and(|o| !o.is_empty()))
                .cloned(),
            installed_csv: text(sub, "/status/installedCSV"),
            state: text(sub, "/status/state"),
            generated_by: sub
                .pointer("/metadata/annotations/olm.generated-by")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

/// What the plan reads from the installed ClusterServiceVersion.
#[derive(Clone, Debug, Default)]
pub struct CsvView {
    pub name: String,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.reason` and `status.message`, for the blocker's words.
    pub reason: Option<String>,
    /// The `olm.package` version of `operatorframework.io/properties`, else
    /// `spec.version`.
    pub version: Option<String>,
    /// Property types of `operatorframework.io/properties` that v1 refuses.
    pub dependency_properties: Vec<String>,
    /// `spec.apiservicedefinitions.owned` names.
    pub owned_apiservices: Vec<String>,
    /// `spec.installModes` supported (`OwnNamespace`, …).
    pub install_modes: Vec<String>,
    /// `spec.install.spec.deployments[].name`.
    pub deployments: Vec<String>,
}

/// Bundle property types OLM v1's resolver refuses (olm-v0 reference §4.2).
pub const DEPENDENCY_PROPERTIES: [&str; 3] =
    ["olm.package.required", "olm.gvk.required", "olm.constraint"];

impl CsvView {
    pub fn of(csv: &Value) -> CsvView {
        let props: Vec<Value> = text(
            csv,
            "/metadata/annotations/operatorframework.io~1properties",
        )
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .and_then(|v| v.get("properties").and_then(Value::as_array).cloned())
        .unwrap_or_default();
        let prop_version = props
            .iter()
            .find(|p| p["type"] == "olm.package")
            .and_then(|p| p["value"]["version"].as_str())
            .map(str::to_string);
        let mut dependency_properties: Vec<String> = props
            .iter()
            .filter_map(|p| p["type"].as_str())
            .filter(|t| DEPENDENCY_PROPERTIES.contains(t))
            .map(str::to_string)
            .collect();
        dependency_properties.dedup();
        let names = |pointer: &str, field: &str| -> Vec<String> {
            csv.pointer(pointer)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|d| d[field].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let install_modes = csv
            .pointer("/spec/installModes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|m| m["supported"] == true)
                    .filter_map(|m| m["type"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let reason = match (text(csv, "/status/reason"), text(csv, "/status/message")) {
            (Some(r), Some(m)) => Some(format!("{r}: {m}")),
            (r, m) => r.or(m),
        };
        CsvView {
            name: text(csv, "/metadata/name").unwrap_or_default(),
            phase: text(csv, "/status/phase"),
            reason,
            version: prop_version.or_else(|| text(csv, "/spec/version")),
            dependency_properties,
            owned_apiservices: names("/spec/apiservicedefinitions/owned", "name"),
            install_modes,
            deployments: names("/spec/install/spec/deployments", "name"),
        }
    }
}

/// The namespaces an OperatorGroup makes its operators watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// No OperatorGroup in the namespace.
    NoOperatorGroup,
    /// More than one (OLM v0 itself refuses to install then).
    SeveralOperatorGroups(Vec<String>),
    /// Every namespace.
    AllNamespaces,
    /// Exactly one namespace: the install namespace (OwnNamespace) or another one
    /// (SingleNamespace).
    One(String),
    /// Several namespaces (MultiNamespace), which OLM v1 cannot express.
    Several(Vec<String>),
    /// `spec.serviceAccountName` of the OperatorGroup is set (checked separately).
    Scoped {
        service_account: String,
        inner: Box<WatchScope>,
    },
}

impl WatchScope {
    /// The scope without the service account wrapper.
    pub fn namespaces(&self) -> &WatchScope {
        match self {
            WatchScope::Scoped { inner, .. } => inner,
            other => other,
        }
    }
}

/// The watch scope of the namespace's OperatorGroup: `spec.targetNamespaces`, else
/// (selector) `status.namespaces`; none of both (or `[""]`) is every namespace.
pub fn watch_scope(groups: &[Value], _install_namespace: &str) -> WatchScope {
    let og = match groups {
        [] => return WatchScope::NoOperatorGroup,
        [og] => og,
        many => {
            return WatchScope::SeveralOperatorGroups(
                many.iter()
                    .filter_map(|g| text(g, "/metadata/name"))
                    .collect(),
            );
        }
    };
    let list = |pointer: &str| -> Option<Vec<String>> {
        og.pointer(pointer).and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
    };
    let has_selector = og.pointer("/spec/selector").is_some_and(|s| !s.is_null());
    let mut namespaces = list("/spec/targetNamespaces").unwrap_or_default();
    if namespaces.is_empty() && has_selector {
        namespaces = list("/status/namespaces").unwrap_or_default();
    }
    namespaces.sort();
    namespaces.dedup();
    let scope = match namespaces.len() {
        0 => WatchScope::AllNamespaces,
        1 => WatchScope::One(namespaces.remove(0)),
        _ => WatchScope::Several(namespaces),
    };
    match text(og, "/spec/serviceAccountName") {
        Some(service_account) => WatchScope::Scoped {
            service_account,
            inner: Box::new(scope),
        },
        None => scope,
    }
}

/// Whether an OperatorCondition is in use: conditions set by the operator
/// (`status.conditions`, `spec.conditions`) or by an admin (`spec.overrides`).
pub fn operator_condition_in_use(cond: &Value) -> Vec<String> {
    ["/status/conditions", "/spec/conditions", "/spec/overrides"]
        .iter()
        .flat_map(|p| {
            cond.pointer(p)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["type"].as_str().map(str::to_string))
        .collect()
}
