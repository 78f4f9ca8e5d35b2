//! Bundle configuration (`spec.config.inline`, docs/concepts/rendering.md §5.7) and install modes /
//! target namespaces (docs/concepts/rendering.md §5.4): the draft-07 JSON schema derived from the bundle's install
//! modes, upstream-compatible error messages, and the typed `deploymentConfig`.

use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt;
use std::sync::OnceLock;

/// An install mode of a CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InstallMode {
    AllNamespaces,
    MultiNamespace,
    OwnNamespace,
    SingleNamespace,
}

impl InstallMode {
    pub fn as_str(self) -> &'static str {
        match self {
            InstallMode::AllNamespaces => "AllNamespaces",
            InstallMode::MultiNamespace => "MultiNamespace",
            InstallMode::OwnNamespace => "OwnNamespace",
            InstallMode::SingleNamespace => "SingleNamespace",
        }
    }
    fn parse(s: &str) -> Option<InstallMode> {
        Some(match s {
            "AllNamespaces" => InstallMode::AllNamespaces,
            "MultiNamespace" => InstallMode::MultiNamespace,
            "OwnNamespace" => InstallMode::OwnNamespace,
            "SingleNamespace" => InstallMode::SingleNamespace,
            _ => return None,
        })
    }
}

/// The supported install modes of a CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InstallModeSet {
    pub all: bool,
    pub multi: bool,
    pub own: bool,
    pub single: bool,
}

impl InstallModeSet {
    /// From the CSV `spec.installModes` entries (unknown types are ignored).
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = (&'a str, bool)>) -> Self {
        let mut set = InstallModeSet::default();
        for (t, supported) in entries {
            if !supported {
                continue;
            }
            match InstallMode::parse(t) {
                Some(InstallMode::AllNamespaces) => set.all = true,
                Some(InstallMode::MultiNamespace) => set.multi = true,
                Some(InstallMode::OwnNamespace) => set.own = true,
                Some(InstallMode::SingleNamespace) => set.single = true,
                None => {}
            }
        }
        set
    }
    /// Supported modes, sorted by name.
    pub fn sorted(&self) -> Vec<InstallMode> {
        let mut v = Vec::new();
        if self.all {
            v.push(InstallMode::AllNamespaces);
        }
        if self.multi {
            v.push(InstallMode::MultiNamespace);
        }
        if self.own {
            v.push(InstallMode::OwnNamespace);
        }
        if self.single {
            v.push(InstallMode::SingleNamespace);
        }
        v
    }
    /// Whether the bundle supports only AllNamespaces among the modes the API can reach
    /// (i.e. neither OwnNamespace nor SingleNamespace).
    pub fn all_namespaces_only(&self) -> bool {
        self.all && !self.own && !self.single
    }
}

impl fmt::Display for InstallModeSet {
    /// Go `%v` of the sorted mode list: `[AllNamespaces OwnNamespace]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.sorted().into_iter().map(InstallMode::as_str).collect();
        write!(f, "[{}]", names.join(" "))
    }
}

/// `deploymentConfig` of the bundle configuration (OLM v0 SubscriptionConfig minus selector).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentConfig {
    pub env: Option<Vec<k8s_openapi::api::core::v1::EnvVar>>,
    pub env_from: Option<Vec<k8s_openapi::api::core::v1::EnvFromSource>>,
    pub volumes: Option<Vec<k8s_openapi::api::core::v1::Volume>>,
    pub volume_mounts: Option<Vec<k8s_openapi::api::core::v1::VolumeMount>>,
    pub tolerations: Option<Vec<k8s_openapi::api::core::v1::Toleration>>,
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    pub node_selector: Option<std::collections::BTreeMap<String, String>>,
    pub affinity: Option<k8s_openapi::api::core::v1::Affinity>,
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// The validated bundle configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BundleConfig {
    pub watch_namespace: Option<String>,
    pub deployment_config: Option<DeploymentConfig>,
}

