//! `olmv1 catalog packages|channels|bundles|show|validate`: query a file-based catalog from the
//! command line instead of `opm render | jq` (every query of the product documentation's
//! tables 10.1–10.3 is one command; see `QUERIES.md`). The source is given with
//! `--catalog`: a local file or directory, a catalog image (pulled into a local cache),
//! or an on-cluster ClusterCatalog name (read over its HTTP API), see [`super::source`].
//! `validate` lives in [`validate`]; the commands' error type in `error.rs`.

pub mod coverage;
mod error;
pub mod validate;

pub use error::CliError;

use super::source::{CatalogSource, FetchArgs};
use crate::fbc::model::{SCHEMA_BUNDLE, SCHEMA_CHANNEL};
use crate::fbc::query::{self, BundleRecord, ChannelRecord, Filter, PackageRecord};
use crate::fbc::{FbcError, Limits, walk_catalog};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum CatalogCommand {
    /// List packages (name, default channel, channels, latest version in the default channel).
    Packages(QueryArgs),
    /// List channels (head bundle and version, number of entries); with -o json|yaml also the entries (upgrade path).
    Channels(QueryArgs),
    /// List bundles (version, channels, install modes, webhooks, provided APIs, dependencies, upgrade edges).
    Bundles(QueryArgs),
    /// Print raw catalog blobs, selected like the catalog server's `metas` endpoint.
    Show(ShowArgs),
    /// Check a catalog as the controller ingests it: FBC invariant violations are warnings (exit 0), errors with --strict.
    Validate(validate::ValidateArgs),
    /// Render the head bundle of every package (as a first install would) and print installs / refused with the reason, then a summary.
    Coverage(coverage::CoverageArgs),
}

#[derive(clap::Args, Debug)]
pub struct SourceArgs {
    /// The catalog: a file-based catalog file or directory, an image reference, or a ClusterCatalog name.
    #[arg(long)]
    pub catalog: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// How images and ClusterCatalogs are read (shared with `olmv1 resolve`).
    #[command(flatten)]
    pub fetch: FetchArgs,
}

#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only this package.
    #[arg(long)]
    pub package: Option<String>,
    /// Only this channel (bundles: bundles that are entries of this channel).
    #[arg(long)]
    pub channel: Option<String>,
    /// Only bundles (packages: with a bundle) supporting this install mode, e.g. AllNamespaces.
    #[arg(long)]
    pub install_mode: Option<String>,
    /// Leave out bundles whose CSV declares webhooks (catalogs with only olm.csv.metadata do not say; those are kept).
    #[arg(long)]
    pub no_webhooks: bool,
    /// Only bundles whose version satisfies this range, e.g. ">=1.2, <2" or "1.14.x"
    /// (the syntax of `spec.source.catalog.version`).
    #[arg(long)]
    pub version: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Blobs of this package (olm.package blobs count as their own package).
    #[arg(long)]
    pub package: Option<String>,
    /// Blobs of this schema (olm.package, olm.channel, olm.bundle, olm.deprecations, or any other).
    #[arg(long)]
    pub schema: Option<String>,
    /// Blobs with this name.
    #[arg(long)]
    pub name: Option<String>,
    /// Shorthand for --schema olm.channel --name <CHANNEL>.
    #[arg(long, conflicts_with_all = ["schema", "name", "bundle"])]
    pub channel: Option<String>,
    /// Shorthand for --schema olm.bundle --name <BUNDLE>.
    #[arg(long, conflicts_with_all = ["schema", "name"])]
    pub bundle: Option<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Columns for people (`show`: one JSON object per line, as the catalog API).
    Table,
    Json,
    Yaml,
}

