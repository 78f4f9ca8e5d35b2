//! Unit tests: one per rule in both directions, the seed's worked examples, messages,
//! bad input, and the real CRD pairs from the shared fixtures.

use super::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const NAME: &str = "samples.test.example.com";

/// A one-version (`v1`, served, storage) CRD whose root schema has `spec` = `spec_schema`.
fn crd_spec(spec_schema: Value) -> CustomResourceDefinition {
    crd_versions(json!([version("v1", true, true, spec_schema)]))
}

fn version(name: &str, served: bool, storage: bool, spec_schema: Value) -> Value {
    json!({
        "name": name, "served": served, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"}, "spec": spec_schema
        }}}
    })
}

fn crd_versions(versions: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {"group": "test.example.com", "scope": "Namespaced",
                 "names": {"kind": "Sample", "plural": "samples"}, "versions": versions}
    }))
    .unwrap()
}

/// Findings for `spec` going from `old` to `new`, as display strings.
fn diff_spec(old: Value, new: Value) -> Vec<String> {
    check(&crd_spec(old), &crd_spec(new))
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn obj(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

#[track_caller]
fn assert_safe(old: Value, new: Value) {
    let f = diff_spec(old, new);
    assert!(f.is_empty(), "expected safe, got {f:#?}");
}

#[track_caller]
fn assert_one(old: Value, new: Value, expected: &str) {
    assert_eq!(diff_spec(old, new), vec![expected.to_owned()]);
}

// ---------------------------------------------------------------- CRD-wide rules

#[test]
fn scope_change_is_found_and_same_scope_passes() {
    let old = crd_spec(obj(json!({})));
    let mut new = old.clone();
    new.spec.scope = "Cluster".into();
    let f = check(&old, &new);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].rule, Rule::Scope);
    assert_eq!(
        f[0].to_string(),
        r#"scope: scope changed : "Namespaced" -> "Cluster""#
    );
    assert!(check(&old, &old.clone()).is_empty());
}

#[test]
fn stored_version_removal_is_found_unstored_removal_and_new_version_pass() {
    let old = crd_versions(json!([
        version("v1alpha1", true, false, obj(json!({}))),
        version("v1", true, true, obj(json!({}))),
    ]));
    let only_v1 = crd_versions(json!([version("v1", true, true, obj(json!({})))]));
    // storedVersions from status: v1alpha1 still has objects.
    let mut live = old.clone();
    live.status =
        Some(serde_json::from_value(json!({"storedVersions": ["v1alpha1", "v1"]})).unwrap());
    let f = check(&live, &only_v1);
    assert_eq!(
        f.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["storedVersionRemoval: stored versions removed : [v1alpha1]"]
    );
    // Without status only the storage version counts as stored: dropping v1alpha1 is fine.
    assert!(check(&old, &only_v1).is_empty());
    // Adding a new version without touching the existing one is fine.
    let added = crd_versions(json!([
        version("v1alpha1", true, false, obj(json!({}))),
        version("v1", true, true, obj(json!({}))),
        version("v2", true, false, obj(json!({}))),
    ]));
    assert!(check(&live, &added).is_empty());
}

#[test]
fn stored_versions_default_to_status_then_storage_flag() {
    let mut live = crd_versions(json!([
        version("v1alpha1", true, false, obj(json!({}))),
        version("v1", true, true, obj(json!({}))),
    ]));
    assert_eq!(stored_versions(&live), vec!["v1"]);
    live.status = Some(serde_json::from_value(json!({"storedVersions": ["v1alpha1"]})).unwrap());
    assert_eq!(stored_versions(&live), vec!["v1alpha1"]);
}

// ---------------------------------------------------------------- field rules

#[test]
fn field_removal_is_found_and_field_addition_passes() {
    let old = obj(json!({"a": {"type": "string"}, "b": {"type": "string"}}));
    assert_one(
        old.clone(),
        obj(json!({"a": {"type": "string"}})),
        "existingFieldRemoval: removed field : v1.^.spec.b",
    );
    assert_safe(
        old,
        obj(json!({"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "integer"}})),
    );
}

#[test]
fn field_removal_under_preserve_unknown_fields_passes() {
    let old = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"a": {"type": "string"}}});
    let new = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    assert_safe(old, new);
}

#[test]
fn type_change_is_found_and_widening_to_int_or_string_passes() {
    assert_one(
        obj(json!({"port": {"type": "integer"}})),
        obj(json!({"port": {"type": "string"}})),
        r#"v1: ^.spec.port: type: type changed : "integer" -> "string""#,
    );
    assert_safe(
        obj(json!({"port": {"type": "integer"}})),
        obj(json!({"port": {"x-kubernetes-int-or-string": true}})),
    );
    // int-or-string narrowed back to integer rejects stored strings.
    assert_one(
        obj(json!({"port": {"x-kubernetes-int-or-string": true}})),
        obj(json!({"port": {"type": "integer"}})),
        r#"v1: ^.spec.port: type: type changed : "int-or-string" -> "integer""#,
    );
}

#[test]
fn new_required_field_is_found_and_relaxing_required_passes() {
    let base = json!({"a": {"type": "string"}, "b": {"type": "string"}});
    let with = |req: Value| json!({"type": "object", "properties": base, "required": req});
    assert_one(
        with(json!(["a"])),
        with(json!(["a", "b"])),
        "v1: ^.spec: required: new required fields: [b]",
    );
    assert_safe(with(json!(["a", "b"])), with(json!(["a"])));
}

