//! Tests of the Masterminds constraint grammar.

use super::*;
use proptest::prelude::*;

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

fn check(range: &str, version: &str) -> bool {
    Constraints::parse(range)
        .unwrap_or_else(|e| panic!("{range}: {e}"))
        .matches(&v(version))
}

/// Asserts that `range` is equivalent to `expected` over a grid of versions.
fn assert_equivalent(range: &str, expected: &str) {
    let a = Constraints::parse(range).unwrap();
    let b = Constraints::parse(expected).unwrap();
    for ma in 0..5 {
        for mi in 0..15 {
            for pa in 0..5 {
                let ver = Version::new(ma, mi, pa);
                assert_eq!(
                    a.matches(&ver),
                    b.matches(&ver),
                    "{range} vs {expected} at {ver}"
                );
            }
        }
    }
}

#[test]
fn table_10_4_basic_comparisons() {
    let rows: &[(&str, &[(&str, bool)])] = &[
        (
            "=1.11.1",
            &[("1.11.1", true), ("1.11.2", false), ("1.11.0", false)],
        ),
        (
            "!=1.11.1",
            &[("1.11.1", false), ("1.11.2", true), ("1.10.0", true)],
        ),
        (
            ">1.11.1",
            &[
                ("1.11.1", false),
                ("1.11.2", true),
                ("2.0.0", true),
                ("1.0.0", false),
            ],
        ),
        (
            "<1.11.1",
            &[
                ("1.11.1", false),
                ("1.11.0", true),
                ("0.1.0", true),
                ("1.12.0", false),
            ],
        ),
        (
            ">=1.11.1",
            &[("1.11.1", true), ("1.11.0", false), ("1.12.0", true)],
        ),
        (
            "<=1.11.1",
            &[("1.11.1", true), ("1.11.2", false), ("1.11.0", true)],
        ),
        (
            ">=1.11, <1.13",
            &[
                ("1.10.9", false),
                ("1.11.0", true),
                ("1.12.7", true),
                ("1.13.0", false),
            ],
        ),
    ];
    for (range, cases) in rows {
        for (ver, want) in *cases {
            assert_eq!(check(range, ver), *want, "{range} against {ver}");
        }
    }
}

#[test]
fn table_10_5_wildcards() {
    assert_equivalent("1.11.x", ">=1.11.0, <1.12.0");
    assert_equivalent(">=1.12.X", ">=1.12.0");
    assert_equivalent("<=2.x", "<3");
    assert_equivalent("*", ">=0.0.0");
    assert!(check("1.11.x", "1.11.9"));
    assert!(!check("1.11.x", "1.12.0"));
    assert!(check("<=2.x", "2.99.0"));
    assert!(!check("<=2.x", "3.0.0"));
    assert!(check("*", "0.0.0"));
    assert!(check("*", "99.1.2"));
}

#[test]
fn table_10_6_tilde() {
    assert_equivalent("~1.11.0", ">=1.11.0, <1.12.0");
    assert_equivalent("~1", ">=1, <2");
    assert_equivalent("~1.12", ">=1.12, <1.13");
    assert_equivalent("~1.12.x", ">=1.12.0, <1.13.0");
    assert_equivalent("~1.x", ">=1, <2");
    assert!(check("~1.11.0", "1.11.5"));
    assert!(!check("~1.11.0", "1.12.0"));
    assert!(check("~1", "1.99.0"));
    assert!(!check("~1", "2.0.0"));
}

#[test]
fn table_10_7_caret() {
    let rows = [
        ("^0", ">=0.0.0, <1.0.0"),
        ("^0.0", ">=0.0.0, <0.1.0"),
        ("^0.0.3", ">=0.0.3, <0.0.4"),
        ("^0.2", ">=0.2.0, <0.3.0"),
        ("^0.2.3", ">=0.2.3, <0.3.0"),
        ("^1.2.x", ">= 1.2.0, < 2.0.0"),
        ("^1.2.3", ">= 1.2.3, < 2.0.0"),
        ("^2.x", ">= 2.0.0, < 3"),
        ("^2.3", ">= 2.3, < 3"),
    ];
    for (range, expected) in rows {
        assert_equivalent(range, expected);
    }
    assert!(check("^0.0.3", "0.0.3"));
    assert!(!check("^0.0.3", "0.0.4"));
    assert!(check("^1.2.3", "1.9.9"));
    assert!(!check("^1.2.3", "2.0.0"));
    assert!(!check("^1.2.3", "1.2.2"));
}

