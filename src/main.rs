#![forbid(unsafe_code)]
//! The `olmv1` binary: argument parsing and wiring only.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "olmv1",
    version,
    about = "OLM v1 controllers, catalog server and offline tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Query a file-based catalog: packages, channels, bundles, raw blobs.
    Catalog(olmv1::fbc::cli::CatalogArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Catalog(args) => olmv1::fbc::cli::run(args),
    }
}
