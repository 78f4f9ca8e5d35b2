//! Go's `encoding/json` key rules, for the rare blob that needs them. catalogd reads each
//! FBC document into a map and finds `schema`, `package` and `name` case-insensitively
//! (`"Schema"` counts), refusing an object with two keys that fold to the same name
//! (`duplicate keys for key "schema": [Schema schema]`); a key written twice verbatim
//! is one map entry, the last value kept. operator-controller then decodes each blob
//! into the declcfg types with `encoding/json`, which matches struct fields
//! case-insensitively too. olmv1's fast path reads exact key names; a blob that needs
//! these rules (flagged while its view is read) is normalized here: parsed once more
//! (duplicates: last value kept), checked as catalogd checks it, and its keys renamed to
//! the declcfg field names where Go would match them, so that every reader of the served
//! blob — olmv1's, operator-controller's, `jq` — sees what operator-controller sees when
//! catalogd serves the original. What was normalized is reported as a catalog warning.

use serde_json::{Map, Value};

/// The keys of the blob view, in their declcfg spelling.
pub(super) const VIEW_KEYS: [&str; 6] = [
    "schema",
    "package",
    "name",
    "defaultChannel",
    "entries",
    "properties",
];

/// Whether `key` is not a view key but folds to one (Go would match it).
pub(super) fn folds_to_view_key(key: &str) -> bool {
    if key.is_ascii() {
        VIEW_KEYS
            .iter()
            .any(|k| k.len() == key.len() && k.eq_ignore_ascii_case(key) && *k != key)
    } else {
        let folded = fold(key);
        VIEW_KEYS.iter().any(|k| fold(k) == folded)
    }
}

/// Simple case folding as Go's `encoding/json` and catalogd apply it (the long s and
/// the Kelvin sign fold to `s` and `k`).
pub(super) fn fold(key: &str) -> String {
    key.chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == 'ſ' { 's' } else { c })
        .collect()
}

/// Top-level fields of the declcfg types (`Package`, `Channel`, `Bundle`,
/// `Deprecation`) and of every `Meta`.
const TOP: &[&str] = &[
    "schema",
    "package",
    "name",
    "defaultChannel",
    "icon",
    "description",
    "properties",
    "entries",
    "image",
    "relatedImages",
];
const META: &[&str] = &["schema", "package", "name"];
const ENTRY: &[&str] = &[
    "name",
    "replaces",
    "skips",
    "skipRange",
    "reference",
    "message",
];
const REFERENCE: &[&str] = &["schema", "name"];
const PROPERTY: &[&str] = &["type", "value"];
const RELATED_IMAGE: &[&str] = &["name", "image"];
const ICON: &[&str] = &["base64data", "mediatype"];
const PACKAGE_VALUE: &[&str] = &["packageName", "version", "versionRange"];
const GVK_VALUE: &[&str] = &["group", "kind", "version"];
const KNOWN_SCHEMAS: &[&str] = &[
    "olm.package",
    "olm.channel",
    "olm.bundle",
    "olm.deprecations",
];