#[test]
fn required_with_default_and_required_inside_new_object_pass() {
    let old = obj(json!({"a": {"type": "string"}}));
    let new = json!({"type": "object", "required": ["a"],
                     "properties": {"a": {"type": "string", "default": "x"}}});
    // The default is still reported (it changes what existing objects read as).
    assert_eq!(
        diff_spec(old.clone(), new),
        vec![r#"v1: ^.spec.a: default: default added when there was none previously : "x""#]
    );
    let new = obj(json!({"a": {"type": "string"},
        "extra": {"type": "object", "required": ["z"], "properties": {"z": {"type": "string"}}}}));
    assert_safe(old, new);
}

#[test]
fn default_added_changed_removed_are_found_and_default_on_new_field_passes() {
    let none = obj(json!({"a": {"type": "string"}}));
    let d = |v: &str| obj(json!({"a": {"type": "string", "default": v}}));
    assert_one(
        none.clone(),
        d("x"),
        r#"v1: ^.spec.a: default: default added when there was none previously : "x""#,
    );
    assert_one(
        d("x"),
        d("y"),
        r#"v1: ^.spec.a: default: default value changed : "x" -> "y""#,
    );
    assert_one(
        d("x"),
        none.clone(),
        r#"v1: ^.spec.a: default: default value removed : "x""#,
    );
    assert_safe(
        none,
        obj(json!({"a": {"type": "string"}, "b": {"type": "string", "default": "z"}})),
    );
}

#[test]
fn enum_added_or_values_removed_are_found_and_enum_growth_or_removal_passes() {
    let e = |v: Value| obj(json!({"mode": {"type": "string", "enum": v}}));
    let plain = obj(json!({"mode": {"type": "string"}}));
    assert_one(
        plain.clone(),
        e(json!(["A", "B"])),
        r#"v1: ^.spec.mode: enum: enum constraint added when there was none previously : ["A", "B"]"#,
    );
    assert_one(
        e(json!(["A", "B", "C"])),
        e(json!(["A", "C"])),
        r#"v1: ^.spec.mode: enum: allowed enum values removed : ["B"]"#,
    );
    assert_safe(e(json!(["A", "B"])), e(json!(["A", "B", "C"])));
    assert_safe(e(json!(["A", "B"])), e(json!(["B", "A"])));
    assert_safe(e(json!(["A", "B"])), plain);
}

#[test]
fn minimum_rules_found_when_raised_or_added_and_pass_when_lowered_or_removed() {
    for (key, ty) in [
        ("minimum", "integer"),
        ("minLength", "string"),
        ("minItems", "array"),
        ("minProperties", "object"),
    ] {
        let s = |v: Option<i64>| {
            let mut f = json!({"type": ty});
            if ty == "array" {
                f["items"] = json!({"type": "string"});
            }
            if let Some(v) = v {
                f[key] = json!(v);
            }
            obj(json!({"f": f}))
        };
        assert_one(
            s(Some(1)),
            s(Some(2)),
            &format!("v1: ^.spec.f: {key}: minimum increased : 1 -> 2"),
        );
        assert_one(
            s(None),
            s(Some(3)),
            &format!(
                "v1: ^.spec.f: {key}: minimum constraint added when there was none previously : 3"
            ),
        );
        assert_safe(s(Some(2)), s(Some(1)));
        assert_safe(s(Some(2)), s(None));
    }
}

#[test]
fn maximum_rules_found_when_lowered_or_added_and_pass_when_raised_or_removed() {
    for (key, ty) in [
        ("maximum", "number"),
        ("maxLength", "string"),
        ("maxItems", "array"),
        ("maxProperties", "object"),
    ] {
        let s = |v: Option<i64>| {
            let mut f = json!({"type": ty});
            if ty == "array" {
                f["items"] = json!({"type": "string"});
            }
            if let Some(v) = v {
                f[key] = json!(v);
            }
            obj(json!({"f": f}))
        };
        assert_one(
            s(Some(10)),
            s(Some(5)),
            &format!("v1: ^.spec.f: {key}: maximum decreased : 10 -> 5"),
        );
        assert_one(
            s(None),
            s(Some(7)),
            &format!(
                "v1: ^.spec.f: {key}: maximum constraint added when there was none previously : 7"
            ),
        );
        assert_safe(s(Some(5)), s(Some(10)));
        assert_safe(s(Some(5)), s(None));
    }
}

#[test]
fn fractional_bounds_print_as_given() {
    assert_one(
        obj(json!({"r": {"type": "number", "minimum": 0.5}})),
        obj(json!({"r": {"type": "number", "minimum": 1.25}})),
        "v1: ^.spec.r: minimum: minimum increased : 0.5 -> 1.25",
    );
}

#[test]
fn pattern_added_or_changed_is_found_and_removal_passes() {
    let p = |v: Option<&str>| {
        let mut f = json!({"type": "string"});
        if let Some(v) = v {
            f["pattern"] = json!(v);
        }
        obj(json!({"name": f}))
    };
    assert_one(
        p(None),
        p(Some("^[a-z]+$")),
        r#"v1: ^.spec.name: pattern: pattern added : "" -> "^[a-z]+$""#,
    );
    assert_one(
        p(Some("^[a-z]+$")),
        p(Some("^[a-z]{1,5}$")),
        r#"v1: ^.spec.name: pattern: pattern changed : "^[a-z]+$" -> "^[a-z]{1,5}$""#,
    );
    assert_safe(p(Some("^[a-z]+$")), p(None));
}

/// The API server stores whole-number floats in `default`/`enum` as integers and drops
/// empty strings: the live copy of a CRD written with `default: 1.0` or `pattern: ""`
/// reads back differently, which must not look like a change (found against a real
/// kube-apiserver by `tests/crd_safety.rs`).
#[test]
fn api_server_number_and_empty_string_rewrites_are_not_changes() {
    let written = obj(json!({
        "ratio": {"type": "number", "default": 1.0, "enum": [1.0, 2.5, 300.0, 0.0, -4.0]},
        "count": {"type": "integer", "default": 2.0},
        "settings": {"type": "object", "default": {"limit": 5.0, "l": [1.0]},
                     "properties": {"limit": {"type": "number"}, "l": {"type": "array", "items": {"type": "number"}}}},
        "name": {"type": "string", "pattern": ""}
    }));
    let stored = obj(json!({
        "ratio": {"type": "number", "default": 1, "enum": [1, 2.5, 300, 0, -4]},
        "count": {"type": "integer", "default": 2},
        "settings": {"type": "object", "default": {"limit": 5, "l": [1]},
                     "properties": {"limit": {"type": "number"}, "l": {"type": "array", "items": {"type": "number"}}}},
        "name": {"type": "string"}
    }));
    assert_safe(stored.clone(), written.clone());
    assert_safe(written.clone(), stored.clone());

    // Real changes of those values are still found.
    let mut changed = written.clone();
    changed["properties"]["ratio"]["default"] = json!(1.5);
    changed["properties"]["ratio"]["enum"] = json!([1.0, 2.5, 300.0, -4.0]);
    changed["properties"]["count"]["default"] = json!(3.0);
    changed["properties"]["name"]["pattern"] = json!("^a");
    assert_eq!(
        diff_spec(stored, changed),
        vec![
            r#"v1: ^.spec.count: default: default value changed : 2 -> 3.0"#.to_owned(),
            r#"v1: ^.spec.name: pattern: pattern added : "" -> "^a""#.to_owned(),
            r#"v1: ^.spec.ratio: enum: allowed enum values removed : [0]"#.to_owned(),
            r#"v1: ^.spec.ratio: default: default value changed : 1 -> 1.5"#.to_owned(),
        ]
    );
    // Integers beyond f64 precision keep their identity.
    assert_one(
        obj(json!({"n": {"type": "integer", "default": 9_007_199_254_740_993_u64}})),
        obj(json!({"n": {"type": "integer", "default": 9_007_199_254_740_992_u64}})),
        "v1: ^.spec.n: default: default value changed : 9007199254740993 -> 9007199254740992",
    );
}

#[test]
fn nullable_removed_is_found_and_nullable_added_passes() {
    let n = |v: bool| obj(json!({"x": {"type": "string", "nullable": v}}));
    assert_one(
        n(true),
        n(false),
        "v1: ^.spec.x: nullable: nullable removed : true -> false",
    );
    assert_safe(n(false), n(true));
}

#[test]
fn other_tightenings_are_found_and_their_loosenings_pass() {
    let s = |extra: Value| {
        let mut f = json!({"type": "array", "items": {"type": "integer"}});
        f.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        obj(json!({"f": f}))
    };
    assert_one(
        s(json!({})),
        s(json!({"uniqueItems": true})),
        "v1: ^.spec.f: uniqueItems: uniqueItems added : false -> true",
    );
    assert_safe(s(json!({"uniqueItems": true})), s(json!({})));
    assert_one(
        s(json!({})),
        s(json!({"x-kubernetes-list-type": "set"})),
        r#"v1: ^.spec.f: x-kubernetes-list-type: list type changed : "atomic" -> "set""#,
    );
    assert_safe(
        s(json!({"x-kubernetes-list-type": "set"})),
        s(json!({"x-kubernetes-list-type": "atomic"})),
    );
    let m = |v: Value| obj(json!({"n": {"type": "integer", "multipleOf": v}}));
    assert_one(
        m(json!(4)),
        m(json!(3)),
        "v1: ^.spec.n: multipleOf: multipleOf changed : 4 -> 3",
    );
    assert_safe(m(json!(4)), m(json!(2)));
    let f = |v: Option<&str>| {
        obj(
            json!({"t": v.map_or(json!({"type": "string"}), |v| json!({"type": "string", "format": v}))}),
        )
    };
    assert_one(
        f(None),
        f(Some("date-time")),
        r#"v1: ^.spec.t: format: format added : "" -> "date-time""#,
    );
    assert_safe(f(Some("date-time")), f(None));
}

#[test]
fn preserve_unknown_fields_removed_is_found_and_added_passes() {
    let p = |v: bool| {
        obj(json!({"raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": v}}))
    };
    assert_one(
        p(true),
        p(false),
        "v1: ^.spec.raw: x-kubernetes-preserve-unknown-fields: unknown fields are no longer preserved (they will be pruned) : true -> false",
    );
    assert_safe(p(false), p(true));
}

