//! Object names compatible with upstream OLM v1 (docs/concepts/rendering.md §5.5): Go `encoding/json`
//! encoding of the hashed object, SHA-224, base36, and the 63-character truncation rule.
//! Pure functions only.

use serde_json::Value;
use sha2::{Digest, Sha224};

/// Longest Kubernetes object name the truncation rule aims for.
pub const MAX_NAME_LENGTH: usize = 63;

/// `base + "-" + suffix`, cutting `base` to `63 - len(suffix) - 1` bytes when
/// `len(base) + len(suffix) > 63` (upstream `ObjectNameForBaseAndSuffix`).
pub fn name_for_base_and_suffix(base: &str, suffix: &str) -> String {
    let mut base = base;
    if base.len() + suffix.len() > MAX_NAME_LENGTH {
        let mut cut = MAX_NAME_LENGTH.saturating_sub(suffix.len() + 1);
        while cut > 0 && !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base = &base[..cut];
    }
    format!("{base}-{suffix}")
}

/// Lowercase base36 of a big-endian unsigned integer, without leading zeros (Go `big.Int.Text(36)`).
pub fn base36(bytes: &[u8]) -> String {
    let mut num: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    if num.is_empty() {
        return "0".to_string();
    }
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while !num.is_empty() {
        let mut rem: u32 = 0;
        let mut next = Vec::with_capacity(num.len());
        for b in &num {
            let acc = (rem << 8) | u32::from(*b);
            let q = acc / 36;
            rem = acc % 36;
            if !(next.is_empty() && q == 0) {
                next.push(q as u8);
            }
        }
        out.push(DIGITS[rem as usize]);
        num = next;
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// base36(SHA-224(bytes)).
pub fn hash_bytes(bytes: &[u8]) -> String {
    let digest = Sha224::digest(bytes);
    base36(&digest)
}

/// Appends a JSON string literal the way Go `encoding/json` writes it with HTML escaping.
pub fn write_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_string_list(out: &mut String, list: &[String]) {
    out.push('[');
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_go_json_string(out, s);
    }
    out.push(']');
}

/// One RBAC rule as Go `rbacv1.PolicyRule` encodes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GoPolicyRule {
    /// `None` is Go's nil slice (`null`).
    pub verbs: Option<Vec<String>>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

impl GoPolicyRule {
    /// Reads a rule from CSV JSON; lists of non-strings are read as their JSON text.
    pub fn from_value(v: &Value) -> Self {
        let list = |key: &str| -> Option<Vec<String>> {
            v.get(key).and_then(Value::as_array).map(|a| {
                a.iter()
                    .map(|x| {
                        x.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| x.to_string())
                    })
                    .collect()
            })
        };
        GoPolicyRule {
            verbs: list("verbs"),
            api_groups: list("apiGroups").unwrap_or_default(),
            resources: list("resources").unwrap_or_default(),
            resource_names: list("resourceNames").unwrap_or_default(),
            non_resource_urls: list("nonResourceURLs").unwrap_or_default(),
        }
    }

    fn write(&self, out: &mut String) {
        out.push_str("{\"verbs\":");
        match &self.verbs {
            Some(v) => write_string_list(out, v),
            None => out.push_str("null"),
        }
        for (key, list) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !list.is_empty() {
                out.push_str(",\"");
                out.push_str(key);
                out.push_str("\":");
                write_string_list(out, list);
            }
        }
        out.push('}');
    }
}

/// The Go encoding (plus trailing newline) of a CSV permission entry
/// `{"serviceAccountName":…,"rules":[…]}`; `rules: None` is Go's nil slice.
pub fn permission_json(service_account: &str, rules: Option<&[GoPolicyRule]>) -> String {
    let mut out = String::from("{\"serviceAccountName\":");
    write_go_json_string(&mut out, service_account);
    out.push_str(",\"rules\":");
    match rules {
        None => out.push_str("null"),
        Some(rules) => {
            out.push('[');
            for (i, r) in rules.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                r.write(&mut out);
            }
            out.push(']');
        }
    }
    out.push_str("}\n");
    out
}

