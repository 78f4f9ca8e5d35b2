//! The subcommands of the `olmv1` binary but `controller`: `catalog`, `resolve`,
//! `render`, `crd-diff`, `rbac` (offline tools), `status` (the cluster's
//! ClusterExtensions for a person), `approve` (an upgrade under manual approval), `rollback` (to an earlier revision),
//! `migrate` (OLM v0 Subscriptions to ClusterExtensions), one module each; `completion`
//! and `man` in [`docs`]; image pull progress on a terminal in [`progress`]. A module here owns the command's clap
//! arguments, reading its inputs (files, images, catalogs, the cluster of the current
//! kubeconfig) and printing; every decision (which bundle, which objects, is a CRD change
//! safe, which rules an installer needs) is a call into the domain modules. Nothing
//! outside `cli` imports from here, so the domain modules stay free of argument parsing
//! and terminal output. `catalog validate` lives in [`catalog::validate`]. [`source`] is the `--catalog` source the commands share; [`input_file`] reads
//! files named on the command line (regular files only, bounded).

pub mod approve;
pub mod catalog;
pub mod cluster_content;
pub mod crd_diff;
pub mod dependencies;
pub mod docs;
pub mod input_file;
pub mod migrate;
pub mod progress;
pub mod rbac;
pub mod render;
pub mod resolve;
pub mod rollback;
pub mod source;
pub mod status;
pub mod upstream;

/// Runs `fut` to completion on a runtime of its own, for the synchronous command
/// handlers (which run outside any async context).
pub(crate) fn block_on<T>(fut: impl std::future::Future<Output = T>) -> Result<T, String> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    Ok(rt.block_on(fut))
}

/// The exit of a command whose work ran in [`block_on`]: its output printed by `print`
/// and success, or the error (of the command or of the runtime) on stderr and failure.
pub(crate) fn exit_with<E: std::fmt::Display>(
    outcome: Result<Result<String, E>, String>,
    print: impl FnOnce(&str),
) -> std::process::ExitCode {
    match outcome {
        Ok(Ok(out)) => {
            print(&out);
            std::process::ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Rows as aligned columns: every column but the last padded to its widest cell and
/// followed by `gap`; trailing blanks trimmed, one line per row.
pub(crate) fn format_table(rows: &[Vec<String>], gap: &str) -> String {
    let cols = rows.first().map(Vec::len).unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == cols {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}{gap}", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_are_aligned() {
        let rows = vec![
            vec!["A".to_string(), "BB".to_string(), "C".to_string()],
            vec!["aaa".to_string(), "b".to_string(), String::new()],
        ];
        assert_eq!(super::format_table(&rows, "  "), "A    BB  C\naaa  b\n");
    }
}
