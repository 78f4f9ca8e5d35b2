//! Reading what `migrate check` decides from: the Subscriptions, and for each its CSV
//! (and copies), InstallPlans, OperatorGroup, CatalogSource, OperatorCondition and
//! `Operator` object; the ClusterCatalogs with the package's content they serve. OLM
//! v0's APIs are read untyped (as JSON); a v0 API the cluster does not serve reads as
//! no objects.

use super::CheckArgs;
use crate::api::ClusterCatalog;
use crate::content::{ContentClient, ContentConfig};
use crate::migrate::olm_v0::install_plans::InstallPlanView;
use crate::migrate::olm_v0::read::text;
use crate::migrate::olm_v0::{CatalogView, V0Operator};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use std::collections::BTreeMap;

const V0_GROUP: &str = "operators.coreos.com";

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(V0_GROUP, version, kind), plural)
}

/// Lists `kind` (in `namespace`, or everywhere), as JSON values; a resource the cluster
/// does not serve (404) is an empty list.
async fn list(
    client: &kube::Client,
    r: &ApiResource,
    namespace: Option<&str>,
    params: &ListParams,
) -> Result<Vec<Value>, String> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, r),
        None => Api::all_with(client.clone(), r),
    };
    match api.list(params).await {
        Ok(l) => Ok(l
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(format!("listing {}: {e}", r.plural)),
    }
}

async fn get(
    client: &kube::Client,
    r: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, r);
    match api.get_opt(name).await {
        Ok(o) => Ok(o.and_then(|o| serde_json::to_value(o).ok())),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(format!("reading {} {namespace}/{name}: {e}", r.kind)),
    }
}

/// The kube client of `--kubeconfig` (else KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("kubeconfig: {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("creating the client: {e}"))
}

/// Reads the Subscriptions (`target`, or all) with their objects, and the
/// ClusterCatalogs with the content of every package concerned.
pub async fn read(
    args: &CheckArgs,
    target: Option<(String, String)>,
) -> Result<(Vec<V0Operator>, BTreeMap<String, Vec<CatalogView>>), String> {
    let client = client(args.kubeconfig.as_deref()).await?;
    let subs_r = resource("v1alpha1", "Subscription", "subscriptions");
    let subs = match &target {
        Some((ns, name)) => match get(&client, &subs_r, ns, name).await? {
            Some(s) => vec![s],
            None => return Err(format!("Subscription {ns}/{name} not found")),
        },
        None => list(&client, &subs_r, None, &ListParams::default()).await?,
    };
    let mut operators = Vec::with_capacity(subs.len());
    for sub in subs {
        operators.push(operator(&client, sub).await?);
    }
    let packages: Vec<String> = operators
        .iter()
        .filter_map(|o| text(&o.subscription, "/spec/name"))
        .collect();
    let catalogs = catalogs(&client, &packages).await?;
    Ok((operators, catalogs))
}

/// One Subscription's objects.
async fn operator(client: &kube::Client, sub: Value) -> Result<V0Operator, String> {
    let ns = text(&sub, "/metadata/namespace").unwrap_or_default();
    let package = text(&sub, "/spec/name").unwrap_or_default();
    let sub_name = text(&sub, "/metadata/name").unwrap_or_default();
    let csv_r = resource(
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
    );
    let installed = text(&sub, "/status/installedCSV");
    let mut op = V0Operator {
        subscription: sub.clone(),
        ..Default::default()
    };
    if let Some(csv) = &installed {
        op.csv = get(client, &csv_r, &ns, csv).await?;
        let copies = ListParams::default().labels(&format!("olm.copiedFrom={ns}"));
        op.copied_csv_namespaces = list(client, &csv_r, None, &copies)
            .await?
            .iter()
            .filter(|c| text(c, "/metadata/name").as_deref() == Some(csv.as_str()))
            .filter_map(|c| text(c, "/metadata/namespace"))
            .collect();
        let ip_r = resource("v1alpha1", "InstallPlan", "installplans");
        op.install_plans = list(client, &ip_r, Some(&ns), &ListParams::default())
            .await?
            .into_iter()
            .filter(|ip| {
                let plan = InstallPlanView::of(ip);
                plan.csvs.contains(csv) || plan.subscriptions.contains(&sub_name)
            })
            .collect();
        let cond_r = resource("v2", "OperatorCondition", "operatorconditions");
        op.operator_condition = get(client, &cond_r, &ns, csv).await?;
    }
    let og_r = resource("v1", "OperatorGroup", "operatorgroups");
    op.operator_groups = list(client, &og_r, Some(&ns), &ListParams::default()).await?;
    if let (Some(src), Some(src_ns)) = (
        text(&sub, "/spec/source"),
        text(&sub, "/spec/sourceNamespace"),
    ) {
        let cs_r = resource("v1alpha1", "CatalogSource", "catalogsources");
        op.catalog_source = get(client, &cs_r, &src_ns, &src).await?;
    }
    let operator_name: String = format!("{package}.{ns}").chars().take(63).collect();
    let operators: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("v1", "Operator", "operators"));
    op.operator_object = match operators.get_opt(&operator_name).await {
        Ok(Some(_)) => Some(operator_name),
        _ => None,
    };
    Ok(op)
}

/// The ClusterCatalogs as seen for each of `packages` (each view holding that
/// package's content, when the catalog serves it).
async fn catalogs(
    client: &kube::Client,
    packages: &[String],
) -> Result<BTreeMap<String, Vec<CatalogView>>, String> {
    let list = Api::<ClusterCatalog>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing ClusterCatalogs: {e}"))?;
    let content = ContentClient::new(ContentConfig::default()).map_err(|e| e.to_string())?;
    let mut out: BTreeMap<String, Vec<CatalogView>> = BTreeMap::new();
    for p in packages {
        if out.contains_key(p) {
            continue;
        }
        let mut views = Vec::new();
        for c in &list.items {
            let serving = c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|x| x.type_ == crate::api::conditions::TYPE_SERVING && x.status == "True")
            });
            let mut view = CatalogView {
                name: c.metadata.name.clone().unwrap_or_default(),
                image: c.spec.source.image.as_ref().map(|i| i.ref_.clone()),
                serving,
                priority: c.spec.priority,
                package: None,
                content_error: None,
            };
            if serving {
                match super::super::cluster_content::package(&content, client, c, p).await {
                    Ok(pc) if pc.package.is_some() || !pc.bundles.is_empty() => {
                        view.package = Some(std::sync::Arc::unwrap_or_clone(pc));
                    }
                    Ok(_) => {}
                    Err(e) => view.content_error = Some(e.to_string()),
                }
            }
            views.push(view);
        }
        out.insert(p.clone(), views);
    }
    Ok(out)
}
