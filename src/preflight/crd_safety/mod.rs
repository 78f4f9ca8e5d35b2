//! CRD upgrade-safety preflight: decides whether replacing a live CustomResourceDefinition
//! with a new one can break existing custom resources, and says why in messages a person
//! can act on. Owns the rules (docs/concepts/crd-upgrade-safety.md §6), the finding model, message
//! formatting (docs/concepts/crd-upgrade-safety.md §6 "current" family, 32 KiB cap, deterministic order) and the
//! `crd-diff` command. Pure: it never talks to a cluster except in [`cli`] for
//! `--from-cluster`; the reconciler fetches live CRDs and emits events/conditions.
//!
//! Wiring for the reconciler: for every CRD of the rendered bundle that exists on the
//! cluster, call [`check`] (live CRD with `status.storedVersions`, new CRD), then
//! [`verdict`] with the ClusterExtension's [`Enforcement`]; `Blocked` becomes the
//! (non-terminal) Progressing/Retrying message, `Warn` must still be logged and emitted as
//! a Warning Event. A CRD that does not exist yet passes without a check.

#[cfg(test)]
mod hostile_tests;
mod parse;
mod schema;
#[cfg(test)]
mod tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
};
use std::collections::{HashMap, HashSet};
use std::fmt;

pub use parse::{CrdInputError, MAX_SCHEMA_NODES, parse_crd, schema_nodes};
pub use schema::MAX_DEPTH;

/// Upper bound of a joined message (the Kubernetes condition message limit).
pub const MESSAGE_LIMIT: usize = 32 * 1024;
/// Upper bound of one finding inside a joined message (huge enum lists, long CEL rules).
const FINDING_LIMIT: usize = 4 * 1024;

/// Most served versions whose schemas are compared with each other. Every pair is a
/// whole-schema comparison (twice, with the ratchet), so the cost grows with the square of
/// the count: 10,000 tiny versions are 50 million comparisons, and as many findings when
/// each version differs. Real CRDs serve fewer than ten versions. Above the limit the
/// pairs are not compared and one fail-closed `unhandled` finding says so
/// (`hostile_tests::many_served_versions_are_not_compared_pairwise`).
pub const MAX_SERVED_VERSIONS: usize = 64;

/// The validator that produced a finding. Names follow docs/concepts/crd-upgrade-safety.md §6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    Scope,
    StoredVersionRemoval,
    ExistingFieldRemoval,
    Type,
    Enum,
    Required,
    Default,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinItems,
    MinLength,
    MinProperties,
    ExclusiveMaximum,
    ExclusiveMinimum,
    MultipleOf,
    UniqueItems,
    Nullable,
    Pattern,
    Format,
    AllOf,
    AnyOf,
    OneOf,
    PreserveUnknownFields,
    EmbeddedResource,
    ListType,
    ListMapKeys,
    Cel,
    /// Fail-closed: a difference no other rule accounts for (always last per node).
    Unhandled,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Scope => "scope",
            Rule::StoredVersionRemoval => "storedVersionRemoval",
            Rule::ExistingFieldRemoval => "existingFieldRemoval",
            Rule::Type => "type",
            Rule::Enum => "enum",
            Rule::Required => "required",
            Rule::Default => "default",
            Rule::Maximum => "maximum",
            Rule::MaxItems => "maxItems",
            Rule::MaxLength => "maxLength",
            Rule::MaxProperties => "maxProperties",
            Rule::Minimum => "minimum",
            Rule::MinItems => "minItems",
            Rule::MinLength => "minLength",
            Rule::MinProperties => "minProperties",
            Rule::ExclusiveMaximum => "exclusiveMaximum",
            Rule::ExclusiveMinimum => "exclusiveMinimum",
            Rule::MultipleOf => "multipleOf",
            Rule::UniqueItems => "uniqueItems",
            Rule::Nullable => "nullable",
            Rule::Pattern => "pattern",
            Rule::Format => "format",
            Rule::AllOf => "allOf",
            Rule::AnyOf => "anyOf",
            Rule::OneOf => "oneOf",
            Rule::PreserveUnknownFields => "x-kubernetes-preserve-unknown-fields",
            Rule::EmbeddedResource => "x-kubernetes-embedded-resource",
            Rule::ListType => "x-kubernetes-list-type",
            Rule::ListMapKeys => "x-kubernetes-list-map-keys",
            Rule::Cel => "x-kubernetes-validations",
            Rule::Unhandled => "unhandled",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a finding applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// The CRD as a whole (scope, stored versions).
    Crd,
    /// One version, old schema against new schema.
    Version(String),
    /// Two served versions of the new CRD (`from` is the lower-priority one).
    ServedPair { from: String, to: String },
}

/// One reason why the new CRD is not a safe replacement for the live one.
///
/// `Display` gives the docs/concepts/crd-upgrade-safety.md §6 text without the CRD name (the joined [`message`]
/// starts with it); the alternate form `{:#}` prefixes `CRD "<name>": `.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    pub crd: String,
    pub location: Location,
    /// JSON path of the field (`^` is the schema root, `[*]` array items, `{*}` map
    /// values); empty for CRD-wide findings.
    pub path: String,
    pub rule: Rule,
    /// What changed, with old → new values.
    pub detail: String,
}

