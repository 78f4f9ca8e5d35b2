//! `olmv1 migrate rollback` as a plan (docs/how-to/switch-from-olm-v0.md, "rollback";
//! olm-v0 reference §3.5): the ClusterExtension goes without its uninstall ever running
//! — paused first (a paused extension being deleted uninstalls nothing,
//! `controller::extension::plan::paused`), deleted with orphan propagation (garbage
//! collection leaves the objects it owns), then its finalizers removed — its revision
//! record goes, and the Subscription is re-created from the backup with `startingCSV`
//! = the installed CSV, so OLM v0 installs that CSV again over the objects still in
//! place. On Manual approval OLM v0 waits for that CSV's InstallPlan to be approved:
//! the rollback waits for it and approves it when it installs exactly the backed-up
//! CSV (the one still running: no upgrade; found by the real OLM v0 test,
//! e2e/migrate_v0.rs). Before the Subscription comes back, what ties the operator to
//! olmv1's certificate provider goes (a webhook or APIService operator,
//! [`provider_object`], [`PROVIDER_ANNOTATIONS`]): OLM v0 issues its own CA and
//! certificate on install, into the same Secret, and makes its own webhook
//! configurations. The backup goes last. Pure and state-driven like the convert: a rollback
//! interrupted anywhere finishes when run again. Refused when the extension installed
//! another bundle than the backed-up CSV: OLM v0 cannot step back to an older CSV.

use super::backup::{Backup, configmap_name};
use super::convert::{Target, finalizers};
use super::read::text;
use super::target::MIGRATED_FROM_ANNOTATION;
use crate::api;
use serde::Serialize;
use serde_json::Value;

/// The annotation that pauses an extension (`"true"`).
pub const PAUSED_ANNOTATION: &str = "olm.operatorframework.io/paused";

/// What is on the cluster for one rollback, read by the command line.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub namespace: String,
    pub name: String,
    /// The backup ConfigMap, read back.
    pub backup: Option<Result<Backup, String>>,
    /// The live Subscription.
    pub subscription: Option<Value>,
    /// The live ClusterExtension named like the Subscription.
    pub extension: Option<Value>,
    /// The extension's revision record ConfigMaps.
    pub records: Vec<Target>,
    /// The InstallPlans of the Subscription's namespace.
    pub install_plans: Vec<Value>,
    /// The objects of the installed revision (its record) that only olmv1 made for its
    /// certificate provider ([`provider_object`]) and that still exist.
    pub provider_objects: Vec<Target>,
    /// The objects of the installed revision that still carry a certificate provider's
    /// annotations, with those annotations ([`provider_annotations`]).
    pub injected: Vec<(Target, Vec<String>)>,
    /// Why the revision record could not be read, if it could not.
    pub unreadable_record: Option<String>,
    /// The installed revision's APIServices, live.
    pub api_services: Vec<Value>,
    /// Whether the backed-up CSV exists (OLM v0 made it again).
    pub csv_exists: bool,
}

/// The annotations by which a certificate provider injects its CA or issues a
/// certificate: cert-manager's cainjector (CRDs, APIServices, webhook configurations)
/// and OpenShift's service-ca (those, and a Service's serving certificate).
pub const PROVIDER_ANNOTATIONS: [&str; 3] = [
    "cert-manager.io/inject-ca-from",
    "service.beta.openshift.io/inject-cabundle",
    "service.beta.openshift.io/serving-cert-secret-name",
];

/// The provider annotations `obj` carries.
pub fn provider_annotations(obj: &Value) -> Vec<String> {
    let annotations = obj.pointer("/metadata/annotations");
    PROVIDER_ANNOTATIONS
        .iter()
        .filter(|a| annotations.and_then(|m| m.get(**a)).is_some())
        .map(|a| a.to_string())
        .collect()
}

/// Kinds of the revision on which a certificate provider's annotations may sit (to be
/// removed, the objects kept): CRDs, APIServices, Services.
pub fn provider_annotated(kind: &str) -> bool {
    matches!(kind, "CustomResourceDefinition" | "APIService" | "Service")
}

