//! The shape of the source tree (docs/design/architecture.md, "Layers"; the rules of
//! docs/design/layout.md): production files stay under 600 lines and functions under
//! 100, modules use one file style (`folder/mod.rs`), comments cite documents and tests
//! rather than an outside tracker's issue numbers, and the lower layers do not import
//! the higher ones. Tests are excluded: `*tests.rs` files, `#[cfg(test)] mod … {}`
//! blocks, and the test environment (`src/testenv/`, behind the `testenv` feature).

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_FUNCTION_LINES: usize = 100;

fn project() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The production source files, relative to the project, with their production lines
/// (everything before a `#[cfg(test)]` module).
fn production_sources() -> Vec<(String, Vec<String>)> {
    let root = project();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path
                .strip_prefix(&root)
                .expect("under the project")
                .to_string_lossy()
                .into_owned();
            let name = path.file_name()?.to_string_lossy().into_owned();
            if name.ends_with("tests.rs") || rel.starts_with("src/testenv/") {
                return None;
            }
            let text = std::fs::read_to_string(&path).expect("source file");
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            let end = lines
                .windows(2)
                .position(|w| w[0].trim() == "#[cfg(test)]" && is_module_start(&w[1]))
                .unwrap_or(lines.len());
            Some((rel, lines[..end].to_vec()))
        })
        .collect()
}

fn is_module_start(line: &str) -> bool {
    let t = line.trim_start();
    let t = t
        .strip_prefix("pub(crate) ")
        .or(t.strip_prefix("pub "))
        .unwrap_or(t);
    t.starts_with("mod ") && t.trim_end().ends_with('{')
}

/// `fn` items of `lines` with their length in lines (signature to closing brace at the
/// same indentation; rustfmt's layout is assumed, which `cargo fmt --check` enforces).
fn functions(lines: &[String]) -> Vec<(usize, String, usize)> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let indent = line.len() - line.trim_start().len();
        let words: Vec<&str> = line.split_whitespace().collect();
        let fn_at = words
            .iter()
            .take_while(|w| {
                matches!(**w, "pub" | "const" | "async" | "unsafe" | "fn") || w.starts_with("pub(")
            })
            .position(|w| *w == "fn");
        let Some(at) = fn_at else {
            i += 1;
            continue;
        };
        let name = words
            .get(at + 1)
            .map(|w| w.split(['(', '<']).next().unwrap_or(w).to_owned())
            .unwrap_or_default();
        if line.trim_end().ends_with('}') && line.contains('{') {
            found.push((i + 1, name, 1));
            i += 1;
            continue;
        }
        // The line that opens the body, or a `;` (a declaration without one).
        let mut j = i;
        while j < lines.len() && !lines[j].trim_end().ends_with('{') {
            if lines[j].trim_end().ends_with(';') {
                break;
            }
            j += 1;
        }
        if j >= lines.len() || lines[j].trim_end().ends_with(';') {
            i = j + 1;
            continue;
        }
        let close = " ".repeat(indent) + "}";
        let end = (j + 1..lines.len())
            .find(|&k| lines[k].starts_with(&close))
            .unwrap_or(lines.len() - 1);
        found.push((i + 1, name, end - i + 1));
        i += 1;
    }
    found
}

#[test]
fn production_files_and_functions_stay_small() {
    let mut too_big = Vec::new();
    for (file, lines) in production_sources() {
        if lines.len() > MAX_FILE_LINES {
            too_big.push(format!(
                "{file}: {} lines (limit {MAX_FILE_LINES}): split it by what its parts own",
                lines.len()
            ));
        }
        for (line, name, len) in functions(&lines) {
            if len > MAX_FUNCTION_LINES {
                too_big.push(format!(
                    "{file}:{line}: fn {name} is {len} lines (limit {MAX_FUNCTION_LINES}): give its steps names of their own"
                ));
            }
        }
    }
    assert!(too_big.is_empty(), "{}", too_big.join("\n"));
}

