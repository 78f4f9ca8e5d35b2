//! Unit tests of the dependency decisions: every constraint form, satisfied and
//! missing, suggestions, the full set and cycles.

use super::*;
use crate::fbc::model::{Channel, ChannelEntry, Package};
use crate::resolve::Availability;

fn prop(type_: &str, value: Value) -> Property {
    Property {
        type_: type_.into(),
        value,
    }
}

fn bundle(package: &str, version: &str, extra: Vec<Property>) -> Bundle {
    let mut properties = vec![prop(
        PROPERTY_PACKAGE,
        json!({"packageName": package, "version": version}),
    )];
    properties.extend(extra);
    Bundle {
        schema: "olm.bundle".into(),
        name: format!("{package}.v{version}"),
        package: package.into(),
        image: format!("example.com/{package}:v{version}"),
        properties,
        ..Default::default()
    }
}

fn content(package: &str, bundles: Vec<Bundle>) -> PackageContent {
    PackageContent {
        package: Some(Package {
            schema: "olm.package".into(),
            name: package.into(),
            default_channel: "stable".into(),
            ..Default::default()
        }),
        channels: vec![Channel {
            schema: "olm.channel".into(),
            name: "stable".into(),
            package: package.into(),
            entries: bundles
                .iter()
                .map(|b| ChannelEntry {
                    name: b.name.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        bundles,
        deprecations: Vec::new(),
    }
}

fn catalogs<'a>(
    contents: &'a [PackageContent],
    labels: &'a BTreeMap<String, String>,
) -> Catalogs<'a> {
    contents
        .iter()
        .map(|c| {
            let name = c
                .package
                .as_ref()
                .map(|p| p.name.clone())
                .unwrap_or_default();
            let input = CatalogInput {
                name: "cat",
                priority: 0,
                availability: Availability::Available,
                labels,
                content: Ok(c),
            };
            (name, vec![input])
        })
        .collect()
}

fn installed(package: &str, version: &str, scope: WatchScope) -> Installed {
    Installed {
        name: package.into(),
        package: package.into(),
        version: version.into(),
        scope,
    }
}

fn one(value: Value) -> Constraint {
    parse(&[prop(PROPERTY_CONSTRAINT, value)])
        .unwrap()
        .remove(0)
        .constraint
}

fn gvk(g: &str, v: &str, k: &str) -> Gvk {
    Gvk {
        group: g.into(),
        version: v.into(),
        kind: k.into(),
    }
}

#[test]
fn parses_every_form() {
    let deps = parse(&[
        prop(
            PROPERTY_PACKAGE,
            json!({"packageName": "me", "version": "1.0.0"}),
        ),
        prop(
            PROPERTY_PACKAGE_REQUIRED,
            json!({"packageName": "etcd", "versionRange": ">=0.9.0"}),
        ),
        prop(
            PROPERTY_GVK_REQUIRED,
            json!({"group": "g.io", "version": "v1", "kind": "K"}),
        ),
        prop(
            PROPERTY_CONSTRAINT,
            json!({"failureMessage": "needs etcd or K",
            "any": {"constraints": [
                {"package": {"packageName": "etcd", "versionRange": ">=1"}},
                {"gvk": {"group": "g.io", "version": "v1", "kind": "K"}}]}}),
        ),
        prop(
            PROPERTY_CONSTRAINT,
            json!({"all": {"constraints": [
            {"not": {"constraints": [{"package": {"packageName": "old"}}]}},
            {"cel": {"rule": "properties.exists(p, p.type == \"olm.package\")"}}]}}),
        ),
    ])
    .unwrap();
    assert_eq!(deps.len(), 4);
    assert_eq!(
        deps[0].constraint.to_string(),
        "package \"etcd\" in range \">=0.9.0\""
    );
    assert_eq!(deps[1].constraint.to_string(), "GVK g.io/v1 K");
    assert_eq!(deps[2].failure_message.as_deref(), Some("needs etcd or K"));
    assert_eq!(
        deps[2].constraint.to_string(),
        "any of [package \"etcd\" in range \">=1\"; GVK g.io/v1 K]"
    );
    assert!(
        deps[3]
            .constraint
            .to_string()
            .starts_with("all of [none of [package \"old\"]; CEL rule")
    );
    // Refused: bad range, unknown form, bad rule, nesting beyond the bound.
    assert!(
        parse(&[prop(
            PROPERTY_PACKAGE_REQUIRED,
            json!({"packageName": "x", "versionRange": "~~"})
        )])
        .is_err()
    );
    assert!(parse(&[prop(PROPERTY_CONSTRAINT, json!({"foo": {}}))]).is_err());
    assert!(
        parse(&[prop(
            PROPERTY_CONSTRAINT,
            json!({"cel": {"rule": "size(properties) > 1"}})
        )])
        .is_err()
    );
    let mut deep = json!({"package": {"packageName": "x"}});
    for _ in 0..40 {
        deep = json!({"all": {"constraints": [deep]}});
    }
    assert!(
        parse(&[prop(PROPERTY_CONSTRAINT, deep)])
            .unwrap_err()
            .contains("too deeply")
    );
}

#[test]
fn cel_subset() {
    let props = vec![
        json!({"type": "olm.package", "value": {"packageName": "etcd", "version": "1.2.3"}}),
        json!({"type": "certified", "value": true}),
    ];
    let m = |rule: &str| cel::matches(&cel::parse(rule).unwrap(), &props).unwrap();
    assert!(m(r#"properties.exists(p, p.type == "certified")"#));
    assert!(!m(r#"properties.exists(p, p.type == "uncertified")"#));
    assert!(m(
        r#"properties.exists(p, p.type == "olm.package" && p.value.packageName == "etcd" && semver_compare(p.value.version, "1.0.0") >= 0)"#
    ));
    assert!(!m(
        r#"properties.exists(p, p.type == "olm.package" && semver_compare(p.value.version, "2.0.0") >= 0)"#
    ));
    assert!(m(
        r#"properties.exists(p, p.type == 'olm.package' && semver(p.value.version) < semver("v2.0.0"))"#
    ));
    assert!(m(r#"!properties.exists(p, p.type == "x") || false"#));
    assert!(m(r#"properties.all(p, p.type != "bad") && (1 < 2)"#));
    assert!(!m(r#"properties.all(p, p.type == "certified")"#));
    assert!(m(
        r#"semver_compare("1.0.0", "1.0.0") == 0 && semver_compare("0.1.0", "1.0.0") == -1"#
    ));
    // Not parsed: unknown functions and macros, trailing tokens, unterminated strings.
    for bad in [
        "size(properties)",
        "properties.map(p, p)",
        "1 2",
        "\"open",
        "p.type ==",
        "a ? b : c",
    ] {
        assert!(cel::parse(bad).is_err(), "{bad}");
    }
    // A free name outside a macro is an evaluation error.
    assert!(cel::matches(&cel::parse("q.type == 1").unwrap(), &props).is_err());
    let mut names = Vec::new();
    cel::package_names(
        &cel::parse(
            r#"properties.exists(p, p.value.packageName == "a" || "b" == p.value.packageName)"#,
        )
        .unwrap(),
        &mut names,
    );
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn holds_on_the_cluster() {
    let cluster = Cluster {
        extensions: vec![
            installed("etcd", "1.2.0", WatchScope::All),
            installed("scoped", "1.0.0", WatchScope::Namespace("team-a".into())),
        ],
        served: [gvk("g.io", "v1", "K")].into(),
    };
    let all = WatchScope::All;
    let team_a = WatchScope::Namespace("team-a".into());
    let pkg = |p: &str, r: &str| Constraint::Package {
        package: p.into(),
        range: r.into(),
    };
    assert!(holds(&pkg("etcd", ">=1.0.0"), &cluster, &all));
    assert!(holds(&pkg("etcd", ""), &cluster, &all));
    assert!(!holds(&pkg("etcd", ">=2.0.0"), &cluster, &all));
    assert!(!holds(&pkg("other", ""), &cluster, &all));
    // Watch scope: a single-namespace extension serves only a dependent in that scope.
    assert!(!holds(&pkg("scoped", ""), &cluster, &all));
    assert!(holds(&pkg("scoped", ""), &cluster, &team_a));
    assert!(!holds(
        &pkg("scoped", ""),
        &cluster,
        &WatchScope::Namespace("team-b".into())
    ));
    assert!(holds(
        &Constraint::Gvk(gvk("g.io", "v1", "K")),
        &cluster,
        &all
    ));
    assert!(!holds(
        &Constraint::Gvk(gvk("g.io", "v2", "K")),
        &cluster,
        &all
    ));
    let c = one(json!({"all": {"constraints": [
        {"package": {"packageName": "etcd"}}, {"gvk": {"group": "g.io", "version": "v1", "kind": "K"}}]}}));
    assert!(holds(&c, &cluster, &all));
    let c = one(json!({"all": {"constraints": [
        {"package": {"packageName": "etcd"}}, {"package": {"packageName": "nope"}}]}}));
    assert!(!holds(&c, &cluster, &all));
    let c = one(json!({"any": {"constraints": [
        {"package": {"packageName": "nope"}}, {"package": {"packageName": "etcd"}}]}}));
    assert!(holds(&c, &cluster, &all));
    let c = one(json!({"not": {"constraints": [{"package": {"packageName": "etcd"}}]}}));
    assert!(!holds(&c, &cluster, &all));
    let c = one(json!({"not": {"constraints": [{"package": {"packageName": "nope"}}]}}));
    assert!(holds(&c, &cluster, &all));
    let cel = |rule: &str| one(json!({"cel": {"rule": rule}}));
    let rule = r#"properties.exists(p, p.type == "olm.package" && p.value.packageName == "etcd" && semver_compare(p.value.version, "1.1.0") >= 0)"#;
    assert!(holds(&cel(rule), &cluster, &all));
    assert!(!holds(
        &cel(&rule.replace("1.1.0", "1.3.0")),
        &cluster,
        &all
    ));
}

fn dependent<'a>(deps: &'a [Dependency]) -> Dependent<'a> {
    Dependent {
        bundle: "app.v1.0.0",
        package: "app",
        version: "1.0.0",
        scope: WatchScope::All,
        dependencies: deps,
    }
}

#[test]
fn satisfied_dependencies_need_nothing() {
    let deps = parse(&[prop(
        PROPERTY_PACKAGE_REQUIRED,
        json!({"packageName": "etcd", "versionRange": ">=1"}),
    )])
    .unwrap();
    let cluster = Cluster {
        extensions: vec![installed("etcd", "1.0.0", WatchScope::All)],
        ..Default::default()
    };
    let c = check(&dependent(&deps), &cluster, &Catalogs::new());
    assert!(c.satisfied());
    assert_eq!(c.detail(), "");
    assert!(c.set.is_empty() && c.need.is_empty());
}

#[test]
fn missing_dependencies_name_what_satisfies_them() {
    let deps = parse(&[
        prop(
            PROPERTY_PACKAGE_REQUIRED,
            json!({"packageName": "etcd", "versionRange": ">=1.0.0 <2.0.0"}),
        ),
        prop(
            PROPERTY_GVK_REQUIRED,
            json!({"group": "g.io", "version": "v1", "kind": "K"}),
        ),
    ])
    .unwrap();
    let labels = BTreeMap::new();
    // First pass: no catalog content yet, the packages to read are named.
    let first = check(&dependent(&deps), &Cluster::default(), &Catalogs::new());
    assert_eq!(first.need, ["etcd"]);
    assert!(!first.satisfied());
    let contents = [
        content(
            "etcd",
            vec![
                bundle("etcd", "1.1.0", vec![]),
                bundle("etcd", "2.0.0", vec![]),
            ],
        ),
        content(
            "kprovider",
            vec![bundle(
                "kprovider",
                "0.1.0",
                vec![prop(
                    PROPERTY_GVK,
                    json!({"group": "g.io", "version": "v1", "kind": "K"}),
                )],
            )],
        ),
    ];
    let c = check(
        &dependent(&deps),
        &Cluster::default(),
        &catalogs(&contents, &labels),
    );
    assert!(c.need.is_empty());
    assert_eq!(c.set.len(), 2);
    assert_eq!(c.set[0].bundle, "etcd.v1.1.0");
    assert_eq!(c.set[0].channel.as_deref(), Some("stable"));
    assert_eq!(c.set[1].package, "kprovider");
    assert_eq!(
        c.detail(),
        ". Missing dependencies: package \"etcd\" in range \">=1.0.0 <2.0.0\" (satisfied by package \"etcd\" version \">=1.0.0 <2.0.0\" from catalog \"cat\" channel \"stable\" (bundle etcd.v1.1.0)); GVK g.io/v1 K (satisfied by package \"kprovider\" from catalog \"cat\" channel \"stable\" (bundle kprovider.v0.1.0)); `olmv1 resolve --with-dependencies` prints the ClusterExtensions that satisfy them"
    );
    // An installed etcd outside the range does not count; a GVK nobody provides is said so.
    let cluster = Cluster {
        extensions: vec![installed("etcd", "2.0.0", WatchScope::All)],
        ..Default::default()
    };
    let c = check(
        &dependent(&deps),
        &cluster,
        &catalogs(&contents[..1], &labels),
    );
    assert_eq!(c.missing.len(), 2);
    assert_eq!(
        c.missing[1].satisfied_by,
        Err("no package in the catalogs read provides it".to_string())
    );
}

#[test]
fn compound_and_cel_suggestions() {
    let labels = BTreeMap::new();
    let contents = [
        content(
            "etcd",
            vec![
                bundle("etcd", "1.1.0", vec![]),
                bundle("etcd", "3.0.0", vec![]),
            ],
        ),
        content("vault", vec![bundle("vault", "1.0.0", vec![])]),
    ];
    let cats = catalogs(&contents, &labels);
    let deps = parse(&[
        prop(PROPERTY_CONSTRAINT, json!({"failureMessage": "etcd below 2 please",
            "cel": {"rule": "properties.exists(p, p.type == \"olm.package\" && p.value.packageName == \"etcd\" && semver_compare(p.value.version, \"2.0.0\") < 0)"}})),
        prop(PROPERTY_CONSTRAINT, json!({"any": {"constraints": [
            {"package": {"packageName": "missing"}}, {"package": {"packageName": "vault"}}]}})),
        prop(PROPERTY_CONSTRAINT, json!({"not": {"constraints": [{"package": {"packageName": "vault"}}]}})),
    ])
    .unwrap();
    let mut cats2 = cats.clone();
    cats2.insert("missing".into(), Vec::new());
    let c = check(&dependent(&deps), &Cluster::default(), &cats2);
    // CEL: the newest bundle that fits the rule, pinned.
    assert_eq!(c.set[0].bundle, "etcd.v1.1.0");
    assert_eq!(c.set[0].range.as_deref(), Some("1.1.0"));
    assert!(
        c.missing[0]
            .dependency
            .ends_with("(\"etcd below 2 please\")")
    );
    assert_eq!(c.set[1].package, "vault");
    // `not` holds on an empty cluster: only two missing.
    assert_eq!(c.missing.len(), 2);
    let cluster = Cluster {
        extensions: vec![installed("vault", "1.0.0", WatchScope::All)],
        ..Default::default()
    };
    let c = check(&dependent(&deps[2..]), &cluster, &cats);
    assert!(
        c.missing[0]
            .satisfied_by
            .as_ref()
            .unwrap_err()
            .contains("removing")
    );
}

#[test]
fn full_set_is_recursive_cycle_safe_and_bounded() {
    let labels = BTreeMap::new();
    let req = |p: &str| prop(PROPERTY_PACKAGE_REQUIRED, json!({"packageName": p}));
    let contents = [
        content("b", vec![bundle("b", "1.0.0", vec![req("c")])]),
        // c needs b (a cycle) and the dependent's own package.
        content("c", vec![bundle("c", "1.0.0", vec![req("b"), req("app")])]),
    ];
    let deps = parse(&[req("b")]).unwrap();
    let first = check(
        &dependent(&deps),
        &Cluster::default(),
        &catalogs(&contents[..1], &labels),
    );
    assert_eq!(first.need, ["c"]);
    let c = check(
        &dependent(&deps),
        &Cluster::default(),
        &catalogs(&contents, &labels),
    );
    let set: Vec<_> = c
        .set
        .iter()
        .map(|s| (s.package.as_str(), s.required_by.as_str()))
        .collect();
    assert_eq!(set, [("b", "app.v1.0.0"), ("c", "b.v1.0.0")]);
    assert!(c.unsatisfiable.is_empty(), "{:?}", c.unsatisfiable);
    assert_eq!(c.missing.len(), 1);
    // A chain longer than the bound stops at MAX_SET.
    let chain: Vec<PackageContent> = (0..MAX_SET + 5)
        .map(|i| {
            content(
                &format!("p{i}"),
                vec![bundle(
                    &format!("p{i}"),
                    "1.0.0",
                    vec![req(&format!("p{}", i + 1))],
                )],
            )
        })
        .collect();
    let deps = parse(&[req("p0")]).unwrap();
    let c = check(
        &dependent(&deps),
        &Cluster::default(),
        &catalogs(&chain, &labels),
    );
    assert_eq!(c.set.len(), MAX_SET);
    assert!(!c.unsatisfiable.is_empty());
}

#[test]
fn conflicting_ranges_are_reported() {
    let labels = BTreeMap::new();
    let req = |p: &str, r: &str| {
        prop(
            PROPERTY_PACKAGE_REQUIRED,
            json!({"packageName": p, "versionRange": r}),
        )
    };
    let contents = [
        content("b", vec![bundle("b", "1.0.0", vec![req("c", "<2")])]),
        content(
            "c",
            vec![bundle("c", "1.0.0", vec![]), bundle("c", "2.0.0", vec![])],
        ),
    ];
    let deps = parse(&[req("c", ">=2"), req("b", "")]).unwrap();
    let c = check(
        &dependent(&deps),
        &Cluster::default(),
        &catalogs(&contents, &labels),
    );
    assert_eq!(c.set.len(), 2);
    assert!(
        c.unsatisfiable[0].contains("conflicts with"),
        "{:?}",
        c.unsatisfiable
    );
}
