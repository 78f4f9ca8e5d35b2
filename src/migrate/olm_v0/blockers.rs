//! What stops a switch, each in words with what to do about it (olm-v0 reference §2.3
//! and §2.7; unlike upstream's tool nothing here is acknowledged away: OwnNamespace and
//! SingleNamespace are supported as they are, the rest blocks).

use super::catalog::{Found, catalog_source_image};
use super::crd_owners::CrdOwner;
use super::install_plans::InstallPlanView;
use super::read::{CsvView, SubscriptionView, WatchScope, text};
use crate::bundle::CertProvider;
use crate::bundle::certs;
use crate::fbc::model::Bundle;
use serde::Serialize;

/// Which rule a blocker comes from (stable names for `-o json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BlockerCode {
    NotInstalled,
    CsvNotSucceeded,
    GeneratedDependency,
    Dependencies,
    /// No longer produced (owned APIServices are installed); kept for stable `-o json` names.
    ApiServices,
    ScopedServiceAccount,
    OperatorGroup,
    MultiNamespace,
    CatalogSourceNotImage,
    NotInCatalog,
    /// An InstallPlan OLM v0 has not finished that the switch cannot delete.
    InstallPlanInFlight,
    /// A CRD of the operator is owned by another installation too (`crd_owners`).
    SharedCrds,
    /// The operator has webhooks and the cluster serves no certificate provider.
    CertificateProvider,
}

/// One reason the operator cannot be switched yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub code: BlockerCode,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub action: String,
}

fn blocker(code: BlockerCode, message: String, action: &str) -> Blocker {
    Blocker {
        code,
        message,
        action: action.to_string(),
    }
}

