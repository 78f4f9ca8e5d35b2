#![forbid(unsafe_code)]
//! The `olmv1` binary: argument parsing and wiring only.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// jemalloc instead of the system allocator: the controller's allocations come from
/// many short-lived tasks on several threads, and glibc's per-thread arenas keep the
/// freed memory resident (bench_install: RSS far above the live heap); jemalloc's
/// background thread returns freed pages to the system (settings: .cargo/config.toml).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "olmv1",
    version,
    about = "OLM v1 controllers, catalog server and offline tools"
)]
struct Cli {
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text", env = "OLMV1_LOG_FORMAT")]
    log_format: String,
    /// containers-policy.json signature policy applied to the images the offline
    /// commands pull (catalog, resolve, render, rbac; see
    /// docs/concepts/signature-policy.md). Not read unless named. `controller` has its
    /// own flag of this name (default /etc/containers/policy.json when it exists).
    #[arg(long, global = true, value_name = "PATH")]
    signature_policy: Option<std::path::PathBuf>,
    /// containers-registries.d directory saying where `signedBy` (GPG) signatures are
    /// read from for the offline commands (lookaside storage). Default
    /// /etc/containers/registries.d when it exists and a --signature-policy is named.
    /// `controller` has its own flag of this name.
    #[arg(long, global = true, value_name = "DIR")]
    registries_d: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the ClusterExtension and ClusterCatalog CRDs as YAML.
    Crds,
    /// Run the controllers (ClusterExtension, ClusterCatalog and the catalog server).
    Controller(Box<olmv1::controller::ControllerArgs>),
    /// Check whether a new CRD can safely replace an installed one (exit 0 safe, 1 unsafe, 2 bad input).
    CrdDiff(olmv1::cli::crd_diff::CrdDiffArgs),
    /// Query a file-based catalog: packages, channels, bundles, raw blobs.
    Catalog(olmv1::cli::catalog::CatalogArgs),
    /// Resolve a package against catalogs and print the bundle that would be installed.
    Resolve(olmv1::cli::resolve::ResolveArgs),
    /// Render a registry+v1 bundle into the Kubernetes objects that would be applied.
    Render(olmv1::cli::render::RenderArgs),
    /// Print the least-privilege RBAC an installer ServiceAccount needs for a bundle.
    Rbac(olmv1::cli::rbac::RbacArgs),
    /// Show ClusterExtensions: installed bundle, target, available upgrades, Events, what to do next.
    Status(olmv1::cli::status::StatusArgs),
    /// Switch OLM v0 installations (Subscriptions) to ClusterExtensions: `check` says what the switch would do, `convert` does it, `rollback` undoes it.
    Migrate(olmv1::cli::migrate::MigrateArgs),
    /// Approve the upgrade of a ClusterExtension under manual approval (sets its approved-version annotation).
    Approve(olmv1::cli::approve::ApproveArgs),
    /// Return a ClusterExtension to an earlier revision (sets its rollback-to annotation; --clear removes it).
    Rollback(olmv1::cli::rollback::RollbackArgs),
    /// Print a shell completion script (bash, zsh, fish).
    Completion(olmv1::cli::docs::CompletionArgs),
    /// Write man pages (one per command and subcommand) into a directory.
    Man(olmv1::cli::docs::ManArgs),
    /// Write the Markdown command and controller-flag reference (docs/reference).
    #[command(hide = true)]
    Docs(olmv1::cli::docs::ReferenceArgs),
}

/// The program name in usage and help: `kubectl olmv1` when this binary runs as the
/// kubectl plugin `kubectl-olmv1` (kubectl finds it on PATH by that name), else `olmv1`.
fn program_name(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let base = argv0
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .and_then(|n| n.to_str());
    if base == Some("kubectl-olmv1") {
        "kubectl olmv1"
    } else {
        "olmv1"
    }
}