/// A revision object only olmv1 made for its certificate provider, which would fight
/// OLM v0's own once it installs again: cert-manager's Certificates (they re-issue the
/// Secret OLM v0 writes its certificate into) and Issuers, and the webhook
/// configurations (OLM v0 makes its own, suffixed, with its CA).
pub fn provider_object(api_version: &str, kind: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    matches!(
        (group, kind),
        ("cert-manager.io", "Certificate" | "Issuer")
            | (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
            )
    )
}

/// One step of a rollback; each is safe to run again.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum Step {
    PauseExtension {
        name: String,
    },
    /// Delete with propagationPolicy Orphan.
    DeleteExtension {
        name: String,
    },
    RemoveExtensionFinalizers {
        name: String,
        finalizers: Vec<String>,
    },
    /// Remove a certificate provider's annotations ([`PROVIDER_ANNOTATIONS`]).
    RemoveProviderAnnotations {
        target: Target,
        annotations: Vec<String>,
    },
    /// Delete an object only olmv1 made for its certificate provider ([`provider_object`]).
    DeleteProviderObject {
        target: Target,
    },
    /// Wait until OLM v0 made the CSV again, then plan again.
    AwaitCsv {
        namespace: String,
        csv: String,
    },
    /// Label an APIService for the CSV (`olm.owner`, `olm.owner.kind`,
    /// `olm.owner.namespace`): OLM v0 adopts an existing APIService only when it is
    /// labelled for the installing CSV (`IsAPIServiceAdoptable` in its source), and
    /// deletes one labelled for a CSV that does not exist: so once the CSV does.
    LabelApiService {
        target: Target,
        namespace: String,
        csv: String,
    },
    DeleteRevisionRecord {
        target: Target,
    },
    RestoreSubscription {
        manifest: Value,
    },
    /// Wait until OLM v0 made the InstallPlan of the restored Subscription (Manual
    /// approval), then plan again.
    AwaitInstallPlan {
        namespace: String,
        csv: String,
    },
    ApproveInstallPlan {
        target: Target,
        csv: String,
    },
    DeleteBackup {
        target: Target,
    },
}

impl Step {
    /// The step in words.
    pub fn describe(&self) -> String {
        match self {
            Step::PauseExtension { name } => format!(
                "pause ClusterExtension {name} ({PAUSED_ANNOTATION}: \"true\": it uninstalls nothing)"
            ),
            Step::DeleteExtension { name } => format!(
                "delete ClusterExtension {name} (propagationPolicy Orphan: its objects stay)"
            ),
            Step::RemoveExtensionFinalizers { name, finalizers } => format!(
                "remove finalizers {} from ClusterExtension {name}",
                finalizers.join(", ")
            ),
            Step::RemoveProviderAnnotations {
                target,
                annotations,
            } => format!(
                "remove {} from {target} (OLM v0 puts its own CA there)",
                annotations.join(", ")
            ),
            Step::DeleteProviderObject { target } => match target.kind.as_str() {
                "Certificate" => format!(
                    "delete {target} (cert-manager would re-issue the Secret OLM v0 writes its own certificate into)"
                ),
                "Issuer" => format!("delete {target} (it issued olmv1's certificates only)"),
                _ => format!(
                    "delete {target} (olmv1's: OLM v0 makes its own with its CA, and this one would fail every call once the pods serve OLM v0's certificate)"
                ),
            },
            Step::AwaitCsv { namespace, csv } => {
                format!("wait for OLM v0 to create ClusterServiceVersion {namespace}/{csv} again")
            }
            Step::LabelApiService {
                target,
                namespace,
                csv,
            } => format!(
                "label {target} for ClusterServiceVersion {namespace}/{csv} (olm.owner: OLM v0 adopts an existing APIService only when it is labelled for the installing CSV)"
            ),
            Step::DeleteRevisionRecord { target } => format!("delete the revision record {target}"),
            Step::RestoreSubscription { manifest } => format!(
                "create {} with startingCSV {}",
                Target::of(manifest),
                text(manifest, "/spec/startingCSV").unwrap_or_default()
            ),
            Step::AwaitInstallPlan { namespace, csv } => {
                format!("wait for OLM v0's InstallPlan of {csv} in {namespace} (Manual approval)")
            }
            Step::ApproveInstallPlan { target, csv } => format!(
                "approve {target} (it installs {csv} only, the CSV still running: no upgrade)"
            ),
            Step::DeleteBackup { target } => format!("delete the backup {target}"),
        }
    }
}

