//! Comparison of two OpenAPI v3 schemas of a CRD version: walks the old and the new
//! schema side by side and reports every change that can make an object that was valid
//! before invalid (or lose its data) after. Pure; no knowledge of versions or CRD names.
//!
//! Rules of thumb, in the order the walker applies them at each node:
//! - equal subtrees are skipped at once (this is what keeps large CRDs cheap);
//! - tightening (type narrowed, enum added / values removed, bounds raised or added,
//!   pattern / format added or changed, new required fields, default changes, nullable
//!   removed, `*Of` tightening, CEL rules added or changed, unknown fields now pruned) is
//!   reported; loosening is not;
//! - documentation (`description`, `title`, `example`, `externalDocs`) and merge hints
//!   (`x-kubernetes-map-type`) are ignored;
//! - anything else that differs is reported as `unhandled` (fail-closed), last per node;
//! - a missing sub-schema (`items`, `additionalProperties`) is treated as the empty
//!   schema `{}`, which accepts anything: comparing against it yields exactly the
//!   tightening (old `{}` → new constraints) or the fields lost (old fields → new `{}`);
//! - nesting deeper than [`MAX_DEPTH`] schema levels is not compared and is reported
//!   (fail-closed), so hostile schemas cost bounded time and stack.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSON, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ValidationRule,
};
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;

use super::Rule;

/// Deepest schema nesting (properties, items, map values, `*Of` branches) that is compared.
pub const MAX_DEPTH: usize = 64;

/// One problem found between two schemas, before it is placed in a CRD version context.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RawFinding {
    pub path: String,
    pub rule: Rule,
    pub detail: String,
}

/// Compares `old` with `new` starting at the root path `^`.
pub(crate) fn diff(old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<RawFinding> {
    let mut out = Vec::new();
    let mut path = String::from("^");
    walk(old, new, &mut path, 0, &mut out);
    out
}

fn empty() -> &'static JSONSchemaProps {
    static EMPTY: std::sync::OnceLock<JSONSchemaProps> = std::sync::OnceLock::new();
    EMPTY.get_or_init(JSONSchemaProps::default)
}

/// Appends a path segment for property `name`: `.name`, or `["a.b"]` when the name is
/// not a plain identifier.
fn push_property(path: &mut String, name: &str) {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$' || c == '@');
    if plain {
        path.push('.');
        path.push_str(name);
    } else {
        path.push('[');
        path.push_str(&serde_json::Value::String(name.to_owned()).to_string());
        path.push(']');
    }
}

fn json(v: &JSON) -> String {
    v.0.to_string()
}

/// `v` with every whole-number float written as an integer (`1.0` → `1`, `3e2` → `300`),
/// recursively. The API server stores `default` and `enum` values that way (Go decodes
/// them with integer conversion), so the live copy of a CRD written with `default: 1.0`
/// reads back as `1`; comparing canonical forms keeps that from looking like a change.
fn canonical(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.is_finite() && f.fract() == 0.0 => {
                // 2^63 and 2^64 as f64: whole floats in these ranges convert exactly.
                if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
                    Value::from(f as i64)
                } else if (0.0..1.844_674_407_370_955_2e19).contains(&f) {
                    Value::from(f as u64)
                } else {
                    v.clone()
                }
            }
            _ => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        _ => v.clone(),
    }
}

/// Compares two JSON values as the API server would store them (see [`canonical`]).
fn same_json(a: &JSON, b: &JSON) -> bool {
    a == b || canonical(&a.0) == canonical(&b.0)
}

fn json_list<'a>(values: impl IntoIterator<Item = &'a JSON>) -> String {
    let mut s = String::from("[");
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&v.0.to_string());
    }
    s.push(']');
    s
}

fn quoted(v: Option<&str>) -> String {
    serde_json::Value::String(v.unwrap_or("").to_owned()).to_string()
}

/// Numbers print as integers when they are whole (`3`, not `3.0`).
fn num(v: f64) -> String {
    format!("{v}")
}

struct Node<'p> {
    path: &'p str,
    out: Vec<RawFinding>,
    unhandled: Vec<String>,
}

