//! The generated Markdown reference (`olmv1 docs --dir docs/reference`): `cli.md`, every
//! command, subcommand and flag with its help text, and `controller-flags.md`, the flags
//! and environment variables of `olmv1 controller` — both read from the binary's clap
//! definition, so they list exactly the flags the binary has. `tests/docs.rs` fails when
//! the committed files differ from what this writes.

use clap::{Arg, Command};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The command whose flags `controller-flags.md` lists.
const CONTROLLER: &str = "controller";

/// The regeneration command named in both files' headers.
pub const REGENERATE: &str = "cargo run -- docs --dir docs/reference";

/// Both reference pages of `cmd`: (file name, Markdown).
pub fn reference_pages(cmd: Command) -> Vec<(&'static str, String)> {
    let mut cmd = cmd;
    cmd.build();
    vec![
        ("cli.md", cli_markdown(&cmd)),
        ("controller-flags.md", controller_flags_markdown(&cmd)),
    ]
}

/// Writes [`reference_pages`] into `dir`; the paths written.
pub fn write_reference(cmd: Command, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for (file, text) in reference_pages(cmd) {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn header(title: &str, out: &mut String) {
    let _ = writeln!(out, "# {title}\n");
    let _ = writeln!(
        out,
        "<!-- Generated from the clap definition of the binary; do not edit. Regenerate: `{REGENERATE}` -->\n"
    );
}

/// Every visible command and subcommand, depth first, with its flags.
fn cli_markdown(cmd: &Command) -> String {
    let mut out = String::new();
    header("Command-line reference", &mut out);
    out.push_str(
        "Every command, subcommand and flag of `olmv1` with its help text (`olmv1 <command> --help` \
         prints the same). The controller's flags, with their environment variables and \
         defaults, are also listed in [controller-flags.md](controller-flags.md).\n\n",
    );
    let mut names = Vec::new();
    visible_commands(cmd, cmd.get_name().to_string(), &mut names);
    out.push_str("Commands:\n\n");
    for (path, sub) in &names {
        let _ = writeln!(
            out,
            "- [`{path}`](#{}) — {}",
            path.replace(' ', "-"),
            one_line(sub.get_about().map(|a| a.to_string()).unwrap_or_default())
        );
    }
    out.push('\n');
    for (path, sub) in &names {
        command_section(path, sub, sub.get_name() == cmd.get_name(), &mut out);
    }
    out
}

fn visible_commands<'a>(cmd: &'a Command, path: String, out: &mut Vec<(String, &'a Command)>) {
    out.push((path.clone(), cmd));
    for sub in cmd.get_subcommands() {
        if sub.get_name() != "help" && !sub.is_hide_set() {
            visible_commands(sub, format!("{path} {}", sub.get_name()), out);
        }
    }
}

fn command_section(path: &str, cmd: &Command, top: bool, out: &mut String) {
    let _ = writeln!(out, "## {path}\n");
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    if !about.is_empty() {
        let _ = writeln!(out, "{}\n", about.trim());
    }
    let usage = cmd.clone().bin_name(path).render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    let _ = writeln!(out, "```\n{usage}\n```\n");
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && (top || !a.is_global_set()))
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .partition(|a| a.is_positional());
    for (title, args) in [("Arguments", positionals), ("Options", options)] {
        if args.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title}:\n");
        for arg in args {
            let _ = writeln!(out, "- {}", describe(arg));
        }
        out.push('\n');
    }
    if top {
        out.push_str("`--log-format` is accepted by every command.\n\n");
    }
}

/// `` `-o, --output <FORMAT>` — help. Default: … Values: … Env: … ``
fn describe(arg: &Arg) -> String {
    let mut text = format!("`{}`", spelling(arg));
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    if !help.is_empty() {
        let _ = write!(text, " — {}", sentence(help));
    }
    for extra in details(arg) {
        let _ = write!(text, " {extra}.");
    }
    text
}

/// How the flag is written: short and long names, its value, or the positional's name.
fn spelling(arg: &Arg) -> String {
    let value = value_names(arg);
    if arg.is_positional() {
        return value;
    }
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    let mut text = names.join(", ");
    if takes_value(arg) {
        let _ = write!(text, " {value}");
    }
    text
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_num_args().is_some_and(|n| n.takes_values())
}