/// The plan of a rollback.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub subscription: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    pub steps: Vec<Step>,
}

/// The steps that remain (see the module documentation).
pub fn plan(o: &Observed) -> Plan {
    let subscription = format!("{}/{}", o.namespace, o.name);
    let refuse = |why: String| Plan {
        subscription: subscription.clone(),
        refused: Some(why),
        steps: Vec::new(),
    };
    let backup = match &o.backup {
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            return refuse(format!(
                "the backup ConfigMap {}/{} is unreadable: {e}",
                o.namespace,
                configmap_name(&o.name)
            ));
        }
        None => {
            return refuse(format!(
                "no backup ConfigMap {}/{}: {subscription} was not converted by olmv1 migrate convert (or was rolled back already)",
                o.namespace,
                configmap_name(&o.name)
            ));
        }
    };
    let mut steps = Vec::new();
    if let Some(ext) = &o.extension {
        if let Some(why) = refusal(ext, backup, &subscription) {
            return refuse(why);
        }
        steps.extend(remove_extension(ext, &o.name));
    }
    if let Some(why) = &o.unreadable_record {
        return refuse(format!(
            "the revision record is unreadable ({why}): the certificate objects olmv1 made cannot be found; delete the record to roll back without removing them"
        ));
    }
    steps.extend(untie_certificate_provider(o));
    if o.subscription.is_none() {
        steps.push(Step::RestoreSubscription {
            manifest: backup.restored_subscription(),
        });
    }
    let approving = manual(backup).and_then(|()| approval(o, &backup.installed_csv));
    let waiting = matches!(approving, Some(Step::AwaitInstallPlan { .. }));
    steps.extend(approving);
    if !waiting {
        steps.extend(tie_api_services(o, &backup.installed_csv));
    }
    // The record names the revision's objects: it goes once nothing above needs it.
    steps.extend(
        o.records
            .iter()
            .map(|t| Step::DeleteRevisionRecord { target: t.clone() }),
    );
    steps.push(Step::DeleteBackup {
        target: Target {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: o.namespace.clone(),
            name: configmap_name(&o.name),
        },
    });
    Plan {
        subscription,
        refused: None,
        steps,
    }
}

/// Why the extension may not be removed for OLM v0: it is not this Subscription's
/// migration, or it installed another bundle than the backed-up CSV.
fn refusal(ext: &Value, backup: &Backup, subscription: &str) -> Option<String> {
    let name = text(ext, "/metadata/name").unwrap_or_default();
    let from = ext
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIGRATED_FROM_ANNOTATION))
        .and_then(Value::as_str);
    if from != Some(subscription) {
        return Some(format!(
            "ClusterExtension {name} is not the migration of Subscription {subscription} (annotation {MIGRATED_FROM_ANNOTATION}): it is left alone"
        ));
    }
    let installed = text(ext, "/status/install/bundle/name")?;
    if installed == backup.installed_csv {
        return None;
    }
    let version = text(ext, "/status/install/bundle/version").unwrap_or_default();
    Some(format!(
        "ClusterExtension {name} has installed {installed} (version {version}) since the switch from {} (version {}): OLM v0 cannot go back to an older CSV, so a Subscription starting at {} would downgrade the operator; pin spec.source.catalog.version to {} to go back with olmv1 first, or keep the ClusterExtension",
        backup.installed_csv, backup.version, backup.installed_csv, backup.version
    ))
}

