//! `olmv1 migrate rollback <namespace>/<name> | --all` (docs/how-to/switch-from-olm-v0.md,
//! "rollback"): reads the backup, the Subscription, the ClusterExtension, its revision
//! records and the objects of the installed revision that tie it to the certificate
//! provider (and its APIServices, and whether OLM v0 made the CSV again), asks
//! [`rollback::plan`] for the steps that remain, and performs
//! them in order (`--dry-run` prints them), stopping at the first failure. Decides
//! nothing itself.

use super::convert::remove_finalizers;
use super::kube as k;
use super::{Output, RollbackArgs, parse_target};
use crate::apply::{ObjectRef, record};
use crate::migrate::olm_v0::backup::{Backup, configmap_name};
use crate::migrate::olm_v0::convert::{Target, owner_labels};
use crate::migrate::olm_v0::rollback::{self, Observed, PAUSED_ANNOTATION, Plan, Step};
use serde_json::json;
use std::path::Path;

fn extension(name: &str) -> Target {
    Target {
        api_version: "olm.operatorframework.io/v1".into(),
        kind: "ClusterExtension".into(),
        namespace: String::new(),
        name: name.into(),
    }
}

/// What `migrate rollback` prints, and its exit code (0 planned or done, 1 refused,
/// 2 a step failed). Blocking.
pub fn rollback(args: &RollbackArgs) -> Result<(String, u8), String> {
    let (ns, name) = parse_target(args.subscription.as_deref().unwrap_or_default())?;
    let kc = args.kubeconfig.as_deref();
    let observed = super::super::block_on(read(kc, &ns, &name))??;
    let plan = rollback::plan(&observed);
    let mut out = render(&plan, args.output, !args.dry_run)?;
    if plan.refused.is_some() {
        return Ok((out, 1));
    }
    if args.dry_run {
        return Ok((out, 0));
    }
    // A convert that did not finish may have left its fence: OLM v0 must be able to
    // tie the objects again. The guard on the package would refuse the Subscription
    // the rollback re-creates.
    super::super::block_on(async {
        let c = super::gather::client(kc).await?;
        super::fence::lower_for_backup(&c, &ns, &name, &mut out).await?;
        super::guard::lower(&c, &ns, &name, &mut out).await
    })??;
    let run = execute_all(kc, (&ns, &name), plan.steps, &mut out);
    let failed = super::super::block_on(run)??;
    Ok((out, if failed { 2 } else { 0 }))
}

/// `rollback --all`: every Subscription a backup ConfigMap names, one rollback each; a
/// refused or failed one does not stop the others; a summary line, the worst exit code.
pub fn rollback_all(args: &RollbackArgs) -> Result<(String, u8), String> {
    let kc = args.kubeconfig.as_deref();
    let targets = super::super::block_on(super::cleanup::backed_up(kc))??;
    let mut outcomes = Vec::new();
    for target in targets {
        let one = RollbackArgs {
            subscription: Some(target.clone()),
            all: false,
            dry_run: args.dry_run,
            output: args.output,
            kubeconfig: args.kubeconfig.clone(),
        };
        outcomes.push(
            rollback(&one).unwrap_or_else(|e| (format!("Subscription {target}: error: {e}\n"), 2)),
        );
    }
    Ok(super::summary("rollback", outcomes))
}

/// Performs `steps`; after a wait for OLM v0 (Manual approval) reads and plans again
/// and goes on. True when a step failed.
async fn execute_all(
    kc: Option<&Path>,
    (ns, name): (&str, &str),
    mut steps: Vec<Step>,
    out: &mut String,
) -> Result<bool, String> {
    let mut done = 0;
    // Rounds: up to the InstallPlan (Manual approval), up to the CSV, the rest.
    for _round in 0..4 {
        match execute(kc, name, &steps, out, &mut done).await? {
            Executed::Failed => return Ok(true),
            Executed::All => return Ok(false),
            Executed::Waited => {}
        }
        let plan = rollback::plan(&read(kc, ns, name).await?);
        if let Some(why) = plan.refused {
            out.push_str(&format!("rollback refused: {why}\n"));
            return Ok(true);
        }
        steps = plan.steps;
    }
    out.push_str("still waiting for OLM v0: run rollback again\n");
    Ok(true)
}

