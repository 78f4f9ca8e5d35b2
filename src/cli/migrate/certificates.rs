//! After a convert: rolls the operator's pods onto the serving certificate cert-manager
//! re-issued at the takeover, as OLM v0 does when its CA changes
//! ([`crate::migrate::olm_v0::certificates`] decides; this reads and patches).

use super::convert::{Finish, configmap_target};
use super::kube as k;
use crate::api;
use crate::migrate::olm_v0::certificates::{self, CertRollout};
use crate::migrate::olm_v0::cleanup;
use crate::migrate::olm_v0::convert::Target;
use std::path::Path;

/// How long the convert waits for cert-manager to re-issue the serving certificate.
const REISSUE_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until every Deployment of the operator that mounts OLM v0's serving
/// certificate runs with the CA now in its Secret, patching each once.
pub async fn roll_onto_reissued(
    kc: Option<&Path>,
    ns: &str,
    name: &str,
    out: &mut String,
) -> Result<Finish, String> {
    let client = super::gather::client(kc).await?;
    // Only for a Subscription this convert switched (its backup exists).
    if k::get(&client, &configmap_target(ns, name))
        .await?
        .is_none()
    {
        return Ok(Finish::Done);
    }
    let deadline = tokio::time::Instant::now() + REISSUE_WAIT;
    loop {
        let mut waiting = Vec::new();
        let deployments = k::list(&client, "apps/v1", "Deployment", ns, None).await?;
        for d in deployments.iter().filter(|d| untied(d)) {
            let secret = match certificates::serving_secret(d) {
                Some(s) => k::get(&client, &secret_target(ns, &s)).await?,
                None => continue,
            };
            let target = Target::of(d);
            match certificates::rollout(d, secret.as_ref()) {
                CertRollout::Nothing => {}
                CertRollout::Wait => waiting.push(target.to_string()),
                CertRollout::Patch { secret, patch } => {
                    if retire_v0_webhook_configurations(&client, name, out).await? {
                        return Ok(Finish::Failed);
                    }
                    let what = format!(
                        "roll {target} onto the certificate cert-manager re-issued in Secret {ns}/{secret} ({} set to the new CA's hash, as OLM v0 does when its CA changes: one rollout)",
                        certificates::CA_HASH_ANNOTATION
                    );
                    if let Err(e) = k::merge_patch(&client, &target, &patch).await {
                        out.push_str(&format!("FAILED: {what}: {e}\n"));
                        return Ok(Finish::Failed);
                    }
                    out.push_str(&format!("done: {what}\n"));
                }
            }
        }
        if waiting.is_empty() {
            return Ok(Finish::Done);
        }
        if tokio::time::Instant::now() >= deadline {
            out.push_str(&format!(
                "not finished: cert-manager has not re-issued the serving certificate of {} yet (is ClusterExtension {name} installed?): run convert --apply again then, to roll its pods onto it (until then the webhooks fail TLS verification)\n",
                waiting.join(", ")
            ));
            return Ok(Finish::Again);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Not tied to a CSV (no `olm.owner` label): the operator's Deployments once convert
/// untied them. OLM v0's adoption controller adds the component label only a moment
/// after the install, so it cannot be relied on; other operators OLM v0 still manages
/// in the namespace keep their `olm.owner`.
fn untied(deployment: &serde_json::Value) -> bool {
    deployment
        .pointer("/metadata/labels")
        .and_then(|l| l.get("olm.owner"))
        .is_none()
}

fn secret_target(ns: &str, name: &str) -> Target {
    Target {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// Deletes OLM v0's webhook configurations the takeover replaced (same definition,
/// olmv1's own configuration exists: [`cleanup::replaced_webhook_configuration`])
/// before the pods roll: they carry OLM v0's CA, which the new pods no longer serve,
/// and would fail every call. `true` when a delete failed.
async fn retire_v0_webhook_configurations(
    client: &kube::Client,
    extension: &str,
    out: &mut String,
) -> Result<bool, String> {
    let owner = format!(
        "{}=ClusterExtension,{}={extension}",
        api::LABEL_OWNER_KIND,
        api::LABEL_OWNER_NAME
    );
    let api_version = "admissionregistration.k8s.io/v1";
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let owned = k::list(client, api_version, kind, "", Some(&owner)).await?;
        let owned: Vec<_> = owned.iter().collect();
        let label = Some(cleanup::WEBHOOK_DESCRIPTION_LABEL);
        for v in k::list(client, api_version, kind, "", label).await? {
            let Some(why) = cleanup::replaced_webhook_configuration(&v, &owned, extension) else {
                continue;
            };
            let target = Target::of(&v);
            let what = format!("delete {target} ({why}; it carries OLM v0's CA)");
            if let Err(e) = k::delete(client, &target, false).await {
                out.push_str(&format!("FAILED: {what}: {e}\n"));
                return Ok(true);
            }
            out.push_str(&format!("done: {what}\n"));
        }
    }
    Ok(false)
}