impl Node<'_> {
    fn push(&mut self, rule: Rule, detail: String) {
        self.out.push(RawFinding {
            path: self.path.to_owned(),
            rule,
            detail,
        });
    }

    fn unhandled(&mut self, field: &str, before: String, after: String) {
        let show = |s: String| {
            if s.is_empty() {
                "<empty>".to_owned()
            } else {
                s
            }
        };
        self.unhandled
            .push(format!("{field} {} -> {}", show(before), show(after)));
    }
}

fn walk(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    path: &mut String,
    depth: usize,
    out: &mut Vec<RawFinding>,
) {
    if old == new {
        return;
    }
    if depth >= MAX_DEPTH {
        out.push(RawFinding {
            path: path.clone(),
            rule: Rule::Unhandled,
            detail: format!(
                "schema nested deeper than {MAX_DEPTH} levels differs here; not compared (fail-closed)"
            ),
        });
        return;
    }
    // Exhaustive on purpose: a field added to JSONSchemaProps breaks the build here
    // instead of being silently ignored.
    let JSONSchemaProps {
        ref_path,
        schema,
        additional_items,
        additional_properties,
        all_of,
        any_of,
        default,
        definitions,
        dependencies,
        description: _,
        enum_,
        example: _,
        exclusive_maximum,
        exclusive_minimum,
        external_docs: _,
        format,
        id,
        items,
        max_items,
        max_length,
        max_properties,
        maximum,
        min_items,
        min_length,
        min_properties,
        minimum,
        multiple_of,
        not,
        nullable,
        one_of,
        pattern,
        pattern_properties,
        properties,
        required,
        title: _,
        type_: _,
        unique_items,
        x_kubernetes_embedded_resource,
        x_kubernetes_int_or_string: _,
        x_kubernetes_list_map_keys: _,
        x_kubernetes_list_type: _,
        x_kubernetes_map_type: _,
        x_kubernetes_preserve_unknown_fields,
        x_kubernetes_validations,
    } = old;

    let here = path.clone();
    let mut node = Node {
        path: &here,
        out: Vec::new(),
        unhandled: Vec::new(),
    };

    check_type(old, new, &mut node);
    check_enum(enum_.as_deref(), new.enum_.as_deref(), &mut node);
    check_required(required.as_deref(), new, &mut node);
    check_default(default.as_ref(), new, &mut node);

    max_rule(
        Rule::Maximum,
        maximum.map(num),
        new.maximum.map(num),
        *maximum,
        new.maximum,
        &mut node,
    );
    count_rule(
        max_rule,
        Rule::MaxItems,
        *max_items,
        new.max_items,
        &mut node,
    );
    count_rule(
        max_rule,
        Rule::MaxLength,
        *max_length,
        new.max_length,
        &mut node,
    );
    count_rule(
        max_rule,
        Rule::MaxProperties,
        *max_properties,
        new.max_properties,
        &mut node,
    );
    min_rule(
        Rule::Minimum,
        minimum.map(num),
        new.minimum.map(num),
        *minimum,
        new.minimum,
        &mut node,
    );
    count_rule(
        min_rule,
        Rule::MinItems,
        *min_items,
        new.min_items,
        &mut node,
    );
    count_rule(
        min_rule,
        Rule::MinLength,
        *min_length,
        new.min_length,
        &mut node,
    );
    count_rule(
        min_rule,
        Rule::MinProperties,
        *min_properties,
        new.min_properties,
        &mut node,
    );

    flag_turned_on(
        Rule::ExclusiveMaximum,
        *exclusive_maximum,
        new.exclusive_maximum,
        "exclusiveMaximum added",
        &mut node,
    );
    flag_turned_on(
        Rule::ExclusiveMinimum,
        *exclusive_minimum,
        new.exclusive_minimum,
        "exclusiveMinimum added",
        &mut node,
    );
    flag_turned_on(
        Rule::UniqueItems,
        *unique_items,
        new.unique_items,
        "uniqueItems added",
        &mut node,
    );
    check_multiple_of(*multiple_of, new.multiple_of, &mut node);
    check_pattern(pattern.as_deref(), new.pattern.as_deref(), &mut node);
    check_format(format.as_deref(), new.format.as_deref(), &mut node);
    if nullable.unwrap_or(false) && !new.nullable.unwrap_or(false) {
        node.push(
            Rule::Nullable,
            "nullable removed : true -> false".to_owned(),
        );
    }
    if x_kubernetes_preserve_unknown_fields.unwrap_or(false)
        && !new.x_kubernetes_preserve_unknown_fields.unwrap_or(false)
    {
        node.push(
            Rule::PreserveUnknownFields,
            "unknown fields are no longer preserved (they will be pruned) : true -> false"
                .to_owned(),
        );
    }
    if x_kubernetes_embedded_resource.unwrap_or(false)
        != new.x_kubernetes_embedded_resource.unwrap_or(false)
    {
        node.push(
            Rule::EmbeddedResource,
            format!(
                "embedded resource changed : {} -> {}",
                x_kubernetes_embedded_resource.unwrap_or(false),
                new.x_kubernetes_embedded_resource.unwrap_or(false)
            ),
        );
    }
    check_list_type(old, new, &mut node);
    check_cel(
        x_kubernetes_validations.as_deref(),
        new.x_kubernetes_validations.as_deref(),
        &mut node,
    );

    // Fields that structural schemas forbid or that this check does not model: any
    // difference is reported, never ignored.
    if ref_path != &new.ref_path {
        node.unhandled(
            "$ref",
            quoted(ref_path.as_deref()),
            quoted(new.ref_path.as_deref()),
        );
    }
    if schema != &new.schema {
        node.unhandled(
            "$schema",
            quoted(schema.as_deref()),
            quoted(new.schema.as_deref()),
        );
    }
    if id != &new.id {
        node.unhandled("id", quoted(id.as_deref()), quoted(new.id.as_deref()));
    }
    if additional_items != &new.additional_items {
        node.unhandled(
            "additionalItems",
            complex(additional_items.is_some()),
            complex(new.additional_items.is_some()),
        );
    }
    if definitions != &new.definitions {
        node.unhandled(
            "definitions",
            complex(definitions.is_some()),
            complex(new.definitions.is_some()),
        );
    }
    if dependencies != &new.dependencies {
        node.unhandled(
            "dependencies",
            complex(dependencies.is_some()),
            complex(new.dependencies.is_some()),
        );
    }
    if pattern_properties != &new.pattern_properties {
        node.unhandled(
            "patternProperties",
            complex(pattern_properties.is_some()),
            complex(new.pattern_properties.is_some()),
        );
    }
    if not != &new.not {
        node.unhandled("not", complex(not.is_some()), complex(new.not.is_some()));
    }

    // Composition keywords.
    check_of(
        Rule::AllOf,
        all_of.as_deref(),
        new.all_of.as_deref(),
        path,
        depth,
        &mut node,
    );
    check_of(
        Rule::AnyOf,
        any_of.as_deref(),
        new.any_of.as_deref(),
        path,
        depth,
        &mut node,
    );
    check_of(
        Rule::OneOf,
        one_of.as_deref(),
        new.one_of.as_deref(),
        path,
        depth,
        &mut node,
    );

    // Children: properties, items, additionalProperties.
    let new_preserves = new.x_kubernetes_preserve_unknown_fields.unwrap_or(false);
    if let Some(old_props) = properties {
        for (name, old_child) in old_props {
            let len = path.len();
            push_property(path, name);
            match new.properties.as_ref().and_then(|p| p.get(name)) {
                Some(new_child) => walk(old_child, new_child, path, depth + 1, &mut node.out),
                // Kept as unknown field, not pruned, not validated: nothing can break.
                None if new_preserves => {}
                None => node.out.push(RawFinding {
                    path: path.clone(),
                    rule: Rule::ExistingFieldRemoval,
                    detail: "removed field".to_owned(),
                }),
            }
            path.truncate(len);
        }
    }
    // A new property of an object that used to accept any key (unknown fields preserved,
    // or a map) now validates data that may already be stored under that key.
    let catch_all = if x_kubernetes_preserve_unknown_fields.unwrap_or(false) {
        Some(empty())
    } else {
        match additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
            Some(JSONSchemaPropsOrBool::Bool(true)) => Some(empty()),
            _ => None,
        }
    };
    if let (Some(catch_all), Some(new_props)) = (catch_all, &new.properties) {
        for (name, new_child) in new_props {
            if properties.as_ref().is_some_and(|p| p.contains_key(name)) {
                continue;
            }
            let len = path.len();
            push_property(path, name);
            walk(catch_all, new_child, path, depth + 1, &mut node.out);
            path.truncate(len);
        }
    }

    match (items, &new.items) {
        (None, None) => {}
        (Some(JSONSchemaPropsOrArray::Schemas(a)), Some(JSONSchemaPropsOrArray::Schemas(b)))
            if a.len() == b.len() =>
        {
            for (i, (a, b)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                walk(a, b, path, depth + 1, &mut node.out);
                path.truncate(len);
            }
        }
        (Some(JSONSchemaPropsOrArray::Schemas(_)), _)
        | (_, Some(JSONSchemaPropsOrArray::Schemas(_))) => {
            node.unhandled(
                "items",
                "<complex value>".to_owned(),
                "<complex value>".to_owned(),
            );
        }
        (a, b) => {
            let a = match a {
                Some(JSONSchemaPropsOrArray::Schema(s)) => s.as_ref(),
                _ => empty(),
            };
            let b = match b {
                Some(JSONSchemaPropsOrArray::Schema(s)) => s.as_ref(),
                _ => empty(),
            };
            let len = path.len();
            path.push_str("[*]");
            walk(a, b, path, depth + 1, &mut node.out);
            path.truncate(len);
        }
    }

    match (additional_properties, &new.additional_properties) {
        (a, b) if a == b => {}
        (_, Some(JSONSchemaPropsOrBool::Bool(false))) => {
            node.unhandled(
                "additionalProperties",
                complex(additional_properties.is_some()),
                "false".to_owned(),
            );
        }
        (Some(JSONSchemaPropsOrBool::Bool(false)), _) => {} // was "nothing allowed": anything is looser
        (a, b) => {
            let a = match a {
                Some(JSONSchemaPropsOrBool::Schema(s)) => s.as_ref(),
                _ => empty(),
            };
            let b = match b {
                Some(JSONSchemaPropsOrBool::Schema(s)) => s.as_ref(),
                _ => empty(),
            };
            let len = path.len();
            path.push_str("{*}");
            walk(a, b, path, depth + 1, &mut node.out);
            path.truncate(len);
        }
    }

    if !node.unhandled.is_empty() {
        let detail = format!("unhandled changes found ({})", node.unhandled.join("; "));
        node.push(Rule::Unhandled, detail);
    }
    out.append(&mut node.out);
}

