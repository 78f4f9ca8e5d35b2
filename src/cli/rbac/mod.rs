//! `olmv1 rbac`: prints the least-privilege installer ServiceAccount, ClusterRole and
//! ClusterRoleBinding for a set of rendered objects (docs/concepts/installer-permissions.md A3, §7.2), or with
//! `--diff` the rules an upgrade adds. SOURCE (and the `--diff` value) is one of: a
//! registry+v1 bundle directory (rendered for the namespace, as the controller will) or
//! already rendered manifests (a YAML/JSON file or a directory of them); a bundle image
//! reference (pulled and loaded like `olmv1 render <image>`); or, with `--catalog`,
//! `package@version` (or a package name alone) looked up in a catalog read like
//! `olmv1 resolve --catalog`, whose bundle image is then pulled. [`classify_source`] and
//! [`classify_diff`] decide which form an argument is, [`find_bundle`] is the catalog
//! lookup; the I/O (files, registries, catalogs) stays in [`run`].

mod input;
mod lookup;
#[cfg(test)]
mod tests;

pub use input::{Input, InputError, classify_diff, classify_source, package_at_version};
pub use lookup::{CatalogBundle, LookupError, find_bundle};

use super::source::{CatalogSource, FetchArgs};
use crate::fbc::model::PackageContent;
use crate::preflight::permissions::PermissionError;
use crate::preflight::permissions::rbac::{BundledRbac, added_rules, installer_rbac};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest manifest file read.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Print the least-privilege RBAC the installer ServiceAccount needs for a bundle.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// A bundle directory or rendered manifests, a bundle image reference, or with
    /// --catalog `package@version` (or `package` alone).
    ///
    /// SOURCE and --diff are told apart as follows, first match wins:
    ///
    /// 1. an existing file or directory (or a value starting with `/`, `.` or `~`): a registry+v1 bundle directory (manifests/ +
    ///    metadata/), or rendered manifests (a YAML/JSON file, multi-document allowed, or
    ///    a directory of them);
    ///
    /// 2. with --catalog: `package@version` (semver, a leading `v` allowed; e.g.
    ///    ecr-secret-operator@0.4.0), looked up in the catalog, whose bundle image is then
    ///    pulled; `package` alone means the bundle a ClusterExtension naming only the
    ///    package would install (the highest version in any channel); for --diff also a
    ///    bare version (`--diff 0.3.2`): that version of SOURCE's package;
    ///
    /// 3. anything else: a bundle image reference (registry/repo:tag or
    ///    registry/repo@sha256:…), pulled like `olmv1 render <image>`.
    ///
    /// --catalog with a path or image SOURCE is an error, and so is `package@version`
    /// without --catalog.
    pub source: String,
    /// Namespace of the installer ServiceAccount (the ClusterExtension's spec.namespace).
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// Name of the ClusterExtension (scopes the finalizers rule; names the objects).
    #[arg(long)]
    pub extension: String,
    /// How bundled ClusterRoles/Roles are covered: include their rules (and bind on them by name), or bind+escalate.
    #[arg(long, value_enum, default_value_t = BundledRbac::Include)]
    pub bundled_rbac: BundledRbac,
    /// The installed version, to print only the rules the upgrade adds: a bundle
    /// directory or rendered manifests, a bundle image reference, or (when SOURCE is a
    /// catalog package) a version of the same package (`--diff 0.3.2`) or
    /// `package@version`, looked up in the same --catalog.
    #[arg(long, value_name = "INSTALLED")]
    pub diff: Option<String>,
    /// For bundles (directories, images, catalog packages): the `watchNamespace` the
    /// bundle is rendered with (OwnNamespace/SingleNamespace bundles).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// For bundles: include what the controller installs on a cluster that serves
    /// operators.coreos.com/v2 OperatorCondition (the OperatorCondition, its Role and
    /// RoleBinding; docs/how-to/upgrade-control.md).
    #[arg(long)]
    pub operator_condition: bool,
    /// Catalog in which `package@version` is looked up: an FBC file or directory, a
    /// catalog image reference, or the name of a ClusterCatalog (as `olmv1 resolve
    /// --catalog`).
    #[arg(long)]
    pub catalog: Option<String>,
    /// Cache directory for pulled bundle images (default $XDG_CACHE_HOME/olmv1 or
    /// ~/.cache/olmv1; as `olmv1 render --cache-dir`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// How `--catalog` is read (the options of `olmv1 resolve --catalog`);
    /// `--insecure-registry` applies to bundle images too.
    #[command(flatten)]
    pub fetch: FetchArgs,
}