#[test]
fn reference_semantics() {
    let rows: &[(&str, &str, bool)] = &[
        ("1.2.x", "1.2.0", true),
        ("1.2", "1.2.9", true),
        ("=1.2", "1.3.0", false),
        ("x", "5.0.0", true),
        (">1", "1.9.9", false),
        (">1", "2.0.0", true),
        (">1.1", "1.1.9", false),
        (">1.1", "1.2.0", true),
        ("~0.0.0", "7.1.1", true),
        ("!=1.x", "1.5.0", false),
        ("!=1.x", "2.0.0", true),
        ("!=1.x", "0.9.0", true),
        ("!=1.2.x", "1.2.7", false),
        ("!=1.2.x", "1.3.0", true),
        ("^0", "0.9.9", true),
        ("^0", "1.0.0", false),
        ("v1.2.3", "1.2.3", true),
        ("=v1.2.3", "1.2.3+build.7", true),
        ("1.0.0", "1.0.0+anything", true),
        ("1.0.0+meta", "1.0.0", true),
        ("=>1.0", "1.0.0", true),
        ("=<1.0", "1.0.9", true),
        ("=<1.0", "1.1.0", false),
        ("~>1.2.3", "1.2.9", true),
        ("~>1.2.3", "1.3.0", false),
        ("1.*.3", "1.9.0", true),
        ("1.2.X", "1.2.4", true),
        (">= 1.0 , < 2", "1.5.0", true),
        (">=1.0 <2", "2.0.0", false),
        ("1.0 - 2.0", "2.0.0", true),
        ("1.0 - 2.0", "2.0.1", true),
        ("1.0 - 2.0", "2.1.0", false),
        ("1.0.0 - 2.0.0", "2.0.1", false),
        ("1.0 - 2.0", "0.9.0", false),
        ("<1.0.0 || >=3.0.0", "0.5.0", true),
        ("<1.0.0 || >=3.0.0", "2.0.0", false),
        ("<1.0.0 || >=3.0.0", "3.1.0", true),
    ];
    for (range, ver, want) in rows {
        assert_eq!(check(range, ver), *want, "{range} against {ver}");
    }
}

#[test]
fn prerelease_rule() {
    let rows: &[(&str, &str, bool)] = &[
        (">=1.0.0", "1.1.0-beta.1", false),
        (">=1.0.0-0", "1.1.0-beta.1", true),
        (">=1.0.0-alpha", "1.0.0-beta", true),
        ("<2.0.0", "1.9.0-rc.1", false),
        ("1.2.3-beta", "1.2.3-beta", true),
        ("1.2.3-beta", "1.2.3", false),
        ("^1.2.3-alpha", "1.2.3-beta", true),
        // the rule is per OR-group
        (">=1.0.0-0 || >=5.0.0", "1.1.0-rc.1", true),
        (">=5.0.0 || >=1.0.0", "1.1.0-rc.1", false),
        ("*", "1.0.0-alpha", false),
    ];
    for (range, ver, want) in rows {
        assert_eq!(check(range, ver), *want, "{range} against {ver}");
    }
}

#[test]
fn parse_errors_name_the_segment() {
    let rows: &[(&str, &str)] = &[
        ("foo", "foo"),
        (">=1.0 || bar", " bar"),
        ("1.0 ||", ""),
        ("1.0.0.0", "1.0.0.0"),
        (">>1.0", ">>1.0"),
        ("1.0 && 2.0", "1.0 && 2.0"),
        ("==1.0", "==1.0"),
        ("1.0;2.0", "1.0;2.0"),
    ];
    for (range, segment) in rows {
        let err = Constraints::parse(range).unwrap_err();
        assert_eq!(err.segment, *segment, "{range}");
        assert_eq!(
            err.to_string(),
            format!("improper constraint: \"{segment}\"")
        );
    }
}

#[test]
fn empty_matches_everything_released() {
    let c = Constraints::parse("").unwrap();
    assert!(c.matches(&v("0.0.1")));
    assert!(c.matches(&v("100.0.0")));
}

// ---- property tests against a brute-force reference ----

/// A simple bound-interval reference: (lower, lower_inclusive, upper).
fn reference(op: &str, parts: &[Option<u64>], ver: &Version) -> bool {
    // Expand wildcards/partials to the range [lo, hi).
    let lo = Version::new(
        parts[0].unwrap_or(0),
        parts[1].unwrap_or(0),
        parts[2].unwrap_or(0),
    );
    let n = parts.iter().take_while(|p| p.is_some()).count();
    let hi = match n {
        0 => None,
        1 => Some(Version::new(lo.major + 1, 0, 0)),
        2 => Some(Version::new(lo.major, lo.minor + 1, 0)),
        _ => Some(Version::new(lo.major, lo.minor, lo.patch + 1)),
    };
    let in_block = ver >= &lo && hi.as_ref().is_none_or(|h| ver < h);
    match op {
        "" | "=" => in_block,
        "!=" => match n {
            0 => ver != &lo, // Masterminds quirk: `!=*` only excludes 0.0.0
            _ => !in_block,
        },
        ">=" => ver >= &lo,
        "<" => ver < &lo,
        ">" => match n {
            0 => ver > &lo,
            _ => hi.as_ref().is_some_and(|h| ver >= h),
        },
        "<=" => match n {
            0 => ver.major == 0 && ver.minor == 0,
            3 => ver <= &lo,
            _ => hi.as_ref().is_some_and(|h| ver < h),
        },
        "~" => {
            let hi = match n {
                0 => None,
                1 => Some(Version::new(lo.major + 1, 0, 0)),
                _ => Some(Version::new(lo.major, lo.minor + 1, 0)),
            };
            if n == 3 && lo == Version::new(0, 0, 0) {
                return true;
            }
            ver >= &lo && hi.is_none_or(|h| ver < &h)
        }
        "^" => {
            if ver < &lo {
                return false;
            }
            let hi = if lo.major > 0 || n == 1 {
                Version::new(lo.major + 1, 0, 0)
            } else if lo.minor > 0 || n == 2 {
                Version::new(0, lo.minor + 1, 0)
            } else if n == 0 {
                return true;
            } else {
                Version::new(0, 0, lo.patch + 1)
            };
            ver < &hi
        }
        _ => unreachable!(),
    }
}

