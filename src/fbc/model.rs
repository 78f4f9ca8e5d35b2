//! Typed file-based catalog (FBC) blobs: `olm.package`, `olm.channel`, `olm.bundle`
//! and `olm.deprecations`, plus [`PackageContent`], everything a catalog holds for one
//! package. These are plain data types with serde mappings matching the FBC schema
//! (operator-registry `declcfg`); parsing whole catalogs, validation and indexing live
//! in sibling modules. Unknown fields are ignored here; raw blobs are kept by the
//! storage layer so that the catalog server serves them unchanged.

use crate::version::{BundleVersion, VersionError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SCHEMA_PACKAGE: &str = "olm.package";
pub const SCHEMA_CHANNEL: &str = "olm.channel";
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

pub const PROPERTY_PACKAGE: &str = "olm.package";
pub const PROPERTY_GVK: &str = "olm.gvk";
pub const PROPERTY_PACKAGE_REQUIRED: &str = "olm.package.required";
pub const PROPERTY_GVK_REQUIRED: &str = "olm.gvk.required";
pub const PROPERTY_CONSTRAINT: &str = "olm.constraint";
pub const PROPERTY_CSV_METADATA: &str = "olm.csv.metadata";
pub const PROPERTY_BUNDLE_OBJECT: &str = "olm.bundle.object";

/// The three fields every FBC blob is indexed by (`schema`, `package`, `name`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaKey {
    pub schema: String,
    #[serde(default)]
    pub package: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Package {
    pub schema: String,
    pub name: String,
    #[serde(
        rename = "defaultChannel",
        default,
        deserialize_with = "null_as_default"
    )]
    pub default_channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    pub schema: String,
    pub name: String,
    pub package: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub entries: Vec<ChannelEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub skips: Vec<String>,
    #[serde(rename = "skipRange", default, skip_serializing_if = "Option::is_none")]
    pub skip_range: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub schema: String,
    pub name: String,
    pub package: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub image: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub properties: Vec<Property>,
    #[serde(
        rename = "relatedImages",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub related_images: Vec<RelatedImage>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedImage {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Real catalogs contain `"image": null` (rendered from CSVs with empty related images).
    #[serde(default, deserialize_with = "null_as_default")]
    pub image: String,
}

/// Deserializes `null` as the type's default value.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Property {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub value: Value,
}

/// The value of an `olm.package` property on a bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageProperty {
    #[serde(rename = "packageName")]
    pub package_name: String,
    pub version: String,
    /// Newer catalogs carry an explicit release (docs/concepts/resolution.md §4.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Deprecation {
    pub schema: String,
    pub package: String,
    #[serde(default)]
    pub entries: Vec<DeprecationEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecationEntry {
    pub reference: PackageScopedReference,
    #[serde(default)]
    pub message: String,
}

/// `reference` of a deprecation entry: `schema` is `olm.package` (no name),
/// `olm.channel` or `olm.bundle` (with the channel or bundle name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageScopedReference {
    pub schema: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Everything one catalog holds for one package: what resolution reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackageContent {
    pub package: Option<Package>,
    pub channels: Vec<Channel>,
    pub bundles: Vec<Bundle>,
    pub deprecations: Vec<Deprecation>,
}

impl Bundle {
    /// The properties of the given type, in catalog order.
    pub fn properties_of<'a>(&'a self, type_: &'a str) -> impl Iterator<Item = &'a Property> + 'a {
        self.properties.iter().filter(move |p| p.type_ == type_)
    }

    /// The bundle's `olm.package` property, if exactly parseable.
    pub fn package_property(&self) -> Option<Result<PackageProperty, serde_json::Error>> {
        self.properties_of(PROPERTY_PACKAGE)
            .next()
            .map(|p| serde_json::from_value(p.value.clone()))
    }
}

/// Reading a bundle's version is FBC knowledge (its `olm.package` property), so it lives
/// here; the version rules themselves are [`crate::version`]'s.
impl BundleVersion {
    /// The version and release of an FBC bundle from its `olm.package` property.
    pub fn of_bundle(bundle: &Bundle) -> Result<BundleVersion, VersionError> {
        let prop = bundle
            .properties
            .iter()
            .find(|p| p.type_ == PROPERTY_PACKAGE)
            .ok_or(VersionError::MissingProperty)?;
        let version = prop
            .value
            .get("version")
            .and_then(|v| v.as_str())
            .ok_or(VersionError::MissingVersion)?;
        let release = prop.value.get("release").and_then(|v| v.as_str());
        BundleVersion::new(version, release)
    }
}

