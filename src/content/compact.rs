//! The compact projection of one package's catalog content: exactly what resolution
//! reads, built blob by blob from FBC JSON lines so the catalog content cache stays
//! small (the whole 59 MB benchmark catalog in a few MiB). Pure functions only.
//!
//! Kept: the `olm.package` blob without `icon`/`description`; every channel with its
//! entries (`name`, `replaces`, `skips`, `skipRange`), without channel properties;
//! every bundle's `name`, `package`, `image` and its properties reduced to the first
//! property of each distinct type, with the value kept only for `olm.package` (the
//! version source); every `olm.package.required`, `olm.gvk.required` and
//! `olm.constraint` property whole, and every `olm.gvk` as one string
//! `group/version/Kind` ([`gvk_key`]; as JSON objects they tripled the cache) — what
//! dependency checking reads, docs/concepts/dependencies.md §2; every `olm.deprecations`
//! blob unchanged. Dropped: `relatedImages`, all other property values (CSV metadata,
//! bundle objects), unknown schemas. Resolution over the
//! projection gives the same result as over the full content, because the first
//! property of a type is the one every reader looks at.

use crate::fbc::model::{
    Bundle, Channel, ChannelEntry, Deprecation, PROPERTY_CONSTRAINT, PROPERTY_GVK,
    PROPERTY_GVK_REQUIRED, PROPERTY_PACKAGE, PROPERTY_PACKAGE_REQUIRED, Package, PackageContent,
    Property, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::mem::size_of;

/// The `schema`/`package`/`name` of a blob, read without building the rest.
#[derive(Debug, Default, Deserialize)]
pub struct MetaView {
    #[serde(default, deserialize_with = "null_as_default")]
    pub schema: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub package: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
}

impl MetaView {
    /// The package a blob belongs to: `name` for `olm.package` (whose `package` is
    /// normally absent), else `package` — how `/all` is filtered client-side (the
    /// server's `metas?package=` index, like catalogd's, uses only `package`).
    pub fn package(&self) -> &str {
        if self.schema == SCHEMA_PACKAGE && self.package.is_empty() {
            &self.name
        } else {
            &self.package
        }
    }
}

/// Go's `encoding/json` leaves a field at its zero value for `null`; do the same.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct PackageIn {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(
        rename = "defaultChannel",
        default,
        deserialize_with = "null_as_default"
    )]
    default_channel: String,
    #[serde(default, deserialize_with = "null_as_default")]
    properties: Vec<Property>,
}

#[derive(Deserialize)]
struct ChannelIn {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    package: String,
    #[serde(default, deserialize_with = "null_as_default")]
    entries: Vec<ChannelEntry>,
}

#[derive(Deserialize)]
struct BundleIn {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    package: String,
    #[serde(default, deserialize_with = "null_as_default")]
    image: String,
    #[serde(default, deserialize_with = "null_as_default")]
    properties: Vec<PropertyIn>,
}

/// Whether a property's value is kept: the version source and what dependency checking
/// reads.
fn value_kept(type_: &str) -> bool {
    matches!(
        type_,
        PROPERTY_PACKAGE
            | PROPERTY_GVK
            | PROPERTY_PACKAGE_REQUIRED
            | PROPERTY_GVK_REQUIRED
            | PROPERTY_CONSTRAINT
    )
}

/// A bundle property whose value is only built when [`value_kept`] (other values, such
/// as CSV metadata or whole bundle objects, are skipped without allocating when
/// `type` comes first, as it does in rendered catalogs).
struct PropertyIn(Property);

impl<'de> Deserialize<'de> for PropertyIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PropertyIn;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a property object with \"type\" and \"value\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PropertyIn, A::Error> {
                let mut type_: Option<String> = None;
                let mut value = Value::Null;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "type" => type_ = Some(map.next_value()?),
                        "value" => match type_.as_deref() {
                            Some(t) if !value_kept(t) => {
                                map.next_value::<IgnoredAny>()?;
                            }
                            _ => value = map.next_value()?,
                        },
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let type_ = type_.ok_or_else(|| serde::de::Error::missing_field("type"))?;
                if !value_kept(&type_) {
                    value = Value::Null;
                }
                Ok(PropertyIn(Property { type_, value }))
            }
        }
        d.deserialize_map(V)
    }
}