#[test]
fn composition_tightening_is_found_and_loosening_passes() {
    let with = |k: &str, v: Value| {
        let mut s =
            obj(json!({"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}));
        if !v.is_null() {
            s[k] = v;
        }
        s
    };
    let ra = json!({"required": ["a"]});
    let rb = json!({"required": ["b"]});
    let rc = json!({"required": ["c"]});
    // allOf: added constraint blocks, dropped constraint passes.
    assert_one(
        with("allOf", Value::Null),
        with("allOf", json!([ra])),
        "v1: ^.spec: allOf: allOf constraint added : 1 schema(s)",
    );
    assert_one(
        with("allOf", json!([ra])),
        with("allOf", json!([ra, rb])),
        "v1: ^.spec: allOf: allOf schemas added : 1",
    );
    assert_safe(with("allOf", json!([ra, rb])), with("allOf", json!([ra])));
    // anyOf: dropping an alternative blocks, adding one passes.
    assert_one(
        with("anyOf", json!([ra, rb])),
        with("anyOf", json!([ra])),
        "v1: ^.spec: anyOf: allowed anyOf schemas removed : 1",
    );
    assert_safe(with("anyOf", json!([ra])), with("anyOf", json!([ra, rb])));
    assert_safe(with("anyOf", json!([ra])), with("anyOf", Value::Null));
    // oneOf: added where none, alternative dropped, alternative added (objects may now match two).
    assert_one(
        with("oneOf", Value::Null),
        with("oneOf", json!([ra, rb])),
        "v1: ^.spec: oneOf: oneOf constraint added : 2 schema(s)",
    );
    assert_one(
        with("oneOf", json!([ra, rb])),
        with("oneOf", json!([ra])),
        "v1: ^.spec: oneOf: allowed oneOf schemas removed : 1",
    );
    assert_eq!(
        diff_spec(
            with("oneOf", json!([ra, rb])),
            with("oneOf", json!([ra, rb, rc]))
        ),
        vec![
            "v1: ^.spec: oneOf: oneOf schemas added : 1 (an existing object may now match more than one)"
        ]
    );
    assert_safe(with("oneOf", json!([ra, rb])), with("oneOf", Value::Null));
    // Same shape: branch by branch, documentation edits pass, tightening is located.
    let doc = json!({"required": ["a"], "description": "now documented"});
    assert_safe(
        with("oneOf", json!([ra, rb])),
        with("oneOf", json!([doc, rb])),
    );
    assert_one(
        with("anyOf", json!([ra, rb])),
        with("anyOf", json!([{"required": ["a", "c"]}, rb])),
        "v1: ^.spec.anyOf[0]: required: new required fields: [c]",
    );
}

#[test]
fn unmodelled_changes_fail_closed_as_unhandled() {
    let n = |v: Value| {
        let mut s = obj(json!({"a": {"type": "string"}}));
        if !v.is_null() {
            s["not"] = v;
        }
        s
    };
    assert_one(
        n(Value::Null),
        n(json!({"required": ["a"]})),
        "v1: ^.spec: unhandled: unhandled changes found (not <empty> -> <complex value>)",
    );
    // Unchanged `not` is no finding.
    assert_safe(n(json!({"required": ["a"]})), n(json!({"required": ["a"]})));
}

#[test]
fn cel_rules_added_or_changed_are_found_quoting_the_rule_and_removal_passes() {
    let c = |rules: Value| {
        obj(json!({"replicas": {"type": "integer", "x-kubernetes-validations": rules}}))
    };
    let r1 = json!({"rule": "self >= 0", "message": "must be positive"});
    let r2 = json!({"rule": "self <= 10"});
    assert_one(
        c(json!([r1])),
        c(json!([r1, r2])),
        r#"v1: ^.spec.replicas: x-kubernetes-validations: rule added : "self <= 10""#,
    );
    assert_one(
        c(json!([r1])),
        c(json!([{"rule": "self >= 1", "message": "must be positive"}])),
        r#"v1: ^.spec.replicas: x-kubernetes-validations: rule changed : "self >= 0" -> "self >= 1""#,
    );
    assert_safe(c(json!([r1, r2])), c(json!([r1])));
    // Message, reason and fieldPath are documentation.
    assert_safe(
        c(json!([r1])),
        c(json!([{"rule": "self >= 0", "message": "no negatives", "reason": "FieldValueInvalid"}])),
    );
    // A rule on a new field cannot reject existing objects.
    assert_safe(c(json!([r1])), {
        let mut s = c(json!([r1]));
        s["properties"]["other"] =
            json!({"type": "string", "x-kubernetes-validations": [{"rule": "size(self) < 5"}]});
        s
    });
}

#[test]
fn documentation_and_display_hints_never_block() {
    let old = obj(
        json!({"m": {"type": "object", "additionalProperties": {"type": "string"},
                               "x-kubernetes-map-type": "granular"}}),
    );
    let new = json!({"type": "object", "description": "the spec", "title": "Spec",
        "properties": {"m": {"type": "object", "description": "labels", "example": {"a": "b"},
            "externalDocs": {"url": "https://example.com"},
            "additionalProperties": {"type": "string", "description": "a value"},
            "x-kubernetes-map-type": "atomic"}}});
    assert_safe(old, new);
}

// ---------------------------------------------------------------- structure

#[test]
fn nested_arrays_of_objects_maps_and_preserved_subtrees_are_walked() {
    let old = obj(json!({
        "list": {"type": "array", "items": {"type": "array", "items": obj(json!({"mode": {"type": "string", "enum": ["A", "B"]}}))}},
        "map": {"type": "object", "additionalProperties": obj(json!({"n": {"type": "integer"}}))},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"k": {"type": "string"}}}
    }));
    let new = obj(json!({
        "list": {"type": "array", "items": {"type": "array", "items": obj(json!({"mode": {"type": "string", "enum": ["A"]}}))}},
        "map": {"type": "object", "additionalProperties": obj(json!({"n": {"type": "string"}}))},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"k": {"type": "string", "maxLength": 3}}}
    }));
    assert_eq!(
        diff_spec(old.clone(), new),
        vec![
            r#"v1: ^.spec.list[*][*].mode: enum: allowed enum values removed : ["B"]"#,
            r#"v1: ^.spec.map{*}.n: type: type changed : "integer" -> "string""#,
            "v1: ^.spec.raw.k: maxLength: maximum constraint added when there was none previously : 3",
        ]
    );
    // Constraining a map that accepted anything: the value schema is compared with `{}`.
    assert_one(
        json!({"type": "object", "additionalProperties": true}),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        r#"v1: ^.spec{*}: type: type changed : "" -> "string""#,
    );
    // Property names that are not identifiers are quoted in the path.
    assert_one(
        obj(json!({"a.b/c": {"type": "string"}})),
        obj(json!({})),
        r#"existingFieldRemoval: removed field : v1.^.spec["a.b/c"]"#,
    );
}