/// Upstream unique name for a permission entry: `truncate(base) + "-" + hash(entry)`.
pub fn permission_object_name(
    base: &str,
    service_account: &str,
    rules: Option<&[GoPolicyRule]>,
) -> String {
    let hash = hash_bytes(permission_json(service_account, rules).as_bytes());
    name_for_base_and_suffix(base, &hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_matches_known_values() {
        assert_eq!(base36(&[0]), "0");
        assert_eq!(base36(&[35]), "z");
        assert_eq!(base36(&[36]), "10");
        assert_eq!(base36(&[0x01, 0x00]), "74"); // 256 = 7*36 + 4
        assert_eq!(base36(&[0xff, 0xff, 0xff, 0xff]), "1z141z3"); // 4294967295
        assert_eq!(base36(&[0, 0, 1]), "1");
    }

    #[test]
    fn go_json_escapes_html_and_controls() {
        let mut s = String::new();
        write_go_json_string(&mut s, "a<b>&\"\\\n\u{1}\u{2028}é");
        assert_eq!(s, r#""a\u003cb\u003e\u0026\"\\\n\u0001\u2028é""#);
    }

    #[test]
    fn permission_json_key_order_and_omitempty() {
        let rules = vec![
            GoPolicyRule {
                verbs: Some(vec!["get".into(), "list".into()]),
                api_groups: vec!["".into()],
                resources: vec!["pods".into()],
                ..Default::default()
            },
            GoPolicyRule {
                verbs: Some(vec!["get".into()]),
                non_resource_urls: vec!["/metrics<x>".into()],
                ..Default::default()
            },
        ];
        assert_eq!(
            permission_json("op-sa", Some(&rules)),
            "{\"serviceAccountName\":\"op-sa\",\"rules\":[{\"verbs\":[\"get\",\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]},{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\\u003cx\\u003e\"]}]}\n"
        );
        assert_eq!(
            permission_json("", None),
            "{\"serviceAccountName\":\"\",\"rules\":null}\n"
        );
    }

    #[test]
    fn hash_is_base36_sha224_of_go_json() {
        // SHA-224("") = d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f,
        // whose base36 value was computed independently (Python: repeated divmod by 36).
        assert_eq!(
            hash_bytes(b""),
            "2n6a5vwpk9ckyxi5x87i7768t4bpqmp64qi0556ih35b"
        );
        // Known value for a permission entry: SHA-224 of the exact bytes below.
        let json = "{\"serviceAccountName\":\"sa\",\"rules\":[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}\n";
        let rules = vec![GoPolicyRule {
            verbs: Some(vec!["get".into()]),
            api_groups: vec!["".into()],
            resources: vec!["pods".into()],
            ..Default::default()
        }];
        assert_eq!(permission_json("sa", Some(&rules)), json);
        // computed independently with Python hashlib + base36
        assert_eq!(
            hash_bytes(json.as_bytes()),
            "3wviurxqrxqx9tcfeq9i80qbm0stl686z1sd97orsyx"
        );
        let name = permission_object_name("my-operator.v1.0.0-sa", "sa", Some(&rules));
        // 21 + 43 > 63: the base is cut to 63 - 43 - 1 = 19 bytes (upstream yields the double dash too)
        assert_eq!(
            name,
            "my-operator.v1.0.0--3wviurxqrxqx9tcfeq9i80qbm0stl686z1sd97orsyx"
        );
        let short = permission_object_name("op-sa", "sa", Some(&rules));
        assert_eq!(short, "op-sa-3wviurxqrxqx9tcfeq9i80qbm0stl686z1sd97orsyx");
    }

    #[test]
    fn truncation_rule() {
        let suffix = "x".repeat(44);
        let base = "b".repeat(30);
        let n = name_for_base_and_suffix(&base, &suffix);
        assert_eq!(n.len(), 63);
        assert_eq!(&n[..18], &"b".repeat(18));
        assert_eq!(name_for_base_and_suffix("abc", "service"), "abc-service");
        // exactly 63 combined: upstream keeps the base (name becomes 64 characters)
        let base = "c".repeat(56);
        assert_eq!(name_for_base_and_suffix(&base, "service").len(), 64);
    }
}