/// Renders a loaded bundle for `namespace` (as the controller will); `what` names it
/// in errors.
fn render_bundle(
    bundle: crate::bundle::Bundle,
    what: &str,
    namespace: &str,
    watch_namespace: Option<&str>,
    operator_condition: bool,
) -> Result<Vec<Value>, String> {
    let config = watch_namespace.map(|ns| serde_json::json!({ "watchNamespace": ns }));
    crate::bundle::render_owned(
        bundle,
        namespace,
        config.as_ref(),
        &crate::bundle::RenderOptions {
            operator_condition,
            ..Default::default()
        },
    )
    .map_err(|e| format!("rendering {what}: {e}"))
}

/// A bundle directory is rendered for `namespace`; anything else is read as manifests.
fn read_source(
    path: &Path,
    namespace: &str,
    watch_namespace: Option<&str>,
    operator_condition: bool,
) -> Result<Vec<Value>, String> {
    let is_bundle =
        path.join("metadata").join("annotations.yaml").is_file() || path.join("manifests").is_dir();
    if !is_bundle {
        return read_manifests(path);
    }
    let bundle = crate::bundle::load_dir(path, &crate::bundle::LoadOptions::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    render_bundle(
        bundle,
        &path.display().to_string(),
        namespace,
        watch_namespace,
        operator_condition,
    )
}

/// Pulls a bundle image (as `olmv1 render <image>`) and renders it.
fn read_image(reference: &str, args: &RbacArgs) -> Result<Vec<Value>, String> {
    let bundle = super::render::pull_bundle_blocking(
        reference,
        args.cache_dir.as_deref(),
        &args.fetch.insecure_registries,
        args.fetch.registries_conf.as_deref(),
    )?;
    render_bundle(
        bundle,
        &format!("bundle image {reference}"),
        &args.namespace,
        args.watch_namespace.as_deref(),
        args.operator_condition,
    )
}

/// Reads the inputs of one run; catalog packages are loaded once.
struct Reader<'a> {
    args: &'a RbacArgs,
    packages: BTreeMap<String, PackageContent>,
}

impl Reader<'_> {
    fn objects(&mut self, input: &Input) -> Result<Vec<Value>, String> {
        let args = self.args;
        match input {
            Input::Path(p) => read_source(
                p,
                &args.namespace,
                args.watch_namespace.as_deref(),
                args.operator_condition,
            ),
            Input::Image(r) => read_image(r, args),
            Input::Catalog { package, version } => {
                let Some(catalog) = args.catalog.as_deref() else {
                    return Err(format!("package {package:?}: no --catalog given"));
                };
                if !self.packages.contains_key(package) {
                    let content = CatalogSource::parse(catalog)
                        .load_package_blocking(package, &args.fetch)
                        .map_err(|e| e.to_string())?;
                    self.packages.insert(package.clone(), content.content);
                }
                let content = self
                    .packages
                    .get(package)
                    .ok_or_else(|| format!("package {package:?}: catalog content went missing"))?;
                let found = find_bundle(content, catalog, package, version.as_deref())
                    .map_err(|e| e.to_string())?;
                read_image(&found.image, args).map_err(|e| {
                    format!(
                        "package {package:?} version {} (bundle {}, catalog {catalog}): {e}",
                        found.version, found.name
                    )
                })
            }
        }
    }
}

/// Runs the command; exit 0 on success, 2 on bad input.
pub fn run(args: RbacArgs) -> ExitCode {
    match execute(&args) {
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

/// The output of `olmv1 rbac` (what [`run`] prints), or the error it reports. Blocking:
/// pulls images on a runtime of its own, so call it outside an async context.
pub fn execute(args: &RbacArgs) -> Result<String, String> {
    let source =
        classify_source(&args.source, args.catalog.is_some()).map_err(|e| e.to_string())?;
    let source_package = match &source {
        Input::Catalog { package, .. } => Some(package.as_str()),
        _ => None,
    };
    let diff = args
        .diff
        .as_deref()
        .map(|d| classify_diff(d, source_package))
        .transpose()
        .map_err(|e| format!("--diff: {e}"))?;
    let mut reader = Reader {
        args,
        packages: BTreeMap::new(),
    };
    let objects = reader.objects(&source)?;
    match diff {
        None => rbac_yaml_with(
            &objects,
            &args.namespace,
            &args.extension,
            args.bundled_rbac,
        )
        .map_err(|e| e.to_string()),
        Some(installed) => {
            let old = reader
                .objects(&installed)
                .map_err(|e| format!("--diff: {e}"))?;
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
        let text =
            super::input_file::read_string(&file, MAX_FILE_BYTES).map_err(|e| e.to_string())?;
        let docs: Vec<Value> = crate::yaml::from_multiple(&text, serde_saphyr::Options::default())
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
