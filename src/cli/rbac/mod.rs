//! `olmv1 rbac`: prints the least-privilege installer ServiceAccount, ClusterRole and
//! ClusterRoleBinding for a set of rendered objects (reference A3, seed §10.1.3), or with
//! `--diff` the rules an upgrade adds. SOURCE (and the `--diff` value) is one of: a
//! registry+v1 bundle directory (rendered for the namespace, as the controller will) or
//! already rendered manifests (a YAML/JSON file or a directory of them); a bundle image
//! reference (pulled and loaded like `olmv1 render <image>`); or, with `--catalog`,
//! `package@version` (or a package name alone) looked up in a catalog read like
//! `olmv1 resolve --catalog`, whose bundle image is then pulled. [`classify_source`] and
//! [`classify_diff`] decide which form an argument is, [`find_bundle`] is the catalog
//! lookup; the I/O (files, registries, catalogs) stays in [`run`].

use super::PermissionError;
use super::rbac::{BundledRbac, added_rules, installer_rbac};
use crate::content::source::{CatalogSource, FetchArgs};
use crate::fbc::model::PackageContent;
use crate::resolve::{Availability, CatalogInput, ResolveRequest, UpgradePolicy};
use crate::version::BundleVersion;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest manifest file read.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Most versions listed when the requested version is not in the package.
const MAX_LISTED_VERSIONS: usize = 20;

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
    /// How bundled ClusterRoles/Roles are covered: include their rules, or bind+escalate.
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
    /// Catalog in which `package@version` is looked up: an FBC file or directory, a
    /// catalog image reference, or the name of a ClusterCatalog (as `olmv1 resolve
    /// --catalog`).
    #[arg(long)]
    pub catalog: Option<String>,
    /// Cache directory for pulled bundle images (default $XDG_CACHE_HOME/olmv1 or
    /// ~/.cache/olmv1; as `olmv1 render --cache-dir`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Registry (host[:port]) reached over plain HTTP, for bundle and catalog images
    /// (repeatable; for loopback test registries).
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// Directory for pulled catalog images (default $XDG_CACHE_HOME/olmv1/catalog-images;
    /// as `olmv1 resolve --image-cache-dir`).
    #[arg(long)]
    pub image_cache_dir: Option<PathBuf>,
    /// Kubeconfig for a ClusterCatalog --catalog (default: KUBECONFIG, then
    /// ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

impl RbacArgs {
    /// How `--catalog` is read (the options of `olmv1 resolve --catalog`).
    fn fetch(&self) -> FetchArgs {
        FetchArgs {
            insecure_registries: self.insecure_registries.clone(),
            image_cache_dir: self.image_cache_dir.clone(),
            kubeconfig: self.kubeconfig.clone(),
        }
    }
}

/// What a SOURCE or `--diff` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// An existing file or directory (bundle directory or rendered manifests).
    Path(PathBuf),
    /// A bundle image reference.
    Image(String),
    /// A bundle of a catalog package: the given version, or (`None`) the bundle a
    /// ClusterExtension naming only the package would install.
    Catalog {
        package: String,
        version: Option<String>,
    },
}

/// Why an argument cannot be used the way it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("the source is empty")]
    Empty,
    #[error(
        "--catalog was given, but {arg:?} is an existing file or directory; --catalog is only for package@version sources"
    )]
    CatalogWithPath { arg: String },
    #[error(
        "--catalog was given, but {arg:?} is neither package@version nor a package name; for a bundle image reference leave out --catalog"
    )]
    CatalogWithImage { arg: String },
    #[error("{arg:?} names a version of a catalog package: give the catalog with --catalog")]
    NeedsCatalog { arg: String },
    #[error(
        "{arg:?} names a version of a catalog package, which needs a package@version SOURCE and --catalog"
    )]
    DiffNeedsCatalogSource { arg: String },
}

/// A bundle found in a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogBundle {
    pub name: String,
    pub version: String,
    pub image: String,
}

