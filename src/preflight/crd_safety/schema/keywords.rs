//! The per-keyword checks of the schema walk: each compares one keyword (type, enum,
//! required, default, bounds, pattern/format, list type, CEL rules, …) of an old and a
//! new node and records the tightening it finds on the node. No recursion into child
//! schemas here (that is the walk's job in the parent module).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSON, JSONSchemaProps, JSONSchemaPropsOrArray, ValidationRule,
};
use std::collections::{BTreeSet, HashSet};

use super::values::{canonical, complex, json, json_list, num, quoted, same_json};
use super::{MAX_DEPTH, Node, Rule};

/// Type, enum, required fields and default of one node.
pub(super) fn check_type_and_values(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    node: &mut Node<'_>,
) {
    check_type(old, new, node);
    check_enum(old.enum_.as_deref(), new.enum_.as_deref(), node);
    check_required(old.required.as_deref(), new, node);
    check_default(old.default.as_ref(), new, node);
}

/// Pattern, format, nullable, unknown-field pruning, embedded resource, list type and CEL
/// rules of one node.
pub(super) fn check_formats_and_flags(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    node: &mut Node<'_>,
) {
    check_string_keyword(
        Rule::Pattern,
        "pattern",
        old.pattern.as_deref(),
        new.pattern.as_deref(),
        node,
    );
    check_string_keyword(
        Rule::Format,
        "format",
        old.format.as_deref(),
        new.format.as_deref(),
        node,
    );
    if old.nullable.unwrap_or(false) && !new.nullable.unwrap_or(false) {
        node.push(
            Rule::Nullable,
            "nullable removed : true -> false".to_owned(),
        );
    }
    if old.x_kubernetes_preserve_unknown_fields.unwrap_or(false)
        && !new.x_kubernetes_preserve_unknown_fields.unwrap_or(false)
    {
        node.push(
            Rule::PreserveUnknownFields,
            "unknown fields are no longer preserved (they will be pruned) : true -> false"
                .to_owned(),
        );
    }
    let (old_embedded, new_embedded) = (
        old.x_kubernetes_embedded_resource.unwrap_or(false),
        new.x_kubernetes_embedded_resource.unwrap_or(false),
    );
    if old_embedded != new_embedded {
        node.push(
            Rule::EmbeddedResource,
            format!("embedded resource changed : {old_embedded} -> {new_embedded}"),
        );
    }
    check_list_type(old, new, node);
    check_cel(
        old.x_kubernetes_validations.as_deref(),
        new.x_kubernetes_validations.as_deref(),
        node,
    );
}

/// Numeric and count bounds, exclusive flags, `uniqueItems` and `multipleOf`.
pub(super) fn check_bounds(old: &JSONSchemaProps, new: &JSONSchemaProps, node: &mut Node<'_>) {
    bound_rule(
        Bound::Max,
        Rule::Maximum,
        old.maximum.map(num),
        new.maximum.map(num),
        old.maximum,
        new.maximum,
        node,
    );
    for (bound, rule, o, n) in [
        (Bound::Max, Rule::MaxItems, old.max_items, new.max_items),
        (Bound::Max, Rule::MaxLength, old.max_length, new.max_length),
        (
            Bound::Max,
            Rule::MaxProperties,
            old.max_properties,
            new.max_properties,
        ),
    ] {
        count_rule(bound, rule, o, n, node);
    }
    bound_rule(
        Bound::Min,
        Rule::Minimum,
        old.minimum.map(num),
        new.minimum.map(num),
        old.minimum,
        new.minimum,
        node,
    );
    for (bound, rule, o, n) in [
        (Bound::Min, Rule::MinItems, old.min_items, new.min_items),
        (Bound::Min, Rule::MinLength, old.min_length, new.min_length),
        (
            Bound::Min,
            Rule::MinProperties,
            old.min_properties,
            new.min_properties,
        ),
    ] {
        count_rule(bound, rule, o, n, node);
    }
    for (rule, o, n, what) in [
        (
            Rule::ExclusiveMaximum,
            old.exclusive_maximum,
            new.exclusive_maximum,
            "exclusiveMaximum added",
        ),
        (
            Rule::ExclusiveMinimum,
            old.exclusive_minimum,
            new.exclusive_minimum,
            "exclusiveMinimum added",
        ),
        (
            Rule::UniqueItems,
            old.unique_items,
            new.unique_items,
            "uniqueItems added",
        ),
    ] {
        flag_turned_on(rule, o, n, what, node);
    }
    check_multiple_of(old.multiple_of, new.multiple_of, node);
}

