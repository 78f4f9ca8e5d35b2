//! The I/O edge of dependency checking (docs/concepts/dependencies.md §2): when the
//! resolved bundle declares dependencies, gathers the facts
//! [`crate::resolve::dependencies::check`] decides on — the installed ClusterExtensions,
//! whether discovery serves the required GVKs, the catalogs' content of the packages the
//! check asks for (a bounded number of rounds) — and lets
//! [`crate::resolve::dependencies::settle::settle`] turn the verdict into the resolution
//! result. Decides nothing itself.

use super::ExtensionContext;
use super::plan::Note;
use crate::api::{ClusterCatalog, ClusterExtension};
use crate::content::CatalogContent;
use crate::fbc::model::Property;
use crate::resolve::dependencies::{self, Catalogs, Check, Cluster, Dependent, Gvk, settle};
use crate::resolve::{Explanation, Resolution};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;
use std::collections::BTreeMap;

/// How many times the catalogs are read for packages the check names.
const MAX_ROUNDS: usize = 8;

/// Settles `explained` (from `resolve::explain_with_dependencies`, whose winner
/// declares `props`) for `ext` against the cluster and the `catalogs`.
pub(super) async fn settle_resolution(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    catalogs: &[ClusterCatalog],
    explained: Explanation,
    props: &[Property],
) -> Result<Explanation, kube::Error> {
    let Ok(resolution) = &explained.result else {
        return Ok(explained);
    };
    if props.is_empty() {
        return Ok(explained);
    }
    let check = match dependencies::parse(props) {
        Ok(deps) => Ok(check(ctx, ext, catalogs, resolution, &deps).await?),
        Err(e) => Err(e),
    };
    let mut created = Vec::new();
    if let Ok(c) = &check {
        for object in settle::dependency_extensions(ext, c) {
            if let Some(name) = create(ctx, object).await? {
                created.push(name);
            }
        }
    }
    if let Ok(c) = &check {
        tracing::info!(
            extension = %ext.name_any(),
            bundle = %resolution.bundle.name,
            missing = c.missing.len(),
            "checked the bundle's dependencies"
        );
    }
    let check = check.as_ref().map_err(Clone::clone);
    Ok(settle::settle(explained, props, check, &created))
}

async fn check(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    catalogs: &[ClusterCatalog],
    resolution: &Resolution,
    deps: &[dependencies::Dependency],
) -> Result<Check, kube::Error> {
    let name = ext.name_any();
    let extensions = Api::<ClusterExtension>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?;
    let mut cluster = Cluster {
        extensions: extensions
            .items
            .iter()
            .filter(|e| e.name_any() != name)
            .filter_map(settle::installed_of)
            .collect(),
        ..Default::default()
    };
    for gvk in settle::required_gvks(deps) {
        if served(&ctx.client, &gvk).await? {
            cluster.served.insert(gvk);
        }
    }
    let version = resolution.bundle.version.status_version();
    let dependent = Dependent {
        bundle: &resolution.bundle.name,
        package: &resolution.bundle.package,
        version: &version,
        scope: settle::scope_of(&ext.spec),
        dependencies: deps,
    };
    let mut read: BTreeMap<String, Vec<CatalogContent>> = BTreeMap::new();
    for _ in 0..MAX_ROUNDS {
        let inputs: Catalogs<'_> = read
            .iter()
            .map(|(p, c)| (p.clone(), c.iter().map(CatalogContent::input).collect()))
            .collect();
        let checked = dependencies::check(&dependent, &cluster, &inputs);
        let need: Vec<String> = checked
            .need
            .iter()
            .filter(|p| !read.contains_key(*p))
            .cloned()
            .collect();
        drop(inputs);
        if need.is_empty() {
            return Ok(checked);
        }
        for package in need {
            let contents = ctx.content.catalog_contents(catalogs, &package, None).await;
            read.insert(package, contents);
        }
    }
    let inputs: Catalogs<'_> = read
        .iter()
        .map(|(p, c)| (p.clone(), c.iter().map(CatalogContent::input).collect()))
        .collect();
    Ok(dependencies::check(&dependent, &cluster, &inputs))
}

/// Creates a dependency ClusterExtension unless one of that name exists; its name when
/// created.
async fn create(ctx: &ExtensionContext, object: Value) -> Result<Option<String>, kube::Error> {
    let ext: ClusterExtension = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    let name = ext.name_any();
    let api = Api::<ClusterExtension>::all(ctx.client.clone());
    if api.get_opt(&name).await?.is_some() {
        return Ok(None);
    }
    match api.create(&PostParams::default(), &ext).await {
        Ok(_) => Ok(Some(name)),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
        Err(e) => Err(e),
    }
}

/// After `ext` is uninstalled: an Event naming the dependency ClusterExtensions created
/// for it, which stay installed (never uninstalled silently).
pub(super) async fn report_left(ctx: &ExtensionContext, ext: &ClusterExtension) {
    let selector = format!(
        "{}={}",
        settle::DEPENDENCY_OF,
        settle::label_value(&ext.name_any())
    );
    let api = Api::<ClusterExtension>::all(ctx.client.clone());
    let left = match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        Err(e) => {
            tracing::warn!(extension = %ext.name_any(), error = %e, "listing dependency ClusterExtensions");
            return;
        }
    };
    if left.is_empty() {
        return;
    }
    let note = Note {
        warning: false,
        reason: "DependenciesLeft",
        action: "Uninstall",
        message: format!(
            "ClusterExtensions installed as its dependencies stay installed: [{}]; delete them when nothing else needs them",
            left.join(" ")
        ),
    };
    super::executor::emit(ctx, ext, &note).await;
}

/// Whether discovery serves `gvk` (a group/version the server does not know: no).
async fn served(client: &kube::Client, gvk: &Gvk) -> Result<bool, kube::Error> {
    let listed = if gvk.group.is_empty() {
        client.list_core_api_resources(&gvk.version).await
    } else {
        let gv = format!("{}/{}", gvk.group, gvk.version);
        client.list_api_group_resources(&gv).await
    };
    match listed {
        Ok(list) => Ok(list.resources.iter().any(|r| r.kind == gvk.kind)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}
