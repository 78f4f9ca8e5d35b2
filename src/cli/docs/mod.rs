//! Shell completions (`olmv1 completion bash|zsh|fish`) and man pages (`olmv1 man
//! --dir DIR`), both generated from the binary's clap definition, which `main` passes
//! in — so they can never list a flag the binary does not have. One man page per
//! command and subcommand: `olmv1.1`, `olmv1-status.1`, `olmv1-catalog-packages.1`, ….
//! [`markdown`] writes the Markdown reference in `docs/reference/` from the same definition.

pub mod markdown;

use clap::Command;
use std::path::{Path, PathBuf};

/// The shells `olmv1 completion` writes scripts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell: bash (`source <(olmv1 completion bash)`), zsh, or fish.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write the man pages into (created if missing), e.g.
    /// ~/.local/share/man/man1.
    #[arg(long)]
    pub dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ReferenceArgs {
    /// Directory to write `cli.md` and `controller-flags.md` into (created if missing):
    /// docs/reference in the source tree.
    #[arg(long)]
    pub dir: PathBuf,
}

/// The completion script of `cmd` for `shell`, for the program name `bin`.
pub fn completion(mut cmd: Command, shell: Shell, bin: &str) -> Vec<u8> {
    let mut out = Vec::new();
    match shell {
        Shell::Bash => clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, bin, &mut out),
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, bin, &mut out),
        Shell::Fish => clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, bin, &mut out),
    }
    out
}

/// Every man page of `cmd`: (file name, roff text), the top command first.
pub fn man_pages(cmd: Command) -> Result<Vec<(String, Vec<u8>)>, std::io::Error> {
    let mut cmd = cmd;
    cmd.build();
    let mut pages = Vec::new();
    collect(&cmd, cmd.get_name().to_string(), &mut pages)?;
    Ok(pages)
}

fn collect(
    cmd: &Command,
    name: String,
    pages: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), std::io::Error> {
    let page_cmd = cmd.clone().name(name.clone());
    let mut text = Vec::new();
    clap_mangen::Man::new(page_cmd).render(&mut text)?;
    pages.push((format!("{name}.1"), text));
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        collect(sub, format!("{name}-{}", sub.get_name()), pages)?;
    }
    Ok(())
}

/// Writes [`man_pages`] into `dir`; the paths written.
pub fn write_man_pages(cmd: Command, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let pages = man_pages(cmd).map_err(|e| format!("rendering the man pages: {e}"))?;
    let mut written = Vec::with_capacity(pages.len());
    for (file, text) in pages {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