#[test]
fn versions_neither_served_nor_stored_are_not_compared() {
    let mk = |v1alpha1_served: bool, spec: Value| {
        crd_versions(json!([
            version("v1alpha1", v1alpha1_served, false, spec),
            version("v1", true, true, obj(json!({}))),
        ]))
    };
    let narrowed = obj(json!({"a": {"type": "integer"}}));
    let wide = obj(json!({"a": {"type": "string"}}));
    // Not served in the new CRD, not stored: ignored.
    assert!(check(&mk(true, wide.clone()), &mk(false, narrowed.clone())).is_empty());
    // Served: compared.
    let f = check(&mk(true, wide.clone()), &mk(true, narrowed.clone()));
    assert!(
        f.iter()
            .any(|f| f.location == Location::Version("v1alpha1".into()) && f.rule == Rule::Type),
        "{f:?}"
    );
    // Not served but stored: compared.
    let mut live = mk(true, wide);
    live.status =
        Some(serde_json::from_value(json!({"storedVersions": ["v1alpha1", "v1"]})).unwrap());
    let f = check(&live, &mk(false, narrowed));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].to_string(),
        r#"v1alpha1: ^.spec.a: type: type changed : "string" -> "integer""#
    );
}

#[test]
fn served_versions_are_compared_pairwise_with_ratcheting_and_webhook_skip() {
    let two = |alpha: Value, v1: Value| {
        crd_versions(json!([
            version("v1alpha1", true, false, alpha),
            version("v1", true, true, v1)
        ]))
    };
    let full = obj(json!({"a": {"type": "string"}, "b": {"type": "string"}}));
    let small = obj(json!({"a": {"type": "string", "enum": ["x"]}}));
    // The old CRD had identical versions; the new v1 drops b and narrows a while v1alpha1 keeps them.
    let old = two(full.clone(), full.clone());
    let new = two(full.clone(), small.clone());
    let f: Vec<String> = check(&old, &new).iter().map(ToString::to_string).collect();
    assert_eq!(
        f,
        vec![
            "existingFieldRemoval: removed field : v1.^.spec.b",
            r#"v1: ^.spec.a: enum: enum constraint added when there was none previously : ["x"]"#,
            r#"v1alpha1 -> v1: ^.spec.a: enum: enum constraint added when there was none previously : ["x"]"#,
            "v1alpha1 -> v1: ^.spec.b: existingFieldRemoval: removed field",
        ]
    );
    // Ratchet: the same difference between the pair already existed in the old CRD.
    let old = two(full.clone(), small.clone());
    assert!(check(&old, &two(full.clone(), small.clone())).is_empty());
    // ... but a new difference on top of it is still reported.
    let smaller = obj(json!({"a": {"type": "string", "enum": ["x"], "maxLength": 1}}));
    let f: Vec<String> = check(&old, &two(full.clone(), smaller.clone()))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        f,
        vec![
            "v1: ^.spec.a: maxLength: maximum constraint added when there was none previously : 1",
            "v1alpha1 -> v1: ^.spec.a: maxLength: maximum constraint added when there was none previously : 1",
        ]
    );
    // Webhook conversion: no served-version comparison.
    let mut hooked = two(full.clone(), small.clone());
    hooked.spec.conversion = Some(serde_json::from_value(json!({"strategy": "Webhook"})).unwrap());
    let f = check(&two(full.clone(), full), &hooked);
    assert!(
        f.iter()
            .all(|f| !matches!(f.location, Location::ServedPair { .. })),
        "{f:?}"
    );
    assert!(!f.is_empty());
}

