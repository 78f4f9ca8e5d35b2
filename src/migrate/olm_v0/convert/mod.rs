//! `olmv1 migrate convert` as a plan (docs/how-to/switch-from-olm-v0.md, "convert"):
//! from what is on the cluster now, the ordered steps that remain to stop OLM v0 for one
//! Subscription without losing anything and hand the operator to a ClusterExtension.
//! Pure and state-driven: a step already done is not planned again, so a convert that
//! was interrupted anywhere finishes when run again, and one that finished plans
//! nothing.
//!
//! The order follows what OLM v0 deletes (olm-v0 reference §1.4): the backup first
//! (the way back, [`super::backup`]); the guard refusing a Subscription for the package
//! ([`super::guard`]); the installer account; the Subscription and its
//! InstallPlans (the catalog-operator stops: no upgrade and no re-created CSV from here
//! on); the CRDs the CSV owns are marked as adoptable by the ClusterExtension and the
//! backup ([`crate::apply::ownership::adoption_mark`]: the consent the controller's
//! takeover requires, written by whoever runs the convert and may write those objects);
//! then, right before the CSV goes, every object tied to the CSV is untied and marked
//! the same way in one write (so that no full update by OLM v0 between two writes can
//! drop the mark of an object already untied) — the
//! `olm.owner*` labels the `operators.coreos.com/csv-cleanup` finalizer selects
//! ClusterRoles, ClusterRoleBindings and webhook configurations by, and the
//! ownerReferences garbage collection follows — and the finalizer itself is removed;
//! then the CSV is deleted (orphan propagation) and its copies; the ClusterExtension
//! last, annotated as the migration of the Subscription, and the guard made the
//! ClusterExtension's (its owner). The OperatorCondition stays,
//! untied like the rest: the operator's pods still name it (`OPERATOR_CONDITION_NAME`)
//! until the ClusterExtension's own revision replaces them.
//!
//! Where a convert starts from (module `start`), what ties an object to the CSV and how
//! it is handed over (module `hand_over`), and the OperatorCondition restored once the
//! CSV is gone (module `restore`) live in modules of their own.

use super::Check;
use super::backup::{BACKUP_ANNOTATION, Backup, configmap_name};
use super::install_plans::InstallPlanView;
use super::read::{strings, text};
use super::target::MIGRATED_FROM_ANNOTATION;
use crate::apply::ownership::ADOPTABLE_BY_ANNOTATION;
use serde::Serialize;
use serde_json::{Value, json};

mod hand_over;
mod restore;
mod start;

use hand_over::{backup_target, extension_name, marks};
pub use hand_over::{labelled_for, owned_crd_names, owner_labels, untie, with_hand_over};
pub use restore::{Restore, restore_operator_condition};
use start::{Start, foreign_extension, start};

/// OLM v0's finalizer on a CSV (olm-v0 reference §1.1, §1.4).
pub const CSV_FINALIZER: &str = "operators.coreos.com/csv-cleanup";
/// The labels the finalizer selects the operator's cluster-scoped objects by.
pub const OWNER_LABELS: [&str; 3] = ["olm.owner", "olm.owner.kind", "olm.owner.namespace"];

