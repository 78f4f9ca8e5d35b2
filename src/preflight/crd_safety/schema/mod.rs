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

mod branches;
mod keywords;
mod values;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use std::fmt::Write as _;

use super::Rule;
use keywords::{check_bounds, check_formats_and_flags, check_type_and_values, check_unmodelled};
use values::complex;

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

    /// Records `field` as unhandled when `old` and `new` differ, each shown by `show`.
    fn unhandled_if<T: PartialEq>(
        &mut self,
        field: &str,
        old: &T,
        new: &T,
        show: impl Fn(&T) -> String,
    ) {
        if old != new {
            self.unhandled(field, show(old), show(new));
        }
    }
}

/// Compares one node and, recursively, its children; findings go to `out`.
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
    every_field_is_compared(old);
    let here = path.clone();
    let mut node = Node {
        path: &here,
        out: Vec::new(),
        unhandled: Vec::new(),
    };

    check_type_and_values(old, new, &mut node);
    check_bounds(old, new, &mut node);
    check_formats_and_flags(old, new, &mut node);
    check_unmodelled(old, new, &mut node);

    // Composition keywords.
    for (rule, a, b) in [
        (Rule::AllOf, &old.all_of, &new.all_of),
        (Rule::AnyOf, &old.any_of, &new.any_of),
        (Rule::OneOf, &old.one_of, &new.one_of),
    ] {
        check_of(rule, a.as_deref(), b.as_deref(), path, depth, &mut node);
    }

    // Children: properties, items, additionalProperties.
    walk_properties(old, new, path, depth, &mut node);
    walk_items(old, new, path, depth, &mut node);
    walk_additional_properties(old, new, path, depth, &mut node);

    if !node.unhandled.is_empty() {
        let detail = format!("unhandled changes found ({})", node.unhandled.join("; "));
        node.push(Rule::Unhandled, detail);
    }
    out.append(&mut node.out);
}

/// Names every field of `JSONSchemaProps` and where [`walk`] compares it. Exhaustive on
/// purpose: a field added to `JSONSchemaProps` breaks the build here instead of being
/// silently ignored.
fn every_field_is_compared(s: &JSONSchemaProps) {
    let JSONSchemaProps {
        // check_type_and_values
        default: _,
        enum_: _,
        required: _,
        type_: _,
        x_kubernetes_int_or_string: _,
        // check_formats_and_flags
        format: _,
        nullable: _,
        pattern: _,
        x_kubernetes_embedded_resource: _,
        x_kubernetes_list_map_keys: _,
        x_kubernetes_list_type: _,
        x_kubernetes_preserve_unknown_fields: _,
        x_kubernetes_validations: _,
        // check_bounds
        exclusive_maximum: _,
        exclusive_minimum: _,
        max_items: _,
        max_length: _,
        max_properties: _,
        maximum: _,
        min_items: _,
        min_length: _,
        min_properties: _,
        minimum: _,
        multiple_of: _,
        unique_items: _,
        // check_unmodelled
        ref_path: _,
        schema: _,
        additional_items: _,
        definitions: _,
        dependencies: _,
        id: _,
        not: _,
        pattern_properties: _,
        // composition (check_of)
        all_of: _,
        any_of: _,
        one_of: _,
        // children
        additional_properties: _,
        items: _,
        properties: _,
        // documentation and merge hints: ignored
        description: _,
        example: _,
        external_docs: _,
        title: _,
        x_kubernetes_map_type: _,
    } = s;
}

/// The one schema of all items; a tuple or no `items` compares as `{}`.
fn items_schema(s: &Option<JSONSchemaPropsOrArray>) -> &JSONSchemaProps {
    match s {
        Some(JSONSchemaPropsOrArray::Schema(s)) => s.as_ref(),
        _ => empty(),
    }
}

/// The schema of map values; `true`, `false` or none compares as `{}`.
fn values_schema(s: &Option<JSONSchemaPropsOrBool>) -> &JSONSchemaProps {
    match s {
        Some(JSONSchemaPropsOrBool::Schema(s)) => s.as_ref(),
        _ => empty(),
    }
}

