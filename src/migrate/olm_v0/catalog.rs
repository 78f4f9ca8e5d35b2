//! Catalogs: the ClusterCatalog an image-based CatalogSource becomes (an existing one
//! with the same image reused; priority and poll interval carried over; olm-v0
//! reference §2.2 "Catalogs first"), and the Serving ClusterCatalog that holds the
//! installed package, version and channel (§3.2: the one with the CatalogSource's image
//! first, then the highest priority).

use super::read::{SubscriptionView, text};
use crate::fbc::model::{Bundle, PackageContent};
use serde::Serialize;
use serde_json::{Value, json};

/// One ClusterCatalog of the cluster as the plan sees it.
#[derive(Clone, Debug, Default)]
pub struct CatalogView {
    pub name: String,
    /// `spec.source.image.ref`.
    pub image: Option<String>,
    /// `Serving=True`.
    pub serving: bool,
    pub priority: i32,
    /// The package's content in this catalog; `None` when the catalog does not hold it
    /// (or its content could not be read: see `content_error`).
    pub package: Option<PackageContent>,
    pub content_error: Option<String>,
}

/// The ClusterCatalog that serves the CatalogSource's image.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogPlan {
    pub name: String,
    /// An existing ClusterCatalog with the same image is reused (nothing created).
    pub reused: bool,
    /// The ClusterCatalog to create (`None` when reused).
    pub manifest: Option<Value>,
}

/// The image of a gRPC CatalogSource with `spec.image`; `None` for other kinds.
pub fn catalog_source_image(cs: &Value) -> Option<String> {
    let grpc = text(cs, "/spec/sourceType").is_none_or(|t| t == "grpc");
    grpc.then(|| text(cs, "/spec/image")).flatten()
}

/// Minutes of a Go duration (`10m`, `1h30m`, `45s`, `1h`), rounded up, at least 1.
pub fn duration_minutes(d: &str) -> Option<i32> {
    let mut seconds = 0f64;
    let mut number = String::new();
    let mut chars = d.trim().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push('s');
            chars.next();
        }
        let n: f64 = number.parse().ok()?;
        number.clear();
        seconds += n * match unit.as_str() {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
    }
    if !number.is_empty() || seconds <= 0.0 {
        return None;
    }
    let minutes = (seconds / 60.0).ceil().max(1.0);
    (minutes <= f64::from(i32::MAX)).then_some(minutes as i32)
}

/// The ClusterCatalog for the Subscription's CatalogSource: `None` unless it is
/// image-based.
pub fn plan(
    cs: Option<&Value>,
    sub: &SubscriptionView,
    catalogs: &[CatalogView],
) -> Option<CatalogPlan> {
    let cs = cs?;
    let image = catalog_source_image(cs)?;
    if let Some(existing) = catalogs
        .iter()
        .find(|c| c.image.as_deref() == Some(image.as_str()))
    {
        return Some(CatalogPlan {
            name: existing.name.clone(),
            reused: true,
            manifest: None,
        });
    }
    let base = text(cs, "/metadata/name").unwrap_or_else(|| sub.package.clone());
    let namespace = text(cs, "/metadata/namespace").unwrap_or_default();
    let name = if catalogs.iter().any(|c| c.name == base) {
        format!("{base}-{namespace}")
    } else {
        base
    };
    let mut source = json!({"ref": image});
    // A digest reference never changes: ClusterCatalogs refuse a poll interval then.
    if !image.contains('@')
        && let Some(minutes) = text(cs, "/spec/updateStrategy/registryPoll/interval")
            .and_then(|d| duration_minutes(&d))
    {
        source["pollIntervalMinutes"] = json!(minutes);
    }
    let mut spec = json!({"source": {"type": "Image", "image": source}});
    if let Some(p) = cs.pointer("/spec/priority").and_then(Value::as_i64)
        && p != 0
        && let Ok(p) = i32::try_from(p)
    {
        spec["priority"] = json!(p);
    }
    let manifest = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterCatalog",
        "metadata": {
            "name": name,
            "annotations": {"olm.operatorframework.io/migrated-from-catalogsource": format!("{namespace}/{}", text(cs, "/metadata/name").unwrap_or_default())},
        },
        "spec": spec,
    });
    Some(CatalogPlan {
        name,
        reused: false,
        manifest: Some(manifest),
    })
}

/// What the catalog search found for the installed bundle.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// The Serving ClusterCatalog chosen.
    pub catalog: Option<String>,
    /// The channel the ClusterExtension names (the Subscription's, else the package's
    /// default channel in that catalog).
    pub channel: Option<String>,
    /// The bundle found (its image feeds the installer account).
    pub bundle: Option<Bundle>,
    /// Why each catalog did not fit, for the blocker's words.
    pub misses: Vec<String>,
}

/// Finds a Serving ClusterCatalog holding the package at `version` in the channel.
pub fn find(
    catalogs: &[CatalogView],
    sub: &SubscriptionView,
    version: Option<&str>,
    preferred: Option<&CatalogPlan>,
) -> Found {
    let mut order: Vec<&CatalogView> = catalogs.iter().collect();
    let preferred = preferred.map(|p| p.name.as_str());
    order.sort_by_key(|c| (Some(c.name.as_str()) != preferred, -i64::from(c.priority)));
    let mut found = Found::default();
    for c in order {
        match holds(c, sub, version) {
            Ok((channel, bundle)) => {
                found.catalog = Some(c.name.clone());
                found.channel = Some(channel);
                found.bundle = Some(bundle);
                return found;
            }
            Err(miss) => found.misses.push(format!("{}: {miss}", c.name)),
        }
    }
    found
}

/// The channel and bundle `catalog` serves for the Subscription, or why not.
fn holds(
    c: &CatalogView,
    sub: &SubscriptionView,
    version: Option<&str>,
) -> Result<(String, Bundle), String> {
    if !c.serving {
        return Err("not Serving".into());
    }
    if let Some(e) = &c.content_error {
        return Err(format!("content not readable ({e})"));
    }
    let Some(content) = &c.package else {
        return Err(format!("no package {:?}", sub.package));
    };
    let channel = match (&sub.channel, &content.package) {
        (Some(ch), _) => ch.clone(),
        (None, Some(p)) if !p.default_channel.is_empty() => p.default_channel.clone(),
        _ => return Err("no channel named and no default channel".into()),
    };
    let Some(ch) = content.channels.iter().find(|x| x.name == channel) else {
        return Err(format!("no channel {channel:?}"));
    };
    let Some(version) = version else {
        return Err("installed version unknown".into());
    };
    let bundle = content.bundles.iter().find(|b| {
        b.package_property()
            .and_then(Result::ok)
            .is_some_and(|p| p.version == version)
    });
    let Some(bundle) = bundle else {
        return Err(format!("no version {version}"));
    };
    if !ch.entries.iter().any(|e| e.name == bundle.name) {
        return Err(format!(
            "version {version} (bundle {}) is not in channel {channel:?}",
            bundle.name
        ));
    }
    Ok((channel, bundle.clone()))
}