/// One Kubernetes object the plan names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub api_version: String,
    pub kind: String,
    /// Empty for a cluster-scoped object.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl Target {
    /// The object `v` names (apiVersion, kind, metadata.namespace and name).
    pub fn of(v: &Value) -> Target {
        Target {
            api_version: text(v, "/apiVersion").unwrap_or_default(),
            kind: text(v, "/kind").unwrap_or_default(),
            namespace: text(v, "/metadata/namespace").unwrap_or_default(),
            name: text(v, "/metadata/name").unwrap_or_default(),
        }
    }

    fn v0(kind: &str, version: &str, namespace: &str, name: &str) -> Target {
        Target {
            api_version: format!("operators.coreos.com/{version}"),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// One step of a convert; each is safe to run again.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum Step {
    /// No Serving ClusterCatalog holds the package: create the one serving the
    /// CatalogSource's image (the convert then waits until it serves).
    CreateClusterCatalog {
        manifest: Value,
    },
    /// The backup ConfigMap.
    WriteBackup {
        manifest: Value,
    },
    /// The installer account's objects still missing (server-side apply).
    CreateInstaller {
        objects: Vec<Value>,
    },
    DeleteSubscription {
        target: Target,
    },
    DeleteInstallPlan {
        target: Target,
    },
    /// Hand an object OLM v0 ties to nothing (a CRD the CSV owns) over to the
    /// ClusterExtension: annotate it with [`ADOPTABLE_BY_ANNOTATION`] naming
    /// `extension` and the UID of the backup ConfigMap `backup` (read when the step
    /// runs: a first run writes the backup in an earlier step).
    MarkForAdoption {
        target: Target,
        extension: String,
        backup: Target,
    },
    /// Remove the labels and ownerReferences that tie an object to the CSV.
    #[serde(rename_all = "camelCase")]
    Untie {
        target: Target,
        labels: Vec<String>,
        /// The ownerReferences removed (`<kind>/<name>`).
        owner_references: Vec<String>,
        /// The ownerReferences kept (written back as the new list).
        #[serde(skip)]
        keep_owner_references: Option<Vec<Value>>,
        #[serde(skip)]
        resource_version: Option<String>,
        /// The CSV and its namespace (to read the object again after a conflict).
        #[serde(skip)]
        csv: (String, String),
        /// The ClusterExtension the object is handed over to and the backup whose UID
        /// the mark names, written in the same patch ([`Step::MarkForAdoption`]).
        #[serde(skip)]
        hand_over: Option<(String, Target)>,
    },
    RemoveCsvFinalizer {
        target: Target,
    },
    /// Delete the CSV with orphan propagation.
    DeleteCsv {
        target: Target,
    },
    /// Delete a copied CSV (its finalizers removed first, orphan propagation).
    DeleteCopiedCsv {
        target: Target,
    },
    CreateClusterExtension {
        manifest: Value,
    },
    /// Apply the guard on the package ([`super::guard`]), owned by the ClusterExtension
    /// once that exists (read when the step runs).
    GuardPackage {
        package: String,
        /// The Subscription replaced (`<namespace>/<name>`, named in the refusal).
        subscription: String,
        extension: String,
    },
}

impl Step {
    /// The step in words.
    pub fn describe(&self) -> String {
        match self {
            Step::CreateClusterCatalog { manifest } => format!(
                "create ClusterCatalog {} (the CatalogSource's image)",
                text(manifest, "/metadata/name").unwrap_or_default()
            ),
            Step::WriteBackup { manifest } => format!(
                "write the backup {} (the Subscription, installed CSV, the ClusterExtension to create)",
                Target::of(manifest)
            ),
            Step::CreateInstaller { objects } => format!(
                "create the installer account: {}",
                objects
                    .iter()
                    .map(|o| Target::of(o).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Step::DeleteSubscription { target } => {
                format!("delete {target} (OLM v0 stops upgrading and re-creating the CSV)")
            }
            Step::DeleteInstallPlan { target } => format!("delete {target}"),
            Step::MarkForAdoption {
                target, extension, ..
            } => format!(
                "hand {target} over to ClusterExtension {extension} (annotation {ADOPTABLE_BY_ANNOTATION})"
            ),
            Step::Untie {
                target,
                labels,
                owner_references,
                hand_over,
                ..
            } => {
                let mut what = Vec::new();
                if !labels.is_empty() {
                    what.push(format!("labels {}", labels.join(", ")));
                }
                if !owner_references.is_empty() {
                    what.push(format!("ownerReference {}", owner_references.join(", ")));
                }
                let mut text =
                    format!("untie {target} from the CSV: remove {}", what.join(" and "));
                if let Some((extension, _)) = hand_over {
                    text.push_str(&format!(
                        ", and hand it over to ClusterExtension {extension} (annotation {ADOPTABLE_BY_ANNOTATION})"
                    ));
                }
                text
            }
            Step::RemoveCsvFinalizer { target } => {
                format!("remove finalizer {CSV_FINALIZER} from {target}")
            }
            Step::DeleteCsv { target } => {
                format!("delete {target} (propagationPolicy Orphan: its objects stay)")
            }
            Step::DeleteCopiedCsv { target } => format!("delete copied {target}"),
            Step::CreateClusterExtension { manifest } => format!(
                "create ClusterExtension {} ({MIGRATED_FROM_ANNOTATION})",
                text(manifest, "/metadata/name").unwrap_or_default()
            ),
            Step::GuardPackage {
                package, extension, ..
            } => format!(
                "guard package {package}: refuse a Subscription for it while ClusterExtension {extension} installs it (ValidatingAdmissionPolicy {}, owned by the ClusterExtension once it exists)",
                super::guard::name(package)
            ),
        }
    }
}

/// What is on the cluster for one Subscription, read by the command line.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The Subscription's namespace and name.
    pub namespace: String,
    pub name: String,
    /// The live Subscription.
    pub subscription: Option<Value>,
    /// `migrate check` of the live installation (when the Subscription exists and no
    /// backup does).
    pub check: Option<Check>,
    /// The live backup, read back (`Err`: it exists but is unreadable).
    pub backup: Option<Result<Backup, String>>,
    /// The live backup's UID (what the adoption marks name).
    pub backup_uid: Option<String>,
    /// The backup a first run would write (from `check` and the installer RBAC).
    pub proposed: Option<Result<Backup, String>>,
    /// Objects of the installer account that do not exist yet.
    pub installer_missing: Vec<Value>,
    /// The ClusterCatalog `check` would create already exists.
    pub catalog_exists: bool,
    /// The installed CSV, its copies and InstallPlans, when present.
    pub csv: Option<Value>,
    pub copied_csvs: Vec<Value>,
    pub install_plans: Vec<Value>,
    /// Objects still carrying the CSV's owner labels or an ownerReference to it.
    pub tied: Vec<Value>,
    /// What convert hands over that OLM v0 ties to nothing, live: the CRDs the CSV owns
    /// (`spec.customresourcedefinitions.owned`) and an aggregated API server's
    /// `<service>-auth-reader` RoleBinding in kube-system.
    pub untied_handed_over: Vec<Value>,
    /// The live ClusterExtension named like the Subscription.
    pub extension: Option<Value>,
    /// The live OperatorCondition named like the CSV.
    pub operator_condition: Option<Value>,
    /// The guard on the package ([`super::guard`]).
    pub guard: GuardState,
}

/// What is on the cluster of the guard on the package.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GuardState {
    /// The cluster serves no ValidatingAdmissionPolicy (before Kubernetes 1.30).
    #[default]
    Unsupported,
    Missing,
    /// Applied, not yet owned by the ClusterExtension.
    Unowned,
    Owned,
}

/// The plan of a convert.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// `<namespace>/<name>` of the Subscription.
    pub subscription: String,
    /// Why nothing may be done (the steps are then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    pub steps: Vec<Step>,
    /// What happens once the steps are done.
    pub then: String,
}

