//! Kinds to REST resources: the built-in table ([`super::builtin_resources`]), the
//! kinds defined by CRDs among the objects at hand, and whatever discovery adds. Used by
//! the permission preflight (which resource a rule names) and by apply (which URL an
//! object lives at). Pure.

use serde_json::Value;
use std::collections::BTreeMap;

/// The REST resource behind a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    pub resource: String,
    pub namespaced: bool,
}

/// Maps (group, kind) to its resource: built-in kinds, kinds defined by CRDs among the
/// objects, and whatever the caller adds from discovery.
#[derive(Debug, Clone, Default)]
pub struct ResourceMap {
    map: BTreeMap<(String, String), ResourceInfo>,
}

impl ResourceMap {
    /// Built-in kinds plus the kinds defined by the CRDs among `objects`.
    pub fn offline(objects: &[Value]) -> Self {
        let mut map = ResourceMap::default();
        for (group, kind, resource, namespaced) in super::builtin_resources() {
            map.insert(group, kind, resource, namespaced);
        }
        for obj in objects {
            if kind_of(obj) != Some("CustomResourceDefinition") {
                continue;
            }
            let spec = &obj["spec"];
            let (Some(group), Some(kind), Some(plural)) = (
                spec["group"].as_str(),
                spec["names"]["kind"].as_str(),
                spec["names"]["plural"].as_str(),
            ) else {
                continue;
            };
            let namespaced = spec["scope"].as_str() != Some("Cluster");
            map.insert(group, kind, plural, namespaced);
        }
        map
    }

    pub fn insert(&mut self, group: &str, kind: &str, resource: &str, namespaced: bool) {
        self.map.insert(
            (group.to_owned(), kind.to_owned()),
            ResourceInfo {
                resource: resource.to_owned(),
                namespaced,
            },
        );
    }

    /// Kinds of `objects` this map does not know (for the caller to look up in discovery).
    pub fn unknown_kinds(&self, objects: &[Value]) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = objects
            .iter()
            .filter_map(|o| {
                let (group, version) = split_api_version(o.get("apiVersion")?.as_str()?)?;
                let kind = kind_of(o)?;
                self.get(group, kind)
                    .is_none()
                    .then(|| (group.to_owned(), version.to_owned(), kind.to_owned()))
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    pub fn get(&self, group: &str, kind: &str) -> Option<&ResourceInfo> {
        self.map.get(&(group.to_owned(), kind.to_owned()))
    }

    /// The known resource, or a guess from the kind (lower-case English plural; namespaced
    /// iff the object names a namespace).
    pub fn resolve_or_guess(&self, group: &str, kind: &str, has_namespace: bool) -> ResourceInfo {
        self.get(group, kind)
            .cloned()
            .unwrap_or_else(|| ResourceInfo {
                resource: guess_plural(kind),
                namespaced: has_namespace,
            })
    }
}

/// The English plural Kubernetes uses for most kinds (`Policy` → `policies`).
pub fn guess_plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with("sh")
        || lower.ends_with("ch")
        || lower.ends_with('x')
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// The `kind` of an object.
pub fn kind_of(obj: &Value) -> Option<&str> {
    obj.get("kind").and_then(Value::as_str)
}

/// Splits an apiVersion into (group, version); the core group is `""`.
pub fn split_api_version(api_version: &str) -> Option<(&str, &str)> {
    match api_version.split_once('/') {
        Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => Some((g, v)),
        Some(_) => None,
        None if !api_version.is_empty() => Some(("", api_version)),
        None => None,
    }
}
