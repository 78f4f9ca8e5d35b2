//! `olm.skipRange` ranges in blang/semver v4 syntax (the library OLM used before v1
//! and still uses for skip ranges, docs/concepts/resolution.md §4.4): comparators `= == != ! > >= < <=`
//! followed by a strict semver version, AND by spaces (a space right after an operator
//! does not split), `||` between OR-groups, and `x` wildcards expanded the way blang
//! does (`1.2.x` ⇒ `>=1.2.0 <1.3.0`). Unlike Masterminds ranges there is no
//! pre-release exclusion: `>=1.0.0 <2.0.0` contains `1.5.0-rc.1`.

use semver::Version;
use std::cmp::Ordering;

/// A skip range that blang would reject; the message says what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid skipRange {range:?}: {message}")]
pub struct SkipRangeError {
    pub range: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// A parsed blang range: OR of AND-groups of comparators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipRange {
    groups: Vec<Vec<(Cmp, Version)>>,
}

/// blang `splitAndTrim`: split on spaces unless the last non-space char was an operator.
fn split_and_trim(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut result = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if last + 1 < i {
                result.push(&s[last..i]);
            }
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    if last + 1 < s.len() {
        result.push(&s[last..]);
    }
    result.into_iter().map(|p| p.replace(' ', "")).collect()
}

fn split_comparator_version(s: &str) -> Result<(String, String), String> {
    match s.char_indices().find(|(_, c)| c.is_numeric()) {
        Some((i, _)) => Ok((s[..i].trim().to_string(), s[i..].to_string())),
        None => Err(format!("Could not get version from string: {s:?}")),
    }
}

fn increment(v: &str, index: usize) -> String {
    let mut parts: Vec<String> = v.split('.').map(str::to_string).collect();
    if let Some(p) = parts.get_mut(index)
        && let Ok(n) = p.parse::<i64>()
    {
        // Go's `int` wraps: blang turns `9223372036854775807.x` into a negative
        // component, which then fails to parse as a version. The same here, instead of
        // an overflow panic (found by the version_range fuzz target's seeds).
        *p = n.wrapping_add(1).to_string();
    }
    parts.join(".")
}

/// blang `expandWildcardVersion` for one AND-group.
fn expand_wildcards(parts: Vec<String>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for ap in parts {
        if !ap.contains('x') {
            out.push(ap);
            continue;
        }
        let (op, v) = split_comparator_version(&ap)?;
        let nparts = v.split('.').count();
        let last_is_x = v.split('.').next_back() == Some("x");
        // 2 parts = minor wildcard (1.x), 3 parts = patch wildcard (1.2.x).
        let wildcard = if last_is_x { nparts } else { 0 };
        let mut flat = v.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
        if flat.split('.').count() == 2 {
            flat.push_str(".0");
        }
        let (result_op, incr) = match op.as_str() {
            ">" => (">=", true),
            ">=" => (">=", false),
            "<" => ("<", false),
            "<=" => ("<", true),
            "" | "=" | "==" => {
                out.push(format!(">={flat}"));
                ("<", true)
            }
            "!=" | "!" => {
                out.push(format!("<{flat}"));
                (">=", true)
            }
            _ => ("", false),
        };
        let result_version = if incr {
            match wildcard {
                3 => increment(&flat, 1),
                2 => increment(&flat, 0),
                _ => String::new(),
            }
        } else {
            flat
        };
        out.push(format!("{result_op}{result_version}"));
    }
    Ok(out)
}

