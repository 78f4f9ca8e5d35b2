//! `olmv1 crd-diff`: the upgrade-safety check for operator authors' CI. Reads two CRD
//! files (or the live CRD from a cluster and one file), prints the findings and exits
//! 0 (safe), 1 (unsafe) or 2 (bad input or cluster error).

use crate::preflight::crd_safety::{
    Finding, check_with_stored_versions, message, parse_crd, stored_versions,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest CRD file read (the biggest real CRDs are a few MB).
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Check whether a new CRD can safely replace an old one (exit 0 safe, 1 unsafe, 2 bad input).
#[derive(Debug, clap::Args)]
pub struct CrdDiffArgs {
    /// The old (installed) CRD, YAML or JSON. With --from-cluster this is the new CRD instead.
    pub old: PathBuf,
    /// The new CRD, YAML or JSON (omit it with --from-cluster).
    pub new: Option<PathBuf>,
    /// Versions that have objects stored in etcd, comma-separated (default: the old CRD's
    /// status.storedVersions, else its storage version).
    #[arg(long, value_delimiter = ',')]
    pub stored_versions: Option<Vec<String>>,
    /// Read the old CRD with this name from the cluster of the current kubeconfig.
    #[arg(long, value_name = "CRD_NAME")]
    pub from_cluster: Option<String>,
}

/// Runs the command; see [`CrdDiffArgs`].
pub fn run(args: CrdDiffArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(_)) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: &CrdDiffArgs) -> Result<Option<Vec<Finding>>, String> {
    let (old, new) = match (&args.from_cluster, &args.new) {
        (Some(name), None) => (fetch_live(name)?, read_crd(&args.old)?),
        (Some(_), Some(_)) => {
            return Err("with --from-cluster give only the new CRD file".to_owned());
        }
        (None, Some(new)) => (read_crd(&args.old)?, read_crd(new)?),
        (None, None) => return Err("give the old and the new CRD files".to_owned()),
    };
    let stored = match &args.stored_versions {
        Some(v) => v
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        None => stored_versions(&old),
    };
    let findings = check_with_stored_versions(&old, &new, &stored);
    let name = new.metadata.name.clone().unwrap_or_default();
    if findings.is_empty() {
        println!(
            "CRD {name:?}: safe to upgrade (stored versions: [{}])",
            stored.join(", ")
        );
        return Ok(None);
    }
    println!(
        "CRD {name:?}: {} problem(s) block the upgrade:",
        findings.len()
    );
    for f in &findings {
        println!("  - {f}");
    }
    println!();
    println!("condition message: {}", message(&name, &findings));
    Ok(Some(findings))
}

fn read_crd(path: &Path) -> Result<CustomResourceDefinition, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "{}: larger than {MAX_FILE_BYTES} bytes",
            path.display()
        ));
    }
    parse_crd(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn fetch_live(name: &str) -> Result<CustomResourceDefinition, String> {
    super::block_on(async {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| format!("connecting to the cluster: {e}"))?;
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client);
        api.get(name).await.map_err(|e| fetch_error(name, &e))
    })?
}

/// A readable error for a failed GET of the live CRD (kube's own text repeats the whole
/// API status in debug form).
fn fetch_error(name: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if status.is_not_found() => format!(
            "CRD {name:?} does not exist on the cluster (nothing to compare with: a new CRD is always safe to install)"
        ),
        kube::Error::Api(status) => format!(
            "getting CRD {name:?} from the cluster: {} (HTTP {})",
            status.message, status.code
        ),
        other => format!("getting CRD {name:?} from the cluster: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: samples.test.example.com}
spec:
  group: test.example.com
  scope: Namespaced
  names: {kind: Sample, plural: samples}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {a: {type: string}}}}}}
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {a: {type: string}}}}}}
";

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn args(old: PathBuf, new: Option<PathBuf>, stored: Option<&str>) -> CrdDiffArgs {
        CrdDiffArgs {
            old,
            new,
            stored_versions: stored.map(|s| s.split(',').map(str::to_owned).collect()),
            from_cluster: None,
        }
    }

    #[test]
    fn cluster_errors_are_short_and_say_what_is_wrong() {
        let status = |code: u16, reason: &str, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                reason: reason.to_owned(),
                message: message.to_owned(),
                ..Default::default()
            }))
        };
        let e = status(
            404,
            "NotFound",
            "customresourcedefinitions.apiextensions.k8s.io \"x.example.com\" not found",
        );
        assert_eq!(
            fetch_error("x.example.com", &e),
            "CRD \"x.example.com\" does not exist on the cluster (nothing to compare with: a new CRD is always safe to install)"
        );
        let e = status(403, "Forbidden", "user \"bob\" cannot get resource");
        assert_eq!(
            fetch_error("x.example.com", &e),
            "getting CRD \"x.example.com\" from the cluster: user \"bob\" cannot get resource (HTTP 403)"
        );
    }

    #[test]
    fn safe_unsafe_and_bad_input_map_to_distinct_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let old = write(dir.path(), "old.yaml", OLD);
        // The same CRD as JSON: safe.
        let as_json = serde_json::to_string(&parse_crd(OLD).unwrap()).unwrap();
        let same = write(dir.path(), "same.json", &as_json);
        assert_eq!(
            run_inner(&args(old.clone(), Some(same), None)).unwrap(),
            None
        );

        // v1alpha1 dropped: safe by default (only v1 is stored), unsafe when v1alpha1 is stored.
        let dropped_text = OLD.replace(
            "  - name: v1alpha1\n    served: true\n    storage: false\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {a: {type: string}}}}}}\n",
            "",
        );
        assert_ne!(dropped_text, OLD);
        let dropped = write(dir.path(), "dropped.yaml", &dropped_text);
        assert_eq!(
            run_inner(&args(old.clone(), Some(dropped.clone()), None)).unwrap(),
            None
        );
        let f = run_inner(&args(old.clone(), Some(dropped), Some("v1alpha1,v1")))
            .unwrap()
            .unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].to_string(),
            "storedVersionRemoval: stored versions removed : [v1alpha1]"
        );

        // A field removed: unsafe.
        let removed = write(
            dir.path(),
            "removed.yaml",
            &OLD.replace("properties: {a: {type: string}}", "properties: {}"),
        );
        let f = run_inner(&args(old.clone(), Some(removed.clone()), None))
            .unwrap()
            .unwrap();
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(
            run(args(old.clone(), Some(removed), None)),
            ExitCode::from(1)
        );

        // Bad input: not YAML, v1beta1, missing file, missing second argument.
        let bad = write(dir.path(), "bad.yaml", "a: [");
        let e = run_inner(&args(old.clone(), Some(bad.clone()), None)).unwrap_err();
        assert!(
            e.contains("bad.yaml") && e.contains("not valid YAML"),
            "{e}"
        );
        assert_eq!(run(args(old.clone(), Some(bad), None)), ExitCode::from(2));
        let beta = write(
            dir.path(),
            "beta.yaml",
            &OLD.replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"),
        );
        let e = run_inner(&args(old.clone(), Some(beta), None)).unwrap_err();
        assert!(e.contains("v1beta1"), "{e}");
        assert!(
            run_inner(&args(
                old.clone(),
                Some(dir.path().join("missing.yaml")),
                None
            ))
            .is_err()
        );
        assert!(run_inner(&args(old, None, None)).is_err());
    }
}