fn value_names(arg: &Arg) -> String {
    let names: Vec<String> = match arg.get_value_names() {
        Some(v) => v.iter().map(|n| format!("<{n}>")).collect(),
        None => vec![format!("<{}>", arg.get_id().as_str().to_uppercase())],
    };
    let mut text = names.join(" ");
    if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
        text.push_str("...");
    }
    text
}

/// Default, possible values, environment variable and aliases of `arg`.
fn details(arg: &Arg) -> Vec<String> {
    let mut out = Vec::new();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && takes_value(arg) {
        out.push(format!("Default: `{}`", defaults.join(",")));
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && takes_value(arg) {
        out.push(format!("Values: {}", values.join(", ")));
    }
    if let Some(env) = arg.get_env() {
        out.push(format!("Environment: `{}`", env.to_string_lossy()));
    }
    let aliases: Vec<String> = arg
        .get_aliases()
        .unwrap_or_default()
        .iter()
        .map(|a| format!("`--{a}`"))
        .collect();
    if !aliases.is_empty() {
        out.push(format!("Alias: {}", aliases.join(", ")));
    }
    out
}

/// The flags of `olmv1 controller` as one table, then the hidden (deprecated) ones.
fn controller_flags_markdown(cmd: &Command) -> String {
    let mut out = String::new();
    header("Controller flags", &mut out);
    let Some(ctl) = cmd.find_subcommand(CONTROLLER) else {
        out.push_str("The binary has no `controller` command.\n");
        return out;
    };
    out.push_str(
        "The flags of `olmv1 controller`, with the environment variable each one reads when \
         it is not given, and its default. How to choose the values: \
         [tune the controller](../how-to/tune-the-controller.md); every bound on input: \
         [limits](limits.md).\n\n",
    );
    let (hidden, shown): (Vec<&Arg>, Vec<&Arg>) = ctl
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .partition(|a| a.is_hide_set());
    flag_table(&shown, &mut out);
    if !hidden.is_empty() {
        out.push_str(
            "\nHidden from `--help` (deprecated, kept so that existing deployments start, or for tests):\n\n",
        );
        flag_table(&hidden, &mut out);
    }
    out.push_str(OTHER_ENVIRONMENT);
    out
}

/// What the controller process reads from its environment besides its flags.
const OTHER_ENVIRONMENT: &str = "
Other environment variables of the controller process:

| variable | meaning |
|---|---|
| `RUST_LOG` | log filter (`tracing` env-filter syntax); default `info` |
| `_RJEM_MALLOC_CONF` | jemalloc options; `prof:true,prof_active:false` enables the heap profile of `--pprof-bind-address` ([metrics and profiling](../how-to/metrics-and-profiling.md)) |
| `TMPDIR` | where heap profiles are dumped; with `readOnlyRootFilesystem` set it to a writable path such as `/var/cache/olmv1` |
";

fn flag_table(args: &[&Arg], out: &mut String) {
    out.push_str("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for arg in args {
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = if defaults.is_empty() || !takes_value(arg) {
            String::new()
        } else {
            format!("`{}`", defaults.join(","))
        };
        let mut meaning = sentence(
            arg.get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default(),
        );
        for extra in details(arg)
            .into_iter()
            .filter(|d| d.starts_with("Values") || d.starts_with("Alias"))
        {
            let _ = write!(meaning, " {extra}.");
        }
        let _ = writeln!(
            out,
            "| `{}` | {env} | {default} | {} |",
            spelling(arg),
            meaning.replace('|', "\\|")
        );
    }
}

/// Help text on one line (paragraphs joined), for list items and table cells.
fn one_line(text: String) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`one_line`] ending in a full stop (clap drops the last one of a one-line help), so
/// that the details appended after it read as sentences.
fn sentence(text: String) -> String {
    let mut text = one_line(text);
    if !text.is_empty() && !text.ends_with(['.', ':', '!', '?']) {
        text.push('.');
    }
    text
}
