//! How schema values are compared and shown in findings: JSON values in the canonical
//! form the API server stores (whole floats as integers), and the quoting and number
//! formats of the finding details.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;

pub(super) fn json(v: &JSON) -> String {
    v.0.to_string()
}

/// `v` with every whole-number float written as an integer (`1.0` → `1`, `3e2` → `300`),
/// recursively. The API server stores `default` and `enum` values that way (Go decodes
/// them with integer conversion), so the live copy of a CRD written with `default: 1.0`
/// reads back as `1`; comparing canonical forms keeps that from looking like a change.
pub(super) fn canonical(v: &serde_json::Value) -> serde_json::Value {
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
pub(super) fn same_json(a: &JSON, b: &JSON) -> bool {
    a == b || canonical(&a.0) == canonical(&b.0)
}

pub(super) fn json_list<'a>(values: impl IntoIterator<Item = &'a JSON>) -> String {
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

pub(super) fn quoted(v: Option<&str>) -> String {
    serde_json::Value::String(v.unwrap_or("").to_owned()).to_string()
}

/// Numbers print as integers when they are whole (`3`, not `3.0`).
pub(super) fn num(v: f64) -> String {
    format!("{v}")
}

pub(super) fn complex(present: bool) -> String {
    if present {
        "<complex value>".to_owned()
    } else {
        String::new()
    }
}
