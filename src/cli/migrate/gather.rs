//! Reading what `migrate check` decides from: the Subscriptions, and for each its CSV
//! (and copies), InstallPlans, OperatorGroup, CatalogSource, OperatorCondition and
//! `Operator` object, the other owners of its CRDs (every CSV but copies, once; the
//! CRDs' owner labels); the certificate provider the controller would use (discovery,
//! once); the ClusterCatalogs with the package's content they serve. OLM v0's APIs are
//! read untyped (as JSON); a v0 API the cluster does not serve reads as no objects.

use super::CheckArgs;
use crate::api::ClusterCatalog;
use crate::apply::ownership::{OWNER_KIND, OWNER_KIND_LABEL, OWNER_NAME_LABEL};
use crate::bundle::CertProvider;
use crate::bundle::certs;
use crate::content::{ContentClient, ContentConfig};
use crate::migrate::olm_v0::crd_owners::{self, CsvCrds};
use crate::migrate::olm_v0::install_plans::InstallPlanView;
use crate::migrate::olm_v0::read::text;
use crate::migrate::olm_v0::{CatalogView, V0Operator};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
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
    let csvs: Vec<CsvCrds> = if subs.is_empty() {
        Vec::new()
    } else {
        let originals = ListParams::default().labels("!olm.copiedFrom");
        list(&client, &csv_resource(), None, &originals)
            .await?
            .iter()
            .filter_map(CsvCrds::of)
            .collect()
    };
    let provider = cert_provider(&client).await?;
    let mut operators = Vec::with_capacity(subs.len());
    for sub in subs {
        let mut op = operator(&client, sub).await?;
        op.cert_provider = provider;
        op.crd_owners = other_crd_owners(&client, &op, &csvs).await?;
        operators.push(op);
    }
    let packages: Vec<String> = operators
        .iter()
        .filter_map(|o| text(&o.subscription, "/spec/name"))
        .collect();
    let catalogs = catalogs(&client, &packages).await?;
    Ok((operators, catalogs))
}

fn csv_resource() -> ApiResource {
    resource(
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
    )
}

/// The certificate provider the controller would render webhooks with: its own choice
/// ([`certs::effective`]) over what this cluster serves.
async fn cert_provider(client: &kube::Client) -> Result<CertProvider, String> {
    let served = |gv: &'static str| async move {
        match client.list_api_group_resources(gv).await {
            Ok(list) => Ok(Some(list)),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(e) => Err(format!("discovering {gv}: {e}")),
        }
    };
    let cert_manager = served(certs::CERT_MANAGER_API).await?;
    let service_ca = served(certs::SERVICE_CA_API).await?;
    Ok(certs::effective(
        CertProvider::CertManager,
        cert_manager.as_ref(),
        service_ca.as_ref(),
    ))
}

/// The owners of `op`'s CRDs besides its CSV and the ClusterExtension the switch creates
/// (named like the Subscription): `csvs` and the CRDs' ClusterExtension owner labels.
async fn other_crd_owners(
    client: &kube::Client,
    op: &V0Operator,
    csvs: &[CsvCrds],
) -> Result<Vec<crd_owners::CrdOwner>, String> {
    let Some(this) = op.csv.as_ref().and_then(CsvCrds::of) else {
        return Ok(Vec::new());
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut managed = Vec::new();
    for name in &this.owned {
        let meta = crds
            .get_metadata_opt(name)
            .await
            .map_err(|e| format!("reading CRD {name}: {e}"))?;
        let labels = meta.map(|m| m.metadata.labels.unwrap_or_default());
        if let Some(labels) = labels
            && labels.get(OWNER_KIND_LABEL).map(String::as_str) == Some(OWNER_KIND)
            && let Some(owner) = labels.get(OWNER_NAME_LABEL)
        {
            managed.push((name.clone(), owner.clone()));
        }
    }
    let extension = text(&op.subscription, "/metadata/name").unwrap_or_default();
    Ok(crd_owners::others(&this, csvs, &managed, &extension))
}

/// One Subscription's objects.
async fn operator(client: &kube::Client, sub: Value) -> Result<V0Operator, String> {
    let ns = text(&sub, "/metadata/namespace").unwrap_or_default();
    let package = text(&sub, "/spec/name").unwrap_or_default();
    let sub_name = text(&sub, "/metadata/name").unwrap_or_default();
    let csv_r = csv_resource();
    let installed = text(&sub, "/status/installedCSV");
    let mut op = V0Operator {
        subscription: sub.clone(),
        ..Default::default()
    };
    if let Some(csv) = &installed {
        op.csv = get(client, &csv_r, &ns, csv).await?;
        let copies = ListParams::default()
            .labels(&format!("olm.copiedFrom={ns}"))
            .fields(&format!("metadata.name={csv}"));
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