/// The provider's annotations off the revision's objects first (its cainjector stops
/// writing its CA), then its Certificates and Issuers, then olmv1's webhook
/// configurations: until OLM v0 makes its own (seconds), no webhook is called.
fn untie_certificate_provider(o: &Observed) -> Vec<Step> {
    let rank = |t: &Target| match t.kind.as_str() {
        "Certificate" => 0,
        "Issuer" => 1,
        _ => 2,
    };
    let mut objects: Vec<&Target> = o.provider_objects.iter().collect();
    objects.sort_by_key(|t| (rank(t), (*t).clone()));
    let annotations =
        o.injected
            .iter()
            .map(|(target, annotations)| Step::RemoveProviderAnnotations {
                target: target.clone(),
                annotations: annotations.clone(),
            });
    annotations
        .chain(
            objects
                .into_iter()
                .map(|t| Step::DeleteProviderObject { target: t.clone() }),
        )
        .collect()
}

/// The revision's APIServices not labelled for `csv` yet: labelled once OLM v0 made
/// the CSV again (waited for before).
fn tie_api_services(o: &Observed, csv: &str) -> Vec<Step> {
    let untied: Vec<Target> = o
        .api_services
        .iter()
        .filter(|a| !super::convert::labelled_for(a, csv, &o.namespace))
        .map(Target::of)
        .collect();
    if untied.is_empty() {
        return Vec::new();
    }
    if !o.csv_exists {
        return vec![Step::AwaitCsv {
            namespace: o.namespace.clone(),
            csv: csv.into(),
        }];
    }
    untied
        .into_iter()
        .map(|target| Step::LabelApiService {
            target,
            namespace: o.namespace.clone(),
            csv: csv.into(),
        })
        .collect()
}

/// Pause, delete (orphan), then remove the finalizers of the extension.
fn remove_extension(ext: &Value, name: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let deleting = text(ext, "/metadata/deletionTimestamp").is_some();
    let paused = ext
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PAUSED_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true");
    if !paused && !deleting {
        steps.push(Step::PauseExtension { name: name.into() });
    }
    if !deleting {
        steps.push(Step::DeleteExtension { name: name.into() });
    }
    let controllers = [api::FINALIZER_EXTENSION, api::FINALIZER_EXTENSION_CONTENT];
    let mut ours: Vec<String> = finalizers(ext)
        .into_iter()
        .filter(|f| controllers.contains(&f.as_str()))
        .collect();
    if ours.is_empty() && !deleting {
        // The controller may still add its finalizer until the deletion starts.
        ours = controllers.iter().map(|f| f.to_string()).collect();
    }
    if !ours.is_empty() {
        steps.push(Step::RemoveExtensionFinalizers {
            name: name.into(),
            finalizers: ours,
        });
    }
    steps
}

/// The backed-up Subscription asks for Manual approval.
fn manual(backup: &Backup) -> Option<()> {
    (text(&backup.subscription, "/spec/installPlanApproval")? == "Manual").then_some(())
}

/// On Manual approval: wait for the InstallPlan the restored Subscription names
/// (`status.installPlanRef`: OLM v0 may leave stray ones beside it), then approve it
/// when it installs `csv` and nothing else and is not approved yet. One installing
/// more is left to the user (more than what ran before the switch).
fn approval(o: &Observed, csv: &str) -> Option<Step> {
    let wait = Step::AwaitInstallPlan {
        namespace: o.namespace.clone(),
        csv: csv.into(),
    };
    let Some(name) = o
        .subscription
        .as_ref()
        .and_then(|s| text(s, "/status/installPlanRef/name"))
    else {
        return Some(wait);
    };
    let Some(plan) = o
        .install_plans
        .iter()
        .find(|p| text(p, "/metadata/name").as_deref() == Some(name.as_str()))
    else {
        return Some(wait);
    };
    let names: Vec<&str> = plan
        .pointer("/spec/clusterServiceVersionNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let approved = plan.pointer("/spec/approved").and_then(Value::as_bool) == Some(true);
    (!approved && names == [csv]).then(|| Step::ApproveInstallPlan {
        target: Target::of(plan),
        csv: csv.into(),
    })
}