async fn read(kc: Option<&Path>, ns: &str, name: &str) -> Result<Observed, String> {
    let c = super::gather::client(kc).await?;
    let cm = Target {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: ns.into(),
        name: configmap_name(name),
    };
    let sub = subscription(ns, name);
    let selector = format!(
        "olm.operatorframework.io/revision-record=true,olm.operatorframework.io/owner-name={name}"
    );
    let listed = k::list(&c, "v1", "ConfigMap", "", Some(&selector)).await?;
    let records = listed.iter().map(Target::of).collect();
    let (objects, unreadable_record) = match revision_objects(&listed) {
        Ok(objects) => (objects, None),
        Err(why) => (Vec::new(), Some(why)),
    };
    let (provider_objects, injected) = provider_ties(&c, &objects).await?;
    let mut api_services = Vec::new();
    for t in objects.iter().filter(|t| t.kind == "APIService") {
        api_services.extend(k::get(&c, t).await?);
    }
    let backup = k::get(&c, &cm).await?.map(|v| Backup::from_configmap(&v));
    let csv_exists = match &backup {
        Some(Ok(b)) => k::get(&c, &csv(ns, &b.installed_csv)).await?.is_some(),
        _ => false,
    };
    Ok(Observed {
        namespace: ns.into(),
        name: name.into(),
        backup,
        subscription: k::get(&c, &sub).await?,
        extension: k::get(&c, &extension(name)).await?,
        records,
        install_plans: k::list(&c, INSTALL_PLAN.0, INSTALL_PLAN.1, ns, None).await?,
        provider_objects,
        injected,
        unreadable_record,
        api_services,
        csv_exists,
    })
}

