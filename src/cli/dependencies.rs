//! `olmv1 resolve --with-dependencies` (docs/concepts/dependencies.md §3): resolves the
//! package, then plans with [`crate::resolve::dependencies::check`] the ClusterExtensions
//! that satisfy its dependencies (and theirs), reading each required package from the
//! same `--catalog`s, and prints them — with their namespaces and each one's
//! least-privilege installer RBAC (as `olmv1 rbac`) — as one YAML stream ready for
//! `kubectl apply -f -`. Offline: the set assumes none of them is installed yet (the
//! controller checks what is).

use super::resolve::{ResolveArgs, load_catalogs};
use crate::fbc::model::PackageContent;
use crate::preflight::permissions::rbac::{BundledRbac, installer_names, installer_rbac};
use crate::resolve::dependencies::settle::{DEPENDENCY_OF, label_value};
use crate::resolve::dependencies::{self, Catalogs, Check, Cluster, Dependent, Suggestion};
use crate::resolve::{Availability, CatalogInput, ResolveRequest, resolve_with_dependencies};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

/// How many times the catalogs are read for packages the plan names.
const MAX_ROUNDS: usize = 8;

type Read = BTreeMap<String, (Vec<PackageContent>, Vec<i32>)>;

fn inputs<'a>(
    args: &'a ResolveArgs,
    read: &'a Read,
    labels: &'a BTreeMap<String, String>,
) -> Catalogs<'a> {
    read.iter()
        .map(|(package, (contents, priorities))| {
            let list = args
                .catalogs
                .iter()
                .zip(contents)
                .zip(priorities)
                .map(|((name, content), priority)| CatalogInput {
                    name,
                    priority: *priority,
                    availability: Availability::Available,
                    labels,
                    content: Ok(content),
                })
                .collect();
            (package.clone(), list)
        })
        .collect()
}

/// Plans and prints the dependency set of `request`'s resolution.
pub(super) fn run(args: &ResolveArgs, request: &ResolveRequest) -> Result<ExitCode, String> {
    let labels = BTreeMap::new();
    let mut read: Read = BTreeMap::new();
    read.insert(args.package.clone(), load_catalogs(args, &args.package)?);
    let (resolution, props) = {
        let cats = inputs(args, &read, &labels);
        let root = cats
            .get(&args.package)
            .map(Vec::as_slice)
            .unwrap_or_default();
        resolve_with_dependencies(request, root).map_err(|e| e.to_string())?
    };
    let deps = dependencies::parse(&props).map_err(|e| e.to_string())?;
    let version = resolution.bundle.version.status_version();
    let dependent = Dependent {
        bundle: &resolution.bundle.name,
        package: &resolution.bundle.package,
        version: &version,
        scope: args.watch_namespace.clone().map_or(
            dependencies::WatchScope::All,
            dependencies::WatchScope::Namespace,
        ),
        dependencies: &deps,
    };
    let mut rounds = 0;
    let check = loop {
        let (check, need) = {
            let cats = inputs(args, &read, &labels);
            let check = dependencies::check(&dependent, &Cluster::default(), &cats);
            let need: Vec<String> = check
                .need
                .iter()
                .filter(|p| !read.contains_key(*p))
                .cloned()
                .collect();
            (check, need)
        };
        rounds += 1;
        if need.is_empty() || rounds > MAX_ROUNDS {
            break check;
        }
        for package in need {
            let loaded = load_catalogs(args, &package)?;
            read.insert(package, loaded);
        }
    };
    print!("{}", manifests(args, &resolution.bundle.name, &check)?);
    report(&resolution.bundle.name, &check)
}