fn complex(present: bool) -> String {
    if present {
        "<complex value>".to_owned()
    } else {
        String::new()
    }
}

/// The set of JSON types a node accepts; `None` means any type.
fn accepted_types(s: &JSONSchemaProps) -> Option<BTreeSet<&str>> {
    if s.x_kubernetes_int_or_string.unwrap_or(false) {
        return Some(["integer", "string"].into_iter().collect());
    }
    s.type_
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(|t| std::iter::once(t).collect())
}

fn type_name(s: &JSONSchemaProps) -> String {
    if s.x_kubernetes_int_or_string.unwrap_or(false) {
        "int-or-string".to_owned()
    } else {
        s.type_.clone().unwrap_or_default()
    }
}

fn check_type(old: &JSONSchemaProps, new: &JSONSchemaProps, node: &mut Node<'_>) {
    let narrowed = match (accepted_types(old), accepted_types(new)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(a), Some(b)) => !a.is_subset(&b),
    };
    if narrowed {
        node.push(
            Rule::Type,
            format!(
                "type changed : {} -> {}",
                quoted(Some(&type_name(old))),
                quoted(Some(&type_name(new)))
            ),
        );
    }
}

fn check_enum(old: Option<&[JSON]>, new: Option<&[JSON]>, node: &mut Node<'_>) {
    let old = old.filter(|v| !v.is_empty());
    let new = new.filter(|v| !v.is_empty());
    match (old, new) {
        (None, Some(n)) => node.push(
            Rule::Enum,
            format!(
                "enum constraint added when there was none previously : {}",
                json_list(n)
            ),
        ),
        (Some(o), Some(n)) => {
            let key = |v: &JSON| canonical(&v.0).to_string();
            let kept: HashSet<String> = n.iter().map(key).collect();
            let removed: Vec<&JSON> = o.iter().filter(|v| !kept.contains(&key(v))).collect();
            if !removed.is_empty() {
                node.push(
                    Rule::Enum,
                    format!("allowed enum values removed : {}", json_list(removed)),
                );
            }
        }
        _ => {}
    }
}

