//! Catalog queries for `olmv1 catalog`: one pass over a catalog builds small records of
//! packages, channels and bundles (install modes and webhooks taken from
//! `olm.csv.metadata`, or from the CSV inside `olm.bundle.object`), which pure filter
//! functions then select from. Raw blobs are only kept for `show`.

use super::model::{
    Bundle, Channel, ChannelEntry, PROPERTY_BUNDLE_OBJECT, PROPERTY_CONSTRAINT,
    PROPERTY_CSV_METADATA, PROPERTY_GVK, PROPERTY_GVK_REQUIRED, PROPERTY_PACKAGE_REQUIRED, Package,
    SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use super::{FbcError, Limits, walk_catalog};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PackageRecord {
    pub name: String,
    #[serde(rename = "defaultChannel")]
    pub default_channel: String,
    pub channels: Vec<String>,
    /// Highest bundle version in the default channel.
    #[serde(rename = "latestVersion", skip_serializing_if = "Option::is_none")]
    pub latest_version: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChannelRecord {
    pub package: String,
    pub name: String,
    /// Bundle with the highest version among the entries.
    pub head: Option<String>,
    #[serde(rename = "headVersion", skip_serializing_if = "Option::is_none")]
    pub head_version: Option<String>,
    pub entries: Vec<ChannelEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BundleRecord {
    pub package: String,
    pub name: String,
    pub version: String,
    pub image: String,
    pub channels: Vec<String>,
    /// Supported install modes; `None` when the catalog does not say.
    #[serde(rename = "installModes")]
    pub install_modes: Option<Vec<String>>,
    /// Whether the CSV declares webhooks; `None` when the catalog does not say
    /// (`olm.csv.metadata` does not carry webhook definitions).
    pub webhooks: Option<bool>,
    #[serde(rename = "providedAPIs")]
    pub provided_apis: Vec<String>,
    /// `olm.gvk.required`, `olm.package.required` and `olm.constraint` properties.
    pub dependencies: Vec<String>,
    /// Entries of channels that name this bundle: (channel, replaces, skips, skipRange).
    #[serde(rename = "upgradeEdges", skip_serializing_if = "Vec::is_empty")]
    pub upgrade_edges: Vec<UpgradeEdge>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UpgradeEdge {
    pub channel: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    #[serde(rename = "skipRange", skip_serializing_if = "Option::is_none")]
    pub skip_range: Option<String>,
}

/// What one pass over a catalog collected.
#[derive(Debug, Default)]
pub struct CatalogData {
    pub packages: Vec<Package>,
    pub channels: Vec<Channel>,
    pub bundles: Vec<BundleRecord>,
}

/// Bundle and channel filters of the query commands.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub package: Option<String>,
    pub channel: Option<String>,
    pub install_mode: Option<String>,
    pub no_webhooks: bool,
    /// Only bundles whose version satisfies this range (`spec.source.catalog.version` syntax).
    pub version: Option<crate::version::Constraints>,
}

impl Filter {
    fn package_ok(&self, p: &str) -> bool {
        self.package.as_deref().is_none_or(|x| x == p)
    }

    pub fn bundle_ok(&self, b: &BundleRecord) -> bool {
        self.package_ok(&b.package)
            && self
                .channel
                .as_deref()
                .is_none_or(|c| b.channels.iter().any(|x| x == c))
            && self.install_mode.as_deref().is_none_or(|m| {
                b.install_modes
                    .as_ref()
                    .is_some_and(|ms| ms.iter().any(|x| x.eq_ignore_ascii_case(m)))
            })
            && !(self.no_webhooks && b.webhooks == Some(true))
            && self.version.as_ref().is_none_or(|range| {
                semver::Version::parse(b.version.trim_start_matches('v'))
                    .is_ok_and(|v| range.matches(&v))
            })
    }

    fn bundle_filters(&self) -> bool {
        self.install_mode.is_some() || self.no_webhooks || self.version.is_some()
    }
}

/// Reads the records of a local catalog (file or directory); only the package named by
/// `only_package` (if any) is fully parsed.
pub fn load(source: &Path, only_package: Option<&str>) -> Result<CatalogData, FbcError> {
    let mut data = CatalogData::default();
    walk_catalog(source, &Limits::default(), &mut |blob| {
        if only_package.is_some_and(|p| p != blob.view.package()) {
            return Ok(());
        }
        let schema = blob.view.schema();
        if ![SCHEMA_PACKAGE, SCHEMA_CHANNEL, SCHEMA_BUNDLE].contains(&schema) {
            return Ok(());
        }
        let err = |e: serde_json::Error| FbcError::Parse {
            path: blob.path.to_path_buf(),
            message: format!("{schema} blob at line {}: {e}", blob.line),
        };
        match schema {
            SCHEMA_PACKAGE => data
                .packages
                .push(serde_json::from_slice(blob.json).map_err(err)?),
            SCHEMA_CHANNEL => data
                .channels
                .push(serde_json::from_slice(blob.json).map_err(err)?),
            _ => {
                let bundle: Bundle = serde_json::from_slice(blob.json).map_err(err)?;
                data.bundles.push(bundle_record(&bundle));
            }
        }
        Ok(())
    })?;
    link_channels(&mut data);
    Ok(data)
}

/// Adds to every bundle the channels that name it and their upgrade edges. The bundles
/// are looked up through a sorted list of indexes (8 bytes per bundle, no copies of
/// names), the last of equal (package, name) bundles winning.
fn link_channels(data: &mut CatalogData) {
    let CatalogData {
        channels, bundles, ..
    } = data;
    let mut order: Vec<usize> = (0..bundles.len()).collect();
    fn key(b: &BundleRecord) -> (&str, &str) {
        (b.package.as_str(), b.name.as_str())
    }
    order.sort_by(|&a, &b| key(&bundles[a]).cmp(&key(&bundles[b])));
    for ch in channels.iter() {
        for e in &ch.entries {
            let target = (ch.package.as_str(), e.name.as_str());
            let upper = order.partition_point(|&i| key(&bundles[i]) <= target);
            let Some(&i) = upper.checked_sub(1).map(|u| &order[u]) else {
                continue;
            };
            if key(&bundles[i]) != target {
                continue;
            }
            let b = &mut bundles[i];
            b.channels.push(ch.name.clone());
            b.upgrade_edges.push(UpgradeEdge {
                channel: ch.name.clone(),
                replaces: e.replaces.clone(),
                skips: e.skips.clone(),
                skip_range: e.skip_range.clone(),
            });
        }
    }
}

/// Summarises one bundle blob.
pub fn bundle_record(b: &Bundle) -> BundleRecord {
    let version = b
        .package_property()
        .and_then(Result::ok)
        .map(|p| p.version)
        .unwrap_or_default();
    let mut rec = BundleRecord {
        package: b.package.clone(),
        name: b.name.clone(),
        version,
        image: b.image.clone(),
        ..BundleRecord::default()
    };
    for p in &b.properties {
        match p.type_.as_str() {
            PROPERTY_GVK => rec.provided_apis.push(gvk(&p.value)),
            PROPERTY_GVK_REQUIRED => rec.dependencies.push(format!("gvk {}", gvk(&p.value))),
            PROPERTY_PACKAGE_REQUIRED => rec.dependencies.push(format!(
                "package {} {}",
                p.value["packageName"].as_str().unwrap_or_default(),
                p.value["versionRange"].as_str().unwrap_or_default()
            )),
            PROPERTY_CONSTRAINT => rec.dependencies.push(format!("constraint {}", p.value)),
            PROPERTY_CSV_METADATA => {
                if let Some(modes) = p.value.get("installModes") {
                    rec.install_modes = Some(supported_modes(modes));
                }
            }
            PROPERTY_BUNDLE_OBJECT => {
                if let Some(csv) =
                    decode_object(&p.value).filter(|o| o["kind"] == "ClusterServiceVersion")
                {
                    if let Some(modes) = csv["spec"].get("installModes") {
                        rec.install_modes = Some(supported_modes(modes));
                    }
                    rec.webhooks = Some(
                        csv["spec"]["webhookdefinitions"]
                            .as_array()
                            .is_some_and(|w| !w.is_empty()),
                    );
                }
            }
            _ => {}
        }
    }
    rec
}

fn gvk(v: &Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let group = s("group");
    if group.is_empty() {
        format!("{}/{}", s("version"), s("kind"))
    } else {
        format!("{group}/{}/{}", s("version"), s("kind"))
    }
}

fn supported_modes(modes: &Value) -> Vec<String> {
    modes
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["supported"] == true)
        .filter_map(|m| m["type"].as_str().map(str::to_string))
        .collect()
}

/// The manifest inside an `olm.bundle.object` property (`{"data": base64}`).
fn decode_object(v: &Value) -> Option<Value> {
    let data = v.get("data")?.as_str()?;
    let bytes = data_encoding::BASE64.decode(data.as_bytes()).ok()?;
    serde_json::from_slice(&bytes).ok().or_else(|| {
        let text = String::from_utf8(bytes).ok()?;
        crate::yaml::from_str::<Value>(&text, serde_saphyr::Options::default()).ok()
    })
}

fn version_of(s: &str) -> Option<semver::Version> {
    semver::Version::parse(s).ok()
}

/// Packages matching the filter (with bundle filters: packages with at least one
/// matching bundle), sorted by name.
pub fn packages(data: &CatalogData, f: &Filter) -> Vec<PackageRecord> {
    let mut out: Vec<PackageRecord> = data
        .packages
        .iter()
        .filter(|p| f.package_ok(&p.name))
        .filter(|p| {
            !f.bundle_filters()
                || data
                    .bundles
                    .iter()
                    .any(|b| b.package == p.name && f.bundle_ok(b))
        })
        .map(|p| {
            let channels: Vec<String> = data
                .channels
                .iter()
                .filter(|c| c.package == p.name)
                .map(|c| c.name.clone())
                .collect();
            let latest_version = data
                .bundles
                .iter()
                .filter(|b| b.package == p.name && b.channels.contains(&p.default_channel))
                .filter_map(|b| version_of(&b.version))
                .max()
                .map(|v| v.to_string());
            PackageRecord {
                name: p.name.clone(),
                default_channel: p.default_channel.clone(),
                channels,
                latest_version,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Channels matching the package/channel filter, by package then name.
pub fn channels(data: &CatalogData, f: &Filter) -> Vec<ChannelRecord> {
    let versions: BTreeMap<(&str, &str), &str> = data
        .bundles
        .iter()
        .map(|b| ((b.package.as_str(), b.name.as_str()), b.version.as_str()))
        .collect();
    let mut out: Vec<ChannelRecord> = data
        .channels
        .iter()
        .filter(|c| f.package_ok(&c.package) && f.channel.as_deref().is_none_or(|x| x == c.name))
        .map(|c| {
            let head = c
                .entries
                .iter()
                .filter_map(|e| {
                    let v = versions
                        .get(&(c.package.as_str(), e.name.as_str()))
                        .and_then(|v| version_of(v))?;
                    Some((v, e.name.clone()))
                })
                .max();
            ChannelRecord {
                package: c.package.clone(),
                name: c.name.clone(),
                head_version: head.as_ref().map(|h| h.0.to_string()),
                head: head.map(|h| h.1),
                entries: c.entries.clone(),
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    out
}

/// Bundles matching the filter, by package then ascending version.
pub fn bundles(data: &CatalogData, f: &Filter) -> Vec<BundleRecord> {
    let mut out: Vec<BundleRecord> = data
        .bundles
        .iter()
        .filter(|b| f.bundle_ok(b))
        .cloned()
        .collect();
    out.sort_by(|a, b| {
        (&a.package, version_of(&a.version), &a.name).cmp(&(
            &b.package,
            version_of(&b.version),
            &b.name,
        ))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_data(dir: &str) -> Option<CatalogData> {
        let d = crate::testenv::shared_dir("fixtures/catalogs")?;
        Some(load(&d.join(dir), None).unwrap())
    }

    #[test]
    fn csv_metadata_style_fixture() {
        let Some(data) = fixture_data("v4.20") else {
            return;
        };
        let f = Filter {
            package: Some("ecr-secret-operator".into()),
            ..Filter::default()
        };
        let bs = bundles(&data, &f);
        assert_eq!(bs.len(), 4);
        assert!(
            bs.iter()
                .all(|b| b.install_modes.is_some() && b.webhooks.is_none())
        );
        assert!(bs.iter().all(|b| b.channels == ["alpha"]));
        let vs: Vec<_> = bs.iter().map(|b| b.version.as_str()).collect();
        let mut sorted = vs.clone();
        sorted.sort_by_key(|v| semver::Version::parse(v).unwrap());
        assert_eq!(vs, sorted);
        let ch = channels(&data, &f);
        assert_eq!(ch.len(), 1);
        assert_eq!(ch[0].head_version.as_deref(), Some(sorted[3]));
        let ps = packages(&data, &Filter::default());
        assert!(
            ps.iter()
                .any(|p| p.name == "kubevirt-wol" && p.channels.len() == 3),
            "{ps:?}"
        );
    }

    #[test]
    fn bundle_object_style_fixture_reads_the_csv() {
        let Some(data) = fixture_data("v4.16") else {
            return;
        };
        let bs = bundles(&data, &Filter::default());
        assert_eq!(bs.len(), 4);
        for b in &bs {
            assert!(b.install_modes.is_some(), "{b:?}");
            assert_eq!(b.webhooks, Some(false), "{b:?}");
            assert!(!b.provided_apis.is_empty());
        }
    }

    fn rec(package: &str, modes: Option<&[&str]>, webhooks: Option<bool>) -> BundleRecord {
        BundleRecord {
            package: package.into(),
            name: format!("{package}.v1"),
            version: "1.0.0".into(),
            channels: vec!["stable".into()],
            install_modes: modes.map(|m| m.iter().map(|s| s.to_string()).collect()),
            webhooks,
            ..BundleRecord::default()
        }
    }

    #[test]
    fn install_mode_and_webhook_filters() {
        let data = CatalogData {
            packages: ["a", "b", "c", "d"]
                .iter()
                .map(|n| Package {
                    name: n.to_string(),
                    default_channel: "stable".into(),
                    ..Package::default()
                })
                .collect(),
            channels: vec![],
            bundles: vec![
                rec("a", Some(&["AllNamespaces", "OwnNamespace"]), Some(false)),
                rec("b", Some(&["OwnNamespace"]), None),
                rec("c", Some(&["AllNamespaces"]), Some(true)),
                rec("d", None, None),
            ],
        };
        let f = Filter {
            install_mode: Some("AllNamespaces".into()),
            no_webhooks: true,
            ..Filter::default()
        };
        let names: Vec<_> = packages(&data, &f).into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["a"]);
        let f = Filter {
            install_mode: Some("allnamespaces".into()),
            ..Filter::default()
        };
        assert_eq!(packages(&data, &f).len(), 2);
        let f = Filter {
            no_webhooks: true,
            ..Filter::default()
        };
        assert_eq!(bundles(&data, &f).len(), 3);
        let f = Filter {
            channel: Some("beta".into()),
            ..Filter::default()
        };
        assert!(bundles(&data, &f).is_empty());
    }

    #[test]
    fn version_range_filter() {
        let mut bundles_in = Vec::new();
        for v in ["0.9.0", "1.2.0", "1.14.3", "2.0.0", "not-semver"] {
            let mut b = rec("a", None, None);
            b.version = v.into();
            b.name = format!("a.v{v}");
            bundles_in.push(b);
        }
        let data = CatalogData {
            packages: vec![],
            channels: vec![],
            bundles: bundles_in,
        };
        let filter = |range: &str| Filter {
            version: Some(crate::version::Constraints::parse(range).expect("range")),
            ..Filter::default()
        };
        let names = |f: &Filter| {
            bundles(&data, f)
                .into_iter()
                .map(|b| b.version)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&filter(">=1.2, <2")), ["1.2.0", "1.14.3"]);
        assert_eq!(names(&filter("1.14.x")), ["1.14.3"]);
        assert_eq!(names(&filter("^0.9")), ["0.9.0"]);
        assert!(names(&filter(">=3")).is_empty());
    }
}
