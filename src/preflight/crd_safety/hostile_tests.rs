//! Hostile CRDs: sizes that used to cost quadratic time stay linear.

use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A one-version CRD whose `spec` schema is `spec`.
fn crd(spec: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "hostiles.test.example.com"},
        "spec": {"group": "test.example.com", "scope": "Namespaced",
                 "names": {"kind": "Hostile", "plural": "hostiles"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}
    }))
    .expect("CRD")
}

/// An object schema with `n` distinct `keyword` branches, without branch number `skip`.
fn branches(keyword: &str, n: usize, skip: Option<usize>) -> Value {
    let list: Vec<Value> = (0..n)
        .filter(|i| Some(*i) != skip)
        .map(|i| json!({"required": [format!("f{i:05}")]}))
        .collect();
    let mut spec = json!({"type": "object"});
    spec[keyword] = Value::Array(list);
    spec
}

/// keyword, [long list, one branch shorter], [findings long → short, short → long]
type Case = (
    &'static str,
    [CustomResourceDefinition; 2],
    [Vec<&'static str>; 2],
);

/// `anyOf`/`oneOf`/`allOf` lists of different lengths are counted, not compared in
/// order: 20,000 branches used to take 34 s (every branch compared with every other);
/// the count is now linear and the findings are the same.
#[test]
fn long_branch_lists_of_different_length_are_counted_in_linear_time() {
    const N: usize = 20_000;
    let cases: Vec<Case> = vec![
        (
            "anyOf",
            [
                crd(branches("anyOf", N, None)),
                crd(branches("anyOf", N, Some(7))),
            ],
            [
                vec!["v1: ^.spec: anyOf: allowed anyOf schemas removed : 1"],
                vec![],
            ],
        ),
        (
            "oneOf",
            [
                crd(branches("oneOf", N, None)),
                crd(branches("oneOf", N, Some(7))),
            ],
            [
                vec!["v1: ^.spec: oneOf: allowed oneOf schemas removed : 1"],
                vec![
                    "v1: ^.spec: oneOf: oneOf schemas added : 1 (an existing object may now match more than one)",
                ],
            ],
        ),
        (
            "allOf",
            [
                crd(branches("allOf", N, None)),
                crd(branches("allOf", N, Some(7))),
            ],
            [vec![], vec!["v1: ^.spec: allOf: allOf schemas added : 1"]],
        ),
    ];
    // Only the checks are timed (building the CRDs is slow in debug builds).
    let started = Instant::now();
    for (keyword, [long, short], [removed, added]) in &cases {
        let found: Vec<String> = check(long, short).iter().map(ToString::to_string).collect();
        assert_eq!(&found, removed, "{keyword}: one branch removed");
        let found: Vec<String> = check(short, long).iter().map(ToString::to_string).collect();
        assert_eq!(&found, added, "{keyword}: one branch added");
    }
    let elapsed = started.elapsed();
    eprintln!("6 checks of {N} branches: {elapsed:?}");
    // Linear: ~5 s in a debug build; the quadratic count took minutes for one check.
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
}

/// A CRD serving `n` versions (`v1` … `v{n}`), version `vi` requiring field `f{i}`.
fn crd_serving(n: usize) -> CustomResourceDefinition {
    let versions: Vec<Value> = (1..=n)
        .map(|i| {
            json!({"name": format!("v{i}"), "served": true, "storage": i == 1,
                "schema": {"openAPIV3Schema": {"type": "object", "required": [format!("f{i}")]}}})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "hostiles.test.example.com"},
        "spec": {"group": "test.example.com", "scope": "Namespaced",
                 "names": {"kind": "Hostile", "plural": "hostiles"}, "versions": versions}
    }))
    .expect("CRD")
}

/// Served versions are compared pairwise (quadratic, one finding per differing pair):
/// above [`MAX_SERVED_VERSIONS`] the pairs are not compared and one fail-closed finding
/// says so; at the limit they still are.
#[test]
fn many_served_versions_are_not_compared_pairwise() {
    let started = Instant::now();
    let live = crd_serving(1);
    let new = crd_serving(5_000);
    let found: Vec<String> = check(&live, &new).iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        vec![
            "unhandled: 5000 served versions: more than 64 are not compared with each other (fail-closed); serve fewer versions"
        ]
    );
    let elapsed = started.elapsed();
    // ~0.4 s in a debug build; comparing the 12.5 million pairs ran out of minutes.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let at_limit = crd_serving(MAX_SERVED_VERSIONS);
    let pairs = MAX_SERVED_VERSIONS * (MAX_SERVED_VERSIONS - 1) / 2;
    assert_eq!(check(&live, &at_limit).len(), pairs);
}

/// A CRD (JSON text) whose `spec` has `n` one-line properties.
fn crd_with_properties(n: usize) -> String {
    let props: Vec<String> = (0..n)
        .map(|i| format!("\"p{i:06}\":{{\"type\":\"string\"}}"))
        .collect();
    format!(
        "{{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\",\
         \"metadata\":{{\"name\":\"hostiles.test.example.com\"}},\"spec\":{{\"group\":\"test.example.com\",\
         \"scope\":\"Namespaced\",\"names\":{{\"kind\":\"Hostile\",\"plural\":\"hostiles\"}},\
         \"versions\":[{{\"name\":\"v1\",\"served\":true,\"storage\":true,\"schema\":{{\"openAPIV3Schema\":\
         {{\"type\":\"object\",\"properties\":{{\"spec\":{{\"type\":\"object\",\"properties\":{{{}}}}}}}}}}}}}]}}}}",
        props.join(",")
    )
}

/// Every schema node costs ~2 KB once typed: two 2.7 MB CRDs of 100,000 properties took
/// 454 MB in `olmv1 crd-diff`. A CRD above [`MAX_SCHEMA_NODES`] is refused while it is
/// still JSON; one at the limit is read.
#[test]
fn crds_with_more_schema_nodes_than_the_limit_are_refused() {
    let err = parse_crd(&crd_with_properties(100_000))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "CRD \"hostiles.test.example.com\" has 100010 schema nodes (JSON objects), more than the \
         50000 the upgrade-safety check reads (each costs ~2 KB of memory there; no CRD a \
         default API server can store comes near the limit)"
    );
    // 10 objects besides the properties: the document, metadata, spec, names, the version,
    // schema, openAPIV3Schema, its properties, `spec` and its properties
    let at_limit = crd_with_properties(MAX_SCHEMA_NODES - 10);
    assert_eq!(
        crate::preflight::crd_safety::schema_nodes(&serde_json::from_str(&at_limit).unwrap()),
        MAX_SCHEMA_NODES
    );
    assert!(parse_crd(&at_limit).is_ok());
}