impl PackageContent {
    /// Adds one blob of this package (any schema); blobs of other schemas are ignored.
    pub fn push_blob(&mut self, blob: &Value) -> Result<(), serde_json::Error> {
        match blob.get("schema").and_then(Value::as_str) {
            Some(SCHEMA_PACKAGE) => self.package = Some(Package::deserialize(blob)?),
            Some(SCHEMA_CHANNEL) => self.channels.push(Channel::deserialize(blob)?),
            Some(SCHEMA_BUNDLE) => self.bundles.push(Bundle::deserialize(blob)?),
            Some(SCHEMA_DEPRECATIONS) => self.deprecations.push(Deprecation::deserialize(blob)?),
            _ => {}
        }
        Ok(())
    }

    /// [`Self::push_blob`] straight from the blob's JSON, without a `serde_json::Value`
    /// in between (for a channel of a million entries that tree took ~0.5 GB). A blob the
    /// typed read refuses (a key written twice) goes through [`Self::push_blob`], which
    /// keeps the last value as before.
    pub fn push_json(&mut self, schema: &str, json: &[u8]) -> Result<(), serde_json::Error> {
        let typed = match schema {
            SCHEMA_PACKAGE => serde_json::from_slice(json).map(|p| self.package = Some(p)),
            SCHEMA_CHANNEL => serde_json::from_slice(json).map(|mut c: Channel| {
                // Read from bytes, lists grow by doubling (from a Value they are sized).
                c.entries.shrink_to_fit();
                self.channels.push(c)
            }),
            SCHEMA_BUNDLE => serde_json::from_slice(json).map(|mut b: Bundle| {
                b.properties.shrink_to_fit();
                b.related_images.shrink_to_fit();
                self.bundles.push(b)
            }),
            SCHEMA_DEPRECATIONS => serde_json::from_slice(json).map(|d| self.deprecations.push(d)),
            _ => Ok(()),
        };
        match typed {
            Ok(()) => Ok(()),
            Err(_) => self.push_blob(&serde_json::from_slice(json)?),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.package.is_none() && self.channels.is_empty() && self.bundles.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_in_real_catalogs_are_tolerated() {
        let b: Bundle = serde_json::from_str(
            r#"{"schema":"olm.bundle","name":"b","package":"p","image":null,"properties":null,
                "relatedImages":[{"name":"redis","image":null},{"name":null,"image":"x"}]}"#,
        )
        .unwrap();
        assert_eq!(b.image, "");
        assert_eq!(b.related_images[0].image, "");
        assert_eq!(b.related_images[1].name, "");
        let c: Channel = serde_json::from_str(
            r#"{"schema":"olm.channel","name":"c","package":"p","entries":[{"name":"b","skips":null}]}"#,
        )
        .unwrap();
        assert!(c.entries[0].skips.is_empty());
        assert!(
            serde_json::from_str::<Bundle>(
                r#"{"schema":"olm.bundle","name":"b","package":"p","image":5}"#
            )
            .is_err()
        );
    }

    #[test]
    fn push_json_reads_typed_and_falls_back_for_keys_written_twice() {
        let mut c = PackageContent::default();
        c.push_json(
            SCHEMA_BUNDLE,
            br#"{"schema":"olm.bundle","name":"b","package":"p","image":"a","image":"b"}"#,
        )
        .unwrap();
        c.push_json(
            SCHEMA_CHANNEL,
            br#"{"schema":"olm.channel","name":"c","package":"p","entries":[{"name":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(
            c.bundles[0].image, "b",
            "the last value, as through a Value"
        );
        assert_eq!(c.channels[0].entries[0].name, "b");
        assert!(
            c.push_json(
                SCHEMA_BUNDLE,
                br#"{"schema":"olm.bundle","name":"b","package":"p","image":5}"#
            )
            .is_err()
        );
    }

    #[test]
    fn from_bundle_property() {
        let mut b = Bundle {
            name: "x.v1".into(),
            ..Default::default()
        };
        assert_eq!(
            BundleVersion::of_bundle(&b),
            Err(VersionError::MissingProperty)
        );
        b.properties.push(Property {
            type_: "olm.package".into(),
            value: serde_json::json!({"packageName": "x", "version": "1.2.3", "release": "4"}),
        });
        let v = BundleVersion::of_bundle(&b).unwrap();
        assert_eq!(v.status_version(), "1.2.3");
        assert_eq!(v.status_release(), "4");
        b.properties[0].value = serde_json::json!({"packageName": "x"});
        assert_eq!(
            BundleVersion::of_bundle(&b),
            Err(VersionError::MissingVersion)
        );
    }
}
