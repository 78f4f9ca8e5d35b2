//! `olmv1 catalog coverage`: renders the head bundle of every package of a catalog with the
//! settings a first install would use and prints, per bundle, whether it installs or why it
//! is refused, then a summary counted per reason (docs/how-to/catalog-coverage.md).
//!
//! The catalog is either a directory of unpacked bundles (`<package>/<version>/` holding
//! `manifests/` and `metadata/`, at any depth; the head is the highest version directory
//! by semver) or a file-based catalog whose default-channel heads are pulled as images
//! (into `--cache-dir`, as `olmv1 render <image>`). Finding heads and classifying a
//! result are pure functions ([`heads_of`], [`classify`]); loading and rendering are the
//! bundle loader and renderer the controller runs.

use super::{CliError, Output, out_err};
use crate::bundle::{Bundle, CsvError, InstallModeSet, LoadOptions, RenderOptions};
use crate::cli::source::FetchArgs;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Install namespace every bundle is rendered for.
pub const COVERAGE_NAMESPACE: &str = "coverage-system";
/// `watchNamespace` for bundles that support SingleNamespace but neither AllNamespaces
/// nor OwnNamespace.
pub const COVERAGE_WATCH_NAMESPACE: &str = "coverage-watched";

#[derive(clap::Args, Debug)]
pub struct CoverageArgs {
    /// A directory of bundles (`<package>/<version>/{manifests,metadata}`) or a
    /// file-based catalog (file, directory or image) whose head bundles are pulled.
    #[arg(long)]
    pub catalog: String,
    /// Output format (`table`: one line per bundle, then the summary).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Cache directory for pulled bundle images (FBC catalogs; as `olmv1 render --cache-dir`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// How an FBC catalog and its bundle images are read (as `olmv1 catalog packages`).
    #[command(flatten)]
    pub fetch: FetchArgs,
}

/// The result for one head bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub package: String,
    /// Bundle directory or image reference.
    pub bundle: String,
    pub installs: bool,
    /// Short class of the refusal (see [`classify`]); empty when it installs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The loader's or renderer's message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    bundles: &'a [Row],
    total: usize,
    installs: usize,
    refused: BTreeMap<&'a str, usize>,
}

/// Head bundle directory per package below `root`: directories holding `manifests/`,
/// grouped by their parent directory, the highest version (semver, else name) winning.
pub fn heads_of(dirs: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let mut by_parent: BTreeMap<PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for d in dirs {
        let parent = d.parent().map(Path::to_path_buf).unwrap_or_default();
        by_parent.entry(parent).or_default().push(d);
    }
    let key = |p: &PathBuf| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        (
            semver::Version::parse(name.trim_start_matches('v')).ok(),
            name,
        )
    };
    by_parent
        .into_iter()
        .filter_map(|(parent, versions)| {
            let head = versions.into_iter().max_by(|a, b| {
                let (ka, kb) = (key(a), key(b));
                match (&ka.0, &kb.0) {
                    (Some(x), Some(y)) => x.cmp_precedence(y),
                    _ => ka.cmp(&kb),
                }
            })?;
            let package = parent
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| head.display().to_string());
            Some((package, head.clone()))
        })
        .collect()
}

