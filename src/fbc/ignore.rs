//! `.indexignore` files: gitignore-style patterns that exclude files from a file-based
//! catalog, as operator-registry applies them. Each `.indexignore` applies to the
//! directory it is in and everything below; the last matching pattern wins, `!`
//! re-includes, a trailing `/` matches directories only, a `/` at the start or in the
//! middle anchors the pattern to that directory, `*`/`?`/`[...]` do not cross `/`, and
//! `**` does. A file inside an ignored directory is ignored.

use regex::Regex;

pub const INDEX_IGNORE: &str = ".indexignore";

#[derive(Debug)]
struct Pattern {
    regex: Regex,
    negated: bool,
    dir_only: bool,
    /// Anchored patterns match the whole path relative to the `.indexignore`'s
    /// directory; the others match one path component.
    anchored: bool,
}

/// The patterns of one `.indexignore` file.
#[derive(Debug, Default)]
pub struct IgnoreFile {
    patterns: Vec<Pattern>,
}

impl IgnoreFile {
    /// Parses the text of an `.indexignore`; the error names the line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut patterns = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = trim_trailing_spaces(raw);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, line) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (
                    false,
                    line.strip_prefix("\\")
                        .filter(|r| r.starts_with(['#', '!']))
                        .unwrap_or(line),
                ),
            };
            let (dir_only, line) = match line.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let anchored = line.contains('/');
            let line = line.strip_prefix('/').unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let regex = glob_to_regex(line)
                .and_then(|r| Regex::new(&r).map_err(|e| e.to_string()))
                .map_err(|e| format!("line {}: invalid pattern {raw:?}: {e}", i + 1))?;
            patterns.push(Pattern {
                regex,
                negated,
                dir_only,
                anchored,
            });
        }
        Ok(Self { patterns })
    }

    /// `Some(true)` ignored, `Some(false)` explicitly re-included, `None` no pattern matched.
    /// `rel` is the path relative to this file's directory, `/`-separated.
    fn decide(&self, rel: &str, is_dir: bool) -> Option<bool> {
        let base = rel.rsplit('/').next().unwrap_or(rel);
        self.patterns
            .iter()
            .rev()
            .find(|p| {
                (!p.dir_only || is_dir)
                    && if p.anchored {
                        p.regex.is_match(rel)
                    } else {
                        p.regex.is_match(base)
                    }
            })
            .map(|p| !p.negated)
    }
}

/// The `.indexignore` files in effect at one point of a directory walk: each with the
/// path (relative to the catalog root) of the directory that holds it.
#[derive(Debug, Default)]
pub struct IgnoreStack {
    files: Vec<(String, IgnoreFile)>,
}

impl IgnoreStack {
    pub fn push(&mut self, dir_rel: &str, file: IgnoreFile) {
        self.files.push((dir_rel.to_string(), file));
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn truncate(&mut self, len: usize) {
        self.files.truncate(len);
    }

    /// Whether `rel` (relative to the catalog root, `/`-separated) is ignored. Parent
    /// directories are checked by the walk itself (an ignored directory is not entered).
    pub fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        // Deeper files override shallower ones: walk from the innermost outwards.
        for (dir, file) in self.files.iter().rev() {
            let sub = if dir.is_empty() {
                Some(rel)
            } else {
                rel.strip_prefix(dir.as_str())
                    .and_then(|r| r.strip_prefix('/'))
            };
            if let Some(decision) = sub.and_then(|sub| file.decide(sub, is_dir)) {
                return decision;
            }
        }
        false
    }
}

fn trim_trailing_spaces(line: &str) -> &str {
    let mut end = line.len();
    let bytes = line.as_bytes();
    while end > 0 && bytes[end - 1] == b' ' && !(end >= 2 && bytes[end - 2] == b'\\') {
        end -= 1;
    }
    line[..end].trim_end_matches('\r')
}

fn glob_to_regex(glob: &str) -> Result<String, String> {
    let mut out = String::from("^");
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let at_start = i == 0 || chars[i - 1] == '/';
                let slash_after = chars.get(i + 2) == Some(&'/');
                if at_start && slash_after {
                    out.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => {
                let close = chars[i + 1..]
                    .iter()
                    .enumerate()
                    .skip(1)
                    .find(|(_, c)| **c == ']')
                    .map(|(k, _)| i + 1 + k)
                    .ok_or_else(|| "unterminated character class".to_string())?;
                out.push('[');
                let mut j = i + 1;
                if matches!(chars.get(j), Some('!') | Some('^')) {
                    out.push('^');
                    j += 1;
                }
                for &ch in &chars[j..close] {
                    if matches!(ch, '\\' | '[' | ']' | '&' | '~') {
                        out.push('\\');
                    }
                    out.push(ch);
                }
                out.push(']');
                i = close + 1;
                continue;
            }
            '\\' => {
                if let Some(&next) = chars.get(i + 1) {
                    out.push_str(&regex::escape(&next.to_string()));
                    i += 2;
                    continue;
                }
            }
            _ => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out.push('$');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(text: &str) -> IgnoreStack {
        let mut s = IgnoreStack::default();
        s.push("", IgnoreFile::parse(text).unwrap());
        s
    }

    #[test]
    fn basename_patterns_match_at_any_depth() {
        let s = stack("*.md\n# comment\n\nREADME\n");
        assert!(s.is_ignored("README.md", false));
        assert!(s.is_ignored("a/b/notes.md", false));
        assert!(s.is_ignored("x/README", false));
        assert!(!s.is_ignored("a/catalog.json", false));
    }

    #[test]
    fn anchored_negated_and_dir_only() {
        let s = stack("/docs\nbuild/\n*.yaml\n!keep.yaml\nsub/*.json\n");
        assert!(s.is_ignored("docs", true));
        assert!(!s.is_ignored("a/docs", true));
        assert!(s.is_ignored("x/build", true));
        assert!(!s.is_ignored("build", false));
        assert!(s.is_ignored("foo.yaml", false));
        assert!(!s.is_ignored("keep.yaml", false));
        assert!(s.is_ignored("sub/a.json", false));
        assert!(!s.is_ignored("sub/deep/a.json", false));
    }

    #[test]
    fn double_star_and_classes() {
        let s = stack("**/tmp\na/**/z.json\nfile[0-9].json\n");
        assert!(s.is_ignored("tmp", true));
        assert!(s.is_ignored("q/r/tmp", true));
        assert!(s.is_ignored("a/z.json", false));
        assert!(s.is_ignored("a/b/c/z.json", false));
        assert!(s.is_ignored("file3.json", false));
        assert!(!s.is_ignored("filex.json", false));
    }

    #[test]
    fn nested_files_apply_below_their_directory_only() {
        let mut s = stack("*.txt\n");
        s.push(
            "pkg",
            IgnoreFile::parse("!keep.txt\n/local.json\n").unwrap(),
        );
        assert!(s.is_ignored("a.txt", false));
        assert!(!s.is_ignored("pkg/keep.txt", false));
        assert!(s.is_ignored("pkg/local.json", false));
        assert!(!s.is_ignored("local.json", false));
    }

    #[test]
    fn invalid_pattern_names_the_line() {
        let err = IgnoreFile::parse("ok\nbad[\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