pub fn run(args: CatalogArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match execute(args, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        // `olmv1 catalog … | head`: the reader left; not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a catalog command, writing the result to `out`.
pub fn execute(args: CatalogArgs, out: &mut dyn Write) -> Result<(), CliError> {
    match args.command {
        CatalogCommand::Packages(a) => {
            let (data, f) = load(&a)?;
            let rows = query::packages(&data, &f);
            emit(out, a.source.output, &rows, package_table)
        }
        CatalogCommand::Channels(a) => {
            let (data, f) = load(&a)?;
            let rows = query::channels(&data, &f);
            emit(out, a.source.output, &rows, channel_table)
        }
        CatalogCommand::Bundles(a) => {
            let (data, f) = load(&a)?;
            let rows = query::bundles(&data, &f);
            emit(out, a.source.output, &rows, bundle_table)
        }
        CatalogCommand::Show(a) => show(a, out),
        CatalogCommand::Validate(a) => validate::validate(a, out),
        CatalogCommand::Coverage(a) => coverage::coverage(a, out),
    }
}

fn load(a: &QueryArgs) -> Result<(query::CatalogData, Filter), CliError> {
    let source = CatalogSource::parse(&a.source.catalog);
    let local = source.local_blocking(a.package.as_deref(), &a.source.fetch)?;
    let data = query::load(&local.path, a.package.as_deref())?;
    let f = Filter {
        package: a.package.clone(),
        channel: a.channel.clone(),
        install_mode: a.install_mode.clone(),
        no_webhooks: a.no_webhooks,
        version: a
            .version
            .as_deref()
            .map(|v| {
                crate::version::Constraints::parse(v)
                    .map_err(|e| CliError::Unsupported(format!("--version {v:?} is invalid: {e}")))
            })
            .transpose()?,
    };
    Ok((data, f))
}

fn is_broken_pipe(e: &CliError) -> bool {
    match e {
        CliError::Fbc(FbcError::Io { source, .. }) => {
            source.kind() == std::io::ErrorKind::BrokenPipe
        }
        CliError::Output(m) => m.to_ascii_lowercase().contains("broken pipe"),
        _ => false,
    }
}

fn out_err(e: impl std::fmt::Display) -> CliError {
    CliError::Output(e.to_string())
}

fn emit<T: Serialize>(
    out: &mut dyn Write,
    format: Output,
    rows: &[T],
    table: fn(&[T]) -> Vec<Vec<String>>,
) -> Result<(), CliError> {
    match format {
        Output::Json => {
            serde_json::to_writer_pretty(&mut *out, rows).map_err(out_err)?;
            writeln!(out).map_err(out_err)
        }
        Output::Yaml => {
            write!(out, "{}", serde_saphyr::to_string(&rows).map_err(out_err)?).map_err(out_err)
        }
        Output::Table => write_table(out, &table(rows)),
    }
}

fn write_table(out: &mut dyn Write, rows: &[Vec<String>]) -> Result<(), CliError> {
    out.write_all(super::format_table(rows, "   ").as_bytes())
        .map_err(out_err)
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|s| s.to_string()).collect()
}

fn package_table(rows: &[PackageRecord]) -> Vec<Vec<String>> {
    let mut t = vec![row(&["NAME", "DEFAULT CHANNEL", "LATEST", "CHANNELS"])];
    for p in rows {
        t.push(vec![
            p.name.clone(),
            p.default_channel.clone(),
            p.latest_version.clone().unwrap_or_else(|| "-".into()),
            p.channels.join(","),
        ]);
    }
    t
}

fn channel_table(rows: &[ChannelRecord]) -> Vec<Vec<String>> {
    let mut t = vec![row(&["PACKAGE", "CHANNEL", "HEAD", "VERSION", "ENTRIES"])];
    for c in rows {
        t.push(vec![
            c.package.clone(),
            c.name.clone(),
            c.head.clone().unwrap_or_else(|| "-".into()),
            c.head_version.clone().unwrap_or_else(|| "-".into()),
            c.entries.len().to_string(),
        ]);
    }
    t
}

fn bundle_table(rows: &[BundleRecord]) -> Vec<Vec<String>> {
    let mut t = vec![row(&[
        "PACKAGE",
        "NAME",
        "VERSION",
        "CHANNELS",
        "INSTALL MODES",
        "WEBHOOKS",
        "REPLACES",
        "SKIPS/RANGE",
        "DEPENDENCIES",
    ])];
    let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
    for b in rows {
        let replaces: Vec<String> = b
            .upgrade_edges
            .iter()
            .filter_map(|e| e.replaces.clone())
            .collect();
        let mut skips: Vec<String> = b
            .upgrade_edges
            .iter()
            .flat_map(|e| e.skips.clone())
            .collect();
        skips.extend(b.upgrade_edges.iter().filter_map(|e| e.skip_range.clone()));
        skips.dedup();
        let mut replaces = replaces;
        replaces.dedup();
        t.push(vec![
            b.package.clone(),
            b.name.clone(),
            b.version.clone(),
            dash(b.channels.join(",")),
            b.install_modes
                .as_ref()
                .map(|m| dash(m.join(",")))
                .unwrap_or_else(|| "unknown".into()),
            match b.webhooks {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "unknown".into(),
            },
            dash(replaces.join(",")),
            dash(skips.join(",")),
            dash(b.dependencies.join("; ")),
        ]);
    }
    t
}

fn show(a: ShowArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let source = CatalogSource::parse(&a.source.catalog);
    let (schema, name) = match (&a.channel, &a.bundle) {
        (Some(c), _) => (Some(SCHEMA_CHANNEL.to_string()), Some(c.clone())),
        (_, Some(b)) => (Some(SCHEMA_BUNDLE.to_string()), Some(b.clone())),
        _ => (a.schema.clone(), a.name.clone()),
    };
    let keep = |want: &Option<String>, have: &str| {
        want.as_deref().is_none_or(|w| w.is_empty() || w == have)
    };
    let mut first = true;
    if a.source.output == Output::Json {
        out.write_all(b"[").map_err(out_err)?;
    }
    let local = source.local_blocking(a.package.as_deref(), &a.source.fetch)?;
    walk_catalog(&local.path, &Limits::default(), &mut |blob| {
        let v = blob.view;
        if !(keep(&schema, v.schema()) && keep(&a.package, v.package()) && keep(&name, v.name())) {
            return Ok(());
        }
        let w = |e: std::io::Error| FbcError::Io {
            path: PathBuf::from("<stdout>"),
            source: e,
        };
        match a.source.output {
            Output::Table => out
                .write_all(blob.json)
                .and_then(|_| out.write_all(b"\n"))
                .map_err(w)?,
            Output::Json => {
                let value: serde_json::Value =
                    serde_json::from_slice(blob.json).map_err(|e| FbcError::Parse {
                        path: blob.path.to_path_buf(),
                        message: e.to_string(),
                    })?;
                let text = serde_json::to_string_pretty(&value).map_err(|e| FbcError::Parse {
                    path: blob.path.to_path_buf(),
                    message: e.to_string(),
                })?;
                write!(out, "{}\n{text}", if first { "" } else { "," }).map_err(w)?;
            }
            Output::Yaml => {
                let value: serde_json::Value =
                    serde_json::from_slice(blob.json).map_err(|e| FbcError::Parse {
                        path: blob.path.to_path_buf(),
                        message: e.to_string(),
                    })?;
                let text = serde_saphyr::to_string(&value).map_err(|e| FbcError::Parse {
                    path: blob.path.to_path_buf(),
                    message: e.to_string(),
                })?;
                write!(out, "---\n{text}").map_err(w)?;
            }
        }
        first = false;
        Ok(())
    })?;
    if a.source.output == Output::Json {
        out.write_all(b"\n]\n").map_err(out_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: CatalogCommand,
    }

    fn run_args(args: &[&str]) -> Result<String, CliError> {
        let cli =
            Cli::try_parse_from(std::iter::once("catalog").chain(args.iter().copied())).unwrap();
        let mut out = Vec::new();
        execute(
            CatalogArgs {
                command: cli.command,
            },
            &mut out,
        )?;
        Ok(String::from_utf8(out).unwrap())
    }

    const CAT: &str = "schema: olm.package\nname: p\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: p\nentries:\n- name: p.v1.0.0\n- name: p.v1.1.0\n  replaces: p.v1.0.0\n  skipRange: '<1.1.0'\n---\nschema: olm.bundle\nname: p.v1.0.0\npackage: p\nimage: quay.io/p:1\nproperties:\n- type: olm.package\n  value: {packageName: p, version: 1.0.0}\n- type: olm.csv.metadata\n  value:\n    installModes: [{type: AllNamespaces, supported: false}, {type: OwnNamespace, supported: true}]\n---\nschema: olm.bundle\nname: p.v1.1.0\npackage: p\nimage: quay.io/p:2\nproperties:\n- type: olm.package\n  value: {packageName: p, version: 1.1.0}\n- type: olm.gvk\n  value: {group: example.com, kind: Thing, version: v1}\n- type: olm.csv.metadata\n  value:\n    installModes: [{type: AllNamespaces, supported: true}]\n---\nschema: olm.package\nname: q\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: q\nentries: [{name: q.v1}]\n---\nschema: olm.bundle\nname: q.v1\npackage: q\nproperties:\n- type: olm.package\n  value: {packageName: q, version: 0.1.0}\n- type: olm.package.required\n  value: {packageName: p, versionRange: '>=1.0.0'}\n";

    fn catalog() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("catalog.yaml"), CAT).unwrap();
        d
    }

    #[test]
    fn packages_with_filters() {
        let d = catalog();
        let c = d.path().to_str().unwrap();
        let t = run_args(&["packages", "--catalog", c]).unwrap();
        assert!(t.starts_with("NAME"), "{t}");
        assert!(t.contains("p      stable            1.1.0"), "{t}");
        let j: serde_json::Value = serde_json::from_str(
            &run_args(&[
                "packages",
                "--catalog",
                c,
                "--install-mode",
                "AllNamespaces",
                "--no-webhooks",
                "-o",
                "json",
            ])
            .unwrap(),
        )
        .unwrap();
        assert_eq!(j.as_array().unwrap().len(), 1);
        assert_eq!(j[0]["name"], "p");
    }

    #[test]
    fn channels_and_bundles() {
        let d = catalog();
        let c = d.path().to_str().unwrap();
        let j: serde_json::Value = serde_json::from_str(
            &run_args(&["channels", "--catalog", c, "--package", "p", "-o", "json"]).unwrap(),
        )
        .unwrap();
        assert_eq!(j[0]["head"], "p.v1.1.0");
        assert_eq!(j[0]["entries"][1]["replaces"], "p.v1.0.0");
        let t = run_args(&[
            "bundles",
            "--catalog",
            c,
            "--package",
            "p",
            "--channel",
            "stable",
        ])
        .unwrap();
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(t.contains("<1.1.0"), "{t}");
        let y = run_args(&["bundles", "--catalog", c, "--package", "q", "-o", "yaml"]).unwrap();
        assert!(y.contains("package p >=1.0.0"), "{y}");
        let t = run_args(&["bundles", "--catalog", c, "--install-mode", "OwnNamespace"]).unwrap();
        assert_eq!(t.lines().count(), 2, "{t}");
    }

    #[test]
    fn show_selects_raw_blobs() {
        let d = catalog();
        let c = d.path().to_str().unwrap();
        let t = run_args(&[
            "show",
            "--catalog",
            c,
            "--package",
            "p",
            "--schema",
            "olm.package",
        ])
        .unwrap();
        assert_eq!(
            t,
            "{\"schema\":\"olm.package\",\"name\":\"p\",\"defaultChannel\":\"stable\"}\n"
        );
        let t = run_args(&["show", "--catalog", c, "--package", "p"]).unwrap();
        assert_eq!(t.lines().count(), 4);
        let j: serde_json::Value = serde_json::from_str(
            &run_args(&[
                "show",
                "--catalog",
                c,
                "--package",
                "p",
                "--bundle",
                "p.v1.1.0",
                "-o",
                "json",
            ])
            .unwrap(),
        )
        .unwrap();
        assert_eq!(j.as_array().unwrap().len(), 1);
        assert_eq!(j[0]["image"], "quay.io/p:2");
        let y = run_args(&[
            "show",
            "--catalog",
            c,
            "--package",
            "p",
            "--channel",
            "stable",
            "-o",
            "yaml",
        ])
        .unwrap();
        assert!(
            y.starts_with("---\n") && y.contains("replaces: p.v1.0.0"),
            "{y}"
        );
    }

    #[test]
    fn sources() {
        // How a --catalog value is read: see `super::super::source` (its tests).
        // Images are pulled (here: a reference the puller rejects before any I/O).
        let cache = tempfile::tempdir().unwrap();
        let e = run_args(&[
            "packages",
            "--catalog",
            "quay.io/Org/cat:v1",
            "--image-cache-dir",
            cache.path().to_str().unwrap(),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("invalid image reference"), "{e}");
        let e = run_args(&["packages", "--catalog", "./does-not-exist"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("does-not-exist"), "{e}");
    }
}
