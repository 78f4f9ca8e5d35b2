//! `olmv1 migrate convert` as a plan (docs/how-to/switch-from-olm-v0.md, "convert"):
//! from what is on the cluster now, the ordered steps that remain to stop OLM v0 for one
//! Subscription without losing anything and hand the operator to a ClusterExtension.
//! Pure and state-driven: a step already done is not planned again, so a convert that
//! was interrupted anywhere finishes when run again, and one that finished plans
//! nothing.
//!
//! The order follows what OLM v0 deletes (olm-v0 reference §1.4): the backup first
//! (the way back, [`super::backup`]); the installer account; the Subscription and its
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
//! last, annotated as the migration of the Subscription. The OperatorCondition stays,
//! untied like the rest: the operator's pods still name it (`OPERATOR_CONDITION_NAME`)
//! until the ClusterExtension's own revision replaces them.

use super::backup::{BACKUP_ANNOTATION, Backup, configmap_name};
use super::read::text;
use super::target::MIGRATED_FROM_ANNOTATION;
use super::{BlockerCode, Check};
use crate::apply::ownership::{ADOPTABLE_BY_ANNOTATION, adoption_mark};
use serde::Serialize;
use serde_json::{Value, json};

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
    steps.extend(stop_v0(o, &backup));
    if o.extension.is_none() {
        steps.push(Step::CreateClusterExtension {
            manifest: extension_manifest(&backup),
        });
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

/// What a finished convert does about the OperatorCondition (after the CSV is gone).
#[derive(Clone, Debug, PartialEq)]
pub enum Restore {
    /// Nothing to restore: nothing was set in it, or it is still the same object.
    Nothing,
    /// It is gone and something was set in it: wait until the takeover re-creates it.
    Wait,
    /// It was re-created without what was set in it: this JSON merge patch puts back
    /// `spec.overrides` and `spec.conditions` as backed up (only the missing ones).
    Patch(Value),
}

/// Whether the OperatorCondition `live` lost what the backup kept of it (`backed_up`,
/// [`super::backup::operator_condition_snapshot`]): OLM v0's garbage collection may
/// delete it during the convert and the takeover re-create it empty.
pub fn restore_operator_condition(backed_up: Option<&Value>, live: Option<&Value>) -> Restore {
    let Some(kept) = backed_up
        .and_then(|b| b.get("spec"))
        .and_then(Value::as_object)
    else {
        return Restore::Nothing;
    };
    if kept.is_empty() {
        return Restore::Nothing;
    }
    let Some(live) = live else {
        return Restore::Wait;
    };
    // Still pointing at the CSV (being deleted or gone): garbage collection may delete
    // it yet, or OLM v0 re-created it.
    let tied = live
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "ClusterServiceVersion"));
    if tied {
        return Restore::Wait;
    }
    let uid = |v: &Value| v.pointer("/metadata/uid").cloned();
    if backed_up.and_then(|b| b.get("uid")).cloned() == uid(live) {
        return Restore::Nothing;
    }
    let missing: serde_json::Map<String, Value> = kept
        .iter()
        .filter(|(key, _)| {
            live.pointer(&format!("/spec/{key}"))
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        })
        .map(|(key, v)| (key.clone(), v.clone()))
        .collect();
    if missing.is_empty() {
        return Restore::Nothing;
    }
    Restore::Patch(json!({"spec": missing}))
}

enum Start {
    Refused(String),
    /// Only a ClusterCatalog is missing: create it (if not yet), then wait.
    Catalog(Option<Box<Step>>, String),
}

/// The backup to work from (live, else the one to write first) and the first steps.
fn start(o: &Observed) -> Result<(Backup, Vec<Step>), Start> {
    let subscription = format!("{}/{}", o.namespace, o.name);
    match &o.backup {
        Some(Ok(b)) => return Ok((b.clone(), Vec::new())),
        Some(Err(e)) => {
            return Err(Start::Refused(format!(
                "the backup ConfigMap {}/{} is unreadable ({e}): restore it or delete it if no convert of {subscription} is in progress",
                o.namespace,
                configmap_name(&o.name)
            )));
        }
        None => {}
    }
    if o.subscription.is_none() {
        return Err(Start::Refused(format!(
            "Subscription {subscription} not found, and no backup of a convert in progress ({}/{})",
            o.namespace,
            configmap_name(&o.name)
        )));
    }
    let Some(check) = &o.check else {
        return Err(Start::Refused(format!(
            "Subscription {subscription} was not checked"
        )));
    };
    if let Some(refusal) = blocked(check, o.catalog_exists) {
        return Err(refusal);
    }
    let backup = match &o.proposed {
        Some(Ok(b)) => b.clone(),
        Some(Err(e)) => return Err(Start::Refused(e.clone())),
        None => return Err(Start::Refused("the backup could not be prepared".into())),
    };
    let steps = vec![Step::WriteBackup {
        manifest: backup.configmap(),
    }];
    Ok((backup, steps))
}

/// A convert only starts from an eligible Subscription; when the one blocker is a
/// missing ClusterCatalog that `check` can create, the convert creates it and waits.
fn blocked(check: &Check, catalog_exists: bool) -> Option<Start> {
    if check.eligible {
        return None;
    }
    let only_catalog = check
        .blockers
        .iter()
        .all(|b| b.code == BlockerCode::NotInCatalog);
    match &check.cluster_catalog {
        Some(c) if only_catalog && !c.reused => {
            let step = c
                .manifest
                .clone()
                .filter(|_| !catalog_exists)
                .map(|manifest| Box::new(Step::CreateClusterCatalog { manifest }));
            Some(Start::Catalog(
                step,
                format!(
                    "run convert again once ClusterCatalog {} is Serving the package",
                    c.name
                ),
            ))
        }
        _ => {
            let list: Vec<String> = check
                .blockers
                .iter()
                .map(|b| format!("{} (what to do: {})", b.message, b.action))
                .collect();
            Some(Start::Refused(format!(
                "Subscription {} is not eligible: {}",
                check.subscription,
                list.join("; ")
            )))
        }
    }
}