/// Why a catalog lookup found no bundle image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("package {package:?} is not in catalog {catalog}")]
    PackageNotFound { package: String, catalog: String },
    #[error("invalid version {version:?}: {reason}")]
    InvalidVersion { version: String, reason: String },
    #[error(
        "package {package:?} in catalog {catalog} has no version {version}; available: {available}"
    )]
    VersionNotFound {
        package: String,
        catalog: String,
        version: String,
        available: String,
    },
    #[error("bundle {bundle} of package {package:?} in catalog {catalog} has no image")]
    NoImage {
        package: String,
        catalog: String,
        bundle: String,
    },
    #[error("package {package:?} in catalog {catalog}: {message}")]
    Resolve {
        package: String,
        catalog: String,
        message: String,
    },
}

/// A package name as a catalog spells it: non-empty, no `/`, `:`, `@` or whitespace
/// (which image references use).
fn is_package_name(s: &str) -> bool {
    !s.is_empty() && !s.contains(['/', ':', '@']) && !s.contains(char::is_whitespace)
}

fn is_version(s: &str) -> bool {
    BundleVersion::new_lenient(s, None).is_ok()
}

/// An existing path, or a value that starts like one (`/`, `.`, `~`), which no image
/// reference or package name does: a missing path then fails as a missing file.
fn is_path(arg: &str) -> bool {
    arg.starts_with(['/', '.', '~']) || Path::new(arg).exists()
}

/// `package@version` with a package name and a semver version (leading `v` allowed);
/// `repo@sha256:…` is not.
pub fn package_at_version(s: &str) -> Option<(&str, &str)> {
    let (package, version) = s.rsplit_once('@')?;
    (is_package_name(package) && is_version(version)).then_some((package, version))
}

/// Classifies SOURCE: an existing (or path-like) path; with `catalog`, `package@version` or a package
/// name; otherwise an image reference.
pub fn classify_source(arg: &str, catalog: bool) -> Result<Input, InputError> {
    if arg.is_empty() {
        return Err(InputError::Empty);
    }
    let arg_owned = || arg.to_string();
    if is_path(arg) {
        return match catalog {
            true => Err(InputError::CatalogWithPath { arg: arg_owned() }),
            false => Ok(Input::Path(PathBuf::from(arg))),
        };
    }
    if let Some((package, version)) = package_at_version(arg) {
        return match catalog {
            true => Ok(Input::Catalog {
                package: package.to_string(),
                version: Some(version.to_string()),
            }),
            false => Err(InputError::NeedsCatalog { arg: arg_owned() }),
        };
    }
    match catalog {
        true if is_package_name(arg) => Ok(Input::Catalog {
            package: arg_owned(),
            version: None,
        }),
        true => Err(InputError::CatalogWithImage { arg: arg_owned() }),
        false => Ok(Input::Image(arg_owned())),
    }
}

/// Classifies the `--diff` value. `source_package` is SOURCE's package when SOURCE is a
/// catalog package (then a bare version is a version of that package); an existing
/// path, then `package@version`, then an image reference.
pub fn classify_diff(arg: &str, source_package: Option<&str>) -> Result<Input, InputError> {
    if arg.is_empty() {
        return Err(InputError::Empty);
    }
    if is_path(arg) {
        return Ok(Input::Path(PathBuf::from(arg)));
    }
    let catalog_form = package_at_version(arg)
        .or_else(|| source_package.filter(|_| is_version(arg)).map(|p| (p, arg)))
        .or_else(|| is_version(arg).then_some(("", arg)));
    match (catalog_form, source_package) {
        (Some((package, version)), Some(_)) => Ok(Input::Catalog {
            package: package.to_string(),
            version: Some(version.to_string()),
        }),
        (Some(_), None) => Err(InputError::DiffNeedsCatalogSource {
            arg: arg.to_string(),
        }),
        (None, _) => Ok(Input::Image(arg.to_string())),
    }
}

