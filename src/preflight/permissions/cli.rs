//! `olmv1 rbac`: prints the least-privilege installer ServiceAccount, ClusterRole and
//! ClusterRoleBinding for a set of rendered objects (reference A3, seed §10.1.3), or with
//! `--diff` the rules an upgrade adds. Input: a registry+v1 bundle directory (rendered for
//! the namespace, as the controller will), or already rendered manifests (a YAML/JSON
//! file or a directory of them).

use super::PermissionError;
use super::rbac::{BundledRbac, added_rules, installer_rbac};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest manifest file read.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Print the least-privilege RBAC the installer ServiceAccount needs for a bundle.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// A registry+v1 bundle directory (manifests/ + metadata/), or rendered manifests: a
    /// YAML/JSON file (multi-document allowed) or a directory of them.
    pub source: PathBuf,
    /// Namespace of the installer ServiceAccount (the ClusterExtension's spec.namespace).
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// Name of the ClusterExtension (scopes the finalizers rule; names the objects).
    #[arg(long)]
    pub extension: String,
    /// How bundled ClusterRoles/Roles are covered: include their rules, or bind+escalate.
    #[arg(long, value_enum, default_value_t = BundledRbac::Include)]
    pub bundled_rbac: BundledRbac,
    /// The installed version (bundle directory or rendered manifests): print only the
    /// rules the upgrade adds.
    #[arg(long, value_name = "INSTALLED")]
    pub diff: Option<PathBuf>,
    /// For bundle directories: the `watchNamespace` the bundle is rendered with
    /// (OwnNamespace/SingleNamespace bundles).
    #[arg(long)]
    pub watch_namespace: Option<String>,
}

/// A bundle directory is rendered for `namespace`; anything else is read as manifests.
fn read_source(
    path: &Path,
    namespace: &str,
    watch_namespace: Option<&str>,
) -> Result<Vec<Value>, String> {
    let is_bundle =
        path.join("metadata").join("annotations.yaml").is_file() || path.join("manifests").is_dir();
    if !is_bundle {
        return read_manifests(path);
    }
    let bundle = crate::bundle::load_dir(path, &crate::bundle::LoadOptions::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let config = watch_namespace.map(|ns| serde_json::json!({ "watchNamespace": ns }));
    crate::bundle::render_owned(
        bundle,
        namespace,
        config.as_ref(),
        &crate::bundle::RenderOptions::default(),
    )
    .map_err(|e| format!("rendering {}: {e}", path.display()))
}

/// Runs the command; exit 0 on success, 2 on bad input.
pub fn run(args: RbacArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: &RbacArgs) -> Result<String, String> {
    let watch = args.watch_namespace.as_deref();
    let objects = read_source(&args.source, &args.namespace, watch)?;
    match &args.diff {
        None => rbac_yaml_with(
            &objects,
            &args.namespace,
            &args.extension,
            args.bundled_rbac,
        )
        .map_err(|e| e.to_string()),
        Some(installed) => {
            let old = read_source(installed, &args.namespace, watch)?;
            let rules = added_rules(&old, &objects, &args.extension, args.bundled_rbac)
                .map_err(|e| e.to_string())?;
            if rules.is_empty() {
                return Ok("# the upgrade needs no additional permissions\n".to_owned());
            }
            serde_saphyr::to_string(&serde_json::json!({ "rules": rules }))
                .map_err(|e| format!("serializing rules: {e}"))
        }
    }
}

/// The installer RBAC for `objects` as YAML (bundled RBAC included rule by rule).
pub fn rbac_yaml(
    objects: &[Value],
    namespace: &str,
    extension: &str,
) -> Result<String, PermissionError> {
    rbac_yaml_with(objects, namespace, extension, BundledRbac::Include)
}

/// [`rbac_yaml`] with a choice of how bundled RBAC is covered.
pub fn rbac_yaml_with(
    objects: &[Value],
    namespace: &str,
    extension: &str,
    mode: BundledRbac,
) -> Result<String, PermissionError> {
    let rbac = installer_rbac(objects, namespace, extension, mode)?;
    // Serializing plain JSON values to YAML cannot fail; keep the error visible anyway.
    Ok(rbac
        .to_yaml()
        .unwrap_or_else(|e| format!("# error serializing RBAC: {e}\n")))
}

/// Reads every object of a YAML/JSON file or of the `.yaml`/`.yml`/`.json` files of a
/// directory (sorted by name; `List` objects are flattened).
pub fn read_manifests(path: &Path) -> Result<Vec<Value>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", path.display()))?;
            let p = entry.path();
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if p.is_file() && matches!(ext, "yaml" | "yml" | "json") {
                files.push(p);
            }
        }
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    let mut objects = Vec::new();
    for file in files {
        let size = std::fs::metadata(&file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(format!(
                "{}: larger than {MAX_FILE_BYTES} bytes",
                file.display()
            ));
        }
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| format!("{}: invalid YAML: {e}", file.display()))?;
        for doc in docs {
            flatten(doc, &mut objects);
        }
    }
    Ok(objects)
}

