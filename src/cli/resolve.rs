//! `olmv1 resolve`: resolve a package against catalogs offline and print the chosen
//! bundle, the exact error, or (`--explain`) a verdict for every bundle. Catalog
//! sources are a [`CatalogSource`]: FBC files and directories, catalog images, and
//! ClusterCatalogs (read through the catalog content client).

use super::source::{CatalogSource, FetchArgs};
use crate::fbc::model::PackageContent;
use crate::resolve::{
    Availability, BundleExplanation, CatalogInput, Explanation, InstalledBundle, ResolveRequest,
    UpgradePolicy, explain, resolve,
};
use crate::version::BundleVersion;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ResolveArgs {
    /// Catalog to read (repeatable): an FBC file or directory, a catalog image
    /// reference (registry/repo:tag or @sha256:…), or the name of a ClusterCatalog
    /// (read from status.urls.base; kubeconfig from --kubeconfig or KUBECONFIG).
    #[arg(long = "catalog", required = true)]
    pub catalogs: Vec<String>,
    /// Priority of each --catalog, in the same order (default: the ClusterCatalog's
    /// spec.priority, else 0).
    #[arg(long = "priority", allow_negative_numbers = true)]
    pub priorities: Vec<i32>,
    /// Package name (spec.source.catalog.packageName).
    #[arg(long)]
    pub package: String,
    /// Channel to resolve from (repeatable; none = all channels).
    #[arg(long = "channel")]
    pub channels: Vec<String>,
    /// Version range (spec.source.catalog.version), e.g. ">=1.11, <1.13".
    #[arg(long)]
    pub version: Option<String>,
    /// Installed bundle: its name (looked up in the catalogs) or its version.
    #[arg(long)]
    pub installed: Option<String>,
    /// Upgrade constraint policy.
    #[arg(long, value_enum, default_value_t = UpgradePolicy::CatalogProvided)]
    pub policy: UpgradePolicy,
    /// List every bundle with the reason it was or was not chosen.
    #[arg(long)]
    pub explain: bool,
    /// Print the ClusterExtensions (with their namespaces and installer RBAC) that
    /// satisfy the resolved bundle's dependencies, as YAML for `kubectl apply -f -`
    /// (docs/concepts/dependencies.md §3).
    #[arg(long, conflicts_with_all = ["explain", "output"])]
    pub with_dependencies: bool,
    /// With --with-dependencies: the namespace of every dependency ClusterExtension
    /// (default: each one's package name).
    #[arg(long, requires = "with_dependencies")]
    pub dependency_namespace: Option<String>,
    /// With --with-dependencies: the `watchNamespace` of the dependent (dependencies
    /// must watch all namespaces or this one).
    #[arg(long, requires = "with_dependencies")]
    pub watch_namespace: Option<String>,
    /// With --with-dependencies: cache directory for pulled bundle images (default as
    /// `olmv1 render --cache-dir`).
    #[arg(long, requires = "with_dependencies")]
    pub bundle_cache_dir: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub source: FetchArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// Turns `--installed` into an installed-bundle record: a bundle name found in a
/// catalog gives its version; a version finds the bundle's name; a name ending in
/// `.v<version>` that no catalog has is still usable by version.
pub fn installed_from_arg(
    arg: &str,
    contents: &[PackageContent],
) -> Result<InstalledBundle, String> {
    let bundles = || contents.iter().flat_map(|c| &c.bundles);
    if let Some(b) = bundles().find(|b| b.name == arg) {
        let v =
            BundleVersion::of_bundle(b).map_err(|e| format!("installed bundle {arg:?}: {e}"))?;
        return Ok(InstalledBundle {
            name: b.name.clone(),
            version: v.status_version(),
            release: None,
        });
    }
    if let Ok(v) = BundleVersion::new_lenient(arg, None) {
        let name = bundles()
            .find(|b| BundleVersion::of_bundle(b).is_ok_and(|bv| bv.same_as(&v)))
            .map(|b| b.name.clone())
            .unwrap_or_default();
        return Ok(InstalledBundle {
            name,
            version: v.status_version(),
            release: None,
        });
    }
    if let Some((_, tail)) = arg.rsplit_once(".v")
        && let Ok(v) = BundleVersion::new(tail, None)
    {
        return Ok(InstalledBundle {
            name: arg.to_string(),
            version: v.status_version(),
            release: None,
        });
    }
    Err(format!(
        "installed bundle {arg:?} is not in any given catalog and is not a version; pass its version instead"
    ))
}

pub fn run(args: ResolveArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &ResolveArgs) -> Result<ExitCode, String> {
    if args.priorities.len() > args.catalogs.len() {
        return Err(format!(
            "{} --priority values given for {} --catalog values",
            args.priorities.len(),
            args.catalogs.len()
        ));
    }
    let (contents, priorities) = load_catalogs(args, &args.package)?;
    let installed = args
        .installed
        .as_deref()
        .map(|i| installed_from_arg(i, &contents))
        .transpose()?;
    let request = ResolveRequest {
        package: args.package.clone(),
        channels: args.channels.clone(),
        version_range: args.version.clone(),
        selector: None,
        policy: args.policy,
        installed,
    };
    if args.with_dependencies {
        return super::dependencies::run(args, &request);
    }
    let labels = BTreeMap::new();
    let inputs: Vec<CatalogInput<'_>> = args
        .catalogs
        .iter()
        .zip(&contents)
        .enumerate()
        .map(|(i, (name, content))| CatalogInput {
            name,
            priority: priorities[i],
            availability: Availability::Available,
            labels: &labels,
            content: Ok(content),
        })
        .collect();
    let Explanation { result, bundles } = if args.explain {
        explain(&request, &inputs)
    } else {
        Explanation {
            result: resolve(&request, &inputs),
            bundles: Vec::new(),
        }
    };
    print_result(args, &result, &bundles)?;
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            if args.output == Output::Text {
                eprintln!("{e}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `package`'s content from every `--catalog`, with each catalog's priority.
pub(super) fn load_catalogs(
    args: &ResolveArgs,
    package: &str,
) -> Result<(Vec<PackageContent>, Vec<i32>), String> {
    let mut contents: Vec<PackageContent> = Vec::with_capacity(args.catalogs.len());
    let mut priorities: Vec<i32> = Vec::with_capacity(args.catalogs.len());
    for (i, catalog) in args.catalogs.iter().enumerate() {
        let loaded = CatalogSource::parse(catalog)
            .load_package_blocking(package, &args.source)
            .map_err(|e| e.to_string())?;
        priorities.push(
            args.priorities
                .get(i)
                .copied()
                .or(loaded.priority)
                .unwrap_or(0),
        );
        contents.push(loaded.content);
    }
    Ok((contents, priorities))
}

/// Prints the chosen bundle (and with `--explain` the table), as text or JSON; a
/// resolution error is printed by the caller.
fn print_result(
    args: &ResolveArgs,
    result: &Result<crate::resolve::Resolution, crate::resolve::ResolveError>,
    bundles: &[BundleExplanation],
) -> Result<(), String> {
    match args.output {
        Output::Json => {
            let doc = serde_json::json!({
                "bundle": result.as_ref().ok().map(|r| &r.bundle),
                "error": result.as_ref().err().map(ToString::to_string),
                "explanation": args.explain.then_some(&bundles),
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
            );
        }
        Output::Text => {
            if args.explain {
                print!("{}", explanation_table(bundles));
                println!();
            }
            if let Ok(r) = result {
                println!("bundle:  {}", r.bundle.name);
                println!("version: {}", r.bundle.version);
                println!("image:   {}", r.bundle.image);
                println!("catalog: {}", r.bundle.catalog);
            }
        }
    }
    Ok(())
}

/// The `--explain` table: catalog, bundle, version, verdict.
pub fn explanation_table(rows: &[BundleExplanation]) -> String {
    let header = ["CATALOG", "BUNDLE", "VERSION", "VERDICT"].map(String::from);
    let cells = rows.iter().map(|r| {
        let mut verdict = r
            .reasons
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        if r.deprecated && !verdict.contains("deprecated") {
            verdict.push_str(" (deprecated)");
        }
        vec![
            r.catalog.clone(),
            r.bundle.clone(),
            r.version.clone().unwrap_or_else(|| "-".into()),
            verdict,
        ]
    });
    let table: Vec<Vec<String>> = std::iter::once(header.to_vec()).chain(cells).collect();
    super::format_table(&table, "  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::model::{Bundle, Property};
    use serde_json::json;

    fn contents() -> Vec<PackageContent> {
        let b = |name: &str, v: &str| Bundle {
            name: name.into(),
            properties: vec![Property {
                type_: "olm.package".into(),
                value: json!({"packageName": "p", "version": v}),
            }],
            ..Default::default()
        };
        vec![PackageContent {
            bundles: vec![b("p.v1.0.0", "1.0.0"), b("p.v1.1.0", "1.1.0+3")],
            ..Default::default()
        }]
    }

    #[test]
    fn installed_argument() {
        let c = contents();
        let got = |arg: &str| installed_from_arg(arg, &c).map(|i| (i.name, i.version));
        assert_eq!(got("p.v1.0.0"), Ok(("p.v1.0.0".into(), "1.0.0".into())));
        assert_eq!(got("1.0.0"), Ok(("p.v1.0.0".into(), "1.0.0".into())));
        assert_eq!(got("v1.1.0+3"), Ok(("p.v1.1.0".into(), "1.1.0+3".into())));
        assert_eq!(got("2.0.0"), Ok((String::new(), "2.0.0".into())));
        assert_eq!(
            got("gone.v0.9.1"),
            Ok(("gone.v0.9.1".into(), "0.9.1".into()))
        );
        assert!(
            got("whatever")
                .unwrap_err()
                .contains("is not in any given catalog")
        );
    }

    #[test]
    fn table_is_aligned() {
        let rows = vec![BundleExplanation {
            catalog: "c".into(),
            bundle: "p.v1.0.0".into(),
            version: Some("1.0.0".into()),
            deprecated: true,
            reasons: vec![crate::resolve::Reason::Chosen],
        }];
        let t = explanation_table(&rows);
        assert_eq!(
            t,
            "CATALOG  BUNDLE    VERSION  VERDICT\nc        p.v1.0.0  1.0.0    chosen (deprecated)\n"
        );
    }
}