fn csv(ns: &str, name: &str) -> Target {
    Target {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// Waits until OLM v0 made the ClusterServiceVersion `ns/name` again.
async fn await_csv(c: &kube::Client, ns: &str, name: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + INSTALL_PLAN_WAIT;
    while k::get(c, &csv(ns, name)).await?.is_none() {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "OLM v0 made no ClusterServiceVersion {ns}/{name} within {} s (is its InstallPlan approved, and catalog-operator running?)",
                INSTALL_PLAN_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    Ok(())
}

/// The objects of the installed revision in the record ConfigMaps `records` (none
/// without a record, or before a revision was installed).
fn revision_objects(records: &[serde_json::Value]) -> Result<Vec<Target>, String> {
    let mut objects = Vec::new();
    for record in records {
        let name = Target::of(record);
        let data = record
            .pointer(&format!("/binaryData/{}", record::DATA_KEY))
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| format!("{name}: no binaryData key {}", record::DATA_KEY))?;
        let gz = data_encoding::BASE64
            .decode(data.as_bytes())
            .map_err(|e| format!("{name}: {e}"))?;
        let history = record::decode(&gz).map_err(|e| format!("{name}: {e}"))?;
        let installed = history.installed().map(|r| r.objects.iter());
        // Rendered cluster-scoped objects may carry the install namespace (webhook
        // configurations do, as upstream renders them): it is not part of their name.
        let cluster_scoped =
            |o: &ObjectRef| crate::kinds::lookup(&o.group, &o.kind).is_some_and(|k| !k.namespaced);
        objects.extend(installed.into_iter().flatten().map(|o| Target {
            api_version: o.api_version(),
            kind: o.kind.clone(),
            namespace: if cluster_scoped(o) {
                String::new()
            } else {
                o.namespace.clone()
            },
            name: o.name.clone(),
        }));
    }
    Ok(objects)
}

/// Of `objects`, those only olmv1 made for its certificate provider that still exist,
/// and those (CRDs, APIServices, Services) that still carry the provider's annotations.
async fn provider_ties(
    c: &kube::Client,
    objects: &[Target],
) -> Result<(Vec<Target>, Vec<(Target, Vec<String>)>), String> {
    let mut made = Vec::new();
    let mut injected = Vec::new();
    for t in objects {
        let annotated = rollback::provider_annotated(&t.kind);
        if !annotated && !rollback::provider_object(&t.api_version, &t.kind) {
            continue;
        }
        let Some(live) = k::get(c, t).await? else {
            continue;
        };
        if annotated {
            let annotations = rollback::provider_annotations(&live);
            if !annotations.is_empty() {
                injected.push((t.clone(), annotations));
            }
        } else {
            made.push(t.clone());
        }
    }
    Ok((made, injected))
}

const INSTALL_PLAN: (&str, &str) = ("operators.coreos.com/v1alpha1", "InstallPlan");

/// How long a rollback waits for OLM v0 to make the restored Subscription's InstallPlan.
const INSTALL_PLAN_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until the Subscription `ns/name` names its InstallPlan and that exists.
async fn await_install_plan(
    c: &kube::Client,
    ns: &str,
    name: &str,
    csv: &str,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + INSTALL_PLAN_WAIT;
    loop {
        let sub = k::get(c, &subscription(ns, name)).await?;
        let plan = sub
            .as_ref()
            .and_then(|s| s.pointer("/status/installPlanRef/name"))
            .and_then(serde_json::Value::as_str);
        if let Some(plan) = plan {
            let t = Target {
                api_version: INSTALL_PLAN.0.into(),
                kind: INSTALL_PLAN.1.into(),
                namespace: ns.into(),
                name: plan.into(),
            };
            if k::get(c, &t).await?.is_some() {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "OLM v0 made no InstallPlan for {csv} in {ns} within {} s (is catalog-operator running and the CatalogSource healthy?)",
                INSTALL_PLAN_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

fn subscription(ns: &str, name: &str) -> Target {
    Target {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "Subscription".into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// How [`execute`] ended.
enum Executed {
    All,
    Failed,
    /// It waited for OLM v0: what follows must be planned again.
    Waited,
}

async fn execute(
    kc: Option<&Path>,
    subscription_name: &str,
    steps: &[Step],
    out: &mut String,
    count: &mut usize,
) -> Result<Executed, String> {
    let c = super::gather::client(kc).await?;
    for step in steps {
        *count += 1;
        let i = *count - 1;
        let done = match step {
            Step::PauseExtension { name } => {
                let patch = json!({"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}});
                k::merge_patch(&c, &extension(name), &patch).await
            }
            Step::DeleteExtension { name } => k::delete(&c, &extension(name), true).await,
            Step::RemoveExtensionFinalizers { name, finalizers } => {
                let mut result = Ok(());
                for f in finalizers {
                    result = remove_finalizers(&c, &extension(name), Some(f)).await;
                    if result.is_err() {
                        break;
                    }
                }
                result
            }
            Step::RemoveProviderAnnotations {
                target,
                annotations,
            } => {
                let nulls: serde_json::Map<String, serde_json::Value> = annotations
                    .iter()
                    .map(|a| (a.clone(), serde_json::Value::Null))
                    .collect();
                let patch = json!({"metadata": {"annotations": nulls}});
                k::merge_patch(&c, target, &patch).await
            }
            Step::AwaitCsv { namespace, csv } => await_csv(&c, namespace, csv).await,
            Step::LabelApiService {
                target,
                namespace,
                csv,
            } => {
                let labels = owner_labels(csv, namespace);
                k::merge_patch(&c, target, &json!({"metadata": {"labels": labels}})).await
            }
            Step::DeleteRevisionRecord { target }
            | Step::DeleteProviderObject { target }
            | Step::DeleteBackup { target } => k::delete(&c, target, false).await,
            Step::RestoreSubscription { manifest } => k::create(&c, manifest).await,
            Step::AwaitInstallPlan { namespace, csv } => {
                await_install_plan(&c, namespace, subscription_name, csv).await
            }
            Step::ApproveInstallPlan { target, .. } => {
                k::merge_patch(&c, target, &json!({"spec": {"approved": true}})).await
            }
        };
        match done {
            Ok(()) => out.push_str(&format!("done {}: {}\n", i + 1, step.describe())),
            Err(e) => {
                out.push_str(&format!(
                    "FAILED {}: {}: {e}\nnothing after it was done: run rollback again to continue from there\n",
                    i + 1,
                    step.describe()
                ));
                return Ok(Executed::Failed);
            }
        }
        if matches!(step, Step::AwaitInstallPlan { .. } | Step::AwaitCsv { .. }) {
            return Ok(Executed::Waited);
        }
    }
    Ok(Executed::All)
}

fn render(plan: &Plan, output: Output, applying: bool) -> Result<String, String> {
    if let Some(structured) = super::render::structured(plan, output).filter(|_| !applying) {
        return structured;
    }
    let mut out = format!("Subscription {}: ", plan.subscription);
    if let Some(why) = &plan.refused {
        out.push_str(&format!("rollback refused: {why}\n"));
        return Ok(out);
    }
    // With Manual approval the InstallPlan to approve exists only after the wait:
    // its approval is one more step, planned then.
    let then = if plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::AwaitInstallPlan { .. }))
    {
        ", then one more: approving that InstallPlan"
    } else {
        ""
    };
    if applying {
        out.push_str(&format!(
            "rolling back ({} step(s){then})\n",
            plan.steps.len()
        ));
        return Ok(out);
    }
    out.push_str(&format!(
        "{} step(s){then} (dry run, nothing changed)\n",
        plan.steps.len()
    ));
    for (i, s) in plan.steps.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", i + 1, s.describe()));
    }
    Ok(out)
}