/// Invalid bundle configuration or target namespaces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Schema violations (docs/concepts/rendering.md §5.7); upstream wraps it as `invalid ClusterExtension configuration: …`.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// Target namespaces not allowed by the install modes (docs/concepts/rendering.md §5.4).
    #[error("invalid option(s): invalid target namespaces {targets}: {message}")]
    TargetNamespaces { targets: String, message: String },
}

const NAMESPACE_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

fn deployment_config_schema() -> Value {
    let obj_array = json!({"type": "array", "items": {"type": "object"}});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "affinity": {"type": ["object", "null"]},
            "annotations": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "env": {"type": ["array", "null"], "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
            "envFrom": obj_array.clone(),
            "nodeSelector": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "resources": {"type": ["object", "null"]},
            "tolerations": obj_array,
            "volumeMounts": {"type": ["array", "null"], "items": {"type": "object", "required": ["name", "mountPath"], "properties": {"name": {"type": "string"}, "mountPath": {"type": "string"}}}},
            "volumes": {"type": ["array", "null"], "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}
        }
    })
}

/// The draft-07 schema for a bundle with these install modes.
pub fn config_schema(modes: InstallModeSet) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    if modes.own || modes.single {
        let ty = if modes.all {
            json!(["string", "null"])
        } else {
            json!("string")
        };
        properties.insert(
            "watchNamespace".into(),
            json!({"type": ty, "minLength": 1, "maxLength": 63, "pattern": NAMESPACE_PATTERN}),
        );
        if !modes.all {
            required.push(json!("watchNamespace"));
        }
    }
    properties.insert("deploymentConfig".into(), deployment_config_schema());
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
        "required": required,
    })
}

