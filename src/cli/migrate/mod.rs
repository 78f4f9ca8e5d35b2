//! `olmv1 migrate check <namespace>/<name> | --all`: whether OLM v0 installations
//! (Subscriptions) can be switched to ClusterExtensions, and what the switch would
//! create and remove; `migrate convert` and `migrate rollback`: the switch itself and
//! the way back (docs/how-to/switch-from-olm-v0.md). This module is the I/O edge:
//! [`gather`] reads the v0 objects and the ClusterCatalogs (with the package's content
//! they serve) from the cluster of the kubeconfig, [`crate::migrate::olm_v0::check`]
//! decides, the installer RBAC is `olmv1 rbac`'s ([`super::rbac::execute`]) for the
//! installed bundle, and [`render`] prints the table; [`convert`], [`rollback`] and
//! [`cleanup`] read, ask their plans and perform the steps through [`kube`]; `--all`
//! runs one plan per Subscription and ends with a [`summary`] line.

mod certificates;
mod cleanup;
mod convert;
mod fence;
mod gather;
mod guard;
mod kube;
mod render;
mod rollback;

use super::source::FetchArgs;
use crate::migrate::olm_v0::{self, Check};
use std::path::PathBuf;
use std::process::ExitCode;

/// Switching OLM v0 installations (Subscriptions) to ClusterExtensions.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    #[command(subcommand)]
    pub command: MigrateCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum MigrateCommand {
    /// Say per Subscription whether it can be switched (or each blocker and what to do),
    /// and show the ClusterExtension, ClusterCatalog and installer account it would get.
    Check(CheckArgs),
    /// Switch one Subscription to a ClusterExtension: back it up, create the installer
    /// account, stop OLM v0 without its finalizer deleting anything, create the
    /// ClusterExtension. Prints the steps (dry run) unless --apply; run again to
    /// continue after an interruption.
    Convert(ConvertArgs),
    /// Undo a convert: remove the ClusterExtension without touching the workload and
    /// re-create the Subscription from the backup, starting at the installed CSV.
    Rollback(RollbackArgs),
    /// After the ClusterExtension is Installed and rolled out: delete what only OLM v0
    /// needed (v0-named RBAC, suffixed webhook configurations, copied CSVs, the
    /// Operator object) and remove OLM v0's labels. CRDs and custom resources are never
    /// touched; the backup stays (rollback still works).
    Cleanup(CleanupArgs),
}

#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    /// The Subscription, as `<namespace>/<name>`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub subscription: Option<String>,
    /// Every Subscription `migrate convert` switched (each backup ConfigMap).
    #[arg(long)]
    pub all: bool,
    /// Print the steps without changing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of the dry run: table (text), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The Subscription, as `<namespace>/<name>`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub subscription: Option<String>,
    /// Every Subscription `migrate check --all` finds eligible, one after the other.
    #[arg(long)]
    pub all: bool,
    /// Print the steps that remain without changing anything (the default).
    #[arg(long, conflicts_with = "apply")]
    pub dry_run: bool,
    /// Perform the steps.
    #[arg(long)]
    pub apply: bool,
    /// Output format of the dry run: table (text), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Registry (host[:port]) reached over plain HTTP for bundle images (repeatable).
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,
    /// Stop after this many steps (tests of an interrupted convert).
    #[arg(long, hide = true)]
    pub stop_after: Option<usize>,
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The Subscription, as `<namespace>/<name>`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub subscription: Option<String>,
    /// Every Subscription a backup ConfigMap of `convert` names, one after the other.
    #[arg(long)]
    pub all: bool,
    /// Print the steps without changing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format of the dry run: table (text), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The Subscription, as `<namespace>/<name>`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub subscription: Option<String>,
    /// Every Subscription of the cluster.
    #[arg(long)]
    pub all: bool,
    /// Output format: table (text), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Do not compute the installer RBAC (it pulls the bundle image).
    #[arg(long)]
    pub no_rbac: bool,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Registry (host[:port]) reached over plain HTTP for bundle images (repeatable).
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