fn check_required(old: Option<&[String]>, new: &JSONSchemaProps, node: &mut Node<'_>) {
    let Some(new_req) = new.required.as_deref() else {
        return;
    };
    let old_req: HashSet<&str> = old.unwrap_or_default().iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    let added: Vec<&str> = new_req
        .iter()
        .map(String::as_str)
        .filter(|r| !old_req.contains(r) && seen.insert(*r))
        // A required field with a default is filled in on read for existing objects.
        .filter(|r| {
            new.properties
                .as_ref()
                .and_then(|p| p.get(*r))
                .is_none_or(|p| p.default.is_none())
        })
        .collect();
    if !added.is_empty() {
        node.push(
            Rule::Required,
            format!("new required fields: [{}]", added.join(", ")),
        );
    }
}

fn check_default(old: Option<&JSON>, new_schema: &JSONSchemaProps, node: &mut Node<'_>) {
    match (old, new_schema.default.as_ref()) {
        // An object default that only spells out what the fields' own defaults already
        // produce for an empty object (kubebuilder's `default={...}` on a struct whose
        // fields carry defaults) changes nothing an object can observe beyond `{}`.
        (None, Some(n))
            if n.0.is_object() && {
                let mut a = n.0.clone();
                let mut b = serde_json::Value::Object(Default::default());
                apply_defaults(new_schema, &mut a, 0);
                apply_defaults(new_schema, &mut b, 0);
                a == b
            } => {}
        (None, Some(n)) => node.push(
            Rule::Default,
            format!("default added when there was none previously : {}", json(n)),
        ),
        (Some(o), None) => node.push(
            Rule::Default,
            format!("default value removed : {}", json(o)),
        ),
        (Some(o), Some(n)) if !same_json(o, n) => node.push(
            Rule::Default,
            format!("default value changed : {} -> {}", json(o), json(n)),
        ),
        _ => {}
    }
}

