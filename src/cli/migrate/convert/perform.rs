//! Performing a convert's steps (docs/how-to/switch-from-olm-v0.md, "convert"): the
//! calls each [`Step`] makes, the adoption mark that hands an object over to the
//! ClusterExtension (naming the live backup's UID, read when the step runs), and the
//! untie and finalizer patches guarded by the resourceVersion read, read again and
//! retried when the object changed meanwhile.

use super::super::kube as k;
use crate::migrate::olm_v0::convert::{self, CSV_FINALIZER, Step, Target};
use serde_json::{Value, json};
use std::path::Path;

/// Performs `steps` in order, numbered after `before`, each line of progress appended
/// to `out`; `true` when one failed (nothing after it is done).
pub(super) async fn execute(
    kc: Option<&Path>,
    steps: &[Step],
    before: usize,
    out: &mut String,
) -> Result<bool, String> {
    let client = super::super::gather::client(kc).await?;
    for (i, step) in steps.iter().enumerate() {
        let i = i + before;
        match perform(&client, step).await {
            Ok(()) => out.push_str(&format!("done {}: {}\n", i + 1, step.describe())),
            Err(e) => {
                out.push_str(&format!(
                    "FAILED {}: {}: {e}\nnothing after it was done: run convert again to continue from there\n",
                    i + 1,
                    step.describe()
                ));
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// One step's calls.
async fn perform(c: &kube::Client, step: &Step) -> Result<(), String> {
    match step {
        Step::CreateClusterCatalog { manifest }
        | Step::WriteBackup { manifest }
        | Step::CreateClusterExtension { manifest } => k::create(c, manifest).await,
        Step::CreateInstaller { objects } => {
            for obj in objects {
                k::apply(c, obj).await?;
            }
            Ok(())
        }
        Step::DeleteSubscription { target } | Step::DeleteInstallPlan { target } => {
            k::delete(c, target, false).await
        }
        Step::Untie { .. } => untie(c, step).await,
        Step::GuardPackage {
            package,
            subscription,
            extension,
        } => super::super::guard::raise(c, package, subscription, extension).await,
        Step::MarkForAdoption {
            target,
            extension,
            backup,
        } => {
            let mark = adoption_mark(c, extension, backup).await?;
            let patch = json!({"metadata": {"annotations": {
                crate::apply::ownership::ADOPTABLE_BY_ANNOTATION: mark}}});
            // Gone meanwhile (garbage collection): nothing to hand over (`merge_patch`).
            k::merge_patch(c, target, &patch).await
        }
        Step::RemoveCsvFinalizer { target } => {
            remove_finalizers(c, target, Some(CSV_FINALIZER)).await
        }
        Step::DeleteCsv { target } => k::delete(c, target, true).await,
        Step::DeleteCopiedCsv { target } => {
            remove_finalizers(c, target, None).await?;
            k::delete(c, target, true).await
        }
    }
}

/// The mark handing an object over to `extension`, naming the live backup's UID.
async fn adoption_mark(
    c: &kube::Client,
    extension: &str,
    backup: &Target,
) -> Result<String, String> {
    let uid = k::get(c, backup)
        .await?
        .and_then(|b| crate::migrate::olm_v0::read::text(&b, "/metadata/uid"))
        .ok_or_else(|| format!("the backup {backup} is gone: run convert again"))?;
    Ok(crate::apply::ownership::adoption_mark(extension, &uid))
}

/// Removes the labels and ownerReferences an [`Step::Untie`] names (and hands the
/// object over in the same patch), guarded by the
/// resourceVersion read; when the object changed meanwhile (a status update), it is read
/// again and what still ties it is removed (three attempts).
async fn untie(c: &kube::Client, step: &Step) -> Result<(), String> {
    let mut step = step.clone();
    for _ in 0..3 {
        let Step::Untie {
            target,
            labels,
            keep_owner_references,
            resource_version,
            csv: (csv, csv_namespace),
            hand_over,
            ..
        } = &step
        else {
            return Ok(());
        };
        let hand_over = hand_over.clone();
        let mut meta = json!({"resourceVersion": resource_version});
        if let Some((extension, backup)) = &hand_over {
            let mark = adoption_mark(c, extension, backup).await?;
            meta["annotations"] = json!({crate::apply::ownership::ADOPTABLE_BY_ANNOTATION: mark});
        }
        if !labels.is_empty() {
            let nulls: serde_json::Map<String, Value> =
                labels.iter().map(|l| (l.clone(), Value::Null)).collect();
            meta["labels"] = Value::Object(nulls);
        }
        if let Some(keep) = keep_owner_references {
            meta["ownerReferences"] = json!(keep);
        }
        match k::merge_patch(c, target, &json!({ "metadata": meta })).await {
            Err(e) if e.ends_with(k::CHANGED) => {
                let Some(live) = k::get(c, target).await? else {
                    return Ok(());
                };
                match convert::untie(&live, csv, csv_namespace) {
                    Some(again) => {
                        step = match &hand_over {
                            Some(to) => convert::with_hand_over(again, to),
                            None => again,
                        }
                    }
                    None => return Ok(()),
                }
            }
            done => return done,
        }
    }
    Err(format!(
        "{} kept changing: run convert again",
        step.describe()
    ))
}

/// Removes `only` (or every finalizer) from `t`, guarded by the resourceVersion read;
/// when the object changed meanwhile (its controller, garbage collection), it is read
/// again (five attempts).
pub(in crate::cli::migrate) async fn remove_finalizers(
    c: &kube::Client,
    t: &Target,
    only: Option<&str>,
) -> Result<(), String> {
    let mut last = Ok(());
    for _ in 0..5 {
        let Some(live) = k::get(c, t).await? else {
            return Ok(());
        };
        let before = convert::finalizers(&live);
        let after: Vec<&String> = before
            .iter()
            .filter(|f| only.is_some_and(|o| o != f.as_str()))
            .collect();
        if after.len() == before.len() {
            return Ok(());
        }
        let rv = live.pointer("/metadata/resourceVersion").cloned();
        let patch = json!({"metadata": {"resourceVersion": rv, "finalizers": after}});
        last = k::merge_patch(c, t, &patch).await;
        match &last {
            Err(e) if e.ends_with(k::CHANGED) => continue,
            _ => return last,
        }
    }
    last
}
