//! Masterminds semver v3 constraints, the grammar of `spec.source.catalog.version`
//! (docs/concepts/resolution.md §4.3). This is a port of the library's own regular expressions and
//! check functions, so that odd inputs behave the way they do upstream: `||` splits
//! OR-groups, constraints inside a group are separated by whitespace or commas,
//! operators `= != > < >= => <= =< ~ ~> ^`, wildcards `x X *` in any position,
//! partial versions, optional `v`, hyphen ranges `A - B`, build metadata ignored, and
//! the pre-release rule (a pre-release version only matches an OR-group in which some
//! constraint carries a pre-release).

use semver::{BuildMetadata, Prerelease, Version};
use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

/// Go's `\s` (ASCII only), used instead of Rust's Unicode `\s` to match upstream.
const WS: &str = r"[\t\n\x0C\r ]";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";
const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";

fn build(pattern: String) -> regex::Regex {
    // The patterns are constants of this file; a failure is a programming error
    // caught by every test.
    #[allow(clippy::expect_used)]
    regex::Regex::new(&pattern).expect("constant constraint regex compiles")
}

static CONSTRAINT: LazyLock<regex::Regex> =
    LazyLock::new(|| build(format!(r"^{WS}*({OPS}){WS}*({CV}){WS}*$")));
static CONSTRAINT_RANGE: LazyLock<regex::Regex> =
    LazyLock::new(|| build(format!(r"{WS}*({CV}){WS}+-{WS}+({CV}){WS}*")));
static FIND_CONSTRAINT: LazyLock<regex::Regex> =
    LazyLock::new(|| build(format!(r"({OPS}){WS}*({CV})")));
static VALID_CONSTRAINT: LazyLock<regex::Regex> = LazyLock::new(|| {
    build(format!(
        r"^({WS}*({OPS}){WS}*({CV}){WS}*)((?:{WS}+|,{WS}*)({OPS}){WS}*({CV}){WS}*)*$"
    ))
});

/// A version range that could not be parsed. Displays as upstream does,
/// `improper constraint: "<segment>"`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("improper constraint: {segment:?}")]
pub struct ConstraintError {
    /// The OR-segment (or single constraint) that is malformed, as written.
    pub segment: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    TildeOrEqual,
    NotEqual,
    Greater,
    Less,
    GreaterEqual,
    LessEqual,
    Tilde,
    Caret,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    op: Op,
    con: Version,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Group {
    terms: Vec<Term>,
    has_pre: bool,
}

/// A parsed version range: OR of AND-groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraints {
    groups: Vec<Group>,
    original: String,
}

impl fmt::Display for Constraints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl std::str::FromStr for Constraints {
    type Err = ConstraintError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Constraints::parse(s)
    }
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

/// Rewrites hyphen ranges `A - B` into `>= A, <= B ` exactly as the library does.
fn rewrite_range(input: &str) -> String {
    let mut out = input.to_string();
    for caps in CONSTRAINT_RANGE.captures_iter(input) {
        let (Some(all), Some(a), Some(b)) = (caps.get(0), caps.get(1), caps.get(11)) else {
            continue;
        };
        let replacement = format!(">= {}, <= {} ", a.as_str(), b.as_str());
        out = out.replacen(all.as_str(), &replacement, 1);
    }
    out
}

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_term(text: &str) -> Result<Term, ConstraintError> {
    let improper = || ConstraintError {
        segment: text.to_string(),
    };
    let caps = CONSTRAINT.captures(text).ok_or_else(improper)?;
    let op = match caps.get(1).map_or("", |m| m.as_str()) {
        "" | "=" => Op::TildeOrEqual,
        "!=" => Op::NotEqual,
        ">" => Op::Greater,
        "<" => Op::Less,
        ">=" | "=>" => Op::GreaterEqual,
        "<=" | "=<" => Op::LessEqual,
        "~" | "~>" => Op::Tilde,
        "^" => Op::Caret,
        _ => return Err(improper()),
    };
    let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    let major = group(3);
    let minor = group(4).strip_prefix('.').unwrap_or("");
    let patch = group(5).strip_prefix('.').unwrap_or("");
    let pre = group(7);
    let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
    let (ma, mi, pa) = if is_x(major) || major.is_empty() {
        dirty = true;
        (0, 0, 0)
    } else if is_x(minor) || minor.is_empty() {
        dirty = true;
        minor_dirty = true;
        (parse_number(major).ok_or_else(improper)?, 0, 0)
    } else if is_x(patch) || patch.is_empty() {
        dirty = true;
        patch_dirty = true;
        (
            parse_number(major).ok_or_else(improper)?,
            parse_number(minor).ok_or_else(improper)?,
            0,
        )
    } else {
        (
            parse_number(major).ok_or_else(improper)?,
            parse_number(minor).ok_or_else(improper)?,
            parse_number(patch).ok_or_else(improper)?,
        )
    };
    let pre = if pre.is_empty() {
        Prerelease::EMPTY
    } else {
        Prerelease::new(pre).map_err(|_| improper())?
    };
    let con = Version {
        major: ma,
        minor: mi,
        patch: pa,
        pre,
        build: BuildMetadata::EMPTY,
    };
    Ok(Term {
        op,
        con,
        dirty,
        minor_dirty,
        patch_dirty,
    })
}