/// Blockers read from the Subscription and the CSV. (An OperatorCondition in use is no
/// blocker: olmv1 renders it and honours its `Upgradeable` condition, docs/how-to/upgrade-control.md.)
pub fn of_installation(sub: &SubscriptionView, csv: Option<&CsvView>) -> Vec<Blocker> {
    let mut out = Vec::new();
    if let Some(ip) = &sub.generated_by {
        out.push(blocker(
            BlockerCode::GeneratedDependency,
            format!("OLM v0 created this Subscription to satisfy a dependency (InstallPlan {ip})"),
            "switch the operators that depend on it first; OLM v1 installs no dependencies, so this one is then switched as an operator of its own",
        ));
    }
    let Some(csv) = csv else {
        let what = match &sub.installed_csv {
            Some(name) => format!("the installed CSV {name} does not exist"),
            None => "the Subscription has no installed CSV (status.installedCSV)".to_string(),
        };
        out.push(blocker(
            BlockerCode::NotInstalled,
            what,
            "wait until OLM v0 has installed the operator (Subscription state AtLatestKnown), then check again",
        ));
        return out;
    };
    if csv.phase.as_deref() != Some("Succeeded") {
        out.push(blocker(
            BlockerCode::CsvNotSucceeded,
            format!(
                "CSV {} is in phase {}{}",
                csv.name,
                csv.phase.as_deref().unwrap_or("(none)"),
                csv.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            "switch only a healthy installation: fix what keeps the CSV from Succeeded (its status says why), then check again",
        ));
    }
    if !csv.dependency_properties.is_empty() {
        out.push(dependencies(&csv.name, &csv.dependency_properties));
    }
    // Owned APIServices block no more: olmv1 renders them as OLM v0 installs them
    // (docs/concepts/rendering.md §5.5 item 10).
    out
}

/// InstallPlans of the Subscription that OLM v0 has not finished and the switch can
/// neither delete nor leave: one being installed, or one shared with Subscriptions that
/// stay on OLM v0 (module `install_plans`). One of its own waiting for approval is no
/// blocker: the switch deletes it and takes the installed version over.
pub fn of_install_plans(
    plans: &[serde_json::Value],
    subscription: &str,
    csv: &str,
) -> Option<Blocker> {
    let why: Vec<String> = plans
        .iter()
        .filter_map(|ip| InstallPlanView::of(ip).blocks(subscription, csv))
        .collect();
    (!why.is_empty()).then(|| {
        blocker(
            BlockerCode::InstallPlanInFlight,
            why.join("; "),
            "let OLM v0 finish it first: approve it (spec.approved: true) or let it run, and wait until every Subscription it serves is AtLatestKnown; then check again",
        )
    })
}

fn dependencies(bundle: &str, properties: &[String]) -> Blocker {
    blocker(
        BlockerCode::Dependencies,
        format!(
            "bundle {bundle} declares dependencies ({}), which OLM v1 refuses",
            properties.join(", ")
        ),
        "keep this operator on OLM v0 until a version without dependencies is published",
    )
}

/// Blockers of the OperatorGroup's watch scope.
pub fn of_scope(scope: &WatchScope, namespace: &str) -> Option<Blocker> {
    match scope {
        WatchScope::Scoped {
            service_account, ..
        } => Some(blocker(
            BlockerCode::ScopedServiceAccount,
            format!(
                "the OperatorGroup installs with ServiceAccount {namespace}/{service_account} (spec.serviceAccountName)"
            ),
            "olmv1 installs with its own least-privilege installer account (shown below): remove spec.serviceAccountName from the OperatorGroup once you accept that, then check again",
        )),
        WatchScope::NoOperatorGroup => Some(blocker(
            BlockerCode::OperatorGroup,
            format!("namespace {namespace} has no OperatorGroup"),
            "create the OperatorGroup OLM v0 needs, or remove the Subscription: nothing was installed",
        )),
        WatchScope::SeveralOperatorGroups(names) => Some(blocker(
            BlockerCode::OperatorGroup,
            format!(
                "namespace {namespace} has several OperatorGroups ({})",
                names.join(", ")
            ),
            "keep exactly one OperatorGroup in the namespace, then check again",
        )),
        WatchScope::Several(namespaces) => Some(blocker(
            BlockerCode::MultiNamespace,
            format!(
                "the OperatorGroup targets several namespaces ({}); OLM v1 watches all namespaces or one",
                namespaces.join(", ")
            ),
            "target a single namespace (or all namespaces, if the operator supports it) in the OperatorGroup, then check again",
        )),
        _ => None,
    }
}

/// The Subscription's CatalogSource must be a gRPC CatalogSource with an image — or,
/// when it serves from elsewhere (a gRPC `address`, a ConfigMap), a Serving
/// ClusterCatalog must already hold the installed bundle (`in_cluster_catalog`): then
/// nothing needs to be made from the CatalogSource, and the ClusterExtension selects
/// that catalog (the real OLM v0 test, e2e/migrate_v0.rs, installs from an address).
pub fn of_catalog_source(
    cs: Option<&serde_json::Value>,
    sub: &SubscriptionView,
    in_cluster_catalog: bool,
) -> Option<Blocker> {
    let name = format!(
        "{}/{}",
        sub.source_namespace.as_deref().unwrap_or("?"),
        sub.source.as_deref().unwrap_or("?")
    );
    let Some(cs) = cs else {
        return Some(blocker(
            BlockerCode::CatalogSourceNotImage,
            format!("the Subscription's CatalogSource {name} does not exist"),
            "restore the CatalogSource (OLM v1 needs its image as a ClusterCatalog)",
        ));
    };
    if catalog_source_image(cs).is_some() || in_cluster_catalog {
        return None;
    }
    let kind = match (text(cs, "/spec/sourceType"), text(cs, "/spec/address")) {
        (Some(t), _) if t != "grpc" => format!("sourceType {t}"),
        (_, Some(addr)) => format!("a gRPC address ({addr})"),
        _ => "no image".to_string(),
    };
    Some(blocker(
        BlockerCode::CatalogSourceNotImage,
        format!("CatalogSource {name} is not image-based: it has {kind}"),
        "publish the catalog as a file-based catalog image (opm) and serve it with a ClusterCatalog, or point the CatalogSource at that image (spec.image), then check again",
    ))
}

/// No Serving ClusterCatalog holds the package, version and channel.
pub fn of_catalog_match(
    found: &Found,
    sub: &SubscriptionView,
    version: Option<&str>,
) -> Option<Blocker> {
    if found.catalog.is_some() {
        return None;
    }
    let tried = if found.misses.is_empty() {
        "there are no ClusterCatalogs".to_string()
    } else {
        found.misses.join("; ")
    };
    Some(blocker(
        BlockerCode::NotInCatalog,
        format!(
            "no Serving ClusterCatalog holds package {} version {} in channel {} ({tried})",
            sub.package,
            version.unwrap_or("(unknown)"),
            sub.channel.as_deref().unwrap_or("(default)")
        ),
        "create the ClusterCatalog shown below (or one serving the same catalog image) and wait until it is Serving, then check again",
    ))
}

/// The catalog's bundle declares dependencies (its properties, not only the CSV's
/// annotation: §3.2).
pub fn of_catalog_bundle(bundle: &Bundle) -> Option<Blocker> {
    let mut types: Vec<String> = bundle
        .properties
        .iter()
        .map(|p| p.type_.clone())
        .filter(|t| super::read::DEPENDENCY_PROPERTIES.contains(&t.as_str()))
        .collect();
    types.dedup();
    (!types.is_empty()).then(|| dependencies(&bundle.name, &types))
}

/// Another installation (OLM v0's in another namespace, or a ClusterExtension) owns a
/// CRD of the operator ([`super::crd_owners`]).
pub fn of_crd_owners(owners: &[CrdOwner]) -> Option<Blocker> {
    let why: Vec<String> = owners
        .iter()
        .map(|o| match o {
            CrdOwner::ClusterServiceVersion {
                crd,
                namespace,
                name,
            } => format!("CRD {crd} is also owned by CSV {namespace}/{name} (OLM v0)"),
            CrdOwner::ClusterExtension { crd, name } => {
                format!("CRD {crd} is already managed by ClusterExtension {name}")
            }
        })
        .collect();
    (!why.is_empty()).then(|| {
        blocker(
            BlockerCode::SharedCrds,
            why.join("; "),
            "OLM v1 installs a package, and owns its CRDs, once per cluster: keep every installation of this package on OLM v0, or remove the others first (their custom resources stay with the CRD), then check again",
        )
    })
}

/// The CSV declares webhooks and the cluster serves no certificate provider OLM v1
/// renders them with (the controller's own choice, `certs::effective`): the takeover
/// would refuse the bundle.
pub fn of_cert_provider(csv: &serde_json::Value, provider: CertProvider) -> Option<Blocker> {
    (provider == CertProvider::None && certs::has_webhooks(csv)).then(|| {
        blocker(
            BlockerCode::CertificateProvider,
            format!(
                "the operator has webhooks and the cluster serves no certificate provider for them (cert-manager's Certificate and Issuer in {}, or OpenShift's service-ca in {}): OLM v1 would refuse the bundle",
                certs::CERT_MANAGER_API,
                certs::SERVICE_CA_API
            ),
            "install cert-manager (docs/how-to/install.md, \"Webhooks with cert-manager\"), wait until its API is served, then check again",
        )
    })
}