/// The normalized blob (compact JSON) and what was normalized; `None` when Go reads
/// the blob as it is (e.g. a key of an unknown schema that merely resembles a view key).
pub(super) fn normalize(json: &[u8]) -> Result<Option<(Vec<u8>, String)>, String> {
    let value: Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let Value::Object(top) = value else {
        return Err("not a JSON object".into());
    };
    let duplicated = exact_duplicates(json);
    // catalogd: two keys folding to the same name are an error.
    let mut groups: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for k in top.keys() {
        groups.entry(fold(k)).or_default().push(k);
    }
    let clashes: Vec<String> = groups
        .iter()
        .filter(|(_, keys)| keys.len() > 1)
        .map(|(folded, keys)| {
            let mut keys = keys.clone();
            keys.sort_unstable();
            format!("duplicate keys for key {folded:?}: [{}]", keys.join(" "))
        })
        .collect();
    if !clashes.is_empty() {
        return Err(format!(
            "cannot unmarshal catalog meta: {} (catalogd refuses such a blob)",
            clashes.join("; ")
        ));
    }
    for key in META {
        if let Some((k, v)) = top.iter().find(|(k, _)| fold(k) == *key)
            && !v.is_string()
            && !v.is_null()
        {
            return Err(format!("the value of {k:?} must be a string, not {v}"));
        }
    }
    let mut renamed = Vec::new();
    let schema = top
        .iter()
        .find(|(k, _)| fold(k) == "schema")
        .and_then(|(_, v)| v.as_str())
        .unwrap_or_default()
        .to_string();
    let fields = if KNOWN_SCHEMAS.contains(&schema.as_str()) {
        TOP
    } else {
        META
    };
    let mut top = rename(top, fields, &mut renamed);
    if fields == TOP {
        for (key, inner) in [
            ("entries", ENTRY),
            ("properties", PROPERTY),
            ("relatedImages", RELATED_IMAGE),
        ] {
            if let Some(Value::Array(items)) = top.get_mut(key) {
                for item in items.iter_mut() {
                    if let Value::Object(o) = item {
                        *o = rename(std::mem::take(o), inner, &mut renamed);
                        nested(o, key, &mut renamed);
                    }
                }
            }
        }
        if let Some(Value::Object(icon)) = top.get_mut("icon") {
            *icon = rename(std::mem::take(icon), ICON, &mut renamed);
        }
    }
    let out = serde_json::to_vec(&Value::Object(top)).map_err(|e| e.to_string())?;
    let mut what = Vec::new();
    if !renamed.is_empty() {
        renamed.sort();
        renamed.dedup();
        what.push(format!(
            "keys matched case-insensitively as Go's encoding/json does: {}",
            renamed.join(", ")
        ));
    }
    if duplicated {
        what.push("a key written twice: the last value is kept, as Go's encoding/json does".into());
    }
    if what.is_empty() {
        return Ok(None);
    }
    Ok(Some((out, what.join("; "))))
}

/// The objects inside an entry (`reference`) or a property (`value` of the properties
/// olmv1 reads).
fn nested(o: &mut Map<String, Value>, list: &str, renamed: &mut Vec<String>) {
    let (key, fields) = match list {
        "entries" => ("reference", REFERENCE),
        "properties" => {
            let fields = match o.get("type").and_then(Value::as_str) {
                Some("olm.package" | "olm.package.required") => PACKAGE_VALUE,
                Some("olm.gvk" | "olm.gvk.required") => GVK_VALUE,
                _ => return,
            };
            ("value", fields)
        }
        _ => return,
    };
    if let Some(Value::Object(inner)) = o.get_mut(key) {
        *inner = rename(std::mem::take(inner), fields, renamed);
    }
}

/// `o` with every key that folds to one of `fields` spelled as that field; when two keys
/// land on the same field the later one wins (Go's `encoding/json`).
fn rename(o: Map<String, Value>, fields: &[&str], renamed: &mut Vec<String>) -> Map<String, Value> {
    let mut out = Map::with_capacity(o.len());
    for (k, v) in o {
        let key = match fields.iter().find(|f| **f != k && fold(f) == fold(&k)) {
            Some(f) => {
                renamed.push(format!("{k}→{f}"));
                (*f).to_string()
            }
            None => k,
        };
        out.insert(key, v);
    }
    out
}

/// Whether some object of `json` has a key written twice verbatim (a cheap second parse
/// that counts keys; only for blobs that took this slow path).
fn exact_duplicates(json: &[u8]) -> bool {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
    struct Dup<'a>(&'a std::cell::Cell<bool>);
    impl<'de> serde::de::DeserializeSeed<'de> for Dup<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Dup<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if !seen.insert(k.into_owned()) {
                    self.0.set(true);
                }
                map.next_value_seed(Dup(self.0))?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Dup(self.0))?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let found = std::cell::Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(json);
    let _ = serde::de::DeserializeSeed::deserialize(Dup(&found), &mut de);
    found.get()
}
