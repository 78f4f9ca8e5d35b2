//! Raises and lowers the fence around a CSV during `migrate convert`
//! ([`crate::migrate::olm_v0::fence`] says what it is and why): applies the
//! ValidatingAdmissionPolicy and its binding, waits until the API server enforces them
//! (a dry-run creation of a tied ConfigMap is refused), and deletes both at the end —
//! also for `rollback` and `cleanup`, after a convert that did not finish.

use super::convert::configmap_target;
use super::kube as k;
use crate::migrate::olm_v0::backup::Backup;
use crate::migrate::olm_v0::convert::Target;
use crate::migrate::olm_v0::fence;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

/// How long the convert waits for the API server to enforce the fence.
const ENFORCED_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn targets(ns: &str, csv: &str) -> [Target; 2] {
    let name = fence::name(ns, csv);
    [fence::BINDING_KIND, fence::POLICY_KIND].map(|kind| Target {
        api_version: fence::API_VERSION.into(),
        kind: kind.into(),
        namespace: String::new(),
        name: name.clone(),
    })
}

/// Raises the fence around CSV `ns/csv` and waits until it is enforced. `Ok(false)`:
/// the cluster serves no ValidatingAdmissionPolicy (Kubernetes before 1.30), said in
/// `out`; the convert goes on unfenced, as before.
pub async fn raise(
    c: &kube::Client,
    ns: &str,
    csv: &str,
    out: &mut String,
) -> Result<bool, String> {
    let (policy, binding) = fence::objects(ns, csv);
    if !policy_api_served(c).await {
        out.push_str(&format!(
            "note: the cluster serves no {} ({}): OLM v0 is not fenced off the CSV's objects while they are untied; if it ties one again after the CSV is gone, garbage collection deletes it\n",
            fence::POLICY_KIND,
            fence::API_VERSION
        ));
        return Ok(false);
    }
    k::apply(c, &policy).await?;
    k::apply(c, &binding).await?;
    let probe: ConfigMap = serde_json::from_value(fence::probe(ns, csv))
        .map_err(|e| format!("the fence's probe: {e}"))?;
    let configmaps: Api<ConfigMap> = Api::namespaced(c.clone(), ns);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + ENFORCED_WAIT;
    loop {
        match configmaps.create(&dry_run, &probe).await {
            Err(kube::Error::Api(e)) if fence::refused_by_fence(&e.message, ns, csv) => break,
            Err(kube::Error::Api(e)) if e.code != 409 => {
                return Err(format!(
                    "probing the fence with a dry-run ConfigMap in {ns}: {e}"
                ));
            }
            Err(kube::Error::Api(_)) | Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "probing the fence with a dry-run ConfigMap in {ns}: {e}"
                ));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the API server did not enforce {} {} within {}s: run convert again",
                fence::POLICY_KIND,
                fence::name(ns, csv),
                ENFORCED_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    out.push_str(&format!(
        "done: fence the CSV's objects off OLM v0 while they are untied ({} {}: nothing may tie an object to {ns}/{csv} again)\n",
        fence::POLICY_KIND,
        fence::name(ns, csv)
    ));
    Ok(true)
}

/// Whether the cluster serves ValidatingAdmissionPolicies.
pub(super) async fn policy_api_served(c: &kube::Client) -> bool {
    let (group, version) = fence::API_VERSION
        .split_once('/')
        .unwrap_or(("", fence::API_VERSION));
    match c
        .list_api_group_resources(&format!("{group}/{version}"))
        .await
    {
        Ok(list) => list
            .resources
            .iter()
            .any(|r| r.kind == fence::POLICY_KIND && !r.name.contains('/')),
        Err(_) => false,
    }
}

/// Lowers the fence around CSV `ns/csv`, if raised (said in `out`).
pub async fn lower(c: &kube::Client, ns: &str, csv: &str, out: &mut String) -> Result<(), String> {
    let mut raised = false;
    for t in targets(ns, csv) {
        if k::get(c, &t).await?.is_some() {
            raised = true;
            k::delete(c, &t, false).await?;
        }
    }
    if raised {
        out.push_str(&format!(
            "done: lower the fence ({} {})\n",
            fence::POLICY_KIND,
            fence::name(ns, csv)
        ));
    }
    Ok(())
}

/// Lowers the fence a convert of Subscription `ns/name` raised, found through its
/// backup (none: nothing to lower).
pub async fn lower_for_backup(
    c: &kube::Client,
    ns: &str,
    name: &str,
    out: &mut String,
) -> Result<(), String> {
    let Some(cm) = k::get(c, &configmap_target(ns, name)).await? else {
        return Ok(());
    };
    match Backup::from_configmap(&cm) {
        Ok(backup) => lower(c, ns, &backup.installed_csv, out).await,
        Err(_) => Ok(()),
    }
}
