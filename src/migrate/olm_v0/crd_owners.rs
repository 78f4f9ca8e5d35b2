//! Who else owns the CRDs an operator's CSV owns (docs/how-to/switch-from-olm-v0.md,
//! "Blockers"): OLM v0 lets one package be installed in several namespaces, each CSV
//! owning the same cluster-scoped CRDs, while OLM v1 installs a package — and owns its
//! CRDs — once per cluster. A takeover of one such installation would make its
//! ClusterExtension the owner of CRDs the others still serve (and delete them, with
//! every custom resource of the other namespaces, on its uninstall); a CRD another
//! ClusterExtension already owns is a collision the controller refuses. Either way the
//! switch must not start: [`others`] lists them for `check`. Pure; `olmv1 migrate
//! check` lists the CSVs (copies aside) and reads the CRDs' owner labels.

use super::convert::owned_crd_names;
use super::read::text;
use serde::Serialize;
use serde_json::Value;

/// The CRDs one CSV owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvCrds {
    pub namespace: String,
    pub name: String,
    pub owned: Vec<String>,
}

impl CsvCrds {
    /// The CRDs `csv` owns (`spec.customresourcedefinitions.owned`); `None` for a CSV
    /// OLM v0 copied into another namespace (label `olm.copiedFrom`), which owns
    /// nothing of its own.
    pub fn of(csv: &Value) -> Option<CsvCrds> {
        if text(csv, "/metadata/labels/olm.copiedFrom").is_some() {
            return None;
        }
        Some(CsvCrds {
            namespace: text(csv, "/metadata/namespace")?,
            name: text(csv, "/metadata/name")?,
            owned: owned_crd_names(csv),
        })
    }
}

/// Another owner of one of the operator's CRDs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum CrdOwner {
    /// A CSV of another installation (OLM v0's).
    ClusterServiceVersion {
        crd: String,
        namespace: String,
        name: String,
    },
    /// A ClusterExtension (the CRD's `olm.operatorframework.io/owner-*` labels).
    ClusterExtension { crd: String, name: String },
}

impl CrdOwner {
    pub fn crd(&self) -> &str {
        match self {
            CrdOwner::ClusterServiceVersion { crd, .. }
            | CrdOwner::ClusterExtension { crd, .. } => crd,
        }
    }
}

/// The owners of `this`'s CRDs other than `this` and the ClusterExtension `extension`
/// the switch creates: every CSV of `csvs` owning one of them (another namespace's, or
/// another CSV of the same namespace), and the ClusterExtension `managed_by` names per
/// CRD (`(crd, extension)`).
pub fn others(
    this: &CsvCrds,
    csvs: &[CsvCrds],
    managed_by: &[(String, String)],
    extension: &str,
) -> Vec<CrdOwner> {
    let mut out = Vec::new();
    for crd in &this.owned {
        for c in csvs {
            let same = c.namespace == this.namespace && c.name == this.name;
            if !same && c.owned.contains(crd) {
                out.push(CrdOwner::ClusterServiceVersion {
                    crd: crd.clone(),
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                });
            }
        }
        for (managed, name) in managed_by {
            if managed == crd && name != extension {
                out.push(CrdOwner::ClusterExtension {
                    crd: crd.clone(),
                    name: name.clone(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csv(ns: &str, name: &str, crds: &[&str], copied: bool) -> Value {
        let mut v = json!({"metadata": {"namespace": ns, "name": name, "labels": {}},
            "spec": {"customresourcedefinitions": {"owned":
                crds.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()}}});
        if copied {
            v["metadata"]["labels"]["olm.copiedFrom"] = json!("ops");
        }
        v
    }

    #[test]
    fn another_namespaces_csv_and_another_extension_own_the_crds_too() {
        let this = CsvCrds::of(&csv(
            "a",
            "p.v1",
            &["w.example.com", "g.example.com"],
            false,
        ))
        .expect("a CSV");
        let csvs: Vec<CsvCrds> = [
            csv("a", "p.v1", &["w.example.com", "g.example.com"], false),
            csv("b", "p.v1", &["w.example.com"], false),
            csv("c", "p.v1", &["w.example.com"], true),
            csv("d", "q.v1", &["other.example.com"], false),
        ]
        .iter()
        .filter_map(CsvCrds::of)
        .collect();
        let managed = vec![
            ("g.example.com".to_string(), "team-g".to_string()),
            ("w.example.com".to_string(), "p-sub".to_string()),
        ];
        assert_eq!(
            others(&this, &csvs, &managed, "p-sub"),
            vec![
                CrdOwner::ClusterServiceVersion {
                    crd: "w.example.com".into(),
                    namespace: "b".into(),
                    name: "p.v1".into()
                },
                CrdOwner::ClusterExtension {
                    crd: "g.example.com".into(),
                    name: "team-g".into()
                },
            ],
            "the copy in c owns nothing; the extension the switch creates is no other owner"
        );
        assert!(others(&this, &csvs[..1], &[], "p-sub").is_empty());
    }
}