#[test]
fn kube_version_priority_orders_alpha_beta_ga() {
    let mut v = vec![
        "v1",
        "v10",
        "v2beta1",
        "v1alpha1",
        "foo",
        "v1beta2",
        "v1beta1",
        "v11alpha2",
        "bar",
    ];
    v.sort_by_key(|n| version_priority(n));
    assert_eq!(
        v,
        vec![
            "foo",
            "bar",
            "v1alpha1",
            "v11alpha2",
            "v1beta1",
            "v1beta2",
            "v2beta1",
            "v1",
            "v10"
        ]
    );
}

// ---------------------------------------------------------------- worked examples (docs/concepts/crd-upgrade-safety.md §6.8)

const SEED_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.13.0
  name: example.test.example.com
spec:
  group: test.example.com
  names:
    kind: Sample
    listKind: SampleList
    plural: samples
    singular: sample
  scope: Namespaced
  versions:
  - name: v1alpha1
    schema:
      openAPIV3Schema:
        properties:
          apiVersion:
            type: string
          kind:
            type: string
          metadata:
            type: object
          spec:
            type: object
          status:
            type: object
          pollInterval:
            type: string
        type: object
    served: true
    storage: true
    subresources:
      status: {}
"#;

fn seed_pair(
    edit: impl FnOnce(&mut String),
) -> (CustomResourceDefinition, CustomResourceDefinition, String) {
    let mut new_text = SEED_CRD.to_owned();
    edit(&mut new_text);
    let old = parse_crd(SEED_CRD).unwrap();
    let new = parse_crd(&new_text).unwrap();
    let f = check(&old, &new);
    let msg = message("example.test.example.com", &f);
    (old, new, msg)
}

#[test]
fn worked_example_scope_change() {
    let (_, _, msg) = seed_pair(|t| *t = t.replace("scope: Namespaced", "scope: Cluster"));
    // Seed: "NoScopeChange" validation failed: scope changed from "Namespaced" to "Cluster"
    assert_eq!(
        msg,
        r#"validating upgrade for CRD "example.test.example.com": scope: scope changed : "Namespaced" -> "Cluster""#
    );
}

#[test]
fn worked_example_stored_version_removed() {
    let (_, _, msg) = seed_pair(|t| *t = t.replace("- name: v1alpha1", "- name: v1alpha2"));
    // Seed: "NoStoredVersionRemoved" validation failed: stored version "v1alpha1" removed
    assert_eq!(
        msg,
        r#"validating upgrade for CRD "example.test.example.com": storedVersionRemoval: stored versions removed : [v1alpha1]"#
    );
}

#[test]
fn worked_example_existing_field_removed() {
    let (_, _, msg) =
        seed_pair(|t| *t = t.replace("          pollInterval:\n            type: string\n", ""));
    // Seed: "NoExistingFieldRemoved" validation failed: crd/test.example.com version/v1alpha1
    // field/^.spec.pollInterval may not be removed. (In the seed's own schema pollInterval
    // sits at the root, beside spec, so the path is ^.pollInterval.)
    assert_eq!(
        msg,
        r#"validating upgrade for CRD "example.test.example.com": existingFieldRemoval: removed field : v1alpha1.^.pollInterval"#
    );
}

#[test]
fn worked_example_required_field_added() {
    let (_, _, msg) = seed_pair(|t| {
        *t = t.replace(
            "        type: object\n    served",
            "        type: object\n        required:\n        - pollInterval\n    served",
        )
    });
    // Seed: "ChangeValidator" validation failed: version "v1alpha1", field "^": new required fields added: [pollInterval]
    assert_eq!(
        msg,
        r#"validating upgrade for CRD "example.test.example.com": v1alpha1: ^: required: new required fields: [pollInterval]"#
    );
}

// ---------------------------------------------------------------- messages and verdicts

