//! The documentation as a reader meets it (docs/README.md is the index): the generated
//! reference in `docs/reference/` is what the binary's clap definition gives now (a flag
//! or subcommand missing from it fails), every relative link in the README, SECURITY.md
//! and `docs/**/*.md` reaches an existing file and heading, and the README stays a front
//! door of at most 200 lines that names the two commands; SECURITY.md's table of the
//! controller's rights is the one `config/rbac/` gives (every rule, with its comment).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const REGENERATE: &str = "cargo run -- docs --dir docs/reference";

#[test]
fn the_generated_reference_is_what_the_binary_defines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(["docs", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run olmv1 docs");
    assert!(
        out.status.success(),
        "olmv1 docs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["cli.md", "controller-flags.md"] {
        let generated = std::fs::read_to_string(dir.path().join(file)).expect("generated");
        let committed = std::fs::read_to_string(project().join("docs/reference").join(file))
            .unwrap_or_default();
        if committed != generated {
            let first = committed
                .lines()
                .zip(generated.lines())
                .position(|(c, g)| c != g)
                .unwrap_or(committed.lines().count().min(generated.lines().count()));
            panic!(
                "docs/reference/{file} is not what the binary's command definitions generate \
                 (first difference at line {}: committed {:?}, generated {:?}); regenerate \
                 it with `{REGENERATE}` and commit the result",
                first + 1,
                committed.lines().nth(first).unwrap_or("<end>"),
                generated.lines().nth(first).unwrap_or("<end>"),
            );
        }
    }
}

/// Every controller flag and every visible subcommand appears in the reference, so the
/// comparison above cannot pass on a generator that leaves things out.
#[test]
fn the_reference_lists_every_subcommand_and_controller_flag() {
    let cli = std::fs::read_to_string(project().join("docs/reference/cli.md")).expect("cli.md");
    let flags = std::fs::read_to_string(project().join("docs/reference/controller-flags.md"))
        .expect("controller-flags.md");
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_olmv1"))
            .args(args)
            .arg("--help")
            .output()
            .expect("run olmv1 --help");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for sub in subcommands(&help(&[])) {
        assert!(
            cli.contains(&format!("## olmv1 {sub}\n")),
            "docs/reference/cli.md lacks `olmv1 {sub}`; regenerate it with `{REGENERATE}`"
        );
        for nested in subcommands(&help(&[sub.as_str()])) {
            assert!(
                cli.contains(&format!("## olmv1 {sub} {nested}\n")),
                "docs/reference/cli.md lacks `olmv1 {sub} {nested}`; regenerate it with `{REGENERATE}`"
            );
        }
    }
    let controller = help(&["controller"]);
    let long_flags: BTreeSet<&str> = controller
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .filter(|w| !matches!(*w, "--help" | "--version"))
        .collect();
    assert!(long_flags.len() > 30, "{controller}");
    for flag in long_flags {
        assert!(
            flags.contains(&format!("`{flag}")) && cli.contains(&format!("`{flag}")),
            "the controller flag {flag} is missing from docs/reference; regenerate it with `{REGENERATE}`"
        );
    }
}

/// The names under `Commands:` of a clap help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(project().join("README.md")).expect("README");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; at most 200 — the manual lives in docs/ (index: docs/README.md)"
    );
    for command in ["hack/demo.sh", "hack/test.sh"] {
        assert!(
            readme.lines().any(|l| l.starts_with(command)),
            "the README shows the command {command}"
        );
    }
    assert!(
        readme.contains("(docs/README.md)"),
        "the README links the docs index"
    );
}

#[test]
fn every_relative_link_reaches_a_file_and_heading() {
    let mut files = vec![project().join("README.md"), project().join("SECURITY.md")];
    markdown_files(&project().join("docs"), &mut files);
    assert!(files.len() > 20, "{files:?}");
    let mut anchors: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("markdown");
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().expect("dir").join(path)
            };
            let where_ = format!(
                "{}:{line}: ({target})",
                file.strip_prefix(project()).unwrap_or(file).display()
            );
            let Ok(dest) = dest.canonicalize() else {
                broken.push(format!("{where_} — no such file"));
                continue;
            };
            if anchor.is_empty() || dest.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let known = anchors
                .entry(dest.clone())
                .or_insert_with(|| headings(&std::fs::read_to_string(&dest).unwrap_or_default()));
            if !known.contains(anchor) {
                broken.push(format!("{where_} — no heading with anchor #{anchor}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// (line number, target) of every inline link `[text](target)` outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // inline code spans are not links
        let prose: String = line
            .split('`')
            .enumerate()
            .map(|(i, part)| if i % 2 == 0 { part } else { "" })
            .collect();
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            if !target.is_empty() {
                out.push((n + 1, target.to_string()));
            }
            rest = &after[end..];
        }
    }
    out
}

