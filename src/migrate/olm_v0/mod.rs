//! Planning the switch of one OLM v0 installation (a Subscription and what it
//! installed) to a ClusterExtension (docs/how-to/switch-from-olm-v0.md). Pure: the
//! command line reads the v0 objects and the cluster's ClusterCatalogs into
//! [`V0Operator`] and [`CatalogView`]s, and [`check`] decides from them whether the
//! operator is eligible, or lists each blocker in words with what to do about it, and
//! shows what the switch would create (the ClusterExtension, the ClusterCatalog for an
//! image-based CatalogSource, the installer account) and which v0 objects it would
//! replace or remove. The mapping follows the olm-v0 reference (§2.3 eligibility, §3.1
//! Subscription → ClusterExtension, §3.2 catalog matching, §3.4 v0 objects afterwards).
//!
//! `olmv1 migrate convert`, `rollback` and `cleanup` are plans of their own
//! ([`convert`], [`rollback`], [`cleanup`]): the ordered steps that remain, decided from what is on the cluster,
//! around the [`backup`] a convert writes first.
//!
//! v0 objects are read as JSON values: olmv1 has no typed v0 API and reads only the
//! few fields named in [`read`]; a field of an unexpected shape reads as absent.

pub mod backup;
mod blockers;
mod catalog;
pub mod certificates;
pub mod cleanup;
#[cfg(test)]
mod cleanup_tests;
pub mod convert;
#[cfg(test)]
mod convert_tests;
pub mod crd_owners;
pub mod fence;
pub mod guard;
pub mod install_plans;
pub mod read;
pub mod rollback;
mod target;
#[cfg(test)]
mod tests;

pub use blockers::{Blocker, BlockerCode};
pub use catalog::{CatalogPlan, CatalogView};
pub use target::{Installer, MIGRATED_FROM_ANNOTATION, V0Object, V0ObjectAction};

use serde::Serialize;
use serde_json::Value;

/// Everything read about one Subscription's installation.
#[derive(Clone, Debug, Default)]
pub struct V0Operator {
    /// The Subscription (operators.coreos.com/v1alpha1).
    pub subscription: Value,
    /// The installed CSV (`status.installedCSV`) in the Subscription's namespace.
    pub csv: Option<Value>,
    /// Namespaces holding a copy of that CSV (label `olm.copiedFrom`).
    pub copied_csv_namespaces: Vec<String>,
    /// The InstallPlans of the namespace that install this CSV or serve the
    /// Subscription (an upgrade it waits for, [`install_plans`]).
    pub install_plans: Vec<Value>,
    /// The OperatorGroups of the Subscription's namespace (OLM v0 wants exactly one).
    pub operator_groups: Vec<Value>,
    /// The CatalogSource the Subscription names, when it exists.
    pub catalog_source: Option<Value>,
    /// The OperatorCondition named like the CSV, when it exists.
    pub operator_condition: Option<Value>,
    /// The cluster-scoped `Operator` object `<package>.<namespace>`, when it exists.
    pub operator_object: Option<String>,
    /// The other owners of the CRDs the CSV owns ([`crd_owners::others`]).
    pub crd_owners: Vec<crd_owners::CrdOwner>,
    /// The certificate provider the controller would render the bundle's webhooks with
    /// (`certs::effective` over what the cluster serves).
    pub cert_provider: crate::bundle::CertProvider,
}

/// What `olmv1 migrate check` says about one Subscription.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// `<namespace>/<name>` of the Subscription.
    pub subscription: String,
    pub package: String,
    pub installed_csv: Option<String>,
    /// The installed bundle's version (the CSV's `olm.package` property, else
    /// `spec.version`).
    pub version: Option<String>,
    /// No blockers.
    pub eligible: bool,
    pub blockers: Vec<Blocker>,
    /// The ClusterExtension the switch would create.
    pub cluster_extension: Value,
    /// The ClusterCatalog serving the CatalogSource's image: reused or to be created.
    pub cluster_catalog: Option<CatalogPlan>,
    /// The least-privilege installer ServiceAccount of the ClusterExtension.
    pub installer: Installer,
    /// The v0 objects of this operator and what the switch does with each.
    pub v0_objects: Vec<V0Object>,
}

/// Decides about one operator from what was read (see the module documentation).
pub fn check(op: &V0Operator, catalogs: &[CatalogView]) -> Check {
    let sub = read::SubscriptionView::of(&op.subscription);
    let csv = op.csv.as_ref().map(read::CsvView::of);
    let version = csv.as_ref().and_then(|c| c.version.clone());
    let mut blockers = blockers::of_installation(&sub, csv.as_ref());
    let scope = read::watch_scope(&op.operator_groups, &sub.namespace);
    if let Some(b) = blockers::of_scope(&scope, &sub.namespace) {
        blockers.push(b);
    }
    blockers.extend(blockers::of_crd_owners(&op.crd_owners));
    if let Some(b) = op
        .csv
        .as_ref()
        .and_then(|c| blockers::of_cert_provider(c, op.cert_provider))
    {
        blockers.push(b);
    }
    let csv_name = sub.installed_csv.clone().unwrap_or_default();
    if let Some(b) = blockers::of_install_plans(&op.install_plans, &sub.name, &csv_name) {
        blockers.push(b);
    }
    let catalog_plan = catalog::plan(op.catalog_source.as_ref(), &sub, catalogs);
    let found = catalog::find(catalogs, &sub, version.as_deref(), catalog_plan.as_ref());
    if let Some(b) =
        blockers::of_catalog_source(op.catalog_source.as_ref(), &sub, found.catalog.is_some())
    {
        blockers.push(b);
    }
    if let Some(b) = blockers::of_catalog_match(&found, &sub, version.as_deref()) {
        blockers.push(b);
    }
    if let Some(b) = found.bundle.as_ref().and_then(blockers::of_catalog_bundle)
        && !blockers.iter().any(|x| x.code == BlockerCode::Dependencies)
    {
        blockers.push(b);
    }
    let extension = target::cluster_extension(&sub, &scope, version.as_deref(), &found);
    let installer = target::installer(&sub, version.as_deref(), &scope, &found);
    let v0_objects = target::v0_objects(op, &sub, csv.as_ref());
    Check {
        subscription: format!("{}/{}", sub.namespace, sub.name),
        package: sub.package.clone(),
        installed_csv: sub.installed_csv.clone(),
        version,
        eligible: blockers.is_empty(),
        blockers,
        cluster_extension: extension,
        cluster_catalog: catalog_plan,
        installer,
        v0_objects,
    }
}