/// Bundle directories (holding `manifests/`) under `root`, at most four levels down.
fn bundle_dirs(root: &Path) -> Result<Vec<PathBuf>, CliError> {
    let mut found = Vec::new();
    let mut todo = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = todo.pop() {
        if dir.join("manifests").is_dir() {
            found.push(dir);
            continue;
        }
        if depth >= 4 {
            continue;
        }
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| CliError::Unsupported(format!("reading {}: {e}", dir.display())))?;
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push((e.path(), depth + 1));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// A short, stable class for a refusal message: what a maintainer has to change.
pub fn classify(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    let rules: [(&[&str], &'static str); 9] = [
        (&["invalid yaml", "not valid utf-8", "yaml alias"], "yaml"),
        (&["dependency", "dependencies"], "dependencies"),
        (&["apiservicedefintions", "apiservice"], "apiservices"),
        (&["webhook"], "webhooks"),
        (&["apiextensions.k8s.io/v1beta1"], "crd-version"),
        (
            &["install mode", "watchnamespace", "configuration"],
            "install-mode",
        ),
        (&["metadata/", "registry+v1"], "metadata"),
        (&["unsupported resource"], "unsupported-kind"),
        (&["clusterserviceversion"], "csv"),
    ];
    rules
        .iter()
        .find(|(keys, _)| keys.iter().any(|k| m.contains(k)))
        .map_or("invalid", |(_, class)| class)
}

/// The `watchNamespace` a first install uses: none for AllNamespaces, the install
/// namespace for OwnNamespace, another namespace for SingleNamespace.
fn watch_namespace(bundle: &Bundle) -> Result<Option<&'static str>, CsvError> {
    let csv = crate::bundle::Csv::parse(&bundle.csv)?;
    let modes = InstallModeSet::from_entries(
        csv.spec
            .install_modes
            .iter()
            .map(|m| (m.type_.as_str(), m.supported)),
    );
    Ok(if modes.all {
        None
    } else if modes.own {
        Some(COVERAGE_NAMESPACE)
    } else if modes.single {
        Some(COVERAGE_WATCH_NAMESPACE)
    } else {
        None
    })
}

/// Renders a loaded bundle as a first install would; `Err` holds the refusal message.
pub fn check(bundle: Result<Bundle, String>) -> Result<(), String> {
    let bundle = bundle?;
    let watch = watch_namespace(&bundle).map_err(|e| e.to_string())?;
    let config = watch.map(|ns| serde_json::json!({ "watchNamespace": ns }));
    crate::bundle::render_owned(
        bundle,
        COVERAGE_NAMESPACE,
        config.as_ref(),
        &RenderOptions::default(),
    )
    .map(drop)
    .map_err(|e| e.to_string())
}

fn row(package: String, bundle: String, result: Result<(), String>) -> Row {
    match result {
        Ok(()) => Row {
            package,
            bundle,
            installs: true,
            reason: String::new(),
            message: String::new(),
        },
        Err(message) => Row {
            package,
            bundle,
            installs: false,
            reason: classify(&message).to_string(),
            message: message.replace('\n', "; "),
        },
    }
}

/// Head bundles of an FBC catalog (default channel), pulled and checked.
fn fbc_rows(a: &CoverageArgs) -> Result<Vec<Row>, CliError> {
    let source = super::CatalogSource::parse(&a.catalog);
    let local = source.local_blocking(None, &a.fetch)?;
    let data = crate::fbc::query::load(&local.path, None)?;
    let filter = crate::fbc::query::Filter::default();
    let packages = crate::fbc::query::packages(&data, &filter);
    let channels = crate::fbc::query::channels(&data, &filter);
    let bundles = crate::fbc::query::bundles(&data, &filter);
    let mut rows = Vec::new();
    for p in &packages {
        let head = channels
            .iter()
            .find(|c| c.package == p.name && c.name == p.default_channel)
            .and_then(|c| c.head.as_deref());
        let Some(image) = head.and_then(|h| {
            bundles
                .iter()
                .find(|b| b.package == p.name && b.name == h)
                .map(|b| b.image.clone())
        }) else {
            rows.push(row(
                p.name.clone(),
                String::new(),
                Err(format!(
                    "package \"{}\": no head bundle in default channel \"{}\"",
                    p.name, p.default_channel
                )),
            ));
            continue;
        };
        let bundle = crate::cli::render::pull_bundle_blocking(
            &image,
            a.cache_dir.as_deref(),
            &a.fetch.insecure_registries,
            a.fetch.registries_conf.as_deref(),
        );
        rows.push(row(p.name.clone(), image, check(bundle)));
    }
    Ok(rows)
}

/// The rows for `--catalog`: bundle directories when it holds any, else an FBC catalog.
fn rows(a: &CoverageArgs) -> Result<Vec<Row>, CliError> {
    let root = Path::new(&a.catalog);
    let dirs = if root.is_dir() {
        bundle_dirs(root)?
    } else {
        Vec::new()
    };
    if dirs.is_empty() {
        return fbc_rows(a);
    }
    let opts = LoadOptions::default();
    Ok(heads_of(&dirs)
        .into_iter()
        .map(|(package, dir)| {
            let loaded = crate::bundle::load_dir(&dir, &opts).map_err(|e| e.to_string());
            row(package, dir.display().to_string(), check(loaded))
        })
        .collect())
}

/// Runs `olmv1 catalog coverage`.
pub fn coverage(a: CoverageArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let rows = rows(&a)?;
    let mut refused: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.installs) {
        *refused.entry(r.reason.as_str()).or_default() += 1;
    }
    let installs = rows.iter().filter(|r| r.installs).count();
    let report = Report {
        bundles: &rows,
        total: rows.len(),
        installs,
        refused,
    };
    match a.output {
        Output::Json => {
            let text = serde_json::to_string_pretty(&report).map_err(out_err)?;
            writeln!(out, "{text}").map_err(out_err)
        }
        Output::Yaml => {
            let text = serde_saphyr::to_string(&report).map_err(out_err)?;
            write!(out, "{text}").map_err(out_err)
        }
        Output::Table => table(&report, out),
    }
}

fn table(r: &Report<'_>, out: &mut dyn Write) -> Result<(), CliError> {
    for b in r.bundles {
        if b.installs {
            writeln!(out, "{}\t{}\tinstalls", b.package, b.bundle)
        } else {
            writeln!(
                out,
                "{}\t{}\trefused ({}): {}",
                b.package, b.bundle, b.reason, b.message
            )
        }
        .map_err(out_err)?;
    }
    let refused: usize = r.refused.values().sum();
    writeln!(
        out,
        "summary: {} bundles, {} install, {} refused",
        r.total, r.installs, refused
    )
    .map_err(out_err)?;
    for (reason, n) in &r.refused {
        writeln!(out, "  {reason}: {n}").map_err(out_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_the_highest_semver_per_package() {
        let dirs: Vec<PathBuf> = [
            "a/p/0.9.0",
            "a/p/0.10.0",
            "a/p/0.10.0-rc1",
            "a/q/v1.2.3",
            "a/q/v1.10.0",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let heads = heads_of(&dirs);
        assert_eq!(
            heads,
            vec![
                ("p".to_string(), PathBuf::from("a/p/0.10.0")),
                ("q".to_string(), PathBuf::from("a/q/v1.10.0")),
            ]
        );
    }

    #[test]
    fn refusals_are_classified() {
        assert_eq!(
            classify("file \"manifests/x.yaml\": invalid YAML/JSON: duplicate mapping key"),
            "yaml"
        );
        assert_eq!(
            classify(
                "bundle \"x\" has a dependency declared via property \"olm.package.required\" which is currently not supported"
            ),
            "dependencies"
        );
        assert_eq!(
            classify("unsupported bundle: webhookDefinitions are not supported"),
            "webhooks"
        );
        assert_eq!(classify("something new"), "invalid");
    }
}