#[test]
fn message_is_sorted_deterministically_and_names_everything() {
    let old = obj(
        json!({"a": {"type": "string"}, "b": {"type": "integer", "maximum": 5}, "c": {"type": "string"}}),
    );
    let new = obj(json!({"a": {"type": "integer"}, "b": {"type": "integer", "maximum": 4}}));
    let mut f = check(&crd_spec(old), &crd_spec(new));
    let msg = message(NAME, &f);
    f.reverse();
    assert_eq!(message(NAME, &f), msg);
    assert_eq!(
        msg,
        format!(
            "validating upgrade for CRD \"{NAME}\": existingFieldRemoval: removed field : v1.^.spec.c; \
             v1: ^.spec.a: type: type changed : \"string\" -> \"integer\"; v1: ^.spec.b: maximum: maximum decreased : 5 -> 4"
        )
    );
    assert_eq!(
        format!("{:#}", f[0]),
        format!("CRD \"{NAME}\": v1: ^.spec.b: maximum: maximum decreased : 5 -> 4")
    );
    assert_eq!(f[0].crd, NAME);
}

#[test]
fn message_is_capped_at_32_kib_with_a_count_of_cut_findings() {
    let old = obj((0..3000)
        .map(|i| (format!("field{i:04}"), json!({"type": "string"})))
        .collect::<serde_json::Map<_, _>>()
        .into());
    let f = check(&crd_spec(old), &crd_spec(obj(json!({}))));
    assert_eq!(f.len(), 3000);
    let msg = message(NAME, &f);
    assert!(msg.len() <= MESSAGE_LIMIT, "{}", msg.len());
    let shown = msg.matches("existingFieldRemoval").count();
    assert!(shown > 100 && shown < 3000);
    assert!(
        msg.ends_with(&format!(
            "; … and {} more findings (truncated)",
            3000 - shown
        )),
        "{}",
        &msg[msg.len() - 80..]
    );
    // One huge finding (an enum of 50,000 values) is cut too.
    let e = |n: usize| {
        obj(
            json!({"m": {"type": "string", "enum": (0..n).map(|i| format!("value-{i}")).collect::<Vec<_>>()}}),
        )
    };
    let f = check(&crd_spec(e(50_000)), &crd_spec(e(1)));
    let msg = message(NAME, &f);
    assert!(msg.len() < 5000 && msg.contains("…(cut)"), "{}", msg.len());
}

#[test]
fn verdict_follows_enforcement() {
    let old = crd_spec(obj(json!({"a": {"type": "string"}})));
    let new = crd_spec(obj(json!({})));
    let f = check(&old, &new);
    let expected = format!(
        "validating upgrade for CRD \"{NAME}\": existingFieldRemoval: removed field : v1.^.spec.a"
    );
    assert_eq!(
        verdict(Enforcement::Strict, NAME, &f),
        Verdict::Blocked(expected.clone())
    );
    assert_eq!(
        verdict(Enforcement::from_api(Some("None")), NAME, &f),
        Verdict::Warn(expected)
    );
    assert_eq!(
        verdict(Enforcement::from_api(Some("Strict")), NAME, &[]),
        Verdict::Safe
    );
    assert_eq!(Enforcement::from_api(None), Enforcement::Strict);
}

// ---------------------------------------------------------------- bad input

#[test]
fn bad_input_gives_clear_errors() {
    assert!(matches!(
        parse_crd("a: [unclosed"),
        Err(CrdInputError::Syntax(_))
    ));
    assert!(matches!(
        parse_crd("{\"a\": "),
        Err(CrdInputError::Syntax(_))
    ));
    assert!(matches!(parse_crd(""), Err(CrdInputError::Empty)));
    let e = parse_crd("apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: x.y.z}\n")
        .unwrap_err();
    assert!(
        e.to_string().contains("v1beta1") && e.to_string().contains("x.y.z"),
        "{e}"
    );
    let e = parse_crd("apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
    assert!(matches!(e, CrdInputError::NotCrd { .. }), "{e}");
    let two = format!("{SEED_CRD}\n---\n{SEED_CRD}");
    assert!(matches!(parse_crd(&two), Err(CrdInputError::Several(2))));
    let e = parse_crd("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a}\nspec: 5\n").unwrap_err();
    assert!(matches!(e, CrdInputError::Invalid { .. }), "{e}");
}

#[test]
fn depth_bombs_are_refused_without_panic() {
    let deep_yaml = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(matches!(
        parse_crd(&deep_yaml),
        Err(CrdInputError::TooDeep | CrdInputError::Syntax(_))
    ));
    let deep_json = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(parse_crd(&format!(" {deep_json}")).is_err());
    let mut nested = String::from("x: 1\n");
    for i in 0..300 {
        nested = format!(
            "k{i}:\n{}",
            nested
                .lines()
                .map(|l| format!("  {l}\n"))
                .collect::<String>()
        );
    }
    assert!(
        matches!(parse_crd(&nested), Err(CrdInputError::TooDeep)),
        "{:?}",
        parse_crd(&nested).err()
    );
}

/// A schema nested `levels` deep through `items`, with a changed leaf.
fn deep_schema(levels: usize, leaf: &str) -> JSONSchemaProps {
    let mut s = JSONSchemaProps {
        type_: Some(leaf.into()),
        ..Default::default()
    };
    for _ in 0..levels {
        s = JSONSchemaProps {
            type_: Some("array".into()),
            items: Some(JSONSchemaPropsOrArray::Schema(Box::new(s))),
            ..Default::default()
        };
    }
    s
}

#[test]
fn schema_deeper_than_the_limit_is_reported_not_walked() {
    let mk = |leaf: &str| {
        let mut c = crd_spec(json!({}));
        c.spec.versions[0]
            .schema
            .as_mut()
            .unwrap()
            .open_api_v3_schema = Some(deep_schema(200, leaf));
        c
    };
    let f = check(&mk("string"), &mk("integer"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].rule, Rule::Unhandled);
    assert!(f[0].detail.contains("deeper than 64"), "{}", f[0]);
    assert_eq!(f[0].path, format!("^{}", "[*]".repeat(MAX_DEPTH)));
    // Identical deep schemas are fine, and a change above the limit is found precisely.
    assert!(check(&mk("string"), &mk("string")).is_empty());
    let shallow = |leaf: &str| {
        let mut c = crd_spec(json!({}));
        c.spec.versions[0]
            .schema
            .as_mut()
            .unwrap()
            .open_api_v3_schema = Some(deep_schema(10, leaf));
        c
    };
    let f = check(&shallow("string"), &shallow("integer"));
    assert_eq!(
        f[0].to_string(),
        format!(
            "v1: ^{}: type: type changed : \"string\" -> \"integer\"",
            "[*]".repeat(10)
        )
    );
}

#[test]
fn ref_oddities_are_compared_not_followed() {
    let r =
        |target: &str| obj(json!({"self": {"$ref": target, "definitions": {"x": {"$ref": "#"}}}}));
    assert_safe(r("#"), r("#"));
    assert_one(
        r("#"),
        r("#/definitions/x"),
        r##"v1: ^.spec.self: unhandled: unhandled changes found ($ref "#" -> "#/definitions/x")"##,
    );
    let via_text = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b}\n\
        spec: {group: b, scope: Namespaced, names: {kind: A, plural: as}, versions: [{name: v1, served: true, storage: true,\
        schema: {openAPIV3Schema: {$ref: '#', type: object}}}]}\n";
    let c = parse_crd(via_text).unwrap();
    assert!(check(&c, &c).is_empty());
}