impl Finding {
    fn sort_key(&self) -> (u8, &Location, &str, Rule, &str) {
        let class = match (&self.location, self.rule) {
            (Location::Crd, _) => 0,
            (Location::Version(_), Rule::ExistingFieldRemoval) => 1,
            (Location::Version(_), _) => 2,
            (Location::ServedPair { .. }, _) => 3,
        };
        (class, &self.location, &self.path, self.rule, &self.detail)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "CRD {}: ", quote(&self.crd))?;
        }
        match &self.location {
            Location::Crd => write!(f, "{}: {}", self.rule, self.detail),
            Location::Version(v) if self.rule == Rule::ExistingFieldRemoval => {
                write!(f, "{}: {} : {v}.{}", self.rule, self.detail, self.path)
            }
            Location::Version(v) => write!(f, "{v}: {}: {}: {}", self.path, self.rule, self.detail),
            Location::ServedPair { from, to } => {
                write!(
                    f,
                    "{from} -> {to}: {}: {}: {}",
                    self.path, self.rule, self.detail
                )
            }
        }
    }
}

fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// `spec.install.preflight.crdUpgradeSafety.enforcement` of a ClusterExtension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Enforcement {
    #[default]
    Strict,
    /// Findings never block; they are still logged and emitted as a Warning Event.
    None,
}

impl Enforcement {
    /// Maps the API value (`"Strict"`, `"None"`, or unset = `Strict`).
    pub fn from_api(value: Option<&str>) -> Self {
        match value {
            Some("None") => Enforcement::None,
            _ => Enforcement::Strict,
        }
    }
}

/// What the reconciler does with the findings for one CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Safe,
    /// Do not apply; the string is the condition message (Retrying, not terminal).
    Blocked(String),
    /// Enforcement is `None`: apply, but log the message and emit it as a Warning Event.
    Warn(String),
}

/// Turns findings into the reconciler's decision.
pub fn verdict(enforcement: Enforcement, crd_name: &str, findings: &[Finding]) -> Verdict {
    if findings.is_empty() {
        return Verdict::Safe;
    }
    let msg = message(crd_name, findings);
    match enforcement {
        Enforcement::Strict => Verdict::Blocked(msg),
        Enforcement::None => Verdict::Warn(msg),
    }
}

/// The versions whose objects may exist in etcd: `status.storedVersions` when the live
/// CRD reports any, else the version(s) marked `storage`.
pub fn stored_versions(live: &CustomResourceDefinition) -> Vec<String> {
    if let Some(v) = live
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.as_ref())
        && !v.is_empty()
    {
        return v.clone();
    }
    live.spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.clone())
        .collect()
}

/// Compares the live CRD (with `status.storedVersions`) with the CRD about to replace it.
/// Empty result = safe. Findings are sorted; the same input always gives the same output.
pub fn check(live: &CustomResourceDefinition, new: &CustomResourceDefinition) -> Vec<Finding> {
    check_with_stored_versions(live, new, &stored_versions(live))
}

/// [`check`] with the stored versions given explicitly (the `crd-diff --stored-versions` case).
pub fn check_with_stored_versions(
    live: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
    stored: &[String],
) -> Vec<Finding> {
    let crd = new
        .metadata
        .name
        .clone()
        .or_else(|| live.metadata.name.clone())
        .unwrap_or_default();
    let mut findings = Vec::new();
    let mut push = |location: Location, path: String, rule: Rule, detail: String| {
        findings.push(Finding {
            crd: crd.clone(),
            location,
            path,
            rule,
            detail,
        });
    };

    if live.spec.scope != new.spec.scope {
        push(
            Location::Crd,
            String::new(),
            Rule::Scope,
            format!(
                "scope changed : {} -> {}",
                quote(&live.spec.scope),
                quote(&new.spec.scope)
            ),
        );
    }

    let new_names: HashSet<&str> = new.spec.versions.iter().map(|v| v.name.as_str()).collect();
    let mut removed: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for v in stored {
        if !new_names.contains(v.as_str()) && seen.insert(v.as_str()) {
            removed.push(v);
        }
    }
    if !removed.is_empty() {
        push(
            Location::Crd,
            String::new(),
            Rule::StoredVersionRemoval,
            format!("stored versions removed : [{}]", removed.join(", ")),
        );
    }

    // Same version, old schema → new schema.
    let stored_set: HashSet<&str> = stored.iter().map(String::as_str).collect();
    let live_versions = versions_by_name(live);
    for nv in &new.spec.versions {
        let Some(ov) = live_versions.get(nv.name.as_str()) else {
            continue;
        };
        if !nv.served && !stored_set.contains(nv.name.as_str()) {
            continue; // nobody can read or has written objects of this version
        }
        for r in schema::diff(schema_of(ov), schema_of(nv)) {
            push(Location::Version(nv.name.clone()), r.path, r.rule, r.detail);
        }
    }

    // Served versions of the new CRD against each other.
    for (location, r) in served_pair_findings(live, new) {
        push(location, r.path, r.rule, r.detail);
    }

    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    findings.dedup();
    findings
}

