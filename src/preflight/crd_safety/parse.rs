//! Reading one CustomResourceDefinition from YAML or JSON text supplied by a user
//! (`crd-diff`): bounded nesting and alias expansion ([`crate::yaml`]), clear errors for
//! v1beta1 CRDs, other kinds, several CRDs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Deepest JSON/YAML nesting accepted (real CRDs stay near 31; 64 schema levels need ~140).
pub const MAX_DOCUMENT_DEPTH: usize = 160;

/// Why text could not be read as an `apiextensions.k8s.io/v1` CRD.
#[derive(Debug, thiserror::Error)]
pub enum CrdInputError {
    #[error("not valid YAML or JSON: {0}")]
    Syntax(String),
    #[error(
        "CRD {name:?} uses apiextensions.k8s.io/v1beta1, which Kubernetes no longer serves (removed in 1.22); convert it to apiextensions.k8s.io/v1"
    )]
    V1beta1 { name: String },
    #[error(
        "not a CustomResourceDefinition: the document has apiVersion {api_version:?} and kind {kind:?}"
    )]
    NotCrd { api_version: String, kind: String },
    #[error("no CustomResourceDefinition found (the input is empty)")]
    Empty,
    #[error("the input holds {0} CustomResourceDefinitions; give exactly one")]
    Several(usize),
    #[error("document nested deeper than {MAX_DOCUMENT_DEPTH} levels; refusing to read it")]
    TooDeep,
    #[error(
        "CustomResourceDefinition {name:?} does not match the apiextensions.k8s.io/v1 schema: {reason}"
    )]
    Invalid { name: String, reason: String },
}

/// Parses text holding exactly one `apiextensions.k8s.io/v1` CustomResourceDefinition
/// (other documents in a multi-document YAML stream are an error too, so nothing is
/// silently ignored).
pub fn parse_crd(text: &str) -> Result<CustomResourceDefinition, CrdInputError> {
    let docs: Vec<Value> = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(text).map_err(|e| CrdInputError::Syntax(e.to_string()))?]
    } else {
        let mut budget = serde_saphyr::Budget::default();
        budget.max_depth = MAX_DOCUMENT_DEPTH;
        let mut options = serde_saphyr::Options::default();
        options.budget = Some(budget);
        crate::yaml::from_multiple(text, options).map_err(|e| match e {
            crate::yaml::YamlError::Alias(a) => CrdInputError::Syntax(a.to_string()),
            crate::yaml::YamlError::Parse(e) => {
                let msg = e.to_string();
                if msg.contains("depth") {
                    CrdInputError::TooDeep
                } else {
                    CrdInputError::Syntax(msg)
                }
            }
        })?
    };
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    if docs.is_empty() {
        return Err(CrdInputError::Empty);
    }
    if docs.len() > 1 {
        return Err(CrdInputError::Several(docs.len()));
    }
    let Some(doc) = docs.into_iter().next() else {
        return Err(CrdInputError::Empty);
    };
    if depth(&doc) > MAX_DOCUMENT_DEPTH {
        return Err(CrdInputError::TooDeep);
    }
    let field = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if kind == "CustomResourceDefinition" && api_version == "apiextensions.k8s.io/v1beta1" {
        return Err(CrdInputError::V1beta1 { name });
    }
    if kind != "CustomResourceDefinition" || api_version != "apiextensions.k8s.io/v1" {
        return Err(CrdInputError::NotCrd { api_version, kind });
    }
    serde_json::from_value(doc).map_err(|e| CrdInputError::Invalid {
        name,
        reason: e.to_string(),
    })
}

/// Nesting depth of a JSON value, computed without recursion.
fn depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    max
}