/// The versions of a package's bundles, highest first, at most [`MAX_LISTED_VERSIONS`]
/// (then "and N more").
fn listed_versions(content: &PackageContent) -> String {
    let mut versions: Vec<BundleVersion> = content
        .bundles
        .iter()
        .filter_map(|b| BundleVersion::of_bundle(b).ok())
        .collect();
    versions.sort_by(|a, b| b.cmp(a));
    versions.dedup();
    if versions.is_empty() {
        return "none".to_string();
    }
    let shown: Vec<String> = versions
        .iter()
        .take(MAX_LISTED_VERSIONS)
        .map(ToString::to_string)
        .collect();
    let mut text = shown.join(", ");
    if versions.len() > MAX_LISTED_VERSIONS {
        text.push_str(&format!(
            " and {} more",
            versions.len() - MAX_LISTED_VERSIONS
        ));
    }
    text
}

/// Finds the bundle of `package` (the content read from `catalog`, named in errors)
/// with `version`, or with `None` the bundle `olmv1 resolve --package` (a
/// ClusterExtension naming only the package, nothing installed) would choose.
pub fn find_bundle(
    content: &PackageContent,
    catalog: &str,
    package: &str,
    version: Option<&str>,
) -> Result<CatalogBundle, LookupError> {
    if content.package.is_none() && content.bundles.is_empty() {
        return Err(LookupError::PackageNotFound {
            package: package.to_string(),
            catalog: catalog.to_string(),
        });
    }
    let found = match version {
        Some(v) => {
            let wanted =
                BundleVersion::new_lenient(v, None).map_err(|e| LookupError::InvalidVersion {
                    version: v.to_string(),
                    reason: e.to_string(),
                })?;
            let bundle = content
                .bundles
                .iter()
                .find(|b| BundleVersion::of_bundle(b).is_ok_and(|bv| bv.same_as(&wanted)))
                .ok_or_else(|| LookupError::VersionNotFound {
                    package: package.to_string(),
                    catalog: catalog.to_string(),
                    version: wanted.to_string(),
                    available: listed_versions(content),
                })?;
            CatalogBundle {
                name: bundle.name.clone(),
                version: wanted.to_string(),
                image: bundle.image.clone(),
            }
        }
        None => {
            let request = ResolveRequest {
                package: package.to_string(),
                channels: Vec::new(),
                version_range: None,
                selector: None,
                policy: UpgradePolicy::CatalogProvided,
                installed: None,
            };
            let labels = BTreeMap::new();
            let input = CatalogInput {
                name: catalog,
                priority: 0,
                availability: Availability::Available,
                labels: &labels,
                content: Ok(content),
            };
            let chosen = crate::resolve::resolve(&request, &[input])
                .map_err(|e| LookupError::Resolve {
                    package: package.to_string(),
                    catalog: catalog.to_string(),
                    message: e.to_string(),
                })?
                .bundle;
            CatalogBundle {
                name: chosen.name,
                version: chosen.version.to_string(),
                image: chosen.image,
            }
        }
    };
    if found.image.is_empty() {
        return Err(LookupError::NoImage {
            package: package.to_string(),
            catalog: catalog.to_string(),
            bundle: found.name,
        });
    }
    Ok(found)
}

/// Renders a loaded bundle for `namespace` (as the controller will); `what` names it
/// in errors.
fn render_bundle(
    bundle: crate::bundle::Bundle,
    what: &str,
    namespace: &str,
    watch_namespace: Option<&str>,
) -> Result<Vec<Value>, String> {
    let config = watch_namespace.map(|ns| serde_json::json!({ "watchNamespace": ns }));
    crate::bundle::render_owned(
        bundle,
        namespace,
        config.as_ref(),
        &crate::bundle::RenderOptions::default(),
    )
    .map_err(|e| format!("rendering {what}: {e}"))
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
    render_bundle(
        bundle,
        &path.display().to_string(),
        namespace,
        watch_namespace,
    )
}