/// Runs the command: `check` exits 0 when every Subscription checked is eligible, 1
/// when one is not; `convert`, `rollback` and `cleanup` 0 when planned or done, 1 when
/// refused, 2 when a step failed, 3 when `convert` did its steps but OLM v0 had not
/// finished within the wait (run it again); with `--all` the worst of them (2, 3, 1,
/// 0 in that order); 2 when the cluster could not be read.
pub fn run(args: MigrateArgs) -> ExitCode {
    let steps = |outcome: Result<(String, u8), String>| match outcome {
        Ok((text, code)) => {
            print!("{text}");
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    };
    match args.command {
        MigrateCommand::Convert(args) if args.all => steps(convert_all(&args)),
        MigrateCommand::Convert(args) => steps(convert::convert(&args)),
        MigrateCommand::Cleanup(args) => steps(cleanup::cleanup(&args)),
        MigrateCommand::Rollback(args) if args.all => steps(rollback::rollback_all(&args)),
        MigrateCommand::Rollback(args) => steps(rollback::rollback(&args)),
        MigrateCommand::Check(args) => match check(&args) {
            Ok((text, eligible)) => {
                print!("{text}");
                if eligible {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
    }
}

/// The output of `migrate check` and whether every Subscription is eligible.
/// Blocking: reads the cluster on a runtime of its own.
pub fn check(args: &CheckArgs) -> Result<(String, bool), String> {
    let checks = checks(args)?;
    let eligible = checks.iter().all(|c| c.eligible);
    let text = match args.output {
        Output::Table => render::text(&checks),
        Output::Json => serde_json::to_string_pretty(&checks)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string())?,
        Output::Yaml => serde_saphyr::to_string(&checks).map_err(|e| e.to_string())?,
    };
    Ok((text, eligible))
}

/// `check` of the Subscriptions `args` names, with the installer RBAC unless
/// `--no-rbac`. Blocking.
pub fn checks(args: &CheckArgs) -> Result<Vec<Check>, String> {
    let target = match (&args.subscription, args.all) {
        (Some(s), _) => Some(parse_target(s)?),
        (None, _) => None,
    };
    let (operators, catalogs) = super::block_on(gather::read(args, target))??;
    if operators.is_empty() {
        return Err("no Subscriptions found".into());
    }
    let mut checks: Vec<Check> = operators
        .iter()
        .map(|op| {
            let package = op.subscription["spec"]["name"].as_str().unwrap_or_default();
            let views = catalogs.get(package).map(Vec::as_slice).unwrap_or_default();
            olm_v0::check(op, views)
        })
        .collect();
    if !args.no_rbac {
        for c in checks.iter_mut() {
            c.installer.rbac = rbac_for(c, args).map(|r| {
                r.unwrap_or_else(|e| format!("# could not compute the installer RBAC: {e}\n"))
            });
        }
    }
    Ok(checks)
}

/// `convert --all`: every Subscription `check --all` finds eligible, one convert each;
/// a refused or failed one does not stop the others.
fn convert_all(args: &ConvertArgs) -> Result<(String, u8), String> {
    let check_args = CheckArgs {
        subscription: None,
        all: true,
        output: Output::Json,
        no_rbac: true,
        kubeconfig: args.kubeconfig.clone(),
        insecure_registries: args.insecure_registries.clone(),
    };
    let checks = checks(&check_args)?;
    let mut outcomes = Vec::new();
    for c in &checks {
        if !c.eligible {
            outcomes.push((
                format!(
                    "Subscription {}: not eligible (see `olmv1 migrate check {}`)\n",
                    c.subscription, c.subscription
                ),
                1,
            ));
            continue;
        }
        let one = ConvertArgs {
            subscription: Some(c.subscription.clone()),
            all: false,
            dry_run: args.dry_run,
            apply: args.apply,
            output: args.output,
            kubeconfig: args.kubeconfig.clone(),
            insecure_registries: args.insecure_registries.clone(),
            stop_after: args.stop_after,
        };
        outcomes.push(
            convert::convert(&one)
                .unwrap_or_else(|e| (format!("Subscription {}: error: {e}\n", c.subscription), 2)),
        );
    }
    Ok(summary("convert", outcomes))
}

/// The outputs of one command per Subscription, then a summary line; the exit code is
/// the worst: 2 failed, then 3 not finished (run again), 1 refused, 0 done.
pub fn summary(command: &str, outcomes: Vec<(String, u8)>) -> (String, u8) {
    let count = |code: u8| outcomes.iter().filter(|(_, c)| *c == code).count();
    let unfinished = match count(3) {
        0 => String::new(),
        n => format!(", {n} not finished (run again)"),
    };
    let line = format!(
        "{command} --all: {} Subscription(s): {} done or planned, {} refused, {} failed{unfinished}\n",
        outcomes.len(),
        count(0),
        count(1),
        count(2)
    );
    let severity = |code: u8| [0u8, 1, 3, 2].iter().position(|c| *c == code);
    let code = outcomes
        .iter()
        .map(|(_, c)| *c)
        .max_by_key(|c| severity(*c))
        .unwrap_or(0);
    let mut out: String = outcomes.into_iter().map(|(o, _)| o).collect();
    out.push_str(&line);
    (out, code)
}

/// `<namespace>/<name>`.
pub fn parse_target(s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!(
            "{s:?}: expected <namespace>/<name> of a Subscription"
        )),
    }
}

/// The installer RBAC (YAML) from `olmv1 rbac` for the bundle the catalog serves;
/// `None` without a catalog or version to compute it from.
pub fn rbac_for(c: &Check, args: &CheckArgs) -> Option<Result<String, String>> {
    let (Some(catalog), Some(version)) = (
        c.cluster_extension
            .pointer(
                "/spec/source/catalog/selector/matchLabels/olm.operatorframework.io~1metadata.name",
            )
            .and_then(|v| v.as_str()),
        c.version.as_deref(),
    ) else {
        return None;
    };
    let watch = c
        .cluster_extension
        .pointer("/spec/config/inline/watchNamespace")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let rbac_args = super::rbac::RbacArgs {
        source: format!("{}@{version}", c.package),
        namespace: c.installer.namespace.clone(),
        extension: c
            .subscription
            .split_once('/')
            .map(|(_, n)| n.to_string())
            .unwrap_or_default(),
        bundled_rbac: Default::default(),
        diff: None,
        watch_namespace: watch,
        // A cluster running OLM v0 serves OperatorCondition: the controller installs
        // one with the bundle (docs/how-to/upgrade-control.md, "The operator's own say").
        operator_condition: true,
        catalog: Some(catalog.to_string()),
        cache_dir: None,
        fetch: FetchArgs {
            insecure_registries: args.insecure_registries.clone(),
            registries_conf: None,
            image_cache_dir: None,
            kubeconfig: args.kubeconfig.clone(),
        },
    };
    Some(super::rbac::execute(&rbac_args))
}

#[cfg(test)]
mod tests {
    #[test]
    fn targets_are_namespace_slash_name() {
        assert_eq!(
            super::parse_target("ops/demo"),
            Ok(("ops".into(), "demo".into()))
        );
        for bad in ["demo", "/demo", "ops/", "a/b/c"] {
            assert!(super::parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_summary_counts_and_exits_with_the_worst() {
        let (out, code) = super::summary(
            "cleanup",
            vec![("a\n".into(), 0), ("b\n".into(), 2), ("c\n".into(), 1)],
        );
        assert_eq!(code, 2);
        assert!(out.ends_with(
            "cleanup --all: 3 Subscription(s): 1 done or planned, 1 refused, 1 failed\n"
        ));
        assert_eq!(super::summary("convert", vec![]).1, 0);
        // not finished ranks above refused, below failed
        let (out, code) = super::summary("convert", vec![("a\n".into(), 1), ("b\n".into(), 3)]);
        assert_eq!(code, 3);
        assert!(out.ends_with(
            "convert --all: 2 Subscription(s): 0 done or planned, 1 refused, 0 failed, 1 not finished (run again)\n"
        ));
        let code = super::summary("convert", vec![("a".into(), 3), ("b".into(), 2)]).1;
        assert_eq!(code, 2);
    }
}
