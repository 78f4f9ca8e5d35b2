//! A fast path for parsing plain Kubernetes YAML into `serde_json::Value` straight from
//! the YAML parser's events (the serde layer costs as much as parsing for large CRDs).
//! It handles only the unambiguous subset — no anchors, aliases, tags, merge keys,
//! duplicate or non-string keys, and no plain scalars whose type is unclear — and returns
//! `None` for anything else, so the caller falls back to `serde_saphyr`, whose results
//! this path reproduces exactly (tests compare both over real bundles).

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
use std::borrow::Cow;

enum Frame {
    Seq(Vec<Value>),
    /// Entries in order and the key waiting for its value.
    Map(Vec<(String, Value)>, Option<String>),
}

/// How a plain scalar resolves, mirroring serde-saphyr's untyped (`Value`) resolution.
fn resolve_plain(cow: Cow<'_, str>) -> Option<Value> {
    let s: &str = &cow;
    if s.is_empty() || s == "~" || s.eq_ignore_ascii_case("null") {
        return Some(Value::Null);
    }
    for t in ["true", "yes", "on", "y"] {
        if s.eq_ignore_ascii_case(t) {
            return Some(Value::Bool(true));
        }
    }
    for f in ["false", "no", "off", "n"] {
        if s.eq_ignore_ascii_case(f) {
            return Some(Value::Bool(false));
        }
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return Some(Value::String(exact(cow)));
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical_int = |d: &str| {
        !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && (d == "0" || !d.starts_with('0'))
    };
    if canonical_int(digits) {
        if let Ok(i) = s.parse::<i64>() {
            return Some(Value::Number(i.into()));
        }
        if !s.starts_with('-')
            && let Ok(u) = s.parse::<u64>()
        {
            return Some(Value::Number(u.into()));
        }
        return None;
    }
    if let Some((int, frac)) = digits.split_once('.')
        && canonical_int(int)
        && !frac.is_empty()
        && frac.bytes().all(|b| b.is_ascii_digit())
    {
        return s
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number);
    }
    // Anything else that may still be a number (1e3, 0x1F, 1_000, 012, .inf) is left to
    // the full deserializer; text like `1.2.3`-free words (`.spec.x`, `1Gi`, `-5s`) is a string.
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = unsigned.to_ascii_lowercase();
    if lower.starts_with("0x")
        || lower.starts_with("0o")
        || lower.starts_with("0b")
        || matches!(lower.as_str(), ".inf" | ".nan")
        || (unsigned.bytes().any(|b| b.is_ascii_digit())
            && unsigned.bytes().all(|b| {
                b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'e' | b'E' | b'+' | b'-')
            }))
    {
        return None;
    }
    Some(Value::String(exact(cow)))
}

/// An owned string without spare capacity (parser-built strings often have some).
fn exact(cow: Cow<'_, str>) -> String {
    let mut s = cow.into_owned();
    s.shrink_to_fit();
    s
}