proptest! {
    #[test]
    fn single_constraint_matches_reference(
        op in prop::sample::select(vec!["", "=", "!=", ">", ">=", "<", "<=", "~", "~>", "^"]),
        nums in prop::collection::vec(0u64..4, 3),
        len in 1usize..=3,
        wild_from in 0usize..=3,
        wild in prop::sample::select(vec!["x", "X", "*"]),
        vprefix in prop::bool::ANY,
        ver in (0u64..5, 0u64..5, 0u64..5),
    ) {
        let parts: Vec<Option<u64>> =
            (0..3).map(|i| (i < len && i < wild_from).then_some(nums[i])).collect();
        let body = (0..len)
            .map(|i| if i < wild_from { nums[i].to_string() } else { wild.to_string() })
            .collect::<Vec<_>>()
            .join(".");
        let text = format!("{op}{}{body}", if vprefix { "v" } else { "" });
        let c = Constraints::parse(&text).unwrap();
        let version = Version::new(ver.0, ver.1, ver.2);
        let op = if op == "~>" { "~" } else { op };
        prop_assert_eq!(c.matches(&version), reference(op, &parts, &version), "{} vs {}", text, version);
    }

    #[test]
    fn and_or_combine_like_boolean_logic(
        a in (0u64..4, 0u64..4), b in (0u64..4, 0u64..4), c in (0u64..4, 0u64..4),
        ver in (0u64..4, 0u64..4, 0u64..3),
        sep in prop::sample::select(vec![" ", ",", ", ", "  ,  "]),
    ) {
        let lo = format!(">={}.{}", a.0, a.1);
        let hi = format!("<{}.{}", b.0, b.1);
        let other = format!("~{}.{}", c.0, c.1);
        let text = format!("{lo}{sep}{hi} || {other}");
        let version = Version::new(ver.0, ver.1, ver.2);
        let one = |s: &str| Constraints::parse(s).unwrap().matches(&version);
        let want = (one(&lo) && one(&hi)) || one(&other);
        prop_assert_eq!(Constraints::parse(&text).unwrap().matches(&version), want, "{}", text);
    }

    #[test]
    fn prerelease_versions_follow_the_group_rule(
        op in prop::sample::select(vec![">=", "<", "<=", "!="]),
        bound in (0u64..3, 0u64..3, 0u64..3),
        bound_pre in prop::option::of(prop::sample::select(vec!["alpha", "beta.1", "0", "rc.2"])),
        ver in (0u64..3, 0u64..3, 0u64..3),
        ver_pre in prop::option::of(prop::sample::select(vec!["alpha", "beta.1", "0", "rc.2"])),
    ) {
        let mut b = Version::new(bound.0, bound.1, bound.2);
        if let Some(p) = bound_pre { b.pre = Prerelease::new(p).unwrap(); }
        let mut version = Version::new(ver.0, ver.1, ver.2);
        if let Some(p) = ver_pre { version.pre = Prerelease::new(p).unwrap(); }
        let text = format!("{op}{b}");
        let o = version.cmp_precedence(&b);
        let by_order = match op {
            ">=" => o != Ordering::Less,
            "<" => o == Ordering::Less,
            "<=" => o != Ordering::Greater,
            _ => o != Ordering::Equal,
        };
        let want = (version.pre.is_empty() || bound_pre.is_some()) && by_order;
        prop_assert_eq!(Constraints::parse(&text).unwrap().matches(&version), want, "{} vs {}", text, version);
    }

    #[test]
    fn build_metadata_is_ignored(maj in 0u64..5, min in 0u64..5, pat in 0u64..5, build in "[a-z0-9]{1,6}") {
        let exact = Version::new(maj, min, pat);
        let mut with_build = exact.clone();
        with_build.build = BuildMetadata::new(&build).unwrap();
        let c = Constraints::parse(&format!("{maj}.{min}.{pat}")).unwrap();
        prop_assert!(c.matches(&with_build));
    }

    #[test]
    fn never_panics(s in "\\PC{0,24}") {
        let _ = Constraints::parse(&s);
    }
}