/// The clap definition with the program name it is invoked as.
fn command(name: &'static str) -> clap::Command {
    Cli::command().bin_name(name).display_name(name)
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next();
    if let Some(role) = olmv1::cli::upstream::role_of(argv0.as_deref()) {
        return upstream_main(role);
    }
    let name = program_name(argv0.as_deref());
    let cli = match Cli::from_arg_matches(&command(name).get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging(&cli.log_format);
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    olmv1::cli::source::set_signature_policy(cli.signature_policy.clone());
    olmv1::cli::source::set_registries_d(cli.registries_d.clone());
    match cli.command {
        Command::Crds => match olmv1::api::crd::all_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(anyhow::anyhow!("serializing CRDs: {e}")),
        },
        Command::Controller(args) => block_on(olmv1::controller::run(*args)),
        Command::CrdDiff(args) => olmv1::cli::crd_diff::run(args),
        Command::Catalog(args) => olmv1::cli::catalog::run(args),
        Command::Resolve(args) => olmv1::cli::resolve::run(args),
        Command::Render(args) => olmv1::cli::render::run(args),
        Command::Rbac(args) => olmv1::cli::rbac::run(args),
        Command::Status(args) => olmv1::cli::status::run(args),
        Command::Migrate(args) => olmv1::cli::migrate::run(args),
        Command::Approve(args) => olmv1::cli::approve::run(args),
        Command::Rollback(args) => olmv1::cli::rollback::run(args),
        Command::Completion(args) => {
            use std::io::Write;
            // a script for a program name with a space would not load: the plugin's
            // completions are for its file name
            let bin = name.replace(' ', "-");
            let script = olmv1::cli::docs::completion(command(name), args.shell, &bin);
            match std::io::stdout().write_all(&script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(anyhow::anyhow!("writing the completion script: {e}")),
            }
        }
        Command::Man(args) => {
            match olmv1::cli::docs::write_man_pages(command("olmv1"), &args.dir) {
                Ok(paths) => {
                    eprintln!("wrote {} man pages to {}", paths.len(), args.dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(anyhow::anyhow!(e)),
            }
        }
        Command::Docs(args) => {
            match olmv1::cli::docs::markdown::write_reference(command("olmv1"), &args.dir) {
                Ok(paths) => {
                    for path in paths {
                        eprintln!("wrote {}", path.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(anyhow::anyhow!(e)),
            }
        }
    }
}

/// Runs as upstream's `operator-controller` or `catalogd` (docs/how-to/switch-from-upstream.md).
fn upstream_main(role: olmv1::controller::options::Role) -> ExitCode {
    use olmv1::cli::upstream::{Outcome, ParseError, parse};
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (mapped, skipped) = match parse(role, argv) {
        Ok(Outcome::Run(mapped, skipped)) => (mapped, skipped),
        Ok(Outcome::Version) => {
            println!("olmv1 {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(ParseError::Clap(e)) => e.exit(),
        Err(ParseError::Invalid(e)) => {
            eprintln!("Error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if std::env::var_os("RUST_LOG").is_none() {
        // The level of upstream's --v (RUST_LOG, when set, wins).
        init_logging_with(mapped.log_filter);
    } else {
        init_logging("text");
    }
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    tracing::info!(role = ?role, "running as upstream's program of this name");
    for flag in skipped {
        tracing::warn!(%flag, "unknown flag skipped");
    }
    for note in &mapped.notes {
        tracing::info!("{note}");
    }
    block_on(olmv1::controller::run(mapped.args))
}

fn block_on(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(anyhow::anyhow!("starting the async runtime: {e}")),
    };
    match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(e: anyhow::Error) -> ExitCode {
    eprintln!("error: {e:#}");
    ExitCode::FAILURE
}

fn init_logging_with(filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        // Span fields (the `reconcile` span's `extension`/`catalog`) on every line.
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init();
    } else {
        builder.init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn invoked_as_kubectl_olmv1_it_says_so() {
        use std::ffi::OsStr;
        assert_eq!(
            program_name(Some(OsStr::new("/home/u/.local/bin/kubectl-olmv1"))),
            "kubectl olmv1"
        );
        assert_eq!(
            program_name(Some(OsStr::new("target/debug/olmv1"))),
            "olmv1"
        );
        assert_eq!(program_name(None), "olmv1");
        let mut cmd = command("kubectl olmv1");
        let help = cmd.render_help().to_string();
        assert!(help.contains("Usage: kubectl olmv1 "), "{help}");
        let err = command("kubectl olmv1")
            .try_get_matches_from(["kubectl-olmv1", "status", "--bogus"])
            .expect_err("unknown flag");
        assert!(
            err.to_string().contains("Usage: kubectl olmv1 status"),
            "{err}"
        );
    }

    #[test]
    fn completions_list_the_subcommands() {
        use olmv1::cli::docs::{Shell, completion};
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script =
                String::from_utf8(completion(command("olmv1"), shell, "olmv1")).expect("utf-8");
            for sub in [
                "status",
                "completion",
                "man",
                "resolve",
                "catalog",
                "render",
                "rbac",
            ] {
                assert!(script.contains(sub), "{shell:?} completion lacks {sub}");
            }
            // fish spells flags `-l explain`
            assert!(
                script.contains("explain"),
                "{shell:?} completion lacks --explain"
            );
        }
    }

    #[test]
    fn the_man_page_of_status_mentions_its_flags() {
        let pages = olmv1::cli::docs::man_pages(command("olmv1")).expect("man pages");
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        for n in [
            "olmv1.1",
            "olmv1-status.1",
            "olmv1-catalog-packages.1",
            "olmv1-completion.1",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        let (_, status) = pages
            .iter()
            .find(|(n, _)| n == "olmv1-status.1")
            .expect("status page");
        let text = String::from_utf8_lossy(status);
        assert!(text.contains(".TH olmv1-status 1"), "{text}");
        for flag in ["explain", "output", "context", "kubeconfig"] {
            assert!(
                text.contains(&format!("\\-\\-{flag}")),
                "the status man page lacks --{flag}: {text}"
            );
        }
    }
}
