//! The parts of a ClusterServiceVersion that validation and rendering read, as typed
//! structs parsed from the CSV JSON (Go field names of `operators.coreos.com/v1alpha1`).

use serde::Deserialize;
use serde_json::{Map, Value};

/// A CSV that could not be read as a ClusterServiceVersion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ClusterServiceVersion \"{name}\": {message}")]
pub struct CsvError {
    pub name: String,
    pub message: String,
}

/// Typed view of a CSV.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct Csv {
    pub metadata: CsvMetadata,
    pub spec: CsvSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct CsvMetadata {
    pub name: String,
    /// Annotation values are opaque; non-string values are kept as their JSON text.
    #[serde(deserialize_with = "string_map")]
    pub annotations: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CsvSpec {
    pub install_modes: Vec<InstallModeEntry>,
    pub install: Install,
    pub webhookdefinitions: Vec<WebhookDescription>,
    pub customresourcedefinitions: CrdDescriptions,
    pub apiservicedefinitions: ApiServiceDescriptions,
}

/// `spec.apiservicedefinitions`: the aggregated APIs the operator serves (`owned`) or
/// needs (`required`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct ApiServiceDescriptions {
    pub owned: Vec<ApiServiceDescription>,
    pub required: Vec<Described>,
}

/// One `spec.apiservicedefinitions.owned[]` entry.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiServiceDescription {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub deployment_name: String,
    /// 0 when absent: rendering uses 443.
    pub container_port: i32,
}

impl ApiServiceDescription {
    /// The container port, defaulting to 443 (OLM v0 `install/apiservice.go`).
    pub fn port(&self) -> i32 {
        if self.container_port > 0 {
            self.container_port
        } else {
            443
        }
    }

    /// The APIService's name, `<version>.<group>`.
    pub fn api_service_name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct InstallModeEntry {
    #[serde(rename = "type")]
    pub type_: String,
    pub supported: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct CrdDescriptions {
    pub owned: Vec<Described>,
    pub required: Vec<Described>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct Described {
    pub name: String,
    pub version: String,
    pub kind: String,
    pub group: String,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct Install {
    pub strategy: String,
    pub spec: StrategySpec,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StrategySpec {
    pub deployments: Vec<DeploymentEntry>,
    pub permissions: Vec<Permission>,
    pub cluster_permissions: Vec<Permission>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct DeploymentEntry {
    pub name: String,
    #[serde(deserialize_with = "string_map")]
    pub label: Map<String, Value>,
    pub spec: Value,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Permission {
    pub service_account_name: String,
    /// `None` when absent or null (Go nil slice).
    pub rules: Option<Vec<Value>>,
}

/// `spec.webhookdefinitions[].type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize)]
pub enum WebhookType {
    #[default]
    ValidatingAdmissionWebhook,
    MutatingAdmissionWebhook,
    ConversionWebhook,
}

impl WebhookType {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookType::ValidatingAdmissionWebhook => "ValidatingAdmissionWebhook",
            WebhookType::MutatingAdmissionWebhook => "MutatingAdmissionWebhook",
            WebhookType::ConversionWebhook => "ConversionWebhook",
        }
    }
}

/// One `spec.webhookdefinitions[]` entry.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WebhookDescription {
    pub generate_name: String,
    #[serde(rename = "type")]
    pub type_: WebhookType,
    pub deployment_name: String,
    /// 0 when absent: rendering uses 443.
    pub container_port: i32,
    pub target_port: Option<Value>,
    pub rules: Option<Value>,
    pub failure_policy: Option<Value>,
    pub match_policy: Option<Value>,
    pub object_selector: Option<Value>,
    pub side_effects: Option<Value>,
    pub timeout_seconds: Option<Value>,
    pub admission_review_versions: Option<Value>,
    pub reinvocation_policy: Option<Value>,
    pub webhook_path: Option<String>,
    #[serde(rename = "conversionCRDs")]
    pub conversion_crds: Vec<String>,
}

impl WebhookDescription {
    /// The container port, defaulting to 443.
    pub fn port(&self) -> i32 {
        if self.container_port == 0 {
            443
        } else {
            self.container_port
        }
    }
}

fn string_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    let raw: Option<Map<String, Value>> = Option::deserialize(d)?;
    Ok(raw
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(_) => (k, v),
            Value::Null => (k, Value::String(String::new())),
            other => (k, Value::String(other.to_string())),
        })
        .collect())
}

impl Csv {
    /// Reads the typed view from the CSV JSON.
    pub fn parse(csv: &Value) -> Result<Csv, CsvError> {
        Csv::deserialize(csv).map_err(|e| CsvError {
            name: csv
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            message: e.to_string(),
        })
    }
}