impl SkipRange {
    pub fn parse(range: &str) -> Result<SkipRange, SkipRangeError> {
        let err = |message: String| SkipRangeError {
            range: range.to_string(),
            message,
        };
        let parts = split_and_trim(range);
        let mut or_parts: Vec<Vec<String>> = Vec::new();
        let mut current = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            if p == "||" {
                if i == 0 {
                    return Err(err("First element in range is '||'".into()));
                }
                or_parts.push(std::mem::take(&mut current));
            } else {
                current.push(p.clone());
            }
        }
        if parts.last().is_some_and(|p| p == "||") {
            return Err(err("Last element in range is '||'".into()));
        }
        or_parts.push(current);
        let mut groups = Vec::new();
        for group in or_parts {
            let mut cmps = Vec::new();
            for ap in expand_wildcards(group).map_err(err)? {
                let (op, v) = split_comparator_version(&ap).map_err(err)?;
                let cmp = match op.as_str() {
                    "" | "=" | "==" => Cmp::Eq,
                    "!" | "!=" => Cmp::Ne,
                    ">" => Cmp::Gt,
                    ">=" => Cmp::Ge,
                    "<" => Cmp::Lt,
                    "<=" => Cmp::Le,
                    _ => return Err(err(format!("Could not parse comparator {op:?} in {ap:?}"))),
                };
                let version = Version::parse(&v)
                    .map_err(|e| err(format!("Could not parse version {v:?} in {ap:?}: {e}")))?;
                cmps.push((cmp, version));
            }
            if cmps.is_empty() {
                // blang: a range of nothing is a nil function; calling it would panic
                // upstream. Treat it as malformed.
                return Err(err("empty range".into()));
            }
            groups.push(cmps);
        }
        Ok(SkipRange { groups })
    }

    /// Whether `v` is inside the range (pre-releases compared, build ignored).
    pub fn contains(&self, v: &Version) -> bool {
        self.groups.iter().any(|g| {
            g.iter().all(|(c, bound)| {
                let o = v.cmp_precedence(bound);
                match c {
                    Cmp::Eq => o == Ordering::Equal,
                    Cmp::Ne => o != Ordering::Equal,
                    Cmp::Gt => o == Ordering::Greater,
                    Cmp::Ge => o != Ordering::Less,
                    Cmp::Lt => o == Ordering::Less,
                    Cmp::Le => o != Ordering::Greater,
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn contains(r: &str, v: &str) -> bool {
        SkipRange::parse(r)
            .unwrap_or_else(|e| panic!("{e}"))
            .contains(&Version::parse(v).unwrap())
    }

    /// Regression: a wildcard on the largest component used to overflow `+ 1` (a panic
    /// in debug builds); like blang, such a range is malformed.
    #[test]
    fn wildcard_at_the_largest_component_is_an_error_not_a_panic() {
        for r in [
            ">9223372036854775807.x",
            "<=9223372036854775807.x",
            "1.9223372036854775807.x",
            "!=9223372036854775807.x",
        ] {
            assert!(SkipRange::parse(r).is_err(), "{r}");
        }
        assert!(SkipRange::parse(">9223372036854775806.x").is_ok());
    }

    #[test]
    fn blang_semantics() {
        let rows: &[(&str, &str, bool)] = &[
            (">=4.1.0 <4.1.2", "4.1.0", true),
            (">=4.1.0 <4.1.2", "4.1.1", true),
            (">=4.1.0 <4.1.2", "4.1.2", false),
            (">=1.0.0 <2.0.0", "1.5.0-rc.1", true),
            (">= 1.0.0 < 2.0.0", "1.9.9", true),
            (">=1.0.0  <2.0.0", "2.0.0", false),
            ("<1.0.0 || >=3.0.0", "0.1.0", true),
            ("<1.0.0 || >=3.0.0", "2.0.0", false),
            ("1.2.3", "1.2.3", true),
            ("==1.2.3", "1.2.3+build", true),
            ("!1.2.3", "1.2.3", false),
            ("!=1.2.3", "1.2.4", true),
            (">1.2.3", "1.2.3", false),
            ("<=1.2.3", "1.2.3", true),
            ("1.2.x", "1.2.9", true),
            ("1.2.x", "1.3.0", false),
            ("1.x", "1.9.0", true),
            ("1.x", "2.0.0", false),
            (">1.2.x", "1.3.0", true),
            (">1.2.x", "1.2.9", false),
            ("<=1.x", "1.99.0", true),
            ("<=1.x", "2.0.0", false),
            ("!=1.2.x", "1.2.5", false),
            // blang quirk: `!=1.2.x` expands to `<1.2.0 >=1.3.0` (AND), which is empty
            ("!=1.2.x", "1.1.5", false),
            ("!=1.2.x", "1.3.0", false),
        ];
        for (r, v, want) in rows {
            assert_eq!(contains(r, v), *want, "{r} contains {v}");
        }
    }

    #[test]
    fn malformed_ranges_are_errors() {
        for r in [
            "",
            "|| >1.0.0",
            ">1.0.0 ||",
            ">=1.0 <2.0.0",
            "~1.2.3",
            "^1.0.0",
            "v1.0.0",
            ">=a.b.c",
            "1.0.0.0",
        ] {
            assert!(SkipRange::parse(r).is_err(), "{r:?} should be rejected");
        }
    }

    proptest! {
        #[test]
        fn and_of_two_bounds_is_an_interval(
            lo in (0u64..4, 0u64..4, 0u64..4), hi in (0u64..4, 0u64..4, 0u64..4), v in (0u64..4, 0u64..4, 0u64..4)
        ) {
            let (lo, hi, v) = (Version::new(lo.0, lo.1, lo.2), Version::new(hi.0, hi.1, hi.2), Version::new(v.0, v.1, v.2));
            let r = SkipRange::parse(&format!(">={lo} <{hi}")).unwrap();
            prop_assert_eq!(r.contains(&v), v >= lo && v < hi);
        }

        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = SkipRange::parse(&s);
        }
    }
}