/// Kubernetes structural defaulting of `value` by `schema` (properties and items), bounded
/// by [`MAX_DEPTH`].
fn apply_defaults(schema: &JSONSchemaProps, value: &mut serde_json::Value, depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    match value {
        serde_json::Value::Object(map) => {
            if let Some(props) = &schema.properties {
                for (k, p) in props {
                    if !map.contains_key(k)
                        && let Some(d) = &p.default
                    {
                        map.insert(k.clone(), d.0.clone());
                    }
                    if let Some(child) = map.get_mut(k) {
                        apply_defaults(p, child, depth + 1);
                    }
                }
            }
        }
        serde_json::Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(s)) = &schema.items {
                for item in items {
                    apply_defaults(s, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// [`max_rule`] or [`min_rule`]: (rule, old text, new text, old value, new value, node).
type BoundRule = fn(Rule, Option<String>, Option<String>, Option<f64>, Option<f64>, &mut Node<'_>);

/// [`max_rule`] or [`min_rule`] for an integer bound (`maxItems`, `minLength`, …).
fn count_rule(
    check: BoundRule,
    rule: Rule,
    old: Option<i64>,
    new: Option<i64>,
    node: &mut Node<'_>,
) {
    check(
        rule,
        old.map(|v| v.to_string()),
        new.map(|v| v.to_string()),
        old.map(|v| v as f64),
        new.map(|v| v as f64),
        node,
    );
}

fn max_rule(
    rule: Rule,
    old_s: Option<String>,
    new_s: Option<String>,
    old: Option<f64>,
    new: Option<f64>,
    node: &mut Node<'_>,
) {
    match (old, new, new_s) {
        (None, Some(_), Some(n)) => node.push(
            rule,
            format!("maximum constraint added when there was none previously : {n}"),
        ),
        (Some(o), Some(n), Some(ns)) if n < o => node.push(
            rule,
            format!("maximum decreased : {} -> {ns}", old_s.unwrap_or_default()),
        ),
        _ => {}
    }
}

fn min_rule(
    rule: Rule,
    old_s: Option<String>,
    new_s: Option<String>,
    old: Option<f64>,
    new: Option<f64>,
    node: &mut Node<'_>,
) {
    match (old, new, new_s) {
        (None, Some(_), Some(n)) => node.push(
            rule,
            format!("minimum constraint added when there was none previously : {n}"),
        ),
        (Some(o), Some(n), Some(ns)) if n > o => node.push(
            rule,
            format!("minimum increased : {} -> {ns}", old_s.unwrap_or_default()),
        ),
        _ => {}
    }
}

fn flag_turned_on(
    rule: Rule,
    old: Option<bool>,
    new: Option<bool>,
    what: &str,
    node: &mut Node<'_>,
) {
    if !old.unwrap_or(false) && new.unwrap_or(false) {
        node.push(rule, format!("{what} : false -> true"));
    }
}

fn check_multiple_of(old: Option<f64>, new: Option<f64>, node: &mut Node<'_>) {
    match (old, new) {
        (None, Some(n)) => node.push(
            Rule::MultipleOf,
            format!(
                "multipleOf constraint added when there was none previously : {}",
                num(n)
            ),
        ),
        (Some(o), Some(n)) if o != n => {
            // Still safe when every old multiple is a new multiple (old is a multiple of new).
            let ratio = o / n;
            if !(n != 0.0 && ratio.is_finite() && ratio.fract() == 0.0) {
                node.push(
                    Rule::MultipleOf,
                    format!("multipleOf changed : {} -> {}", num(o), num(n)),
                );
            }
        }
        _ => {}
    }
}

fn check_pattern(old: Option<&str>, new: Option<&str>, node: &mut Node<'_>) {
    // An empty pattern matches everything (and the API server drops it on write).
    let old = old.filter(|s| !s.is_empty());
    let new = new.filter(|s| !s.is_empty());
    match (old, new) {
        (None, Some(_)) => node.push(
            Rule::Pattern,
            format!("pattern added : \"\" -> {}", quoted(new)),
        ),
        (Some(o), Some(n)) if o != n => node.push(
            Rule::Pattern,
            format!(
                "pattern changed : {} -> {}",
                quoted(Some(o)),
                quoted(Some(n))
            ),
        ),
        _ => {}
    }
}

fn check_format(old: Option<&str>, new: Option<&str>, node: &mut Node<'_>) {
    let old = old.filter(|s| !s.is_empty());
    let new = new.filter(|s| !s.is_empty());
    match (old, new) {
        (None, Some(_)) => node.push(
            Rule::Format,
            format!("format added : \"\" -> {}", quoted(new)),
        ),
        (Some(o), Some(n)) if o != n => node.push(
            Rule::Format,
            format!(
                "format changed : {} -> {}",
                quoted(Some(o)),
                quoted(Some(n))
            ),
        ),
        _ => {}
    }
}

fn check_list_type(old: &JSONSchemaProps, new: &JSONSchemaProps, node: &mut Node<'_>) {
    let old_t = old.x_kubernetes_list_type.as_deref().unwrap_or("atomic");
    let new_t = new.x_kubernetes_list_type.as_deref().unwrap_or("atomic");
    let new_keys = new
        .x_kubernetes_list_map_keys
        .as_deref()
        .unwrap_or_default();
    if old_t == new_t
        && (new_t != "map" || old.x_kubernetes_list_map_keys == new.x_kubernetes_list_map_keys)
    {
        return;
    }
    if new_t == "atomic" {
        return; // no uniqueness any more: looser
    }
    // atomic -> map keyed by fields every existing item already has (required or
    // defaulted in the old item schema): the kubebuilder `+listType=map` on conditions
    // case. Only lists with two items sharing a key would now be rejected; that is
    // accepted as safe (a keyed list with duplicate keys is already broken for its
    // writers). Everything else (set, changed keys, keys items may lack) is reported.
    if old_t == "atomic" && new_t == "map" && !new_keys.is_empty() {
        let item = match &old.items {
            Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s.as_ref()),
            _ => None,
        };
        let present = |k: &String| {
            item.is_some_and(|i| {
                i.required.as_ref().is_some_and(|r| r.contains(k))
                    || i.properties
                        .as_ref()
                        .and_then(|p| p.get(k))
                        .is_some_and(|p| p.default.is_some())
            })
        };
        if new_keys.iter().all(present) {
            return;
        }
    }
    if old_t != new_t {
        node.push(
            Rule::ListType,
            format!(
                "list type changed : {} -> {}",
                quoted(Some(old_t)),
                quoted(Some(new_t))
            ),
        );
    } else {
        let show = |k: Option<&[String]>| format!("[{}]", k.unwrap_or_default().join(", "));
        node.push(
            Rule::ListMapKeys,
            format!(
                "list map keys changed : {} -> {}",
                show(old.x_kubernetes_list_map_keys.as_deref()),
                show(new.x_kubernetes_list_map_keys.as_deref())
            ),
        );
    }
}

/// CEL rules: added = unsafe, text changed = unsafe, removed = safe; messages, reasons
/// and field paths are documentation. A rule that now also runs when there is no old
/// value (`optionalOldSelf` turned on) counts as changed.
fn check_cel(old: Option<&[ValidationRule]>, new: Option<&[ValidationRule]>, node: &mut Node<'_>) {
    let old = old.unwrap_or_default();
    let new = new.unwrap_or_default();
    let key = |r: &ValidationRule| (r.rule.clone(), r.optional_old_self.unwrap_or(false));
    let old_keys: HashSet<(String, bool)> = old.iter().map(key).collect();
    let new_keys: HashSet<(String, bool)> = new.iter().map(key).collect();
    let removed: Vec<&ValidationRule> =
        old.iter().filter(|r| !new_keys.contains(&key(r))).collect();
    let added: Vec<&ValidationRule> = new.iter().filter(|r| !old_keys.contains(&key(r))).collect();
    let rule_text = |r: &ValidationRule| {
        let mut s = quoted(Some(&r.rule));
        if r.optional_old_self.unwrap_or(false) {
            s.push_str(" (optionalOldSelf)");
        }
        s
    };
    for (i, n) in added.iter().enumerate() {
        match removed.get(i) {
            Some(o) => node.push(
                Rule::Cel,
                format!("rule changed : {} -> {}", rule_text(o), rule_text(n)),
            ),
            None => node.push(Rule::Cel, format!("rule added : {}", rule_text(n))),
        }
    }
}

fn check_of(
    rule: Rule,
    old: Option<&[JSONSchemaProps]>,
    new: Option<&[JSONSchemaProps]>,
    path: &mut String,
    depth: usize,
    node: &mut Node<'_>,
) {
    let old = old.unwrap_or_default();
    let new = new.unwrap_or_default();
    if old == new {
        return;
    }
    let name = rule.as_str();
    if old.is_empty() {
        node.push(
            rule,
            format!("{name} constraint added : {} schema(s)", new.len()),
        );
        return;
    }
    if new.is_empty() {
        return; // constraint dropped: looser
    }
    if old.len() == new.len() {
        // Same shape: compare branch by branch, so a description edit inside a branch
        // is not a finding and a tightened branch is reported precisely.
        for (i, (a, b)) in old.iter().zip(new).enumerate() {
            let len = path.len();
            let _ = write!(path, ".{name}[{i}]");
            walk(a, b, path, depth + 1, &mut node.out);
            path.truncate(len);
        }
        return;
    }
    let added = new.iter().filter(|n| !old.contains(n)).count();
    let removed = old.iter().filter(|o| !new.contains(o)).count();
    match rule {
        Rule::AllOf if added > 0 => node.push(rule, format!("allOf schemas added : {added}")),
        Rule::AnyOf | Rule::OneOf if removed > 0 => {
            node.push(rule, format!("allowed {name} schemas removed : {removed}"))
        }
        _ => {}
    }
    if rule == Rule::OneOf && added > 0 {
        node.push(
            rule,
            format!(
                "oneOf schemas added : {added} (an existing object may now match more than one)"
            ),
        );
    }
}