/// Served versions of the new CRD against each other: with no conversion webhook an
/// object is only relabelled between versions, so it must fit every served schema.
/// Problems the live CRD already had between the same pair are not reported (ratchet).
fn served_pair_findings(
    live: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<(Location, schema::RawFinding)> {
    let mut out = Vec::new();
    let webhook = new
        .spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook");
    if !webhook {
        let mut served: Vec<&CustomResourceDefinitionVersion> =
            new.spec.versions.iter().filter(|v| v.served).collect();
        if served.len() > MAX_SERVED_VERSIONS {
            let finding = schema::RawFinding {
                path: String::new(),
                rule: Rule::Unhandled,
                detail: format!(
                    "{} served versions: more than {MAX_SERVED_VERSIONS} are not compared with each other (fail-closed); serve fewer versions",
                    served.len()
                ),
            };
            return vec![(Location::Crd, finding)];
        }
        served.sort_by_key(|v| version_priority(&v.name));
        let live_versions = versions_by_name(live);
        for (i, a) in served.iter().enumerate() {
            for b in &served[i + 1..] {
                let raw = schema::diff(schema_of(a), schema_of(b));
                if raw.is_empty() {
                    continue;
                }
                // Ratchet: problems the live CRD already had between the same pair stay.
                let old_a = live_versions.get(a.name.as_str());
                let old_b = live_versions.get(b.name.as_str());
                let before: HashSet<schema::RawFinding> = match (old_a, old_b) {
                    (Some(x), Some(y)) => schema::diff(schema_of(x), schema_of(y))
                        .into_iter()
                        .collect(),
                    _ => HashSet::new(),
                };
                for r in raw {
                    if !before.contains(&r) {
                        let location = Location::ServedPair {
                            from: a.name.clone(),
                            to: b.name.clone(),
                        };
                        out.push((location, r));
                    }
                }
            }
        }
    }
    out
}

/// The versions of `crd` by name; the first of a repeated name, as a search in order would
/// find it (a map, because the number of versions is not bounded).
fn versions_by_name(
    crd: &CustomResourceDefinition,
) -> HashMap<&str, &CustomResourceDefinitionVersion> {
    let mut by_name = HashMap::new();
    for v in &crd.spec.versions {
        by_name.entry(v.name.as_str()).or_insert(v);
    }
    by_name
}

fn schema_of(v: &CustomResourceDefinitionVersion) -> &JSONSchemaProps {
    static EMPTY: std::sync::OnceLock<JSONSchemaProps> = std::sync::OnceLock::new();
    v.schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .unwrap_or_else(|| EMPTY.get_or_init(JSONSchemaProps::default))
}

/// Kubernetes version priority as a sortable key, lowest first: non-conforming names
/// (alphabetical, reversed), then alpha, beta, GA, each by major then minor number.
pub fn version_priority(name: &str) -> (u8, u64, u64, std::cmp::Reverse<String>) {
    let parsed = name.strip_prefix('v').and_then(|rest| {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        for (prefix, class) in [("alpha", 1), ("beta", 2)] {
            if let Some(n) = tail.strip_prefix(prefix) {
                let minor: u64 = n.parse().ok()?;
                return Some((class, major, minor));
            }
        }
        None
    });
    match parsed {
        Some((class, major, minor)) => (class, major, minor, std::cmp::Reverse(String::new())),
        None => (0, 0, 0, std::cmp::Reverse(name.to_owned())),
    }
}

/// Joins findings into the condition message
/// `validating upgrade for CRD "<name>": <f1>; <f2>; …`, at most [`MESSAGE_LIMIT`]
/// bytes; findings that do not fit are replaced by `… and N more findings (truncated)`.
/// Findings are sorted here too, so callers can pass them in any order.
pub fn message(crd_name: &str, findings: &[Finding]) -> String {
    let mut sorted: Vec<&Finding> = findings.iter().collect();
    sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let mut out = format!("validating upgrade for CRD {}: ", quote(crd_name));
    // Room kept for the truncation marker.
    const MARKER_ROOM: usize = 64;
    for (i, f) in sorted.iter().enumerate() {
        let mut text = f.to_string();
        if text.len() > FINDING_LIMIT {
            let mut cut = FINDING_LIMIT;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("…(cut)");
        }
        let sep = if i == 0 { "" } else { "; " };
        let rest = sorted.len() - i - 1;
        let reserve = if rest > 0 { MARKER_ROOM } else { 0 };
        if out.len() + sep.len() + text.len() + reserve > MESSAGE_LIMIT {
            let cut = sorted.len() - i;
            out.push_str(&format!("; … and {cut} more findings (truncated)"));
            return out;
        }
        out.push_str(sep);
        out.push_str(&text);
    }
    out
}