/// Pulls a bundle image (as `olmv1 render <image>`) and renders it.
fn read_image(reference: &str, args: &RbacArgs) -> Result<Vec<Value>, String> {
    let bundle = crate::bundle::cli::pull_bundle_blocking(
        reference,
        args.cache_dir.as_deref(),
        &args.insecure_registries,
    )?;
    render_bundle(
        bundle,
        &format!("bundle image {reference}"),
        &args.namespace,
        args.watch_namespace.as_deref(),
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
            Input::Path(p) => read_source(p, &args.namespace, args.watch_namespace.as_deref()),
            Input::Image(r) => read_image(r, args),
            Input::Catalog { package, version } => {
                let Some(catalog) = args.catalog.as_deref() else {
                    return Err(format!("package {package:?}: no --catalog given"));
                };
                if !self.packages.contains_key(package) {
                    let content = CatalogSource::parse(catalog)
                        .load_package_blocking(package, &args.fetch())
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
    use serde_json::json;

    fn base(source: &str) -> RbacArgs {
        RbacArgs {
            source: source.to_string(),
            namespace: "inst".into(),
            extension: "ext".into(),
            bundled_rbac: BundledRbac::Include,
            diff: None,
            watch_namespace: None,
            catalog: None,
            cache_dir: None,
            insecure_registries: Vec::new(),
            image_cache_dir: None,
            kubeconfig: None,
        }
    }

    fn args(source: &Path, diff: Option<&Path>) -> RbacArgs {
        RbacArgs {
            diff: diff.map(|d| d.display().to_string()),
            ..base(&source.display().to_string())
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
        let full = execute(&args(&new, None)).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&full).unwrap();
        assert_eq!(docs[1]["rules"][2]["resourceNames"], json!(["a", "b"]));
        let diff = execute(&args(&new, Some(&old))).unwrap();
        let doc: Value = serde_saphyr::from_str(&diff).unwrap();
        assert_eq!(
            doc["rules"],
            json!([{"apiGroups": [""], "resources": ["configmaps"],
                "verbs": ["get", "update", "patch", "delete"], "resourceNames": ["b"]}])
        );
        assert_eq!(
            execute(&args(&old, Some(&old))).unwrap(),
            "# the upgrade needs no additional permissions\n"
        );
        std::fs::write(&old, "kind: ConfigMap\nmetadata: {name: x}\n").unwrap();
        assert!(
            execute(&args(&old, None))
                .unwrap_err()
                .contains("apiVersion")
        );
        let missing = execute(&args(&dir.path().join("nope"), None)).unwrap_err();
        assert!(missing.contains("nope: No such file"), "{missing}");
    }

    #[test]
    fn bundle_directories_are_rendered_first() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/bundle/testdata/bundles/all-namespaces");
        let args = RbacArgs {
            namespace: "team-a".into(),
            extension: "demo".into(),
            ..base(&dir.display().to_string())
        };
        let yaml = execute(&args).expect("rbac for a bundle directory");
        assert!(yaml.contains("kind: ClusterRole"), "{yaml}");
        assert!(yaml.contains("clusterextensions/finalizers"), "{yaml}");
        assert!(yaml.contains("deployments"), "{yaml}");
        let same = RbacArgs {
            diff: Some(args.source.clone()),
            ..args
        };
        assert_eq!(
            execute(&same).expect("diff"),
            "# the upgrade needs no additional permissions\n"
        );
    }

    #[test]
    fn sources_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let image = |s: &str| Ok(Input::Image(s.to_string()));
        let cat = |p: &str, v: Option<&str>| {
            Ok(Input::Catalog {
                package: p.to_string(),
                version: v.map(str::to_string),
            })
        };
        // without --catalog: paths, else images; package@version needs --catalog
        assert_eq!(
            classify_source(&path, false),
            Ok(Input::Path(dir.path().to_path_buf()))
        );
        for r in [
            "localhost:5000/bundles/foo:v1.0.0",
            "localhost:5000/bundles/foo@sha256:0123456789abcdef",
            "quay.io/org/foo@sha256:0123",
            "busybox",
            "foo@sha256:abcd",
        ] {
            assert_eq!(classify_source(r, false), image(r), "{r}");
        }
        assert_eq!(
            classify_source("ecr-secret-operator@0.4.0", false),
            Err(InputError::NeedsCatalog {
                arg: "ecr-secret-operator@0.4.0".into()
            })
        );
        // with --catalog: package@version or a package name; paths and images refused
        assert_eq!(
            classify_source("ecr-secret-operator@0.4.0", true),
            cat("ecr-secret-operator", Some("0.4.0"))
        );
        assert_eq!(
            classify_source("foo@v1.2.3-rc.1", true),
            cat("foo", Some("v1.2.3-rc.1"))
        );
        assert_eq!(classify_source("foo", true), cat("foo", None));
        assert_eq!(
            classify_source(&path, true),
            Err(InputError::CatalogWithPath { arg: path.clone() })
        );
        for r in [
            "localhost:5000/bundles/foo:v1.0.0",
            "r.io/foo@sha256:0123",
            "foo@1.0",
            "r.io/foo@1.0.0",
        ] {
            assert_eq!(
                classify_source(r, true),
                Err(InputError::CatalogWithImage { arg: r.into() }),
                "{r}"
            );
        }
        assert_eq!(classify_source("", false), Err(InputError::Empty));
        // a missing path is still a path (fails as a missing file, not as a pull)
        assert_eq!(
            classify_source("./no/such/bundle", false),
            Ok(Input::Path("./no/such/bundle".into()))
        );
        assert_eq!(
            classify_diff("/no/such/manifests.yaml", Some("p")),
            Ok(Input::Path("/no/such/manifests.yaml".into()))
        );
        // an existing path wins over the package@version form
        let odd = dir.path().join("pkg@1.0.0");
        std::fs::write(&odd, "").unwrap();
        let odd = odd.display().to_string();
        assert_eq!(
            classify_source(&odd, false),
            Ok(Input::Path(PathBuf::from(&odd)))
        );
    }

    #[test]
    fn diff_values_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let cat = |p: &str, v: &str| {
            Ok(Input::Catalog {
                package: p.to_string(),
                version: Some(v.to_string()),
            })
        };
        assert_eq!(classify_diff("0.3.2", Some("ecr")), cat("ecr", "0.3.2"));
        assert_eq!(classify_diff("v0.3.2", Some("ecr")), cat("ecr", "v0.3.2"));
        assert_eq!(
            classify_diff("other@1.0.0", Some("ecr")),
            cat("other", "1.0.0")
        );
        assert_eq!(
            classify_diff(&path, Some("ecr")),
            Ok(Input::Path(dir.path().to_path_buf()))
        );
        assert_eq!(
            classify_diff("r.io/b/ecr:v0.3.2", Some("ecr")),
            Ok(Input::Image("r.io/b/ecr:v0.3.2".into()))
        );
        assert_eq!(
            classify_diff("r.io/b/ecr:v0.3.2", None),
            Ok(Input::Image("r.io/b/ecr:v0.3.2".into()))
        );
        for v in ["0.3.2", "ecr@0.3.2"] {
            assert_eq!(
                classify_diff(v, None),
                Err(InputError::DiffNeedsCatalogSource { arg: v.into() }),
                "{v}"
            );
        }
    }

    fn bundle(package: &str, version: &str, image: &str) -> Value {
        json!({"schema": "olm.bundle", "name": format!("{package}.v{version}"),
            "package": package, "image": image,
            "properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}}]})
    }

    /// An FBC with package `p`: channel `stable` (1.0.0, 1.1.0), channel `fast` (1.2.0),
    /// a bundle without image (0.9.0, in no channel), `extra_versions` more bundles
    /// 0.0.x, and a package `q` without bundles.
    fn write_fbc(dir: &Path, extra_versions: usize) {
        let mut docs = vec![
            json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "name": "stable", "package": "p",
                "entries": [{"name": "p.v1.0.0"}, {"name": "p.v1.1.0", "replaces": "p.v1.0.0"}]}),
            json!({"schema": "olm.channel", "name": "fast", "package": "p",
                "entries": [{"name": "p.v1.2.0"}]}),
            bundle("p", "1.0.0", "r.io/b/p:v1.0.0"),
            bundle("p", "1.1.0", "r.io/b/p:v1.1.0"),
            bundle("p", "1.2.0", "r.io/b/p:v1.2.0"),
            bundle("p", "0.9.0", ""),
            json!({"schema": "olm.package", "name": "q"}),
        ];
        for i in 0..extra_versions {
            docs.push(bundle("p", &format!("0.0.{i}"), "r.io/b/p:old"));
        }
        let text: String = docs.iter().map(|d| format!("{d}\n")).collect();
        std::fs::write(dir.join("catalog.json"), text).unwrap();
    }

    fn load(dir: &Path, package: &str) -> PackageContent {
        CatalogSource::parse(&dir.display().to_string())
            .load_package_blocking(package, &FetchArgs::default())
            .unwrap()
            .content
    }

    #[test]
    fn catalog_lookup() {
        let dir = tempfile::tempdir().unwrap();
        write_fbc(dir.path(), 0);
        let p = load(dir.path(), "p");
        let found = find_bundle(&p, "cat", "p", Some("1.1.0")).unwrap();
        assert_eq!(
            found,
            CatalogBundle {
                name: "p.v1.1.0".into(),
                version: "1.1.0".into(),
                image: "r.io/b/p:v1.1.0".into()
            }
        );
        assert_eq!(
            find_bundle(&p, "cat", "p", Some("v1.0.0")).unwrap().image,
            "r.io/b/p:v1.0.0"
        );
        // package alone: what resolution picks (highest in any channel)
        assert_eq!(find_bundle(&p, "cat", "p", None).unwrap().name, "p.v1.2.0");
        assert_eq!(
            find_bundle(&p, "cat", "p", Some("2.0.0"))
                .unwrap_err()
                .to_string(),
            "package \"p\" in catalog cat has no version 2.0.0; available: 1.2.0, 1.1.0, 1.0.0, 0.9.0"
        );
        assert_eq!(
            find_bundle(&p, "cat", "p", Some("0.9.0")).unwrap_err(),
            LookupError::NoImage {
                package: "p".into(),
                catalog: "cat".into(),
                bundle: "p.v0.9.0".into()
            }
        );
        assert!(matches!(
            find_bundle(&p, "cat", "p", Some("x")),
            Err(LookupError::InvalidVersion { .. })
        ));
        let missing = load(dir.path(), "nope");
        assert_eq!(
            find_bundle(&missing, "cat", "nope", Some("1.0.0"))
                .unwrap_err()
                .to_string(),
            "package \"nope\" is not in catalog cat"
        );
        // a package without bundles: nothing to list, nothing to resolve
        let q = load(dir.path(), "q");
        assert_eq!(
            find_bundle(&q, "cat", "q", Some("1.0.0"))
                .unwrap_err()
                .to_string(),
            "package \"q\" in catalog cat has no version 1.0.0; available: none"
        );
        assert!(matches!(
            find_bundle(&q, "cat", "q", None),
            Err(LookupError::Resolve { .. })
        ));
    }

    #[test]
    fn listed_versions_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        write_fbc(dir.path(), 30);
        let p = load(dir.path(), "p");
        let err = find_bundle(&p, "cat", "p", Some("9.9.9"))
            .unwrap_err()
            .to_string();
        let listed = err.split("available: ").nth(1).unwrap();
        assert!(
            listed.starts_with("1.2.0, 1.1.0, 1.0.0, 0.9.0, 0.0.29,"),
            "{err}"
        );
        assert!(listed.ends_with(" and 14 more"), "{err}");
        assert_eq!(
            listed.matches(", ").count(),
            MAX_LISTED_VERSIONS - 1,
            "{err}"
        );
    }

    #[test]
    fn catalog_lookup_in_the_real_catalogs() {
        let Some(root) = crate::testenv::shared_dir("fixtures/catalogs") else {
            return;
        };
        for release in ["v4.16", "v4.20"] {
            let dir = root.join(release).join("ecr-secret-operator");
            let content = load(&dir, "ecr-secret-operator");
            let found = find_bundle(&content, "c", "ecr-secret-operator", Some("0.4.0")).unwrap();
            assert_eq!(found.name, "ecr-secret-operator.v0.4.0");
            assert_eq!(
                found.image,
                "quay.io/openshift-community-operators/ecr-secret-operator@sha256:90342c48af588010e82e1ae427b929e55b3be45d6a0e5f5029373a5188bf093a"
            );
            let newest = find_bundle(&content, "c", "ecr-secret-operator", None).unwrap();
            assert_eq!(newest.version, "0.5.0", "{release}");
            let err = find_bundle(&content, "c", "ecr-secret-operator", Some("0.6.0"))
                .unwrap_err()
                .to_string();
            assert!(
                err.ends_with("has no version 0.6.0; available: 0.5.0, 0.4.1, 0.4.0, 0.3.2"),
                "{err}"
            );
        }
    }

    #[test]
    fn catalog_sources_end_in_the_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        write_fbc(dir.path(), 0);
        let catalog = dir.path().display().to_string();
        let with_catalog = |source: &str| RbacArgs {
            catalog: Some(catalog.clone()),
            ..base(source)
        };
        assert_eq!(
            execute(&with_catalog("nope@1.0.0")).unwrap_err(),
            format!("package \"nope\" is not in catalog {catalog}")
        );
        assert!(
            execute(&with_catalog("p@3.0.0"))
                .unwrap_err()
                .ends_with("has no version 3.0.0; available: 1.2.0, 1.1.0, 1.0.0, 0.9.0")
        );
        assert!(
            execute(&with_catalog(&catalog))
                .unwrap_err()
                .starts_with("--catalog was given, but")
        );
        assert!(
            execute(&base("p@1.0.0"))
                .unwrap_err()
                .contains("give the catalog with --catalog")
        );
        let mut a = with_catalog("p@1.0.0");
        a.diff = Some("0.9.0".into());
        // the source's image cannot be pulled: the error names the package and the image
        let cache = tempfile::tempdir().unwrap();
        let unreachable = dir.path().join("unreachable");
        std::fs::create_dir(&unreachable).unwrap();
        std::fs::write(
            unreachable.join("c.json"),
            format!("{}\n", bundle("p", "1.0.0", "127.0.0.1:1/b/p:v1.0.0")),
        )
        .unwrap();
        a.catalog = Some(unreachable.display().to_string());
        a.cache_dir = Some(cache.path().to_path_buf());
        a.insecure_registries = vec!["127.0.0.1:1".into()];
        let err = execute(&a).unwrap_err();
        assert!(
            err.starts_with("package \"p\" version 1.0.0 (bundle p.v1.0.0, catalog "),
            "{err}"
        );
        assert!(err.contains("127.0.0.1:1/b/p:v1.0.0"), "{err}");
        // --diff classification errors are reported before any pull
        let mut a = base("127.0.0.1:1/b/p:v1.0.0");
        a.diff = Some("1.0.0".into());
        assert!(
            execute(&a)
                .unwrap_err()
                .starts_with("--diff: \"1.0.0\" names a version of a catalog package, which needs a package@version SOURCE"),
        );
    }
}