#[test]
fn the_size_check_sees_functions_and_test_modules() {
    let text = "fn a() {\n    x;\n}\n\npub(crate) async fn b<T>(\n    t: T,\n) -> u8 {\n    if x {\n    }\n    1\n}\nfn decl();\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let found = functions(&lines);
    assert_eq!(
        found
            .iter()
            .map(|(l, n, len)| (*l, n.as_str(), *len))
            .collect::<Vec<_>>(),
        vec![(1, "a", 3), (5, "b", 7), (15, "t", 1)]
    );
    assert!(is_module_start("mod tests {"));
    assert!(!is_module_start("mod tests;"));
}

#[test]
fn modules_use_the_folder_mod_rs_style() {
    let root = project();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let pairs: Vec<String> = files
        .iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n != "mod.rs" && n != "lib.rs" && n != "main.rs")
        })
        .filter(|f| f.with_extension("").is_dir())
        .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        pairs.is_empty(),
        "modules with both a file and a folder (move the file to <folder>/mod.rs): {pairs:?}"
    );
}

#[test]
fn comments_cite_documents_not_issue_numbers() {
    let root = project();
    let mut files = Vec::new();
    for dir in ["src", "tests", "e2e", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut cited = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("source file");
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_ascii_lowercase();
            let Some(at) = lower.find("issue ") else {
                continue;
            };
            let comment = line.trim_start().starts_with("//");
            if comment && lower[at + 6..].starts_with(|c: char| c.is_ascii_digit()) {
                cited.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        cited.is_empty(),
        "comments citing issue numbers of a tracker that is not in the repository (cite the docs section or the test instead):\n{}",
        cited.join("\n")
    );
}

/// The layers of docs/design/architecture.md: each module, and the top-level modules
/// it must not import (they are above it).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "api",
        &[
            "fbc",
            "content",
            "resolve",
            "image",
            "bundle",
            "apply",
            "preflight",
            "controller",
            "cli",
            "server",
            "migrate",
        ],
    ),
    (
        "version",
        &[
            "fbc",
            "content",
            "resolve",
            "image",
            "bundle",
            "apply",
            "preflight",
            "controller",
            "cli",
            "server",
            "migrate",
        ],
    ),
    (
        "image",
        &[
            "fbc",
            "content",
            "resolve",
            "bundle",
            "apply",
            "preflight",
            "controller",
            "cli",
            "server",
            "migrate",
            "metrics",
        ],
    ),
    (
        "fbc",
        &[
            "content",
            "resolve",
            "bundle",
            "apply",
            "preflight",
            "controller",
            "cli",
            "server",
            "migrate",
            "metrics",
        ],
    ),
    (
        "content",
        &[
            "resolve",
            "bundle",
            "apply",
            "preflight",
            "controller",
            "cli",
            "migrate",
        ],
    ),
    (
        "resolve",
        &[
            "bundle",
            "apply",
            "preflight",
            "controller",
            "cli",
            "migrate",
        ],
    ),
    (
        "bundle",
        &[
            "content",
            "resolve",
            "apply",
            "preflight",
            "controller",
            "cli",
            "migrate",
        ],
    ),
    (
        "apply",
        &["preflight", "controller", "cli", "metrics", "migrate"],
    ),
    ("migrate", &["preflight", "controller", "cli", "metrics"]),
    ("preflight", &["controller", "cli"]),
    ("controller", &["cli"]),
];

#[test]
fn lower_layers_do_not_import_higher_ones() {
    let mut wrong = Vec::new();
    for (file, lines) in production_sources() {
        let Some(module) = file
            .strip_prefix("src/")
            .and_then(|f| f.split(['/', '.']).next())
        else {
            continue;
        };
        let Some((_, above)) = LAYERS.iter().find(|(m, _)| *m == module) else {
            continue;
        };
        for (n, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for higher in *above {
                if code.contains(&format!("crate::{higher}::"))
                    || code.contains(&format!("crate::{higher};"))
                    || code.contains(&format!("crate::{higher}}}"))
                {
                    wrong.push(format!(
                        "{file}:{}: {module} imports {higher}: {}",
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers of docs/design/architecture.md:\n{}",
        wrong.join("\n")
    );
}