/// Fields that structural schemas forbid or that this check does not model: any
/// difference is reported, never ignored.
pub(super) fn check_unmodelled(old: &JSONSchemaProps, new: &JSONSchemaProps, node: &mut Node<'_>) {
    let text = |v: &Option<String>| quoted(v.as_deref());
    node.unhandled_if("$ref", &old.ref_path, &new.ref_path, text);
    node.unhandled_if("$schema", &old.schema, &new.schema, text);
    node.unhandled_if("id", &old.id, &new.id, text);
    fn present<T>(v: &Option<T>) -> String {
        complex(v.is_some())
    }
    node.unhandled_if(
        "additionalItems",
        &old.additional_items,
        &new.additional_items,
        present,
    );
    node.unhandled_if("definitions", &old.definitions, &new.definitions, present);
    node.unhandled_if(
        "dependencies",
        &old.dependencies,
        &new.dependencies,
        present,
    );
    node.unhandled_if(
        "patternProperties",
        &old.pattern_properties,
        &new.pattern_properties,
        present,
    );
    node.unhandled_if("not", &old.not, &new.not, present);
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

pub(super) fn check_type(old: &JSONSchemaProps, new: &JSONSchemaProps, node: &mut Node<'_>) {
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

pub(super) fn check_enum(old: Option<&[JSON]>, new: Option<&[JSON]>, node: &mut Node<'_>) {
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

pub(super) fn check_required(old: Option<&[String]>, new: &JSONSchemaProps, node: &mut Node<'_>) {
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

pub(super) fn check_default(old: Option<&JSON>, new_schema: &JSONSchemaProps, node: &mut Node<'_>) {
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

/// Which side a bound limits.
#[derive(Clone, Copy)]
pub(super) enum Bound {
    /// `maximum`, `maxItems`, …: lowering it tightens.
    Max,
    /// `minimum`, `minItems`, …: raising it tightens.
    Min,
}

/// [`bound_rule`] for an integer bound (`maxItems`, `minLength`, …).
pub(super) fn count_rule(
    bound: Bound,
    rule: Rule,
    old: Option<i64>,
    new: Option<i64>,
    node: &mut Node<'_>,
) {
    bound_rule(
        bound,
        rule,
        old.map(|v| v.to_string()),
        new.map(|v| v.to_string()),
        old.map(|v| v as f64),
        new.map(|v| v as f64),
        node,
    );
}

/// A bound added, or moved so that fewer values pass: (old text, new text, old value,
/// new value).
pub(super) fn bound_rule(
    bound: Bound,
    rule: Rule,
    old_s: Option<String>,
    new_s: Option<String>,
    old: Option<f64>,
    new: Option<f64>,
    node: &mut Node<'_>,
) {
    let (name, moved) = match bound {
        Bound::Max => ("maximum", "decreased"),
        Bound::Min => ("minimum", "increased"),
    };
    let tighter = |o: f64, n: f64| match bound {
        Bound::Max => n < o,
        Bound::Min => n > o,
    };
    match (old, new, new_s) {
        (None, Some(_), Some(n)) => node.push(
            rule,
            format!("{name} constraint added when there was none previously : {n}"),
        ),
        (Some(o), Some(n), Some(ns)) if tighter(o, n) => node.push(
            rule,
            format!("{name} {moved} : {} -> {ns}", old_s.unwrap_or_default()),
        ),
        _ => {}
    }
}

pub(super) fn flag_turned_on(
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

pub(super) fn check_multiple_of(old: Option<f64>, new: Option<f64>, node: &mut Node<'_>) {
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

/// `pattern` or `format` (named `name`) added or changed. An empty value matches
/// everything (and the API server drops an empty pattern on write).
pub(super) fn check_string_keyword(
    rule: Rule,
    name: &str,
    old: Option<&str>,
    new: Option<&str>,
    node: &mut Node<'_>,
) {
    let old = old.filter(|s| !s.is_empty());
    let new = new.filter(|s| !s.is_empty());
    match (old, new) {
        (None, Some(_)) => node.push(rule, format!("{name} added : \"\" -> {}", quoted(new))),
        (Some(o), Some(n)) if o != n => node.push(
            rule,
            format!(
                "{name} changed : {} -> {}",
                quoted(Some(o)),
                quoted(Some(n))
            ),
        ),
        _ => {}
    }
}

pub(super) fn check_list_type(old: &JSONSchemaProps, new: &JSONSchemaProps, node: &mut Node<'_>) {
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
pub(super) fn check_cel(
    old: Option<&[ValidationRule]>,
    new: Option<&[ValidationRule]>,
    node: &mut Node<'_>,
) {
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