/// The steps that remain (see the module documentation).
pub fn plan(o: &Observed) -> Plan {
    let subscription = format!("{}/{}", o.namespace, o.name);
    let refuse = |why: String| Plan {
        subscription: subscription.clone(),
        refused: Some(why),
        steps: Vec::new(),
        then: String::new(),
    };
    let (backup, mut steps) = match start(o) {
        Ok(started) => started,
        Err(Start::Refused(why)) => return refuse(why),
        Err(Start::Catalog(step, then)) => {
            return Plan {
                subscription,
                refused: None,
                steps: step.into_iter().map(|s| *s).collect(),
                then,
            };
        }
    };
    if let Some(why) = foreign_extension(o, &subscription) {
        return refuse(why);
    }
    let guard = guard_step(&backup);
    if o.guard == GuardState::Missing && o.extension.is_none() {
        steps.extend(guard.clone());
    }
    steps.extend(stop_v0(o, &backup));
    if o.extension.is_none() {
        steps.push(Step::CreateClusterExtension {
            manifest: extension_manifest(&backup),
        });
    }
    if matches!(o.guard, GuardState::Missing | GuardState::Unowned) {
        steps.extend(guard);
    }
    let then = format!(
        "OLM v0 no longer manages the operator; olmv1's controller takes it over in place as ClusterExtension {} when it resolves exactly the installed CSV (otherwise its Progressing condition says what differs and nothing is changed); `olmv1 migrate rollback {subscription}` hands it back to OLM v0",
        o.name
    );
    Plan {
        subscription,
        refused: None,
        steps,
        then,
    }
}