/// Compiled validators, one per (all, own-or-single) combination; compiled once.
fn validator(modes: InstallModeSet) -> Result<&'static jsonschema::Validator, String> {
    static CACHE: [OnceLock<Result<jsonschema::Validator, String>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let key = usize::from(modes.all) * 2 + usize::from(modes.own || modes.single);
    let shape = InstallModeSet {
        all: modes.all,
        own: modes.own || modes.single,
        ..Default::default()
    };
    CACHE[key]
        .get_or_init(|| {
            jsonschema::draft7::options()
                .build(&config_schema(shape))
                .map_err(|e| format!("internal error: invalid configuration schema: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// `/deploymentConfig/env/0/name` → `deploymentConfig.env[0].name`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

fn join_path(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}.{child}")
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn format_error(err: &jsonschema::ValidationError<'_>) -> Vec<String> {
    use jsonschema::error::ValidationErrorKind as K;
    let path = field_path(err.instance_path().as_str());
    match err.kind() {
        K::Required { property } => {
            let p = property
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| property.to_string());
            vec![format!(
                "required field \"{}\" is missing",
                join_path(&path, &p)
            )]
        }
        K::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|f| format!("unknown field \"{}\"", join_path(&path, f)))
            .collect(),
        K::Type { kind } => {
            let want = match kind {
                jsonschema::error::TypeKind::Single(t) => t.to_string(),
                jsonschema::error::TypeKind::Multiple(ts) => ts
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            let got = json_type_name(err.instance());
            if path.is_empty() {
                vec![format!("invalid type: got {got}, want {want}")]
            } else {
                vec![format!(
                    "invalid type for field \"{path}\": got {got}, want {want}"
                )]
            }
        }
        K::Pattern { pattern } => {
            vec![format!("field \"{path}\" must match pattern \"{pattern}\"")]
        }
        K::MaxLength { limit } => vec![format!(
            "field \"{path}\" must have maximum length of {limit} (len={})",
            err.instance()
                .as_str()
                .map(|s| s.chars().count())
                .unwrap_or(0)
        )],
        K::MinLength { limit } => vec![format!(
            "field \"{path}\" must have minimum length of {limit} (len={})",
            err.instance()
                .as_str()
                .map(|s| s.chars().count())
                .unwrap_or(0)
        )],
        K::Format { format } => vec![format!(
            "invalid format for field \"{path}\": not a valid {format}"
        )],
        _ => vec![if path.is_empty() {
            err.to_string()
        } else {
            format!("field \"{path}\": {err}")
        }],
    }
}

fn combine(errors: Vec<String>) -> String {
    if errors.len() == 1 {
        errors.into_iter().next().unwrap_or_default()
    } else {
        let mut s = String::from("multiple errors found:");
        for e in errors {
            s.push_str("\n  - ");
            s.push_str(&e);
        }
        s
    }
}

impl BundleConfig {
    /// Validates `config` (absent = `{}`) against the schema for `modes` and reads it.
    pub fn parse(
        config: Option<&Value>,
        modes: InstallModeSet,
        install_namespace: &str,
    ) -> Result<BundleConfig, ConfigError> {
        let empty = Value::Object(Default::default());
        let config = config.unwrap_or(&empty);
        let validator = validator(modes).map_err(ConfigError::Invalid)?;
        let mut errors: Vec<String> = validator
            .iter_errors(config)
            .flat_map(|e| format_error(&e))
            .collect();
        let watch_namespace = config
            .get("watchNamespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        if errors.is_empty()
            && let Some(ns) = &watch_namespace
        {
            // The custom formats of docs/concepts/rendering.md §5.7 (checked here to carry their exact messages).
            if modes.own && !modes.single && ns != install_namespace {
                errors.push(format!(
                    "invalid format for field \"watchNamespace\": invalid value \"{ns}\": must be \"{install_namespace}\" (the namespace where the operator is installed) because this operator only supports OwnNamespace install mode"
                ));
            } else if modes.single && !modes.own && ns == install_namespace {
                errors.push(format!(
                    "invalid format for field \"watchNamespace\": invalid value \"{ns}\": must be different from \"{install_namespace}\" (the install namespace) because this operator uses SingleNamespace install mode to watch a different namespace"
                ));
            }
        }
        let mut deployment_config = None;
        if errors.is_empty()
            && let Some(dc) = config.get("deploymentConfig")
            && !dc.is_null()
        {
            match DeploymentConfig::deserialize(dc) {
                Ok(d) => deployment_config = Some(d),
                Err(e) => errors.push(format!("invalid value for field \"deploymentConfig\": {e}")),
            }
        }
        if !errors.is_empty() {
            return Err(ConfigError::Invalid(combine(errors)));
        }
        Ok(BundleConfig {
            watch_namespace,
            deployment_config,
        })
    }
}

fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Target namespaces for the install (docs/concepts/rendering.md §5.4): `[""]` means all namespaces.
pub fn target_namespaces(
    modes: InstallModeSet,
    watch_namespace: Option<&str>,
    install_namespace: &str,
) -> Result<Vec<String>, ConfigError> {
    let targets: Vec<String> = match watch_namespace {
        Some(ns) => vec![ns.to_string()],
        None if modes.all => vec![String::new()],
        None => Vec::new(),
    };
    let err = |message: String| ConfigError::TargetNamespaces {
        targets: go_list(&targets),
        message,
    };
    if targets.is_empty() {
        return Err(err(if modes.multi {
            "at least one target namespace must be specified".into()
        } else {
            "exactly one target namespace must be specified".into()
        }));
    }
    if targets.len() == 1 {
        let t = &targets[0];
        if t.is_empty() {
            if modes.all {
                return Ok(targets);
            }
            return Err(err(format!(
                "supported install modes {modes} do not support targeting all namespaces"
            )));
        }
        if t == install_namespace {
            if modes.own {
                return Ok(targets);
            }
            return Err(err(format!(
                "supported install modes {modes} do not support targeting own namespace"
            )));
        }
        if modes.single {
            return Ok(targets);
        }
    }
    Err(err(format!(
        "supported install modes {modes} do not support target namespaces {}",
        go_list(&targets)
    )))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
