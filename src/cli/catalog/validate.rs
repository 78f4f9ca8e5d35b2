//! `olmv1 catalog validate`: checks a file-based catalog the way the catalog
//! controller ingests it ([`crate::fbc::validate_catalog`]), for catalog authors' CI.
//! Syntax errors and hostile-input limits always fail. FBC invariant violations (a
//! channel naming a missing bundle, a package without its default channel, …) are
//! reported as warnings with exit code 0 by default — the controller stores and serves
//! such catalogs too, as catalogd does — and are errors (non-zero exit) with
//! `--strict`, which is what the controller's `--strict-catalogs` refuses. One line per
//! problem (`warning: <file>:<line>: …` or `error: …`), then a summary line.

use super::CliError;
use crate::cli::source::{CatalogSource, FetchArgs};
use crate::fbc::{FbcError, Limits, StoreOptions};
use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// The catalog: a file-based catalog file or directory, an image reference, or a
    /// ClusterCatalog name (or give it with --catalog).
    #[arg(value_name = "CATALOG", required_unless_present = "catalog")]
    pub path: Option<String>,
    /// The catalog, as the other `olmv1 catalog` commands take it.
    #[arg(long, conflicts_with = "path")]
    pub catalog: Option<String>,
    /// Treat FBC invariant violations as errors (exit code 1), as the controller's
    /// --strict-catalogs does; by default they are warnings (exit code 0).
    #[arg(long)]
    pub strict: bool,
    /// Largest catalog accepted (bytes of FBC files), as the controller's
    /// --max-catalog-bytes.
    #[arg(long, default_value_t = 1 << 30)]
    pub max_catalog_bytes: u64,
    /// How images and ClusterCatalogs are read.
    #[command(flatten)]
    pub fetch: FetchArgs,
}

/// Validates the catalog, writing one line per problem and a summary to `out`.
pub fn validate(a: ValidateArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let shown = a.catalog.or(a.path).unwrap_or_default();
    let local = CatalogSource::parse(&shown).local_blocking(None, &a.fetch)?;
    let options = StoreOptions {
        limits: Limits {
            max_total_bytes: a.max_catalog_bytes,
            ..Limits::default()
        },
        strict: a.strict,
    };
    let w = |e: std::io::Error| CliError::Output(e.to_string());
    match crate::fbc::validate_catalog(&local.path, &options) {
        Ok(v) => {
            for p in &v.warnings {
                writeln!(out, "warning: {p}").map_err(w)?;
            }
            let s = &v.summary;
            let verdict = if v.warnings.is_empty() {
                "valid".to_string()
            } else {
                format!(
                    "{} FBC invariant violation(s) reported as warnings (--strict makes them errors)",
                    v.warnings.len()
                )
            };
            writeln!(
                out,
                "catalog {shown}: {} package(s), {} channel(s), {} bundle(s), {} blob(s): {verdict}",
                s.packages, s.channels, s.bundles, v.blobs
            )
            .map_err(w)
        }
        Err(FbcError::Invalid { problems }) => {
            for p in &problems {
                writeln!(out, "error: {p}").map_err(w)?;
            }
            Err(CliError::Unsupported(format!(
                "catalog {shown}: {} FBC invariant violation(s) (--strict)",
                problems.len()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ValidateArgs,
    }

    fn run(args: &[&str]) -> (Result<(), CliError>, String) {
        let cli = Cli::try_parse_from(std::iter::once("validate").chain(args.iter().copied()))
            .expect("arguments");
        let mut out = Vec::new();
        let r = validate(cli.args, &mut out);
        (r, String::from_utf8(out).expect("utf-8"))
    }

    const VALID: &str = "schema: olm.package\nname: p\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: p\nentries:\n- name: p.v1\n---\nschema: olm.bundle\nname: p.v1\npackage: p\nimage: quay.io/p:1\nproperties:\n- type: olm.package\n  value: {packageName: p, version: 1.0.0}\n";

    /// A channel entry naming a bundle that does not exist, and a default channel
    /// that is not declared: stored by catalogd, refused with --strict.
    const BROKEN: &str = "schema: olm.package\nname: p\ndefaultChannel: missing\n---\nschema: olm.channel\nname: stable\npackage: p\nentries:\n- name: p.v1\n- name: p.v2\n---\nschema: olm.bundle\nname: p.v1\npackage: p\nimage: quay.io/p:1\nproperties:\n- type: olm.package\n  value: {packageName: p, version: 1.0.0}\n";

    fn dir(content: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(d.path().join("p")).expect("mkdir");
        std::fs::write(d.path().join("p/catalog.yaml"), content).expect("write");
        d
    }

    #[test]
    fn valid_catalog_passes_in_both_modes() {
        let d = dir(VALID);
        let path = d.path().to_str().expect("path");
        for strict in [false, true] {
            let mut args = vec![path];
            if strict {
                args.push("--strict");
            }
            let (r, out) = run(&args);
            assert!(r.is_ok(), "{r:?}");
            assert_eq!(
                out,
                format!(
                    "catalog {path}: 1 package(s), 1 channel(s), 1 bundle(s), 3 blob(s): valid\n"
                )
            );
        }
    }

    #[test]
    fn violations_are_warnings_by_default() {
        let d = dir(BROKEN);
        let path = d.path().to_str().expect("path");
        let (r, out) = run(&["--catalog", path]);
        assert!(r.is_ok(), "{r:?}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(
            lines[..2]
                .iter()
                .all(|l| l.starts_with("warning: p/catalog.yaml:")),
            "{out}"
        );
        assert!(
            out.contains("default channel \"missing\" not found"),
            "{out}"
        );
        assert!(out.contains("p.v2"), "{out}");
        assert!(
            lines[2].ends_with(
                "2 FBC invariant violation(s) reported as warnings (--strict makes them errors)"
            ),
            "{out}"
        );
    }

    #[test]
    fn strict_makes_violations_errors() {
        let d = dir(BROKEN);
        let path = d.path().to_str().expect("path");
        let (r, out) = run(&[path, "--strict"]);
        let e = r.expect_err("strict fails");
        assert_eq!(
            e.to_string(),
            format!("catalog {path}: 2 FBC invariant violation(s) (--strict)")
        );
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(
            out.lines().all(|l| l.starts_with("error: p/catalog.yaml:")),
            "{out}"
        );
    }

    #[test]
    fn syntax_errors_fail_without_strict() {
        let d = dir("schema: olm.package\nname: [unclosed\n");
        let (r, _) = run(&[d.path().to_str().expect("path")]);
        let e = r.expect_err("syntax error");
        assert!(matches!(e, CliError::Fbc(FbcError::Parse { .. })), "{e}");
    }

    #[test]
    fn the_catalog_is_required_once() {
        assert!(Cli::try_parse_from(["validate"]).is_err());
        assert!(Cli::try_parse_from(["validate", "a", "--catalog", "b"]).is_err());
    }
}
