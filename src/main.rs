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
    /// Render a registry+v1 bundle into the Kubernetes objects to apply.
    Render(olmv1::bundle::cli::RenderArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Render(args) => olmv1::bundle::cli::run(args),
    }
}