fn flatten(doc: Value, out: &mut Vec<Value>) {
    match doc {
        Value::Null => {}
        Value::Object(ref m) if m.get("kind").and_then(Value::as_str) == Some("List") => {
            if let Some(items) = m.get("items").and_then(Value::as_array) {
                for item in items {
                    flatten(item.clone(), out);
                }
            }
        }
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(source: &Path, diff: Option<&Path>) -> RbacArgs {
        RbacArgs {
            source: source.to_path_buf(),
            namespace: "inst".into(),
            extension: "ext".into(),
            bundled_rbac: BundledRbac::Include,
            diff: diff.map(Path::to_path_buf),
            watch_namespace: None,
        }
    }

    #[test]
    fn prints_rbac_and_upgrade_diffs() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.yaml");
        let new = dir.path().join("new.yaml");
        std::fs::write(
            &old,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n",
        )
        .unwrap();
        std::fs::write(
            &new,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: n}\n",
        )
        .unwrap();
        let full = run_inner(&args(&new, None)).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&full).unwrap();
        assert_eq!(
            docs[1]["rules"][2]["resourceNames"],
            serde_json::json!(["a", "b"])
        );
        let diff = run_inner(&args(&new, Some(&old))).unwrap();
        let doc: Value = serde_saphyr::from_str(&diff).unwrap();
        assert_eq!(
            doc["rules"],
            serde_json::json!([{"apiGroups": [""], "resources": ["configmaps"],
                "verbs": ["get", "update", "patch", "delete"], "resourceNames": ["b"]}])
        );
        assert_eq!(
            run_inner(&args(&old, Some(&old))).unwrap(),
            "# the upgrade needs no additional permissions\n"
        );
        std::fs::write(&old, "kind: ConfigMap\nmetadata: {name: x}\n").unwrap();
        assert!(
            run_inner(&args(&old, None))
                .unwrap_err()
                .contains("apiVersion")
        );
        assert!(run_inner(&args(&dir.path().join("nope"), None)).is_err());
    }

    #[test]
    fn bundle_directories_are_rendered_first() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/bundle/testdata/bundles/all-namespaces");
        let args = RbacArgs {
            source: dir,
            namespace: "team-a".into(),
            extension: "demo".into(),
            bundled_rbac: BundledRbac::Include,
            diff: None,
            watch_namespace: None,
        };
        let yaml = run_inner(&args).expect("rbac for a bundle directory");
        assert!(yaml.contains("kind: ClusterRole"), "{yaml}");
        assert!(yaml.contains("clusterextensions/finalizers"), "{yaml}");
        assert!(yaml.contains("deployments"), "{yaml}");
        let same = RbacArgs {
            diff: Some(args.source.clone()),
            ..args
        };
        assert_eq!(
            run_inner(&same).expect("diff"),
            "# the upgrade needs no additional permissions\n"
        );
    }
}
