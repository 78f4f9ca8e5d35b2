//! Which `allOf`/`anyOf`/`oneOf` branches of one side also appear on the other, when the
//! lists differ in length (docs/concepts/crd-upgrade-safety.md §6: the branches are then counted,
//! not compared in order). Comparing every branch with every other was quadratic: 20,000
//! branches took 34 s. Here each branch gets a canonical text key, so membership costs
//! one hash lookup plus one equality check against the branches with the same key;
//! the whole count is linear in the size of both lists.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;
use std::collections::HashMap;

/// The branches of one list, by canonical key.
struct Branches<'a> {
    by_key: HashMap<&'a str, Vec<&'a JSONSchemaProps>>,
}

impl<'a> Branches<'a> {
    fn new(keyed: &'a [(String, &'a JSONSchemaProps)]) -> Self {
        let mut by_key: HashMap<&str, Vec<&JSONSchemaProps>> = HashMap::new();
        for (k, b) in keyed {
            by_key.entry(k.as_str()).or_default().push(b);
        }
        Branches { by_key }
    }

    /// Whether a branch equal to `b` (`==`, as `slice::contains` decides) with key `k` is
    /// in the list.
    fn contains(&self, k: &str, b: &JSONSchemaProps) -> bool {
        self.by_key.get(k).is_some_and(|same| same.contains(&b))
    }

    /// How many of `others` are not in the list (duplicates counted one by one).
    fn count_missing(&self, others: &[(String, &JSONSchemaProps)]) -> usize {
        others.iter().filter(|(k, b)| !self.contains(k, b)).count()
    }
}

fn keyed(list: &[JSONSchemaProps]) -> Vec<(String, &JSONSchemaProps)> {
    list.iter().map(|b| (key(b), b)).collect()
}

/// `(added, removed)`: how many branches of `new` are not in `old`, and of `old` not in
/// `new` — what `new.iter().filter(|n| !old.contains(n)).count()` and the reverse count,
/// with each branch's key computed once.
pub(super) fn added_and_removed(
    old: &[JSONSchemaProps],
    new: &[JSONSchemaProps],
) -> (usize, usize) {
    let (old, new) = (keyed(old), keyed(new));
    let added = Branches::new(&old).count_missing(&new);
    let removed = Branches::new(&new).count_missing(&old);
    (added, removed)
}

/// A text that is the same for branches that are `==`: the JSON form with object keys
/// sorted (JSON values inside `default`, `enum`, `example` keep their parse order, which
/// `==` ignores) and `-0.0` written as `0.0` (`==` on floats). Equal keys are confirmed
/// with `==`, so a key only has to be consistent with equality, not decide it.
fn key(schema: &JSONSchemaProps) -> String {
    match serde_json::to_value(schema) {
        Ok(v) => canonical(v).to_string(),
        // Serializing a schema does not fail; an empty key would only cost time.
        Err(_) => String::new(),
    }
}

fn canonical(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        Value::Number(n) if n.as_f64() == Some(0.0) && n.is_f64() => Value::from(0.0),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(v: Value) -> JSONSchemaProps {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn keys_agree_with_equality() {
        let a = schema(
            serde_json::json!({"type": "object", "default": {"a": 1, "b": [2.0]}, "maximum": -0.0}),
        );
        let b = schema(
            serde_json::json!({"maximum": 0.0, "default": {"b": [2.0], "a": 1}, "type": "object"}),
        );
        assert_eq!(a, b);
        assert_eq!(key(&a), key(&b));
        let c = schema(serde_json::json!({"type": "object", "default": {"a": 1, "b": [2]}}));
        assert_ne!(key(&a), key(&c));
        let other = schema(serde_json::json!({"type": "string"}));
        // `b` equals `a`; `other` is new; `c` is gone
        assert_eq!(
            added_and_removed(&[a, c.clone()], &[b, other.clone()]),
            (1, 1)
        );
        assert_eq!(
            added_and_removed(std::slice::from_ref(&c), &[c.clone(), c.clone(), other]),
            (1, 0)
        );
    }
}