impl Constraints {
    /// Parses a range. An empty (or all-whitespace) string matches every version.
    pub fn parse(input: &str) -> Result<Constraints, ConstraintError> {
        let original = input.to_string();
        if input.trim().is_empty() {
            let any = Term {
                op: Op::TildeOrEqual,
                con: Version::new(0, 0, 0),
                dirty: true,
                minor_dirty: false,
                patch_dirty: false,
            };
            return Ok(Constraints {
                groups: vec![Group {
                    terms: vec![any],
                    has_pre: false,
                }],
                original,
            });
        }
        let rewritten = rewrite_range(input);
        let mut groups = Vec::new();
        for segment in rewritten.split("||") {
            if !VALID_CONSTRAINT.is_match(segment) {
                return Err(ConstraintError {
                    segment: segment.to_string(),
                });
            }
            let mut terms = Vec::new();
            for m in FIND_CONSTRAINT.find_iter(segment) {
                terms.push(parse_term(m.as_str())?);
            }
            if terms.is_empty() {
                return Err(ConstraintError {
                    segment: segment.to_string(),
                });
            }
            let has_pre = terms.iter().any(|t| !t.con.pre.is_empty());
            groups.push(Group { terms, has_pre });
        }
        Ok(Constraints { groups, original })
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// Whether `v` satisfies the range (build metadata of `v` is ignored).
    pub fn matches(&self, v: &Version) -> bool {
        self.groups
            .iter()
            .any(|g| g.terms.iter().all(|t| t.check(v, g.has_pre)))
    }
}

fn cmp(a: &Version, b: &Version) -> Ordering {
    a.cmp_precedence(b)
}

impl Term {
    fn check(&self, v: &Version, include_pre: bool) -> bool {
        if !v.pre.is_empty() && !include_pre {
            return false;
        }
        match self.op {
            Op::TildeOrEqual => {
                if self.dirty {
                    self.tilde(v)
                } else {
                    cmp(v, &self.con) == Ordering::Equal
                }
            }
            Op::NotEqual => self.not_equal(v),
            Op::Greater => self.greater(v),
            Op::Less => cmp(v, &self.con) == Ordering::Less,
            Op::GreaterEqual => cmp(v, &self.con) != Ordering::Less,
            Op::LessEqual => self.less_equal(v),
            Op::Tilde => self.tilde(v),
            Op::Caret => self.caret(v),
        }
    }

    fn not_equal(&self, v: &Version) -> bool {
        let c = &self.con;
        if self.dirty {
            if c.major != v.major {
                return true;
            }
            if c.minor != v.minor && !self.minor_dirty {
                return true;
            } else if self.minor_dirty {
                return false;
            } else if c.patch != v.patch && !self.patch_dirty {
                return true;
            } else if self.patch_dirty {
                if !v.pre.is_empty() || !c.pre.is_empty() {
                    return v.pre != c.pre;
                }
                return false;
            }
        }
        cmp(v, c) != Ordering::Equal
    }

    fn greater(&self, v: &Version) -> bool {
        let c = &self.con;
        if !self.dirty {
            return cmp(v, c) == Ordering::Greater;
        }
        if v.major > c.major {
            return true;
        } else if v.major < c.major || self.minor_dirty {
            return false;
        } else if self.patch_dirty {
            return v.minor > c.minor;
        }
        cmp(v, c) == Ordering::Greater
    }

    fn less_equal(&self, v: &Version) -> bool {
        let c = &self.con;
        if !self.dirty {
            return cmp(v, c) != Ordering::Greater;
        }
        if v.major > c.major {
            return false;
        }
        !(v.major == c.major && v.minor > c.minor && !self.minor_dirty)
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if cmp(v, c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        v.minor == c.minor || self.minor_dirty
    }

    fn caret(&self, v: &Version) -> bool {
        let c = &self.con;
        if cmp(v, c) == Ordering::Less {
            return false;
        }
        // `^*` / `^x`: any version (the library documents it so).
        if self.dirty && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if c.major > 0 || self.minor_dirty {
            return v.major == c.major;
        }
        if v.major > 0 {
            return false;
        }
        if c.minor > 0 || self.patch_dirty {
            return v.minor == c.minor;
        }
        if v.minor > 0 {
            return false;
        }
        c.patch == v.patch
    }
}

#[cfg(test)]
#[path = "constraint_tests.rs"]
mod tests;