/// The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces
/// as hyphens, `-1`, `-2`, … for repeats.
fn headings(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        });
        *count += 1;
    }
    out
}

/// One rule of `config/rbac/`'s roles, as SECURITY.md's table shows it.
fn rbac_rows(file: &str, scope: &str) -> Vec<String> {
    let text = std::fs::read_to_string(project().join(file)).expect("role");
    let list = |line: &str| {
        line.split_once('[')
            .and_then(|(_, rest)| rest.rsplit_once(']'))
            .map(|(inside, _)| {
                inside
                    .split(',')
                    .map(|v| v.trim().trim_matches('"'))
                    .map(|v| if v.is_empty() { "core" } else { v })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    let mut comment: Vec<String> = Vec::new();
    let mut in_comment = false;
    let mut rule: Option<[String; 3]> = None;
    let flush = |rule: &mut Option<[String; 3]>, why: &str, rows: &mut Vec<String>| {
        if let Some([groups, resources, verbs]) = rule.take() {
            rows.push(format!(
                "| {scope} | {groups} | {resources} | {verbs} | {why} |"
            ));
        }
    };
    let mut why = String::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix('#') {
            if !in_comment {
                comment.clear();
            }
            in_comment = true;
            comment.push(c.trim().to_string());
            continue;
        }
        if line.starts_with("- apiGroups:") {
            flush(&mut rule, &why, &mut rows);
            if in_comment {
                // The comment's first sentence says why.
                let joined = comment.join(" ");
                why = joined
                    .split_once(". ")
                    .map_or(joined.clone(), |(first, _)| format!("{first}."));
            }
            rule = Some([list(line), String::new(), String::new()]);
        } else if let Some(r) = rule.as_mut() {
            let line = line.trim_start();
            if line.starts_with("resources:") {
                r[1] = list(line);
            } else if line.starts_with("resourceNames:") {
                r[1] = format!("{} ({})", r[1], list(line));
            } else if line.starts_with("verbs:") {
                r[2] = list(line);
            }
        }
        in_comment = false;
    }
    flush(&mut rule, &why, &mut rows);
    rows
}

const RIGHTS_START: &str =
    "<!-- controller-rights: generated from config/rbac/ by tests/docs.rs -->";
const RIGHTS_END: &str = "<!-- end of controller-rights -->";

/// SECURITY.md lists every right the controller's roles give it, and why (the comment
/// above each rule in `config/rbac/`): a rule added, widened or dropped there without
/// SECURITY.md changing fails, with the table to paste. `OLMV1_WRITE_DOCS=1` writes it.
#[test]
fn security_md_lists_every_right_the_controller_holds() {
    let mut table = vec![
        RIGHTS_START.to_string(),
        "| scope | API groups | resources | verbs | why (config/rbac/) |".to_string(),
        "|---|---|---|---|---|".to_string(),
    ];
    table.extend(rbac_rows("config/rbac/cluster_role.yaml", "cluster"));
    table.extend(rbac_rows(
        "config/rbac/role.yaml",
        "the controller's namespace",
    ));
    table.push(RIGHTS_END.to_string());
    let table = table.join("\n");
    let path = project().join("SECURITY.md");
    let text = std::fs::read_to_string(&path).expect("SECURITY.md");
    let (Some(start), Some(end)) = (text.find(RIGHTS_START), text.find(RIGHTS_END)) else {
        panic!(
            "SECURITY.md has no generated table of the controller's rights ({RIGHTS_START} … {RIGHTS_END})"
        );
    };
    let committed = &text[start..end + RIGHTS_END.len()];
    if committed != table {
        if std::env::var_os("OLMV1_WRITE_DOCS").is_some() {
            let updated = format!(
                "{}{table}{}",
                &text[..start],
                &text[end + RIGHTS_END.len()..]
            );
            std::fs::write(&path, updated).expect("write SECURITY.md");
            return;
        }
        panic!(
            "SECURITY.md's table of the controller's rights is not what config/rbac/ gives; \
             rewrite it with `OLMV1_WRITE_DOCS=1 cargo test --test integration docs::security_md` (or paste):\n{table}"
        );
    }
    // No ConfigMap is readable by the controller outside its namespace (SECURITY.md,
    // "Takeovers": a tenant's extension must not make it read one).
    let cluster = rbac_rows("config/rbac/cluster_role.yaml", "cluster");
    assert!(
        !cluster.iter().any(|r| r.contains("configmaps")),
        "{cluster:#?}"
    );
}