#[test]
fn ten_thousand_properties_are_checked_quickly() {
    let props = |n: usize, doc: &str| -> Value {
        (0..n)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "description": format!("{doc} {i}")}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let old = crd_spec(
        json!({"type": "object", "required": (0..10_000).map(|i| format!("p{i}")).collect::<Vec<_>>(), "properties": props(10_000, "old")}),
    );
    let new = crd_spec(
        json!({"type": "object", "required": (0..10_000).rev().map(|i| format!("p{i}")).collect::<Vec<_>>(), "properties": props(9_999, "new")}),
    );
    let t = std::time::Instant::now();
    let f = check(&old, &new);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        f.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["existingFieldRemoval: removed field : v1.^.spec.p9999"]
    );
}

// ---------------------------------------------------------------- real CRDs (shared fixtures)

fn fixture_crd(rel: &str) -> Option<CustomResourceDefinition> {
    let dir = crate::testenv::shared_dir("fixtures/bundles")?;
    let text = std::fs::read_to_string(dir.join(rel)).unwrap();
    Some(parse_crd(&text).unwrap())
}

fn fixture_pair(old: &str, new: &str) -> Option<Vec<String>> {
    let (old, new) = (fixture_crd(old)?, fixture_crd(new)?);
    Some(check(&old, &new).iter().map(ToString::to_string).collect())
}

#[test]
fn camel_karavan_3_18_5_to_3_20_0_is_unsafe_for_the_removed_field() {
    let Some(f) = fixture_pair(
        "camel-karavan-operator/3.18.5/manifests/karavans.camel.apache.org.crd.yml",
        "camel-karavan-operator/3.20.0/manifests/karavans.camel.apache.org.crd.yml",
    ) else {
        return;
    };
    assert_eq!(
        f,
        vec!["existingFieldRemoval: removed field : v1.^.spec.type"]
    );
}

#[test]
fn camel_karavan_3_20_0_to_3_20_1_is_safe() {
    let Some(f) = fixture_pair(
        "camel-karavan-operator/3.20.0/manifests/karavans.camel.apache.org.crd.yml",
        "camel-karavan-operator/3.20.1/manifests/karavans.camel.apache.org.crd.yml",
    ) else {
        return;
    };
    assert_eq!(f, Vec::<String>::new());
}

#[test]
fn limitador_0_3_0_to_0_4_0_is_safe() {
    let Some(f) = fixture_pair(
        "limitador-operator/0.3.0/manifests/limitador.kuadrant.io_limitadors.yaml",
        "limitador-operator/0.4.0/manifests/limitador.kuadrant.io_limitadors.yaml",
    ) else {
        return;
    };
    assert_eq!(f, Vec::<String>::new());
}

