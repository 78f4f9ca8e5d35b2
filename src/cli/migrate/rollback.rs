//! `olmv1 migrate rollback <namespace>/<name>` (docs/how-to/switch-from-olm-v0.md,
//! "rollback"): reads the backup, the Subscription, the ClusterExtension and its
//! revision records, asks [`rollback::plan`] for the steps that remain, and performs
//! them in order (`--dry-run` prints them), stopping at the first failure. Decides
//! nothing itself.

use super::convert::remove_finalizers;
use super::kube as k;
use super::{Output, RollbackArgs, parse_target};
use crate::migrate::olm_v0::backup::{Backup, configmap_name};
use crate::migrate::olm_v0::convert::Target;
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
    let (ns, name) = parse_target(&args.subscription)?;
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
    let failed = super::super::block_on(execute(kc, &plan.steps, &mut out))??;
    Ok((out, if failed { 2 } else { 0 }))
}

async fn read(kc: Option<&Path>, ns: &str, name: &str) -> Result<Observed, String> {
    let c = super::gather::client(kc).await?;
    let cm = Target {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: ns.into(),
        name: configmap_name(name),
    };
    let sub = Target {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "Subscription".into(),
        namespace: ns.into(),
        name: name.into(),
    };
    let selector = format!(
        "olm.operatorframework.io/revision-record=true,olm.operatorframework.io/owner-name={name}"
    );
    let records = k::list(&c, "v1", "ConfigMap", "", Some(&selector))
        .await?
        .iter()
        .map(Target::of)
        .collect();
    Ok(Observed {
        namespace: ns.into(),
        name: name.into(),
        backup: k::get(&c, &cm).await?.map(|v| Backup::from_configmap(&v)),
        subscription: k::get(&c, &sub).await?,
        extension: k::get(&c, &extension(name)).await?,
        records,
    })
}

async fn execute(kc: Option<&Path>, steps: &[Step], out: &mut String) -> Result<bool, String> {
    let c = super::gather::client(kc).await?;
    for (i, step) in steps.iter().enumerate() {
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
            Step::DeleteRevisionRecord { target } | Step::DeleteBackup { target } => {
                k::delete(&c, target, false).await
            }
            Step::RestoreSubscription { manifest } => k::create(&c, manifest).await,
        };
        match done {
            Ok(()) => out.push_str(&format!("done {}: {}\n", i + 1, step.describe())),
            Err(e) => {
                out.push_str(&format!(
                    "FAILED {}: {}: {e}\nnothing after it was done: run rollback again to continue from there\n",
                    i + 1,
                    step.describe()
                ));
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn render(plan: &Plan, output: Output, applying: bool) -> Result<String, String> {
    match output {
        Output::Json if !applying => {
            return serde_json::to_string_pretty(plan)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string());
        }
        Output::Yaml if !applying => {
            return serde_saphyr::to_string(plan).map_err(|e| e.to_string());
        }
        _ => {}
    }
    let mut out = format!("Subscription {}: ", plan.subscription);
    if let Some(why) = &plan.refused {
        out.push_str(&format!("rollback refused: {why}\n"));
        return Ok(out);
    }
    if applying {
        out.push_str(&format!("rolling back ({} step(s))\n", plan.steps.len()));
        return Ok(out);
    }
    out.push_str(&format!(
        "{} step(s) (dry run, nothing changed)\n",
        plan.steps.len()
    ));
    for (i, s) in plan.steps.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", i + 1, s.describe()));
    }
    Ok(out)
}