/// Appends a segment to `path` (`segment`), walks `a` against `b` there, and restores
/// `path`.
fn walk_child(
    a: &JSONSchemaProps,
    b: &JSONSchemaProps,
    path: &mut String,
    segment: impl FnOnce(&mut String),
    depth: usize,
    node: &mut Node<'_>,
) {
    let len = path.len();
    segment(path);
    walk(a, b, path, depth + 1, &mut node.out);
    path.truncate(len);
}

/// Properties: removed ones, changed ones, and new ones of an object that used to accept
/// any key.
fn walk_properties(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    path: &mut String,
    depth: usize,
    node: &mut Node<'_>,
) {
    let new_preserves = new.x_kubernetes_preserve_unknown_fields.unwrap_or(false);
    if let Some(old_props) = &old.properties {
        for (name, old_child) in old_props {
            match new.properties.as_ref().and_then(|p| p.get(name)) {
                Some(new_child) => walk_child(
                    old_child,
                    new_child,
                    path,
                    |p| push_property(p, name),
                    depth,
                    node,
                ),
                // Kept as unknown field, not pruned, not validated: nothing can break.
                None if new_preserves => {}
                None => {
                    let len = path.len();
                    push_property(path, name);
                    node.out.push(RawFinding {
                        path: path.clone(),
                        rule: Rule::ExistingFieldRemoval,
                        detail: "removed field".to_owned(),
                    });
                    path.truncate(len);
                }
            }
        }
    }
    // A new property of an object that used to accept any key (unknown fields preserved,
    // or a map) now validates data that may already be stored under that key.
    let catch_all = if old.x_kubernetes_preserve_unknown_fields.unwrap_or(false) {
        Some(empty())
    } else {
        match &old.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
            Some(JSONSchemaPropsOrBool::Bool(true)) => Some(empty()),
            _ => None,
        }
    };
    if let (Some(catch_all), Some(new_props)) = (catch_all, &new.properties) {
        for (name, new_child) in new_props {
            if old
                .properties
                .as_ref()
                .is_some_and(|p| p.contains_key(name))
            {
                continue;
            }
            walk_child(
                catch_all,
                new_child,
                path,
                |p| push_property(p, name),
                depth,
                node,
            );
        }
    }
}

/// `items`: one schema for all items (`[*]`), or tuples compared position by position.
fn walk_items(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    path: &mut String,
    depth: usize,
    node: &mut Node<'_>,
) {
    match (&old.items, &new.items) {
        (None, None) => {}
        (Some(JSONSchemaPropsOrArray::Schemas(a)), Some(JSONSchemaPropsOrArray::Schemas(b)))
            if a.len() == b.len() =>
        {
            for (i, (a, b)) in a.iter().zip(b).enumerate() {
                walk_child(
                    a,
                    b,
                    path,
                    |p| {
                        let _ = write!(p, "[{i}]");
                    },
                    depth,
                    node,
                );
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
            walk_child(
                items_schema(a),
                items_schema(b),
                path,
                |p| p.push_str("[*]"),
                depth,
                node,
            );
        }
    }
}

/// `additionalProperties`: map values (`{*}`); turning it to `false` is reported.
fn walk_additional_properties(
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
    path: &mut String,
    depth: usize,
    node: &mut Node<'_>,
) {
    match (&old.additional_properties, &new.additional_properties) {
        (a, b) if a == b => {}
        (a, Some(JSONSchemaPropsOrBool::Bool(false))) => {
            node.unhandled(
                "additionalProperties",
                complex(a.is_some()),
                "false".to_owned(),
            );
        }
        (Some(JSONSchemaPropsOrBool::Bool(false)), _) => {} // was "nothing allowed": anything is looser
        (a, b) => {
            walk_child(
                values_schema(a),
                values_schema(b),
                path,
                |p| p.push_str("{*}"),
                depth,
                node,
            );
        }
    }
}

/// `allOf` / `anyOf` / `oneOf`: branch by branch when the shape is kept, else counted.
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
            walk_child(
                a,
                b,
                path,
                |p| {
                    let _ = write!(p, ".{name}[{i}]");
                },
                depth,
                node,
            );
        }
        return;
    }
    // Counted with hashed branches: linear, where `contains` on the slices was quadratic.
    let (added, removed) = branches::added_and_removed(old, new);
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