/// Adds one FBC blob (one JSON line) of the package to `content`, compacted. Blobs of
/// other schemas are ignored; the caller has already checked the blob belongs to the
/// package. The error is serde's message for the malformed blob.
pub fn push_compact(content: &mut PackageContent, line: &[u8]) -> Result<(), String> {
    let meta: MetaView = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    match meta.schema.as_str() {
        SCHEMA_PACKAGE => {
            let p: PackageIn = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            content.package = Some(Package {
                schema: SCHEMA_PACKAGE.to_string(),
                name: p.name,
                default_channel: p.default_channel,
                description: None,
                icon: None,
                properties: p.properties,
            });
        }
        SCHEMA_CHANNEL => {
            let c: ChannelIn = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            let mut entries = c.entries;
            entries.shrink_to_fit();
            content.channels.push(Channel {
                schema: SCHEMA_CHANNEL.to_string(),
                name: c.name,
                package: c.package,
                entries,
                properties: Vec::new(),
            });
        }
        SCHEMA_BUNDLE => {
            let b: BundleIn = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            content.bundles.push(Bundle {
                schema: SCHEMA_BUNDLE.to_string(),
                name: b.name,
                package: b.package,
                image: b.image,
                properties: compact_properties(b.properties.into_iter().map(|p| p.0).collect()),
                related_images: Vec::new(),
            });
        }
        SCHEMA_DEPRECATIONS => {
            let d: Deprecation = serde_json::from_slice(line).map_err(|e| e.to_string())?;
            content.deprecations.push(d);
        }
        _ => {}
    }
    Ok(())
}

/// `group/version/Kind` of an `olm.gvk` value (an object with `group`, `version`,
/// `kind`); a string is kept as it is (already compacted).
pub fn gvk_key(v: &Value) -> Option<String> {
    if let Some(s) = v.as_str() {
        return Some(s.to_owned());
    }
    let field = |k: &str| v.get(k).and_then(Value::as_str);
    Some(format!(
        "{}/{}/{}",
        field("group").unwrap_or_default(),
        field("version")?,
        field("kind")?
    ))
}

/// The first property of each distinct type, in catalog order, with its value for
/// `olm.package` only; every dependency property whole; every `olm.gvk` as
/// [`gvk_key`].
pub fn compact_properties(properties: Vec<Property>) -> Vec<Property> {
    let mut out: Vec<Property> = Vec::new();
    for p in properties {
        if p.type_ == PROPERTY_GVK {
            let value = gvk_key(&p.value).map_or(Value::Null, Value::String);
            out.push(Property {
                type_: p.type_,
                value,
            });
            continue;
        }
        if matches!(
            p.type_.as_str(),
            PROPERTY_PACKAGE_REQUIRED | PROPERTY_GVK_REQUIRED | PROPERTY_CONSTRAINT
        ) {
            out.push(p);
            continue;
        }
        if out.iter().any(|o| o.type_ == p.type_) {
            continue;
        }
        let value = if p.type_ == PROPERTY_PACKAGE {
            p.value
        } else {
            Value::Null
        };
        out.push(Property {
            type_: p.type_,
            value,
        });
    }
    out.shrink_to_fit();
    out
}

/// Releases spare vector capacity once a package is complete.
pub fn finish(content: &mut PackageContent) {
    content.channels.shrink_to_fit();
    content.bundles.shrink_to_fit();
    content.deprecations.shrink_to_fit();
}

/// Parses a JSON Lines body holding (at least) the package's blobs into its compact
/// content. Lines of other packages are skipped when `filter` is set (the `/all`
/// fallback); blank lines are ignored. Errors name the 1-based line.
pub fn parse_jsonl(body: &[u8], package: &str, filter: bool) -> Result<PackageContent, String> {
    let mut content = PackageContent::default();
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        push_line(&mut content, line, package, filter)
            .map_err(|e| format!("line {}: {e}", i + 1))?;
    }
    finish(&mut content);
    Ok(content)
}

/// One line of a JSON Lines body: blank lines are skipped; with `filter`, lines of
/// other packages too.
pub fn push_line(
    content: &mut PackageContent,
    line: &[u8],
    package: &str,
    filter: bool,
) -> Result<(), String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    if filter {
        let meta: MetaView = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        if meta.package() != package {
            return Ok(());
        }
    }
    // A server that serves blobs as written (upstream catalogd with `"Schema"` keys,
    // a key written twice): read them as operator-controller's Go decoder does.
    match crate::fbc::parse::go_normalized(line) {
        Some(normalized) => push_compact(content, &normalized),
        None => push_compact(content, line),
    }
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::String(s) => s.capacity(),
        Value::Array(a) => {
            a.capacity() * size_of::<Value>() + a.iter().map(value_size).sum::<usize>()
        }
        // indexmap: one entry (hash, key, value) plus an index slot per member
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                size_of::<u64>()
                    + size_of::<String>()
                    + k.capacity()
                    + size_of::<Value>()
                    + value_size(v)
                    + size_of::<usize>()
            })
            .sum(),
        _ => 0,
    }
}

fn properties_size(p: &[Property]) -> usize {
    p.iter()
        .map(|p| size_of::<Property>() + p.type_.capacity() + value_size(&p.value))
        .sum()
}

fn opt(s: &Option<String>) -> usize {
    s.as_ref().map_or(0, String::capacity)
}

