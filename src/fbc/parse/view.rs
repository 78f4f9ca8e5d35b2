//! [`BlobView`]: the few keys of a blob that indexing and validation read (schema,
//! package, name, default channel, channel entries, `olm.package` properties),
//! deserialized in one pass that skips everything else; [`parse_view`] falls back to
//! the bare keys for schemas this project does not know.

use super::super::model::{
    PROPERTY_PACKAGE, PackageProperty, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS,
    SCHEMA_PACKAGE,
};
use super::go_keys;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// The parts of a blob that indexing and validation read; everything else is skipped
/// while parsing (but the blob is fully checked for JSON syntax).
#[derive(Debug, Default)]
pub struct BlobView {
    pub schema: Option<String>,
    pub package: Option<String>,
    pub name: Option<String>,
    pub default_channel: Option<String>,
    pub entries: Option<Vec<EntryView>>,
    pub properties: Option<Vec<PropertyView>>,
    /// Set when the blob was normalized as Go's `encoding/json` reads it (keys matched
    /// case-insensitively, a key written twice): what was done, reported as a catalog
    /// warning ([`go_keys`]).
    pub normalized: Option<String>,
    /// A view key written twice, or a key that only case-insensitively matches one:
    /// the blob needs [`go_keys::normalize`].
    pub(super) needs_go_keys: bool,
}

impl<'de> Deserialize<'de> for BlobView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlobView;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BlobView, A::Error> {
                let mut v = BlobView::default();
                // Seen view keys (bit per key of go_keys::VIEW_KEYS), for duplicates.
                let mut seen = 0u8;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let bit = match key.as_ref() {
                        "schema" => {
                            v.schema = map.next_value()?;
                            1
                        }
                        "package" => {
                            v.package = map.next_value()?;
                            2
                        }
                        "name" => {
                            v.name = map.next_value()?;
                            4
                        }
                        "defaultChannel" => {
                            v.default_channel = map.next_value()?;
                            8
                        }
                        "entries" => {
                            v.entries = map.next_value::<Option<Entries>>()?.map(|e| e.0);
                            16
                        }
                        "properties" => {
                            v.properties = map.next_value()?;
                            32
                        }
                        other => {
                            if go_keys::folds_to_view_key(other) {
                                v.needs_go_keys = true;
                            }
                            map.next_value::<IgnoredAny>()?;
                            0
                        }
                    };
                    if seen & bit != 0 {
                        v.needs_go_keys = true;
                    }
                    seen |= bit;
                }
                Ok(v)
            }
        }
        d.deserialize_map(V)
    }
}

/// `entries`, refused beyond [`MAX_BLOBS`](super::MAX_BLOBS) while it is read: a
/// channel cannot list more bundles than a catalog may hold, and a blob of a million
/// entries (25 MB, within the blob size limit) would otherwise cost ~60 MB of views
/// before the blob count could stop the catalog.
struct Entries(Vec<EntryView>);

/// Names the limit in the error of a list of entries that is too long; the parser does
/// not retry such a blob in another reading ([`is_limit`]).
const ENTRIES_LIMIT: &str = "limit max_blobs";

/// Whether `e` is the refusal of a list of entries longer than the limit: reading the
/// blob another way (as Go's decoder would, into a full `Value`) would cost what the
/// limit is there to avoid.
pub(super) fn is_limit(e: &serde_json::Error) -> bool {
    e.to_string().contains(ENTRIES_LIMIT)
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of entries")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<EntryView>()? {
                    if entries.len() as u64 >= super::MAX_BLOBS {
                        return Err(serde::de::Error::custom(format_args!(
                            "entries: more than {} entries ({ENTRIES_LIMIT}: a channel cannot list more bundles than a catalog may hold); split the catalog",
                            super::MAX_BLOBS
                        )));
                    }
                    entries.push(entry);
                }
                entries.shrink_to_fit();
                Ok(Entries(entries))
            }
        }
        d.deserialize_seq(V)
    }
}

/// An entry of `olm.channel` (`name`) or of `olm.deprecations` (`reference`, whether
/// it has a `message`). Kept small (32 bytes): a channel blob may list a million entries.
#[derive(Debug, Default, Deserialize)]
pub struct EntryView {
    #[serde(default)]
    pub name: Option<Box<str>>,
    #[serde(default)]
    pub reference: Option<Box<ReferenceView>>,
    /// `message` is present and not empty (its text is not kept).
    #[serde(default, rename = "message", deserialize_with = "non_empty_string")]
    pub has_message: bool,
}

/// Whether an optional string is present and not empty.
fn non_empty_string<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<std::borrow::Cow<'de, str>>::deserialize(d)?.is_some_and(|s| !s.is_empty()))
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq, Hash)]
pub struct ReferenceView {
    #[serde(default)]
    pub schema: String,
    #[serde(default)]
    pub name: String,
}

/// A property: its type, and for `olm.package` its parsed value (other values are skipped).
#[derive(Debug, Default)]
pub struct PropertyView {
    pub type_: String,
    pub package: Option<Result<PackageProperty, String>>,
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

impl BlobView {
    pub fn schema(&self) -> &str {
        self.schema.as_deref().unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    /// The package a blob belongs to: `name` for `olm.package`, else `package`.
    pub fn package(&self) -> &str {
        match (self.schema(), self.package.as_deref()) {
            (SCHEMA_PACKAGE, None | Some("")) => self.name(),
            (_, p) => p.unwrap_or_default(),
        }
    }
}

impl<'de> Deserialize<'de> for PropertyView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PropertyView;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a property object with \"type\" and \"value\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PropertyView, A::Error> {
                let mut type_: Option<String> = None;
                let mut package = None;
                let mut deferred: Option<Value> = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "type" => type_ = Some(map.next_value()?),
                        "value" => match type_.as_deref() {
                            Some(PROPERTY_PACKAGE) => {
                                package = Some(parse_package(map.next_value()?))
                            }
                            Some(_) => {
                                map.next_value::<IgnoredAny>()?;
                            }
                            None => deferred = Some(map.next_value()?),
                        },
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let type_ = type_.ok_or_else(|| serde::de::Error::missing_field("type"))?;
                if type_ == PROPERTY_PACKAGE && package.is_none() {
                    package = Some(match deferred {
                        Some(v) => parse_package(v),
                        None => Err("missing value".to_string()),
                    });
                }
                Ok(PropertyView { type_, package })
            }
        }
        d.deserialize_map(V)
    }
}

fn parse_package(v: Value) -> Result<PackageProperty, String> {
    serde_json::from_value::<PackageProperty>(v).map_err(|e| e.to_string())
}

pub(super) fn parse_view(json: &[u8]) -> Result<BlobView, serde_json::Error> {
    match serde_json::from_slice::<BlobView>(json) {
        Ok(v) => Ok(v),
        Err(e) => {
            // Unknown schemas may use `entries`/`properties` differently: keep only the keys.
            let meta: MetaOnly = serde_json::from_slice(json)?;
            let schema = meta.schema.as_deref().unwrap_or_default();
            if [
                SCHEMA_PACKAGE,
                SCHEMA_CHANNEL,
                SCHEMA_BUNDLE,
                SCHEMA_DEPRECATIONS,
            ]
            .contains(&schema)
            {
                return Err(e);
            }
            Ok(BlobView {
                schema: meta.schema,
                package: meta.package,
                name: meta.name,
                ..BlobView::default()
            })
        }
    }
}
