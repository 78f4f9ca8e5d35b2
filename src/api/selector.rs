//! Label selectors over ClusterCatalog labels (`spec.source.catalog.selector`):
//! `metav1.LabelSelectorAsSelector` semantics — `matchLabels` plus `matchExpressions`
//! with `In`, `NotIn`, `Exists`, `DoesNotExist`, validated like apimachinery's
//! `labels.NewRequirement` and with its error texts. Absent or empty selectors match
//! every catalog (the resolver treats "nothing" as "everything", docs/concepts/resolution.md §4.1).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;
use std::sync::LazyLock;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A validated selector; matches when every requirement does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

#[allow(clippy::expect_used)]
fn re(p: &str) -> regex::Regex {
    regex::Regex::new(p).expect("constant regex compiles")
}

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
static LABEL_KEY: LazyLock<regex::Regex> = LazyLock::new(|| re(&format!("^{LABEL_KEY_FMT}$")));
static LABEL_VALUE: LazyLock<regex::Regex> = LazyLock::new(|| re(&format!("^{LABEL_VALUE_FMT}$")));
static DNS1123_SUBDOMAIN: LazyLock<regex::Regex> =
    LazyLock::new(|| re(&format!("^{DNS1123_SUBDOMAIN_FMT}$")));

/// apimachinery `RegexError`.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{re}')"));
    s
}

const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 bytes".to_string());
                }
                if !DNS1123_SUBDOMAIN.is_match(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"],
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !LABEL_KEY.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !LABEL_VALUE.is_match(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn json_values(values: &[String]) -> String {
    if values.is_empty() {
        "null".to_string()
    } else {
        serde_json::to_string(values).unwrap_or_default()
    }
}

#[derive(Clone, Copy)]
enum Kind {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// apimachinery `labels.NewRequirement` validation, aggregated like `ToAggregate`.
fn new_requirement(key: &str, kind: Kind, values: Vec<String>) -> Result<Requirement, String> {
    let mut errs: Vec<String> = Vec::new();
    let key_errs = label_key_errors(key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "key: Invalid value: {key:?}: {}",
            key_errs.join("; ")
        ));
    }
    match kind {
        Kind::In | Kind::NotIn if values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            json_values(&values)
        )),
        Kind::Exists | Kind::DoesNotExist if !values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            json_values(&values)
        )),
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let v_errs = label_value_errors(v);
        if !v_errs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {v:?}: {}",
                v_errs.join("; ")
            ));
        }
    }
    let mut unique: Vec<String> = Vec::new();
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    let op = match kind {
        Kind::In => Op::In(values),
        Kind::NotIn => Op::NotIn(values),
        Kind::Exists => Op::Exists,
        Kind::DoesNotExist => Op::DoesNotExist,
    };
    match unique.len() {
        0 => Ok(Requirement {
            key: key.to_string(),
            op,
        }),
        1 => Err(unique.remove(0)),
        _ => Err(format!("[{}]", unique.join(", "))),
    }
}

impl Selector {
    /// Validates a selector. `None` and an empty selector select everything.
    pub fn parse(selector: Option<&LabelSelector>) -> Result<Selector, String> {
        let Some(sel) = selector else {
            return Ok(Selector::default());
        };
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(new_requirement(k, Kind::In, vec![v.clone()])?);
        }
        for expr in sel.match_expressions.iter().flatten() {
            let kind = match expr.operator.as_str() {
                "In" => Kind::In,
                "NotIn" => Kind::NotIn,
                "Exists" => Kind::Exists,
                "DoesNotExist" => Kind::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push(new_requirement(
                &expr.key,
                kind,
                expr.values.clone().unwrap_or_default(),
            )?);
        }
        Ok(Selector { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match &r.op {
            Op::In(vals) => labels.get(&r.key).is_some_and(|v| vals.contains(v)),
            Op::NotIn(vals) => labels.get(&r.key).is_none_or(|v| !vals.contains(v)),
            Op::Exists => labels.contains_key(&r.key),
            Op::DoesNotExist => !labels.contains_key(&r.key),
        })
    }
}

#[cfg(test)]
#[path = "selector_tests.rs"]
mod tests;