/// Estimated heap and inline bytes of `content` (what the cache holds for it).
pub fn estimated_size(c: &PackageContent) -> usize {
    let package = c.package.as_ref().map_or(0, |p| {
        size_of::<Package>()
            + p.schema.capacity()
            + p.name.capacity()
            + p.default_channel.capacity()
            + opt(&p.description)
            + p.icon.as_ref().map_or(0, value_size)
            + properties_size(&p.properties)
    });
    let channels: usize = c
        .channels
        .iter()
        .map(|ch| {
            size_of::<Channel>()
                + ch.schema.capacity()
                + ch.name.capacity()
                + ch.package.capacity()
                + properties_size(&ch.properties)
                + (ch.entries.capacity() - ch.entries.len()) * size_of::<ChannelEntry>()
                + ch.entries
                    .iter()
                    .map(|e| {
                        size_of::<ChannelEntry>()
                            + e.name.capacity()
                            + opt(&e.replaces)
                            + e.skips
                                .iter()
                                .map(|s| size_of::<String>() + s.capacity())
                                .sum::<usize>()
                            + opt(&e.skip_range)
                    })
                    .sum::<usize>()
        })
        .sum();
    let bundles: usize = c
        .bundles
        .iter()
        .map(|b| {
            size_of::<Bundle>()
                + b.schema.capacity()
                + b.name.capacity()
                + b.package.capacity()
                + b.image.capacity()
                + properties_size(&b.properties)
                + (b.properties.capacity() - b.properties.len()) * size_of::<Property>()
                + b.related_images
                    .iter()
                    .map(|r| 2 * size_of::<String>() + r.name.capacity() + r.image.capacity())
                    .sum::<usize>()
        })
        .sum();
    let deprecations: usize = c
        .deprecations
        .iter()
        .map(|d| {
            size_of::<Deprecation>()
                + d.schema.capacity()
                + d.package.capacity()
                + d.entries
                    .iter()
                    .map(|e| {
                        size_of::<crate::fbc::model::DeprecationEntry>()
                            + e.reference.schema.capacity()
                            + e.reference.name.capacity()
                            + e.message.capacity()
                    })
                    .sum::<usize>()
        })
        .sum();
    size_of::<PackageContent>() + package + channels + bundles + deprecations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jsonl(blobs: &[Value]) -> Vec<u8> {
        blobs
            .iter()
            .map(|b| format!("{b}\n"))
            .collect::<String>()
            .into_bytes()
    }

    fn catalog() -> Vec<Value> {
        vec![
            json!({"schema": "olm.package", "name": "foo", "defaultChannel": "stable",
                   "icon": {"base64data": "AAAA", "mediatype": "image/png"},
                   "description": "long text"}),
            json!({"schema": "olm.channel", "name": "stable", "package": "foo",
                   "properties": [{"type": "x", "value": 1}],
                   "entries": [{"name": "foo.v1.0.0"},
                               {"name": "foo.v1.1.0", "replaces": "foo.v1.0.0",
                                "skips": ["foo.v0.9.0"], "skipRange": "<1.0.0"}]}),
            json!({"schema": "olm.bundle", "name": "foo.v1.0.0", "package": "foo",
            "image": "reg/foo@sha256:1",
            "relatedImages": [{"name": "op", "image": null}],
            "properties": [
                {"type": "olm.gvk", "value": {"group": "a", "kind": "K", "version": "v1"}},
                {"type": "olm.package", "value": {"packageName": "foo", "version": "1.0.0"}},
                {"type": "olm.gvk", "value": {"group": "b", "kind": "K", "version": "v1"}},
                {"type": "olm.csv.metadata", "value": {"description": "huge"}},
                {"type": "olm.package", "value": {"packageName": "foo", "version": "9.9.9"}}
            ]}),
            json!({"schema": "olm.bundle", "name": "foo.v1.1.0", "package": "foo", "image": null,
                   "properties": [{"type": "olm.package", "value": {"packageName": "foo", "version": "1.1.0"}},
                                  {"type": "olm.gvk.required", "value": {"group": "c"}}]}),
            json!({"schema": "olm.deprecations", "package": "foo",
                   "entries": [{"reference": {"schema": "olm.bundle", "name": "foo.v1.0.0"},
                                "message": "gone"}]}),
            json!({"schema": "olm.bundle", "name": "bar.v1.0.0", "package": "bar", "image": "x"}),
            json!({"schema": "olm.package", "name": "bar", "defaultChannel": "alpha"}),
            json!({"schema": "custom.thing", "package": "foo", "name": "z"}),
        ]
    }

    #[test]
    fn projection_keeps_what_resolution_reads() {
        let body = jsonl(&catalog());
        let c = parse_jsonl(&body, "foo", true).unwrap();
        let p = c.package.as_ref().unwrap();
        assert_eq!(
            (p.name.as_str(), p.default_channel.as_str()),
            ("foo", "stable")
        );
        assert!(p.icon.is_none() && p.description.is_none());
        assert_eq!(c.channels.len(), 1);
        assert!(c.channels[0].properties.is_empty());
        assert_eq!(
            c.channels[0].entries[1].replaces.as_deref(),
            Some("foo.v1.0.0")
        );
        assert_eq!(
            c.channels[0].entries[1].skips,
            vec!["foo.v0.9.0".to_string()]
        );
        assert_eq!(
            c.channels[0].entries[1].skip_range.as_deref(),
            Some("<1.0.0")
        );
        assert_eq!(c.bundles.len(), 2);
        let b = &c.bundles[0];
        assert!(b.related_images.is_empty());
        let types: Vec<_> = b.properties.iter().map(|p| p.type_.as_str()).collect();
        // Every GVK is kept, as one string (dependency checking finds their providers).
        assert_eq!(
            types,
            ["olm.gvk", "olm.package", "olm.gvk", "olm.csv.metadata"]
        );
        assert_eq!(b.properties[0].value, json!("a/v1/K"));
        assert_eq!(b.properties[2].value, json!("b/v1/K"));
        assert_eq!(b.properties[1].value["version"], "1.0.0");
        assert_eq!(b.properties[3].value, Value::Null);
        assert_eq!(c.bundles[1].image, "");
        assert_eq!(c.bundles[1].properties[1].type_, "olm.gvk.required");
        assert_eq!(c.deprecations.len(), 1);
        assert_eq!(c.deprecations[0].entries[0].message, "gone");
    }

    #[test]
    fn resolution_is_unchanged_by_the_projection() {
        use crate::resolve::{Availability, CatalogInput, InstalledBundle, ResolveRequest};
        let mut full = PackageContent::default();
        for blob in catalog() {
            if blob["package"] == "bar" || blob["name"] == "bar" {
                continue;
            }
            // the full model reads `"image": null` as "" too (as Go does)
            full.push_blob(&blob).unwrap();
        }
        let compact = parse_jsonl(&jsonl(&catalog()), "foo", true).unwrap();
        let labels = Default::default();
        let input = |c| {
            [CatalogInput {
                name: "c",
                priority: 0,
                availability: Availability::Available,
                labels: &labels,
                content: Ok(c),
            }]
        };
        let requests = [
            ResolveRequest {
                package: "foo".into(),
                ..Default::default()
            },
            ResolveRequest {
                package: "foo".into(),
                version_range: Some("<1.1".into()),
                ..Default::default()
            },
            ResolveRequest {
                package: "foo".into(),
                installed: Some(InstalledBundle {
                    name: "foo.v1.0.0".into(),
                    version: "1.0.0".into(),
                    release: None,
                }),
                ..Default::default()
            },
        ];
        for r in &requests {
            let a = crate::resolve::resolve(r, &input(&full));
            let b = crate::resolve::resolve(r, &input(&compact));
            assert_eq!(
                a.as_ref().map(|r| &r.bundle),
                b.as_ref().map(|r| &r.bundle),
                "{r:?}"
            );
            assert_eq!(a.map(|r| r.deprecation), b.map(|r| r.deprecation));
        }
        assert!(estimated_size(&compact) < estimated_size(&full));
    }

    #[test]
    fn filter_uses_the_index_rule() {
        let c = parse_jsonl(&jsonl(&catalog()), "bar", true).unwrap();
        assert_eq!(c.package.unwrap().default_channel, "alpha");
        assert_eq!(c.bundles.len(), 1);
        assert!(c.channels.is_empty());
        let none = parse_jsonl(&jsonl(&catalog()), "baz", true).unwrap();
        assert!(none.is_empty());
        // unfiltered: the body is trusted to be the package's
        let all = parse_jsonl(
            b"\n  \n{\"schema\":\"olm.bundle\",\"name\":\"a\",\"package\":\"q\"}\n",
            "q",
            false,
        )
        .unwrap();
        assert_eq!(all.bundles.len(), 1);
    }

    #[test]
    fn errors_name_the_line() {
        let body = b"{\"schema\":\"olm.package\",\"name\":\"foo\"}\n{\"schema\": \"olm.bundle\", \"name\": 3}\n";
        let e = parse_jsonl(body, "foo", false).unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        let e = parse_jsonl(b"{not json\n", "foo", true).unwrap_err();
        assert!(e.starts_with("line 1: "), "{e}");
    }

    #[test]
    fn size_estimate_grows_with_content() {
        let empty = estimated_size(&PackageContent::default());
        let c = parse_jsonl(&jsonl(&catalog()), "foo", true).unwrap();
        let s = estimated_size(&c);
        assert!(s > empty + 500, "{s}");
        assert!(s < 10_000, "{s}");
    }
}
