#![forbid(unsafe_code)]
//! The `olmv1` binary: argument parsing and wiring only.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "olmv1", version, about = "OLM v1 controllers, catalog server and offline tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check whether a new CRD can safely replace an installed one (exit 0 safe, 1 unsafe, 2 bad input).
    CrdDiff(olmv1::preflight::crd_safety::cli::CrdDiffArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CrdDiff(args) => olmv1::preflight::crd_safety::cli::run(args),
    }
}
