#![forbid(unsafe_code)]
//! The `olmv1` binary: argument parsing and wiring only.

use clap::{Parser, Subcommand};
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log_format);
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
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
    }
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
