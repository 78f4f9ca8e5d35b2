//! `olmv1 migrate cleanup <namespace>/<name> | --all` (docs/how-to/switch-from-olm-v0.md,
//! "cleanup"): reads the backup, the Subscription and CSV, the ClusterExtension, the
//! `Operator` object, every object carrying OLM v0's component label, the revision's
//! RBAC, webhook configurations and Deployments, asks [`cleanup::plan`] for the steps
//! that remain and performs them in order (`--dry-run` prints them), stopping at the
//! first failure. Decides nothing itself.

use super::convert::remove_finalizers;
use super::kube as k;
use super::{CleanupArgs, Output, parse_target};
use crate::api;
use crate::migrate::olm_v0::backup::{BACKUP_LABEL, Backup, configmap_name};
use crate::migrate::olm_v0::cleanup::{self, Observed, Plan, Step};
use crate::migrate::olm_v0::convert::Target;
use crate::migrate::olm_v0::read::text;
use serde_json::{Value, json};
use std::path::Path;

/// The kinds read for OLM v0's component label (olm-v0 reference §1.2), besides those
/// the `Operator` object lists.
const LABELLED: [(&str, &str); 14] = [
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("apiregistration.k8s.io/v1", "APIService"),
    ("apps/v1", "Deployment"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("operators.coreos.com/v2", "OperatorCondition"),
];

fn t(api_version: &str, kind: &str, ns: &str, name: &str) -> Target {
    Target {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// What `migrate cleanup` prints, and its exit code (0 planned or done, 1 refused, 2 a
/// step failed). Blocking.
pub fn cleanup(args: &CleanupArgs) -> Result<(String, u8), String> {
    let kc = args.kubeconfig.as_deref();
    if !args.all {
        let (ns, name) = parse_target(args.subscription.as_deref().unwrap_or_default())?;
        return super::super::block_on(one(kc, &ns, &name, args))?;
    }
    super::super::block_on(all(kc, args))?
}

/// Every Subscription a backup ConfigMap names, one after the other.
async fn all(kc: Option<&Path>, args: &CleanupArgs) -> Result<(String, u8), String> {
    let targets = backed_up(kc).await?;
    let mut outcomes = Vec::new();
    for target in &targets {
        let (ns, name) = parse_target(target)?;
        outcomes.push(match one(kc, &ns, &name, args).await {
            Ok(o) => o,
            Err(e) => (format!("Subscription {target}: error: {e}\n"), 2),
        });
    }
    Ok(super::summary("cleanup", outcomes))
}

/// `<namespace>/<name>` of every Subscription a readable backup ConfigMap names.
pub async fn backed_up(kc: Option<&Path>) -> Result<Vec<String>, String> {
    let c = super::gather::client(kc).await?;
    let selector = format!("{BACKUP_LABEL}=true");
    let backups = k::list(&c, "v1", "ConfigMap", "", Some(&selector)).await?;
    Ok(backups
        .iter()
        .filter_map(|b| Backup::from_configmap(b).ok())
        .map(|b| format!("{}/{}", b.namespace(), b.name()))
        .collect())
}

async fn one(
    kc: Option<&Path>,
    ns: &str,
    name: &str,
    args: &CleanupArgs,
) -> Result<(String, u8), String> {
    let c = super::gather::client(kc).await?;
    let plan = cleanup::plan(&read(&c, ns, name).await?);
    let mut out = render(&plan, args.output, !args.dry_run)?;
    if plan.refused.is_some() {
        return Ok((out, 1));
    }
    if args.dry_run {
        return Ok((out, 0));
    }
    // Before the backup goes: the fence a convert that did not finish left.
    super::fence::lower_for_backup(&c, ns, name, &mut out).await?;
    for (i, step) in plan.steps.iter().enumerate() {
        match execute(&c, step).await {
            Ok(()) => out.push_str(&format!("done {}: {}\n", i + 1, step.describe())),
            Err(e) => {
                out.push_str(&format!(
                    "FAILED {}: {}: {e}\nnothing after it was done: run cleanup again to continue from there\n",
                    i + 1,
                    step.describe()
                ));
                return Ok((out, 2));
            }
        }
    }
    Ok((out, 0))
}

async fn read(c: &kube::Client, ns: &str, name: &str) -> Result<Observed, String> {
    let backup = k::get(c, &t("v1", "ConfigMap", ns, &configmap_name(name)))
        .await?
        .map(|v| Backup::from_configmap(&v));
    let ok = backup.as_ref().and_then(|b| b.as_ref().ok());
    let package = ok
        .and_then(|b| text(&b.subscription, "/spec/name"))
        .unwrap_or_default();
    let csv_name = ok.map(|b| b.installed_csv.clone()).unwrap_or_default();
    let v0 = "operators.coreos.com/v1alpha1";
    let operator_name = cleanup::operator_name(&package, ns);
    let operator_object = k::get(
        c,
        &t("operators.coreos.com/v1", "Operator", "", &operator_name),
    )
    .await?;
    let mut kinds: Vec<(String, String)> = LABELLED
        .iter()
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .collect();
    for r in operator_object
        .as_ref()
        .and_then(|o| o.pointer("/status/components/refs"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(a), Some(k)) = (text(r, "/apiVersion"), text(r, "/kind"))
            && !kinds.iter().any(|(_, known)| *known == k)
        {
            kinds.push((a, k));
        }
    }
    let label = cleanup::component_label(&package, ns);
    let owner = format!(
        "{}=ClusterExtension,{}={name}",
        api::LABEL_OWNER_KIND,
        api::LABEL_OWNER_NAME
    );
    let mut labelled = Vec::new();
    let mut owned = Vec::new();
    for (a, kind) in &kinds {
        if !package.is_empty() {
            labelled.extend(k::list(c, a, kind, "", Some(&label)).await?);
        }
        if kind.contains("Role") || kind.contains("WebhookConfiguration") {
            owned.extend(k::list(c, a, kind, "", Some(&owner)).await?);
        }
    }
    let mut v0_webhook_configurations = Vec::new();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let selector = Some(cleanup::WEBHOOK_DESCRIPTION_LABEL);
        let api = "admissionregistration.k8s.io/v1";
        v0_webhook_configurations.extend(k::list(c, api, kind, "", selector).await?);
    }
    let copied = format!("olm.copiedFrom={ns}");
    let copied_csvs = k::list(c, v0, "ClusterServiceVersion", "", Some(&copied))
        .await?
        .into_iter()
        .filter(|v| !csv_name.is_empty() && text(v, "/metadata/name").as_deref() == Some(&csv_name))
        .collect();
    let crd = t(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "",
        "operatorconditions.operators.coreos.com",
    );
    let operator_condition_served = k::get(c, &crd).await?.is_some_and(|crd| {
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|v| text(v, "/name").as_deref() == Some("v2") && v["served"] == json!(true))
    });
    Ok(Observed {
        namespace: ns.into(),
        name: name.into(),
        subscription: k::get(c, &t(v0, "Subscription", ns, name)).await?,
        csv: match csv_name.as_str() {
            "" => None,
            n => k::get(c, &t(v0, "ClusterServiceVersion", ns, n)).await?,
        },
        extension: k::get(
            c,
            &t("olm.operatorframework.io/v1", "ClusterExtension", "", name),
        )
        .await?,
        backup,
        operator_object,
        labelled,
        owned,
        v0_webhook_configurations,
        copied_csvs,
        owned_deployments: k::list(c, "apps/v1", "Deployment", ns, Some(&owner)).await?,
        operator_condition_served,
    })
}

async fn execute(c: &kube::Client, step: &Step) -> Result<(), String> {
    match step {
        Step::Delete { target, .. } => k::delete(c, target, false).await,
        Step::DeleteCopiedCsv { target } => {
            remove_finalizers(c, target, None).await?;
            k::delete(c, target, true).await
        }
        Step::RemoveLabels { target, labels } => {
            let nulls: serde_json::Map<String, Value> =
                labels.iter().map(|l| (l.clone(), Value::Null)).collect();
            k::merge_patch(c, target, &json!({"metadata": {"labels": nulls}})).await
        }
        Step::DeleteOperator { name } => {
            k::delete(
                c,
                &t("operators.coreos.com/v1", "Operator", "", name),
                false,
            )
            .await
        }
        Step::RemoveEnv { target, containers } => {
            let delete = json!([{"name": cleanup::CONDITION_ENV, "$patch": "delete"}]);
            let containers: Vec<Value> = containers
                .iter()
                .map(|n| json!({"name": n, "env": delete}))
                .collect();
            let patch = json!({"spec": {"template": {"spec": {"containers": containers}}}});
            k::strategic_patch(c, target, &patch).await
        }
    }
}

fn render(plan: &Plan, output: Output, applying: bool) -> Result<String, String> {
    if let Some(structured) = super::render::structured(plan, output).filter(|_| !applying) {
        return structured;
    }
    let mut out = format!("Subscription {}: ", plan.subscription);
    if let Some(why) = &plan.refused {
        out.push_str(&format!("cleanup refused: {why}\n"));
        return Ok(out);
    }
    if plan.steps.is_empty() {
        out.push_str("nothing to clean up\n");
    } else if applying {
        out.push_str(&format!("cleaning up ({} step(s))\n", plan.steps.len()));
    } else {
        out.push_str(&format!(
            "{} step(s) (dry run, nothing changed)\n",
            plan.steps.len()
        ));
        for (i, s) in plan.steps.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n", i + 1, s.describe()));
        }
    }
    for k in &plan.kept {
        out.push_str(&format!("  kept: {k}\n"));
    }
    Ok(out)
}