/// A ClusterExtension of that name that is not this Subscription's migration.
fn foreign_extension(o: &Observed, subscription: &str) -> Option<String> {
    let ext = o.extension.as_ref()?;
    let from = ext
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIGRATED_FROM_ANNOTATION))
        .and_then(Value::as_str);
    (from != Some(subscription)).then(|| {
        format!(
            "ClusterExtension {} already exists and is not the migration of Subscription {subscription} (annotation {MIGRATED_FROM_ANNOTATION}): rename or remove it first",
            o.name
        )
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
    for ip in &o.install_plans {
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

/// The ClusterExtension convert creates (named like the Subscription).
fn extension_name(o: &Observed, backup: &Backup) -> String {
    text(&backup.extension, "/metadata/name").unwrap_or_else(|| o.name.clone())
}

/// The backup ConfigMap of `backup`.
fn backup_target(backup: &Backup) -> Target {
    Target {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: backup.namespace(),
        name: configmap_name(&backup.name()),
    }
}

/// `step` (an untie) handing its object over as well.
pub fn with_hand_over(mut step: Step, to: &(String, Target)) -> Step {
    if let Step::Untie { hand_over, .. } = &mut step {
        *hand_over = Some(to.clone());
    }
    step
}

/// The CRDs the CSV owns that do not carry the mark yet (module documentation);
/// before the backup exists (a first run) every one of them is marked. What is tied to
/// the CSV is marked by its untie.
fn marks(o: &Observed, backup: &Backup) -> Vec<Step> {
    let extension = extension_name(o, backup);
    let wanted = o
        .backup_uid
        .as_deref()
        .map(|uid| adoption_mark(&extension, uid));
    o.untied_handed_over
        .iter()
        .filter(|obj| {
            let mark = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(ADOPTABLE_BY_ANNOTATION))
                .and_then(Value::as_str);
            wanted.is_none() || mark != wanted.as_deref()
        })
        .map(|obj| Step::MarkForAdoption {
            target: Target::of(obj),
            extension: extension.clone(),
            backup: backup_target(backup),
        })
        .collect()
}

/// The names of the CRDs the CSV `csv` owns.
pub fn owned_crd_names(csv: &Value) -> Vec<String> {
    csv.pointer("/spec/customresourcedefinitions/owned")
        .and_then(Value::as_array)
        .map(|owned| {
            owned
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn name_of(v: &Value) -> String {
    text(v, "/metadata/name").unwrap_or_default()
}

fn deleting(v: &Value) -> bool {
    text(v, "/metadata/deletionTimestamp").is_some()
}

/// `metadata.finalizers`.
pub fn finalizers(v: &Value) -> Vec<String> {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an ownerReference points at the CSV `csv` (any UID: a CSV re-created under
/// the same name is the same owner to OLM v0).
fn is_csv_reference(r: &Value, csv: &str) -> bool {
    r["kind"] == "ClusterServiceVersion"
        && r["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("operators.coreos.com/"))
        && r["name"] == csv
}

/// OLM v0's labels tying an object to the CSV `csv` of namespace `namespace`
/// ([`OWNER_LABELS`]).
pub fn owner_labels(csv: &str, namespace: &str) -> Value {
    serde_json::json!({OWNER_LABELS[0]: csv, OWNER_LABELS[1]: "ClusterServiceVersion",
        OWNER_LABELS[2]: namespace})
}

/// Whether `obj` carries OLM v0's labels for the CSV `csv` of namespace `namespace`.
pub fn labelled_for(obj: &Value, csv: &str, namespace: &str) -> bool {
    let wanted = owner_labels(csv, namespace);
    OWNER_LABELS
        .iter()
        .all(|k| obj.pointer(&format!("/metadata/labels/{k}")) == wanted.get(*k))
}

/// What ties `obj` to the CSV `csv` of namespace `namespace`: the `olm.owner*` labels
/// naming it, ownerReferences to it. `None` when nothing does.
pub fn untie(obj: &Value, csv: &str, namespace: &str) -> Option<Step> {
    let label = |k: &str| text(obj, &format!("/metadata/labels/{k}"));
    let labelled = labelled_for(obj, csv, namespace);
    let labels: Vec<String> = if labelled {
        OWNER_LABELS
            .iter()
            .filter(|k| label(k).is_some())
            .map(|k| k.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let refs = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let in_namespace = text(obj, "/metadata/namespace").as_deref() == Some(namespace);
    let (removed, kept): (Vec<Value>, Vec<Value>) = refs
        .into_iter()
        .partition(|r| in_namespace && is_csv_reference(r, csv));
    if labels.is_empty() && removed.is_empty() {
        return None;
    }
    Some(Step::Untie {
        target: Target::of(obj),
        labels,
        owner_references: removed
            .iter()
            .map(|r| format!("{}/{}", r["kind"].as_str().unwrap_or(""), csv))
            .collect(),
        keep_owner_references: (!removed.is_empty()).then_some(kept),
        resource_version: text(obj, "/metadata/resourceVersion"),
        csv: (csv.to_string(), namespace.to_string()),
        hand_over: None,
    })
}
