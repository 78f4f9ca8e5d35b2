//! What the files of `apply` share, so that none of them imports another for it: the
//! reference to one applied object ([`ObjectRef`], also what the revision record and a
//! taken-over installation list) and the field manager of every server-side apply
//! ([`FIELD_MANAGER`]).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fmt;

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "olmv1";

/// A reference to one applied object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    /// The reference of a rendered object (`None` without kind, apiVersion or name).
    pub fn from_object(obj: &Value) -> Option<ObjectRef> {
        let api_version = obj.get("apiVersion")?.as_str()?;
        let (group, version) = crate::kinds::split_api_version(api_version)?;
        Some(ObjectRef {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: obj.get("kind")?.as_str()?.to_owned(),
            namespace: obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            name: obj["metadata"]["name"].as_str()?.to_owned(),
        })
    }

    /// A stand-in object with this reference's apiVersion, kind and metadata (the inverse
    /// of [`ObjectRef::from_object`]), for checks that only need those.
    pub fn to_stub(&self) -> Value {
        let mut meta = json!({"name": self.name});
        if !self.namespace.is_empty() {
            meta["namespace"] = json!(self.namespace);
        }
        json!({"apiVersion": self.api_version(), "kind": self.kind, "metadata": meta})
    }

    /// Identity independent of the API version (a served-version change is the same object).
    pub fn identity(&self) -> (&str, &str, &str, &str) {
        (&self.group, &self.kind, &self.namespace, &self.name)
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// `Kind/namespace/name`, or `Kind/name` for cluster-scoped objects.
impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}})
    }

    #[test]
    fn object_ref_from_objects_and_display() {
        let r = ObjectRef::from_object(&cm("a")).unwrap();
        assert_eq!(r.to_string(), "ConfigMap/ns/a");
        assert_eq!(r.api_version(), "v1");
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x.y"}});
        let r = ObjectRef::from_object(&crd).unwrap();
        assert_eq!(r.to_string(), "CustomResourceDefinition/x.y");
        assert_eq!(r.group, "apiextensions.k8s.io");
        assert!(ObjectRef::from_object(&json!({"kind": "X"})).is_none());
    }
}
