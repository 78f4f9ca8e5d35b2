//! Table-driven resolution tests over small hand-written catalogs, plus the real
//! catalogs in the shared fixtures.

use super::deprecation::{CatalogData, deprecation_conditions};
use super::*;
use crate::fbc::model::{
    Bundle, Channel, ChannelEntry, DeprecationEntry, Package, PackageScopedReference, Property,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::collections::HashSet;

/// (name, version, replaces, skips, skipRange) in one channel.
type Entry<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    &'a [&'a str],
    Option<&'a str>,
);

fn bundle(name: &str, version: &str, extra: &[(&str, serde_json::Value)]) -> Bundle {
    let mut properties = vec![Property {
        type_: "olm.package".into(),
        value: json!({"packageName": "p", "version": version}),
    }];
    for (t, v) in extra {
        properties.push(Property {
            type_: t.to_string(),
            value: v.clone(),
        });
    }
    Bundle {
        schema: "olm.bundle".into(),
        name: name.into(),
        package: "p".into(),
        image: format!("registry.example/p@{name}"),
        properties,
        related_images: vec![],
    }
}

fn channel(name: &str, entries: &[Entry<'_>]) -> Channel {
    Channel {
        schema: "olm.channel".into(),
        name: name.into(),
        package: "p".into(),
        entries: entries
            .iter()
            .map(|(n, _, r, s, sr)| ChannelEntry {
                name: n.to_string(),
                replaces: r.map(str::to_string),
                skips: s.iter().map(|x| x.to_string()).collect(),
                skip_range: sr.map(str::to_string),
            })
            .collect(),
        properties: vec![],
    }
}

fn content(channels: &[(&str, &[Entry<'_>])]) -> PackageContent {
    let mut c = PackageContent {
        package: Some(Package {
            schema: "olm.package".into(),
            name: "p".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut seen = HashSet::new();
    for (ch, entries) in channels {
        c.channels.push(channel(ch, entries));
        for (n, v, ..) in *entries {
            if seen.insert(n.to_string()) {
                c.bundles.push(bundle(n, v, &[]));
            }
        }
    }
    c
}

fn deprecate(c: &mut PackageContent, entries: &[(&str, &str, &str)]) {
    c.deprecations.push(Deprecation {
        schema: "olm.deprecations".into(),
        package: "p".into(),
        entries: entries
            .iter()
            .map(|(s, n, m)| DeprecationEntry {
                reference: PackageScopedReference {
                    schema: s.to_string(),
                    name: n.to_string(),
                },
                message: m.to_string(),
            })
            .collect(),
    });
}

fn installed(name: &str, version: &str) -> Option<InstalledBundle> {
    Some(InstalledBundle {
        name: name.into(),
        version: version.into(),
        release: None,
    })
}

fn req() -> ResolveRequest {
    ResolveRequest {
        package: "p".into(),
        ..Default::default()
    }
}

static NO_LABELS: std::sync::LazyLock<BTreeMap<String, String>> =
    std::sync::LazyLock::new(BTreeMap::new);

fn one<'a>(name: &'a str, c: &'a PackageContent) -> CatalogInput<'a> {
    CatalogInput {
        name,
        priority: 0,
        availability: Availability::Available,
        labels: &NO_LABELS,
        content: Ok(c),
    }
}

fn chosen(r: &ResolveRequest, cats: &[CatalogInput<'_>]) -> Result<String, String> {
    resolve(r, cats)
        .map(|r| format!("{}@{}", r.bundle.name, r.bundle.catalog))
        .map_err(|e| e.to_string())
}

/// The linear graph used by most tests: 1.0.0 ← 1.1.0 ← 1.2.0 (skips 1.0.0... no)
/// alpha: a.1.0.0, a.1.1.0 replaces 1.0.0, a.1.2.0 replaces 1.1.0, a.2.0.0 replaces 1.2.0
/// stable: a.1.0.0, a.1.2.0 skipRange >=1.0.0 <1.2.0
fn graph() -> PackageContent {
    content(&[
        (
            "alpha",
            &[
                ("a.1.0.0", "1.0.0", None, &[], None),
                ("a.1.1.0", "1.1.0", Some("a.1.0.0"), &[], None),
                ("a.1.2.0", "1.2.0", Some("a.1.1.0"), &[], None),
                ("a.2.0.0", "2.0.0", Some("a.1.2.0"), &[], None),
            ],
        ),
        (
            "stable",
            &[
                ("a.1.0.0", "1.0.0", None, &[], None),
                ("a.1.2.0", "1.2.0", None, &[], Some(">=1.0.0 <1.2.0")),
            ],
        ),
    ])
}

#[test]
fn single_catalog_table() {
    let g = graph();
    let cats = [one("cat", &g)];
    let self_certified = |mut r: ResolveRequest| {
        r.policy = UpgradePolicy::SelfCertified;
        r
    };
    let cases: Vec<(&str, ResolveRequest, Result<&str, &str>)> = vec![
        ("fresh install picks highest", req(), Ok("a.2.0.0@cat")),
        (
            "channel filter",
            ResolveRequest {
                channels: vec!["stable".into()],
                ..req()
            },
            Ok("a.1.2.0@cat"),
        ),
        (
            "version range",
            ResolveRequest {
                version_range: Some("<2".into()),
                ..req()
            },
            Ok("a.1.2.0@cat"),
        ),
        (
            "pinned version",
            ResolveRequest {
                version_range: Some("1.1.0".into()),
                ..req()
            },
            Ok("a.1.1.0@cat"),
        ),
        (
            "no match in range",
            ResolveRequest {
                version_range: Some(">=3".into()),
                ..req()
            },
            Err(r#"no bundles found for package "p" matching version ">=3""#),
        ),
        (
            "unknown channel",
            ResolveRequest {
                channels: vec!["beta".into(), "gamma".into()],
                ..req()
            },
            Err(r#"no bundles found for package "p" in channels [beta gamma]"#),
        ),
        (
            "range and channels in message",
            ResolveRequest {
                channels: vec!["stable".into()],
                version_range: Some("2.x".into()),
                ..req()
            },
            Err(r#"no bundles found for package "p" matching version "2.x" in channels [stable]"#),
        ),
        (
            "replaces edge",
            ResolveRequest {
                installed: installed("a.1.0.0", "1.0.0"),
                ..req()
            },
            Ok("a.1.2.0@cat"),
        ),
        (
            "replaces only one step in alpha",
            ResolveRequest {
                channels: vec!["alpha".into()],
                installed: installed("a.1.0.0", "1.0.0"),
                ..req()
            },
            Ok("a.1.1.0@cat"),
        ),
        (
            "skipRange covers installed version",
            ResolveRequest {
                channels: vec!["stable".into()],
                installed: installed("a.1.1.0", "1.1.0"),
                ..req()
            },
            Ok("a.1.2.0@cat"),
        ),
        (
            "installed bundle itself when no successor in range",
            ResolveRequest {
                version_range: Some("<1.2".into()),
                installed: installed("a.1.1.0", "1.1.0"),
                ..req()
            },
            Ok("a.1.1.0@cat"),
        ),
        (
            "no downgrade",
            ResolveRequest {
                version_range: Some("1.0.0".into()),
                installed: installed("a.1.2.0", "1.2.0"),
                ..req()
            },
            Err(
                r#"error upgrading from currently installed version "1.2.0": no bundles found for package "p" matching version "1.0.0""#,
            ),
        ),
        (
            "SelfCertified allows downgrade",
            self_certified(ResolveRequest {
                version_range: Some("1.0.0".into()),
                installed: installed("a.1.2.0", "1.2.0"),
                ..req()
            }),
            Ok("a.1.0.0@cat"),
        ),
        (
            "SelfCertified jumps",
            self_certified(ResolveRequest {
                installed: installed("a.1.0.0", "1.0.0"),
                ..req()
            }),
            Ok("a.2.0.0@cat"),
        ),
        (
            "installed bundle absent from catalog: found by skipRange of version",
            ResolveRequest {
                channels: vec!["stable".into()],
                installed: installed("gone.v1.0.5", "1.0.5"),
                ..req()
            },
            Ok("a.1.2.0@cat"),
        ),
        (
            "installed absent and nothing covers it",
            ResolveRequest {
                channels: vec!["alpha".into()],
                installed: installed("gone.v0.5.0", "0.5.0"),
                ..req()
            },
            Err(
                r#"error upgrading from currently installed version "0.5.0": no bundles found for package "p" in channels [alpha]"#,
            ),
        ),
        (
            "malformed range",
            ResolveRequest {
                version_range: Some(">=1.0 || foo".into()),
                ..req()
            },
            Err(r#"desired version range ">=1.0 || foo" is invalid: improper constraint: " foo""#),
        ),
        (
            "installed version unparsable",
            ResolveRequest {
                installed: installed("a.x", "not-a-version"),
                ..req()
            },
            Err(
                "error walking catalogs: error finding upgrade edges: error parsing installed bundle version: invalid version \"not-a-version\": unexpected character 'n' while parsing major version number",
            ),
        ),
        (
            "invalid selector",
            ResolveRequest {
                selector: Some(LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "k".into(),
                        operator: "Sometimes".into(),
                        values: None,
                    }]),
                    match_labels: None,
                }),
                ..req()
            },
            Err(
                r#"desired catalog selector is invalid: "Sometimes" is not a valid label selector operator"#,
            ),
        ),
    ];
    for (what, r, want) in cases {
        let got = chosen(&r, &cats);
        assert_eq!(
            got,
            want.map(str::to_string).map_err(str::to_string),
            "{what}"
        );
    }
}

#[test]
fn highest_successor_wins_without_transitive_walk() {
    // docs/concepts/resolution.md §4.4 example: v3 skips v2, v2 skipRange >=1.0.0 <2.0.0; from 1.0.0 both
    // qualify (no replaces chain concept), highest wins; v2 is found although skipped.
    let c = content(&[(
        "c",
        &[
            ("e.v3.0.0", "3.0.0", None, &["e.v2.0.0"], None),
            ("e.v2.0.0", "2.0.0", None, &[], Some(">=1.0.0 <2.0.0")),
            ("e.v1.0.0", "1.0.0", None, &[], None),
        ],
    )]);
    let cats = [one("cat", &c)];
    let r = ResolveRequest {
        installed: installed("e.v1.0.0", "1.0.0"),
        ..req()
    };
    assert_eq!(chosen(&r, &cats), Ok("e.v2.0.0@cat".into()));
    let r = ResolveRequest {
        installed: installed("e.v2.0.0", "2.0.0"),
        ..req()
    };
    assert_eq!(chosen(&r, &cats), Ok("e.v3.0.0@cat".into()));
}

#[test]
fn deprecated_bundles_sort_last_within_a_catalog() {
    let mut g = graph();
    deprecate(&mut g, &[("olm.bundle", "a.2.0.0", "broken")]);
    let cats = [one("cat", &g)];
    assert_eq!(chosen(&req(), &cats), Ok("a.1.2.0@cat".into()));
    // but a deprecated bundle is still chosen if it is the only one
    let r = ResolveRequest {
        version_range: Some(">=2".into()),
        ..req()
    };
    let res = resolve(&r, &cats).unwrap();
    assert_eq!(res.bundle.name, "a.2.0.0");
    assert!(res.bundle.deprecated);
    assert_eq!(res.deprecation.as_ref().map(|d| d.entries.len()), Some(1));
}

#[test]
fn multi_catalog() {
    let g = graph();
    let mut g_dep = graph();
    deprecate(&mut g_dep, &[("olm.bundle", "a.2.0.0", "bad")]);
    let only_old = content(&[("alpha", &[("a.1.0.0", "1.0.0", None, &[], None)])]);
    let with = |name, c, priority| CatalogInput {
        priority,
        ..one(name, c)
    };
    let cases: Vec<(&str, Vec<CatalogInput<'_>>, Result<&str, &str>)> = vec![
        (
            "same package, equal priority: ambiguous, catalogs sorted",
            vec![with("zeta", &g, 0), with("alpha", &g, 0)],
            Err(
                r#"found bundles for package "p" in multiple catalogs with the same priority [alpha zeta]"#,
            ),
        ),
        (
            "higher priority wins",
            vec![with("zeta", &g, 0), with("alpha", &g, 5)],
            Ok("a.2.0.0@alpha"),
        ),
        (
            "negative priority loses",
            vec![with("zeta", &g, -1), with("alpha", &g, 0)],
            Ok("a.2.0.0@alpha"),
        ),
        (
            "lower priority does not join the tie",
            vec![with("b", &g, 1), with("a", &g, 1), with("c", &g, 0)],
            Err(
                r#"found bundles for package "p" in multiple catalogs with the same priority [a b]"#,
            ),
        ),
        (
            "priority beats version",
            vec![with("old", &only_old, 10), with("new", &g, 0)],
            Ok("a.1.0.0@old"),
        ),
        (
            "a deprecated bundle sorts last, its catalog's candidate is not deprecated: priority decides",
            vec![with("dep", &g_dep, 10), with("clean", &g, 0)],
            Ok("a.1.2.0@dep"),
        ),
    ];
    for (what, cats, want) in cases {
        assert_eq!(
            chosen(&req(), &cats),
            want.map(str::to_string).map_err(str::to_string),
            "{what}"
        );
    }
    // with a range only a.2.0.0 satisfies, the "dep" catalog's candidate is deprecated:
    // deprecation outranks priority, in either catalog order
    let r = ResolveRequest {
        version_range: Some(">=2".into()),
        ..req()
    };
    for cats in [
        vec![with("dep", &g_dep, 10), with("clean", &g, 0)],
        vec![with("clean", &g, 0), with("dep", &g_dep, 10)],
    ] {
        let res = resolve(&r, &cats).unwrap();
        assert_eq!(res.bundle.catalog, "clean");
        assert!(!res.bundle.deprecated);
        assert_eq!(
            res.deprecation, None,
            "deprecation data of the winner, not of the last catalog"
        );
    }
    // both deprecated: priority decides among them, deprecation data of the winner
    let res = resolve(&r, &[with("dep1", &g_dep, 1), with("dep2", &g_dep, 2)]).unwrap();
    assert_eq!(res.bundle.catalog, "dep2");
    assert!(res.bundle.deprecated);
    assert!(res.deprecation.is_some());
}

#[test]
fn catalog_selection_and_availability() {
    let g = graph();
    let prod: BTreeMap<String, String> = [(
        "olm.operatorframework.io/metadata.name".to_string(),
        "prod".to_string(),
    )]
    .into();
    let dev: BTreeMap<String, String> = [(
        "olm.operatorframework.io/metadata.name".to_string(),
        "dev".to_string(),
    )]
    .into();
    let cats = [
        CatalogInput {
            labels: &prod,
            ..one("prod", &g)
        },
        CatalogInput {
            labels: &dev,
            ..one("dev", &g)
        },
    ];
    let r = ResolveRequest {
        selector: Some(LabelSelector {
            match_labels: Some(prod.clone()),
            match_expressions: None,
        }),
        ..req()
    };
    assert_eq!(chosen(&r, &cats), Ok("a.2.0.0@prod".into()));
    let cats2 = [
        CatalogInput {
            labels: &prod,
            ..one("prod", &g)
        },
        CatalogInput {
            labels: &dev,
            availability: Availability::Unavailable,
            ..one("dev", &g)
        },
    ];
    assert_eq!(chosen(&req(), &cats2), Ok("a.2.0.0@prod".into()));
}

#[test]
fn bad_input() {
    let g = graph();
    // content error aborts
    let broken = CatalogInput {
        content: Err("connection refused".into()),
        ..one("broken", &g)
    };
    assert_eq!(
        chosen(&req(), &[one("ok", &g), broken]),
        Err(r#"error walking catalogs: error getting package "p" from catalog "broken": connection refused"#.into())
    );
    // empty catalogs are skipped; no catalog at all
    let empty = PackageContent::default();
    assert_eq!(
        chosen(&req(), &[one("e", &empty), one("ok", &g)]),
        Ok("a.2.0.0@ok".into())
    );
    assert_eq!(
        chosen(&req(), &[]),
        Err(r#"no bundles found for package "p""#.into())
    );
    let err = resolve(&req(), &[one("e", &empty)]).unwrap_err();
    assert!(err.no_catalog_had_package());
    // non-semver bundle versions are skipped, not fatal
    let mut bad = graph();
    bad.bundles.push(bundle("a.latest", "latest", &[]));
    bad.channels[0].entries.push(ChannelEntry {
        name: "a.latest".into(),
        ..Default::default()
    });
    assert_eq!(
        chosen(&req(), &[one("cat", &bad)]),
        Ok("a.2.0.0@cat".into())
    );
    let ex = explain(&req(), &[one("cat", &bad)]);
    let row = ex.bundles.iter().find(|b| b.bundle == "a.latest").unwrap();
    assert!(
        matches!(row.reasons[0], Reason::InvalidVersion { .. }),
        "{row:?}"
    );
    // dangling replaces and cycles: no walking, so no loops
    let cyc = content(&[(
        "c",
        &[
            ("x.1", "1.0.0", Some("x.2"), &[], None),
            ("x.2", "2.0.0", Some("x.1"), &[], None),
            ("x.3", "3.0.0", Some("nowhere"), &[], None),
        ],
    )]);
    let r = ResolveRequest {
        installed: installed("x.1", "1.0.0"),
        ..req()
    };
    assert_eq!(chosen(&r, &[one("cat", &cyc)]), Ok("x.2@cat".into()));
    // package with no channels: bundles still resolvable without a channel filter
    let mut no_ch = graph();
    no_ch.channels.clear();
    assert_eq!(
        chosen(&req(), &[one("cat", &no_ch)]),
        Ok("a.2.0.0@cat".into())
    );
    let r = ResolveRequest {
        installed: installed("a.1.0.0", "1.0.0"),
        ..req()
    };
    assert_eq!(
        chosen(&r, &[one("cat", &no_ch)]),
        Ok("a.1.0.0@cat".into()),
        "no channels ⇒ no edges ⇒ only the installed bundle itself"
    );
    // an unparsable skipRange is ignored
    let sr = content(&[(
        "c",
        &[
            ("y.1", "1.0.0", None, &[], None),
            ("y.2", "2.0.0", None, &[], Some(">=nonsense")),
        ],
    )]);
    let r = ResolveRequest {
        installed: installed("y.1", "1.0.0"),
        ..req()
    };
    assert_eq!(chosen(&r, &[one("cat", &sr)]), Ok("y.1@cat".into()));
}

#[test]
fn dependency_properties_are_rejected() {
    for prop in ["olm.package.required", "olm.gvk.required", "olm.constraint"] {
        let mut g = graph();
        let b = g.bundles.iter_mut().find(|b| b.name == "a.2.0.0").unwrap();
        b.properties.push(Property {
            type_: prop.into(),
            value: json!({}),
        });
        assert_eq!(
            chosen(&req(), &[one("cat", &g)]),
            Err(format!(
                "validating bundle \"a.2.0.0\": bundle \"a.2.0.0\" has a dependency declared via property \"{prop}\" which is currently not supported"
            ))
        );
    }
}

#[test]
fn releases_order_and_match() {
    let mut c = content(&[("c", &[("r.1", "1.0.0", None, &[], None)])]);
    c.bundles.push(bundle("r.1-2", "1.0.0+2", &[]));
    c.bundles.push(Bundle {
        properties: vec![Property {
            type_: "olm.package".into(),
            value: json!({"packageName": "p", "version": "1.0.0", "release": "10"}),
        }],
        ..bundle("r.1-10", "1.0.0", &[])
    });
    let res = resolve(&req(), &[one("cat", &c)]).unwrap();
    assert_eq!(res.bundle.name, "r.1-10");
    assert_eq!(res.bundle.version.status_release(), "10");
    // pinned range ignores the release (build stripped)
    let r = ResolveRequest {
        version_range: Some("1.0.0".into()),
        ..req()
    };
    assert_eq!(
        resolve(&r, &[one("cat", &c)]).unwrap().bundle.name,
        "r.1-10"
    );
    // installed 1.0.0+2 (legacy) is itself; no edges lead elsewhere
    let r = ResolveRequest {
        installed: installed("r.1-2", "1.0.0+2"),
        ..req()
    };
    assert_eq!(resolve(&r, &[one("cat", &c)]).unwrap().bundle.name, "r.1-2");
}

#[test]
fn explain_gives_a_reason_for_every_bundle() {
    let mut g = graph();
    deprecate(&mut g, &[("olm.bundle", "a.1.1.0", "old")]);
    let r = ResolveRequest {
        channels: vec!["alpha".into()],
        version_range: Some("<2".into()),
        installed: installed("a.1.0.0", "1.0.0"),
        ..req()
    };
    let ex = explain(&r, &[one("cat", &g)]);
    assert!(ex.result.is_ok());
    let table: Vec<(String, String)> = ex
        .bundles
        .iter()
        .map(|b| {
            (
                b.bundle.clone(),
                b.reasons
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
        .collect();
    assert_eq!(
        table,
        vec![
            ("a.1.0.0".into(), "chosen".into()),
            ("a.1.1.0".into(), "deprecated; a.1.0.0 is not".into()),
            (
                "a.1.2.0".into(),
                "not a successor of a.1.0.0 (1.0.0)".into()
            ),
            (
                "a.2.0.0".into(),
                "outside version range \"<2\"; not a successor of a.1.0.0 (1.0.0)".into()
            ),
        ]
    );
    // lower priority and deprecated candidates across catalogs
    let g2 = graph();
    let mut g3 = graph();
    deprecate(&mut g3, &[("olm.bundle", "a.2.0.0", "x")]);
    let cats = [
        CatalogInput {
            priority: 1,
            ..one("hi", &g2)
        },
        one("lo", &g2),
        CatalogInput {
            priority: 9,
            ..one("dep", &g3)
        },
    ];
    let ex = explain(
        &ResolveRequest {
            version_range: Some(">=2".into()),
            ..req()
        },
        &cats,
    );
    assert_eq!(ex.result.unwrap().bundle.catalog, "hi");
    let verdict = |cat: &str, b: &str| {
        ex.bundles
            .iter()
            .find(|x| x.catalog == cat && x.bundle == b)
            .unwrap()
            .reasons
            .last()
            .cloned()
            .unwrap()
    };
    assert_eq!(verdict("hi", "a.2.0.0"), Reason::Chosen);
    assert!(matches!(
        verdict("lo", "a.2.0.0"),
        Reason::LowerPriority {
            priority: 0,
            winner_priority: 1,
            ..
        }
    ));
    assert!(
        matches!(
            verdict("dep", "a.2.0.0"),
            Reason::DeprecatedCandidate { .. }
        ),
        "{:?}",
        verdict("dep", "a.2.0.0")
    );
    assert!(matches!(
        verdict("dep", "a.1.2.0"),
        Reason::OutsideRange { .. }
    ));
}

#[test]
fn deprecation_conditions_from_the_winner() {
    let mut g = graph();
    deprecate(
        &mut g,
        &[
            ("olm.package", "", "pkg is deprecated"),
            ("olm.bundle", "a.1.0.0", "upgrade"),
        ],
    );
    let r = ResolveRequest {
        installed: installed("a.1.0.0", "1.0.0"),
        ..req()
    };
    let res = resolve(&r, &[one("cat", &g)]).unwrap();
    let c = deprecation_conditions(
        CatalogData::Available(res.deprecation.as_ref()),
        &r.channels,
        Some("a.1.0.0"),
    );
    assert_eq!(c[0].message, "pkg is deprecated\nupgrade");
    assert_eq!(c[3].reason, "Deprecated");
}

// ---- real catalogs ----

fn real(sub: &str) -> Option<PackageContent> {
    let dir = crate::testenv::shared_dir(sub)?;
    Some(crate::fbc::load_package(&dir, "ecr-secret-operator").unwrap())
}

#[test]
fn ecr_secret_operator_real_catalogs() {
    for sub in [
        "fixtures/catalogs/v4.16/ecr-secret-operator",
        "fixtures/catalogs/v4.20/ecr-secret-operator",
    ] {
        let Some(c) = real(sub) else { return };
        let r = ResolveRequest {
            package: "ecr-secret-operator".into(),
            ..Default::default()
        };
        let cats = [one("community", &c)];
        let fresh = resolve(&r, &cats).unwrap();
        assert_eq!(fresh.bundle.name, "ecr-secret-operator.v0.5.0");
        assert_eq!(fresh.bundle.version.to_string(), "0.5.0");
        // from 0.3.2 the only allowed upgrade is the highest bundle naming 0.3.2 (replaces/skips)
        let up = |name: &str, version: &str| {
            let r = ResolveRequest {
                installed: installed(name, version),
                ..r.clone()
            };
            resolve(&r, &cats)
                .map(|x| x.bundle.name)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            up("ecr-secret-operator.v0.3.2", "0.3.2"),
            Ok("ecr-secret-operator.v0.5.0".into())
        );
        assert_eq!(
            up("ecr-secret-operator.v0.4.0", "0.4.0"),
            Ok("ecr-secret-operator.v0.5.0".into())
        );
        assert_eq!(
            up("ecr-secret-operator.v0.5.0", "0.5.0"),
            Ok("ecr-secret-operator.v0.5.0".into())
        );
        // the range keeps 0.3.2 at 0.4.x: 0.4.1 skips 0.3.2
        let r2 = ResolveRequest {
            version_range: Some("0.4.x".into()),
            installed: installed("ecr-secret-operator.v0.3.2", "0.3.2"),
            channels: vec!["alpha".into()],
            ..r.clone()
        };
        assert_eq!(
            resolve(&r2, &cats).unwrap().bundle.name,
            "ecr-secret-operator.v0.4.1"
        );
        let r3 = ResolveRequest {
            version_range: Some("<0.3.2".into()),
            ..r2.clone()
        };
        assert_eq!(
            resolve(&r3, &cats).unwrap_err().to_string(),
            r#"error upgrading from currently installed version "0.3.2": no bundles found for package "ecr-secret-operator" matching version "<0.3.2" in channels [alpha]"#
        );
    }
}

#[test]
fn real_catalogs_in_two_catalogs() {
    let (Some(a), Some(b)) = (
        real("fixtures/catalogs/v4.16/ecr-secret-operator"),
        real("fixtures/catalogs/v4.20/ecr-secret-operator"),
    ) else {
        return;
    };
    let r = ResolveRequest {
        package: "ecr-secret-operator".into(),
        ..Default::default()
    };
    assert_eq!(
        resolve(&r, &[one("v4.20", &b), one("v4.16", &a)])
            .unwrap_err()
            .to_string(),
        r#"found bundles for package "ecr-secret-operator" in multiple catalogs with the same priority [v4.16 v4.20]"#
    );
    let cats = [
        one("v4.20", &b),
        CatalogInput {
            priority: 1,
            ..one("v4.16", &a)
        },
    ];
    assert_eq!(resolve(&r, &cats).unwrap().bundle.catalog, "v4.16");
}

/// Catalogs catalogd serves although they break FBC invariants (docs/concepts/catalogs.md §9.1):
/// a package without `defaultChannel` and a channel entry naming a bundle that does not
/// exist. Upstream resolution never reads the default channel (no channels ⇒ every
/// channel's entries), and a missing bundle is simply not a candidate.
#[test]
fn catalogs_breaking_fbc_invariants_still_resolve() {
    let mut c = content(&[
        ("stable", &[("p.v1", "1.0.0", None, &[], None)]),
        ("fast", &[("p.v1", "1.0.0", None, &[], None)]),
    ]);
    assert_eq!(c.package.as_ref().unwrap().default_channel, "");
    // Entries naming bundles that are not in the catalog, one of them the head.
    for ch in &mut c.channels {
        ch.entries.push(ChannelEntry {
            name: "p.v9".into(),
            replaces: Some("p.v1".into()),
            skips: vec![],
            skip_range: None,
        });
    }
    let cats = [one("cat", &c)];
    assert_eq!(chosen(&req(), &cats), Ok("p.v1@cat".into()));
    let with_channel = ResolveRequest {
        channels: vec!["fast".into()],
        ..req()
    };
    assert_eq!(chosen(&with_channel, &cats), Ok("p.v1@cat".into()));
    // An upgrade whose only successor is the missing bundle stays on the installed one.
    let upgrade = ResolveRequest {
        installed: installed("p.v1", "1.0.0"),
        ..with_channel
    };
    assert_eq!(chosen(&upgrade, &cats), Ok("p.v1@cat".into()));
    // A channel that names only missing bundles: no bundle, the usual upstream error.
    let mut only_missing = c.clone();
    only_missing
        .channels
        .push(channel("ghost", &[("p.v7", "7.0.0", None, &[], None)]));
    let ghost = ResolveRequest {
        channels: vec!["ghost".into()],
        ..req()
    };
    let e = chosen(&ghost, &[one("cat", &only_missing)]).unwrap_err();
    assert!(e.contains("no bundles found for package \"p\""), "{e}");
}
