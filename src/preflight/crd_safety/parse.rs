//! Reading one CustomResourceDefinition from YAML or JSON text supplied by a user
//! (`crd-diff`): bounded nesting and alias expansion ([`crate::yaml`]), clear errors for
//! v1beta1 CRDs, other kinds, several CRDs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Deepest JSON/YAML nesting accepted (real CRDs stay near 31; 64 schema levels need ~140).
pub const MAX_DOCUMENT_DEPTH: usize = 160;

/// Most JSON objects (nearly all of them schema nodes) a CRD may have to be compared.
/// Each schema node becomes a k8s-openapi `JSONSchemaProps` of 944 bytes, held in
/// `BTreeMap`s about half full: ~2 KB per node, so two 2.7 MB CRDs of 100,000 one-line
/// properties took 454 MB in `olmv1 crd-diff`. The largest CRD of the real bundles in the
/// test fixtures has 2,595 nodes (914 KB with descriptions); 50,000 nodes of ~30 bytes
/// already fill etcd's default 1.5 MiB request limit, so no CRD a default API server
/// stores comes near it. Bounds the comparison's memory to ~100 MB per CRD.
pub const MAX_SCHEMA_NODES: usize = 50_000;

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
        "CRD {name:?} has {nodes} schema nodes (JSON objects), more than the {MAX_SCHEMA_NODES} the upgrade-safety check reads (each costs ~2 KB of memory there; no CRD a default API server can store comes near the limit)"
    )]
    TooLarge { name: String, nodes: usize },
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
    let (levels, nodes) = shape(&doc);
    if levels > MAX_DOCUMENT_DEPTH {
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
    if nodes > MAX_SCHEMA_NODES {
        return Err(CrdInputError::TooLarge { name, nodes });
    }
    serde_json::from_value(doc).map_err(|e| CrdInputError::Invalid {
        name,
        reason: e.to_string(),
    })
}

/// Nesting depth of a JSON value and the number of objects in it, computed without
/// recursion.
fn shape(v: &Value) -> (usize, usize) {
    let (mut max, mut objects) = (0, 0);
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            Value::Object(o) => {
                objects += 1;
                stack.extend(o.values().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    (max, objects)
}

/// The number of JSON objects in `v` (see [`MAX_SCHEMA_NODES`]).
pub fn schema_nodes(v: &Value) -> usize {
    shape(v).1
}