#[test]
fn cluster_manager_0_6_0_to_0_7_0_is_unsafe_for_the_removed_enum_value_only() {
    let Some(f) = fixture_pair(
        "cluster-manager/0.6.0/manifests/operator.open-cluster-management.io_clustermanagers.yaml",
        "cluster-manager/0.7.0/manifests/operator.open-cluster-management.io_clustermanagers.yaml",
    ) else {
        return;
    };
    assert_eq!(
        f,
        vec![r#"v1: ^.spec.deployOption.mode: enum: allowed enum values removed : ["Detached"]"#]
    );
}

/// Rewrites every `description` in a CRD document.
fn edit_descriptions(v: &mut Value) -> usize {
    let mut n = 0;
    match v {
        Value::Object(o) => {
            for (k, c) in o.iter_mut() {
                if k == "description" && c.is_string() {
                    *c = Value::String(format!("{} (reworded)", c.as_str().unwrap_or("")));
                    n += 1;
                } else {
                    n += edit_descriptions(c);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| n += edit_descriptions(c)),
        _ => {}
    }
    n
}

#[test]
fn description_only_edits_of_a_large_crd_pass() {
    let Some(old) =
        fixture_crd("sn-operator/0.19.7/manifests/pulsar.streamnative.io_pulsarbrokers.yaml")
    else {
        return;
    };
    let mut doc = serde_json::to_value(&old).unwrap();
    let edited = edit_descriptions(&mut doc);
    assert!(edited > 1000, "{edited}");
    let new: CustomResourceDefinition = serde_json::from_value(doc).unwrap();
    assert_ne!(old, new);
    assert!(check(&old, &new).is_empty());
}

#[test]
fn v1beta1_crd_from_fixtures_is_refused_clearly() {
    let Some(dir) = crate::testenv::shared_dir("fixtures/bundles/cockroachdb") else {
        return;
    };
    let mut found = 0;
    for entry in std::fs::read_dir(dir.join("2.1.1/manifests")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("kind: CustomResourceDefinition") {
            found += 1;
            let e = parse_crd(&text).unwrap_err();
            assert!(
                matches!(e, CrdInputError::V1beta1 { .. }),
                "{}: {e}",
                path.display()
            );
        }
    }
    assert!(found > 0);
}

#[test]
fn object_default_spelling_out_field_defaults_passes_but_a_new_value_does_not() {
    let fields = json!({"deployOption": {"type": "object", "default": {"mode": "Default"},
        "properties": {"mode": {"type": "string", "default": "Default"}}}});
    let old = obj(fields.clone());
    let mut same = obj(fields.clone());
    same["default"] = json!({"deployOption": {"mode": "Default"}});
    assert_safe(old.clone(), same);
    let mut other = obj(fields);
    other["default"] = json!({"deployOption": {"mode": "Hosted"}});
    assert_one(
        old,
        other,
        r#"v1: ^.spec: default: default added when there was none previously : {"deployOption":{"mode":"Hosted"}}"#,
    );
}

#[test]
fn keyed_list_map_on_fields_items_have_passes_other_list_changes_do_not() {
    let list = |item_required: Value, extra: Value| {
        let mut l = json!({"type": "array", "items": {"type": "object", "required": item_required,
            "properties": {"type": {"type": "string"}, "name": {"type": "string"}}}});
        l.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        obj(json!({"conditions": l}))
    };
    let map_by =
        |k: &str| json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [k]});
    assert_safe(
        list(json!(["type"]), json!({})),
        list(json!(["type"]), map_by("type")),
    );
    assert_one(
        list(json!([]), json!({})),
        list(json!([]), map_by("type")),
        r#"v1: ^.spec.conditions: x-kubernetes-list-type: list type changed : "atomic" -> "map""#,
    );
    assert_one(
        list(json!(["type", "name"]), map_by("type")),
        list(json!(["type", "name"]), map_by("name")),
        "v1: ^.spec.conditions: x-kubernetes-list-map-keys: list map keys changed : [type] -> [name]",
    );
}

#[test]
fn new_property_in_a_preserved_or_map_object_is_compared_with_what_was_accepted() {
    let preserved = |props: Value| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": props});
    assert_one(
        preserved(json!({})),
        preserved(json!({"replicas": {"type": "integer"}})),
        r#"v1: ^.spec.replicas: type: type changed : "" -> "integer""#,
    );
    // Untyped new property with only documentation: accepts what was accepted.
    assert_safe(
        preserved(json!({})),
        preserved(
            json!({"free": {"x-kubernetes-preserve-unknown-fields": true, "description": "anything"}}),
        ),
    );
    // In an object without a catch-all the key could not hold data: a new field is fine.
    assert_safe(
        obj(json!({})),
        obj(json!({"replicas": {"type": "integer", "minimum": 1}})),
    );
}

#[test]
fn every_v1_fixture_crd_is_safe_against_itself() {
    let Some(dir) = crate::testenv::shared_dir("fixtures/bundles") else {
        return;
    };
    let mut checked = 0;
    for package in std::fs::read_dir(&dir).unwrap() {
        for version in std::fs::read_dir(package.unwrap().path()).unwrap() {
            let manifests = version.unwrap().path().join("manifests");
            for file in std::fs::read_dir(&manifests).unwrap() {
                let path = file.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap();
                if !text.contains("kind: CustomResourceDefinition")
                    || text.contains("apiextensions.k8s.io/v1beta1")
                {
                    continue;
                }
                let crd = parse_crd(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let f = check(&crd, &crd);
                assert!(f.is_empty(), "{}: {f:?}", path.display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({"type": "string"})),
            (0i64..10).prop_map(|n| json!({"type": "integer", "minimum": n, "maximum": n + 5})),
            prop::collection::vec("[a-c]", 1..4).prop_map(|v| json!({"type": "string", "enum": v})),
            Just(json!({"type": "string", "default": "x", "pattern": "^x"})),
            Just(
                json!({"x-kubernetes-int-or-string": true, "x-kubernetes-validations": [{"rule": "true"}]})
            ),
        ];
        leaf.prop_recursive(5, 48, 4, |inner| {
            prop_oneof![
                (
                    prop::collection::btree_map("[a-e]", inner.clone(), 0..4),
                    prop::collection::vec("[a-e]", 0..2)
                )
                    .prop_map(
                        |(m, req)| json!({"type": "object", "properties": m, "required": req})
                    ),
                inner
                    .clone()
                    .prop_map(|i| json!({"type": "array", "items": i})),
                inner.prop_map(|i| json!({"type": "object", "additionalProperties": i})),
            ]
        })
    }

    fn describe_everything(v: &mut Value) {
        if let Value::Object(o) = v {
            if o.contains_key("type") || o.contains_key("x-kubernetes-int-or-string") {
                o.insert("description".into(), json!("documented"));
            }
            o.values_mut().for_each(describe_everything);
        }
    }

    proptest! {
        #[test]
        fn a_crd_is_safe_against_itself_and_its_documented_copy(s in schema()) {
            let old = crd_spec(s.clone());
            prop_assert!(check(&old, &old.clone()).is_empty());
            let mut documented = s;
            describe_everything(&mut documented);
            let f = check(&old, &crd_spec(documented));
            prop_assert!(f.is_empty(), "{:?}", f);
        }

        #[test]
        fn messages_never_exceed_the_limit(n in 0usize..400, len in 1usize..2000) {
            let f: Vec<Finding> = (0..n)
                .map(|i| Finding {
                    crd: NAME.into(),
                    location: Location::Version("v1".into()),
                    path: format!("^.spec.f{i}"),
                    rule: Rule::Pattern,
                    detail: "é".repeat(len),
                })
                .collect();
            let m = message(NAME, &f);
            prop_assert!(m.len() <= MESSAGE_LIMIT);
            prop_assert!(m.starts_with("validating upgrade for CRD"));
        }
    }
}