/// Parses every document of `text`, or `None` when the input needs the full deserializer
/// (unsupported construct, parse error, or more than `max_depth` / `max_nodes`).
pub fn parse_documents(text: &str, max_depth: usize, max_nodes: usize) -> Option<Vec<Value>> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut nodes = 0usize;
    let mut doc_value: Option<Value> = None;
    for ev in Parser::new_from_str(text) {
        let (event, _span) = ev.ok()?;
        let value = match event {
            Event::StreamStart | Event::StreamEnd => continue,
            Event::DocumentStart(..) => {
                doc_value = None;
                continue;
            }
            Event::DocumentEnd => {
                // A null document (`~`, `null`, empty) is no document: serde-saphyr's
                // `from_multiple` drops it too, and document numbers must agree.
                if let Some(v) = doc_value.take().filter(|v| !v.is_null()) {
                    docs.push(v);
                }
                continue;
            }
            Event::Scalar(s, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                match style {
                    ScalarStyle::Plain => resolve_plain(s)?,
                    _ => Value::String(exact(s)),
                }
            }
            Event::SequenceStart(_, anchor, tag) | Event::MappingStart(_, anchor, tag)
                if anchor != 0 || tag.is_some() =>
            {
                return None;
            }
            Event::SequenceStart(..) => {
                stack.push(Frame::Seq(Vec::new()));
                if stack.len() > max_depth {
                    return None;
                }
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Frame::Map(Vec::new(), None));
                if stack.len() > max_depth {
                    return None;
                }
                continue;
            }
            Event::SequenceEnd => match stack.pop()? {
                Frame::Seq(mut v) => {
                    v.shrink_to_fit();
                    Value::Array(v)
                }
                Frame::Map(..) => return None,
            },
            Event::MappingEnd => match stack.pop()? {
                Frame::Map(entries, None) => {
                    let mut map = Map::with_capacity(entries.len());
                    for (k, v) in entries {
                        if map.insert(k, v).is_some() {
                            return None; // duplicate key: the full deserializer reports it
                        }
                    }
                    Value::Object(map)
                }
                _ => return None,
            },
            #[allow(unreachable_patterns)]
            Event::Comment(..) => continue,
            _ => return None,
        };
        nodes += 1;
        if nodes > max_nodes {
            return None;
        }
        match stack.last_mut() {
            None => doc_value = Some(value),
            Some(Frame::Seq(v)) => v.push(value),
            Some(Frame::Map(m, pending)) => match pending.take() {
                None => {
                    // a key: only plain strings that resolve to strings, or quoted strings
                    let Value::String(k) = value else { return None };
                    if k == "<<" {
                        return None;
                    }
                    *pending = Some(k);
                }
                Some(k) => m.push((k, value)),
            },
        }
    }
    if !stack.is_empty() {
        return None;
    }
    if let Some(v) = doc_value.take().filter(|v| !v.is_null()) {
        docs.push(v);
    }
    Some(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow(text: &str) -> Vec<Value> {
        let mut v: Vec<Value> = serde_saphyr::from_multiple(text).unwrap();
        v.retain(|d| !d.is_null());
        v
    }

    fn fast(text: &str) -> Option<Vec<Value>> {
        parse_documents(text, 128, 1_000_000).map(|mut v| {
            v.retain(|d| !d.is_null());
            v
        })
    }

    /// Found by the fuzz replay (bundle_yaml, input `~`): the fast path returned a
    /// null document that serde-saphyr drops.
    #[test]
    fn null_documents_are_dropped_like_serde_saphyr_does() {
        for text in [
            "~",
            "null",
            "Null",
            "",
            "---\n~\n",
            "--- null\n---\na: 1\n",
            "a: 1\n---\n~\n---\nb: 2\n",
            "---\n---\n",
        ] {
            let want: Vec<Value> = serde_saphyr::from_multiple(text).unwrap();
            assert_eq!(parse_documents(text, 128, 1_000), Some(want), "{text:?}");
        }
    }

    #[test]
    fn scalars_match_serde_saphyr_or_fall_back() {
        let candidates = [
            "yes",
            "on",
            "y",
            "n",
            "no",
            "off",
            "True",
            "TRUE",
            "tRue",
            "False",
            "012",
            "0x1F",
            "0o17",
            "1_000",
            "+12",
            "1.2.3",
            "1e3",
            "1.5",
            "-0",
            "-1",
            "9223372036854775808",
            "18446744073709551616",
            "~",
            "null",
            "Null",
            "nULL",
            "",
            "0b101",
            "1.",
            ".5",
            "3.0",
            "1E3",
            "00",
            "0",
            "-0.0",
            "1.0e+3",
            "12:30",
            "2021-01-01",
            "2021-01-01T00:00:00Z",
            "0.1.0",
            "v1",
            "=",
            "nan",
            "NaN",
            "inf",
            "Infinity",
            "0.",
            "-.5",
            "+.5",
            "1e",
            "e3",
            "0x",
            "1__0",
            "--1",
            "a b",
            "\"quoted\"",
            "'1'",
            "http://x/y?z=1",
            "*/5 * * * *",
            "-5s",
            "1Gi",
            "500m",
            "0.5Gi",
            "10%",
            "1.5.x",
            "a: b",
        ];
        for c in candidates {
            let text = format!("k: {c}\n");
            let Ok(want) = serde_saphyr::from_multiple::<Value>(&text) else {
                continue;
            };
            if let Some(got) = parse_documents(&text, 128, 1000) {
                assert_eq!(got, want, "scalar {c:?}");
            }
        }
    }

    #[test]
    fn documents_structure_and_fallbacks() {
        let text = "---\na: [1, 2, {b: c}]\nd:\n  - x\n  - 'y'\n# comment\ne: |\n  multi\n  line\n---\n---\nf: null\n";
        assert_eq!(fast(text), Some(slow(text)));
        assert_eq!(fast("a: &x 1\nb: *x\n"), None);
        assert_eq!(fast("a: !!str 1\n"), None);
        assert_eq!(fast("a: 1\na: 2\n"), None);
        assert_eq!(fast("<<: {a: 1}\n"), None);
        assert_eq!(fast("? [a]\n: 1\n"), None);
        assert_eq!(fast("1: a\n"), None);
        assert_eq!(fast("a: [unclosed\n"), None);
        assert_eq!(
            parse_documents(
                &format!("{}{}", "[".repeat(200), "]".repeat(200)),
                128,
                1000
            ),
            None
        );
        assert_eq!(parse_documents("[1, 2, 3, 4]", 128, 3), None);
    }

    #[test]
    fn matches_serde_saphyr_on_every_shared_bundle_file() {
        let Some(root) = crate::testenv::shared_dir("fixtures/bundles") else {
            return;
        };
        let mut checked = 0;
        let mut fast_files = 0;
        for pkg in std::fs::read_dir(&root).unwrap() {
            for ver in std::fs::read_dir(pkg.unwrap().path()).unwrap() {
                for sub in ["manifests", "metadata"] {
                    for f in std::fs::read_dir(ver.as_ref().unwrap().path().join(sub)).unwrap() {
                        let path = f.unwrap().path();
                        let text = std::fs::read_to_string(&path).unwrap();
                        let want: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
                        let r = parse_documents(&text, 128, 4_000_000);
                        if let Some(got) = r {
                            let got: Vec<Value> =
                                got.into_iter().filter(|d| !d.is_null()).collect();
                            let want: Vec<Value> =
                                want.into_iter().filter(|d| !d.is_null()).collect();
                            assert_eq!(got, want, "{}", path.display());
                            // key order too
                            assert_eq!(
                                serde_json::to_string(&got).unwrap(),
                                serde_json::to_string(&want).unwrap()
                            );
                            fast_files += 1;
                        }
                        checked += 1;
                    }
                }
            }
        }
        eprintln!("fast path: {fast_files} of {checked} files");
        assert!(checked > 100, "{checked}");
        assert!(
            fast_files * 2 > checked,
            "fast path used for only {fast_files} of {checked} files"
        );
    }
}
