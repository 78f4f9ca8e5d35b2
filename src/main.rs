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
    /// Resolve a package against catalogs and print the bundle that would be installed.
    Resolve(olmv1::resolve::cli::ResolveArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Resolve(args) => olmv1::resolve::cli::run(args),
    }
}