/// What nothing satisfies goes to stderr (exit 1); a complete set exits 0.
fn report(bundle: &str, check: &Check) -> Result<ExitCode, String> {
    let mut failed = false;
    for m in &check.missing {
        if let Err(e) = &m.satisfied_by {
            eprintln!("{bundle} requires {}: {e}", m.dependency);
            failed = true;
        }
    }
    for u in &check.unsatisfiable {
        eprintln!("{u}");
        failed = true;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The ClusterExtension for one planned dependency.
pub fn cluster_extension(s: &Suggestion, namespace: &str, cluster_catalog: bool) -> Value {
    let (account, _, _) = installer_names(&s.package);
    let mut catalog = json!({"packageName": s.package});
    if let Some(r) = &s.range {
        catalog["version"] = json!(r);
    }
    if let Some(c) = &s.channel {
        catalog["channels"] = json!([c]);
    }
    if cluster_catalog {
        catalog["selector"] =
            json!({"matchLabels": {"olm.operatorframework.io/metadata.name": s.catalog}});
    }
    json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": s.package, "labels": {DEPENDENCY_OF: label_value(&s.required_by)}},
        "spec": {
            "namespace": namespace,
            "serviceAccount": {"name": account},
            "source": {"sourceType": "Catalog", "catalog": catalog},
        },
    })
}

fn yaml(v: &Value) -> Result<String, String> {
    serde_saphyr::to_string(v).map_err(|e| format!("serializing YAML: {e}"))
}

/// Namespaces, ClusterExtensions and installer RBAC of the planned set, as YAML.
fn manifests(args: &ResolveArgs, bundle: &str, check: &Check) -> Result<String, String> {
    let mut docs = vec![format!(
        "# Dependencies of {bundle}: {} ClusterExtension(s), each with its installer RBAC.\n",
        check.set.len()
    )];
    let mut namespaces = BTreeSet::new();
    for s in &check.set {
        let namespace = args
            .dependency_namespace
            .clone()
            .unwrap_or_else(|| s.package.clone());
        if namespaces.insert(namespace.clone()) {
            let ns =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            docs.push(yaml(&ns)?);
        }
        let from_cluster = args.catalogs.iter().any(|c| {
            c == &s.catalog
                && matches!(
                    super::source::CatalogSource::parse(c),
                    super::source::CatalogSource::ClusterCatalog(_)
                )
        });
        docs.push(yaml(&cluster_extension(s, &namespace, from_cluster))?);
        let objects = render(args, s, &namespace)?;
        let rbac = installer_rbac(&objects, &namespace, &s.package, BundledRbac::Include)
            .map_err(|e| format!("installer RBAC of {}: {e}", s.bundle))?;
        for obj in [&rbac.service_account, &rbac.cluster_role, &rbac.binding] {
            docs.push(yaml(obj)?);
        }
    }
    Ok(docs.join("---\n"))
}

/// Pulls and renders a planned bundle for `namespace` (as the controller will; its own
/// dependencies are in the set).
fn render(args: &ResolveArgs, s: &Suggestion, namespace: &str) -> Result<Vec<Value>, String> {
    let bundle = super::render::pull_bundle_blocking(
        &s.image,
        args.bundle_cache_dir.as_deref(),
        &args.source.insecure_registries,
        args.source.registries_conf.as_deref(),
    )
    .map_err(|e| format!("bundle {} ({}): {e}", s.bundle, s.image))?;
    let options = crate::bundle::RenderOptions {
        dependencies_checked: true,
        ..Default::default()
    };
    crate::bundle::render_owned(bundle, namespace, None, &options)
        .map_err(|e| format!("rendering {}: {e}", s.bundle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_cluster_extension() {
        let s = Suggestion {
            package: "base".into(),
            range: Some(">=1.0.0".into()),
            catalog: "operators".into(),
            channel: Some("stable".into()),
            bundle: "base.v1.2.0".into(),
            image: "example.com/base:v1.2.0".into(),
            version: "1.2.0".into(),
            required_by: "app+v1.0.0".into(),
        };
        let ce = cluster_extension(&s, "deps", true);
        assert_eq!(
            ce["spec"],
            json!({"namespace": "deps", "serviceAccount": {"name": "base-installer"},
                "source": {"sourceType": "Catalog", "catalog": {"packageName": "base",
                    "version": ">=1.0.0", "channels": ["stable"],
                    "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": "operators"}}}}})
        );
        assert_eq!(ce["metadata"]["labels"][DEPENDENCY_OF], json!("app-v1.0.0"));
        let plain = cluster_extension(&s, "deps", false);
        assert!(plain["spec"]["source"]["catalog"].get("selector").is_none());
        assert_eq!(label_value(&"x".repeat(70)).len(), 63);
    }
}