/// What a convert whose steps all ran still does on reading the cluster again, until a
/// read finds nothing left (e2e/migrate_v0.rs, real OLM v0): catalog-operator may have
/// made an InstallPlan between the first read and the Subscription's deletion, and may
/// finish one from its cache — re-creating the CSV or putting OLM v0's owner labels back
/// on an object just untied. So every InstallPlan of the CSV or the Subscription is
/// deleted; a re-created CSV (there, not being deleted) is stopped again like the first;
/// once the CSV is gone, what was tied again is untied. While the CSV is being deleted,
/// only the InstallPlans: its own deletion goes on.
pub fn again(o: &Observed) -> Vec<Step> {
    let csv_deleting = o.csv.as_ref().is_some_and(deleting);
    plan(o)
        .steps
        .into_iter()
        .filter(|s| match s {
            Step::DeleteInstallPlan { .. } | Step::MarkForAdoption { .. } => true,
            Step::Untie { .. }
            | Step::RemoveCsvFinalizer { .. }
            | Step::DeleteCsv { .. }
            | Step::DeleteCopiedCsv { .. } => !csv_deleting,
            _ => false,
        })
        .collect()
}

/// The guard on the backup's package, before OLM v0 is stopped (nothing re-creates the
/// Subscription meanwhile) and again once the ClusterExtension exists (its owner).
fn guard_step(backup: &Backup) -> Option<Step> {
    let package = text(&backup.extension, "/spec/source/catalog/packageName")?;
    let extension = text(&backup.extension, "/metadata/name")?;
    Some(Step::GuardPackage {
        package,
        subscription: format!("{}/{}", backup.namespace(), backup.name()),
        extension,
    })
}

/// The ClusterExtension to create: the backup's, naming its backup.
fn extension_manifest(backup: &Backup) -> Value {
    let mut ext = backup.extension.clone();
    ext["metadata"]["annotations"][BACKUP_ANNOTATION] = json!(format!(
        "{}/{}",
        backup.namespace(),
        configmap_name(&backup.name())
    ));
    ext
}

/// Stopping v0, in the order of the module documentation.
fn stop_v0(o: &Observed, backup: &Backup) -> Vec<Step> {
    let ns = &o.namespace;
    let mut steps = Vec::new();
    if !o.installer_missing.is_empty() {
        steps.push(Step::CreateInstaller {
            objects: o.installer_missing.clone(),
        });
    }
    if o.subscription.as_ref().is_some_and(|s| !deleting(s)) {
        steps.push(Step::DeleteSubscription {
            target: Target::v0("Subscription", "v1alpha1", ns, &o.name),
        });
    }
    // An InstallPlan shared with Subscriptions that stay on OLM v0 is left to them
    // (super::install_plans).
    let own =
        |ip: &&Value| InstallPlanView::of(ip).deleted_by_switch(&o.name, &backup.installed_csv);
    for ip in o.install_plans.iter().filter(own) {
        steps.push(Step::DeleteInstallPlan {
            target: Target::v0("InstallPlan", "v1alpha1", ns, &name_of(ip)),
        });
    }
    steps.extend(marks(o, backup));
    let hand_over = (extension_name(o, backup), backup_target(backup));
    steps.extend(
        o.tied
            .iter()
            .filter_map(|obj| untie(obj, &backup.installed_csv, ns))
            .map(|step| with_hand_over(step, &hand_over)),
    );
    let csv_target = Target::v0(
        "ClusterServiceVersion",
        "v1alpha1",
        ns,
        &backup.installed_csv,
    );
    if let Some(csv) = &o.csv {
        if finalizers(csv).iter().any(|f| f == CSV_FINALIZER) {
            steps.push(Step::RemoveCsvFinalizer {
                target: csv_target.clone(),
            });
        }
        if !deleting(csv) {
            steps.push(Step::DeleteCsv { target: csv_target });
        }
    }
    for copy in &o.copied_csvs {
        let copy_ns = text(copy, "/metadata/namespace").unwrap_or_default();
        steps.push(Step::DeleteCopiedCsv {
            target: Target::v0(
                "ClusterServiceVersion",
                "v1alpha1",
                &copy_ns,
                &name_of(copy),
            ),
        });
    }
    steps
}

fn name_of(v: &Value) -> String {
    text(v, "/metadata/name").unwrap_or_default()
}

fn deleting(v: &Value) -> bool {
    text(v, "/metadata/deletionTimestamp").is_some()
}

/// `metadata.finalizers`.
pub fn finalizers(v: &Value) -> Vec<String> {
    strings(v, "/metadata/finalizers")
}
