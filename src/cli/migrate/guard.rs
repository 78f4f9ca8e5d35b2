//! Reads, raises and lowers the guard on a switched package
//! ([`crate::migrate::olm_v0::guard`] says what it is and why): `convert` reads its
//! state for the plan and applies it as the plan's `GuardPackage` steps; `rollback`
//! deletes it (found through the Subscription's backup) before it re-creates the
//! Subscription.

use super::convert::configmap_target;
use super::kube as k;
use crate::api::ClusterExtension;
use crate::migrate::olm_v0::backup::Backup;
use crate::migrate::olm_v0::convert::{GuardState, Target};
use crate::migrate::olm_v0::fence::{API_VERSION, BINDING_KIND, POLICY_KIND};
use crate::migrate::olm_v0::guard::{self, Guard};
use crate::migrate::olm_v0::read::text;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

/// The package and the ClusterExtension of the backup of Subscription `ns/name`.
async fn of_backup(
    c: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Option<(String, String)>, String> {
    let Some(cm) = k::get(c, &configmap_target(ns, name)).await? else {
        return Ok(None);
    };
    let Ok(backup) = Backup::from_configmap(&cm) else {
        return Ok(None);
    };
    let package = text(&backup.extension, "/spec/source/catalog/packageName");
    let extension = text(&backup.extension, "/metadata/name");
    Ok(package.zip(extension))
}

fn targets(package: &str) -> [Target; 2] {
    let name = guard::name(package);
    [BINDING_KIND, POLICY_KIND].map(|kind| Target {
        api_version: API_VERSION.into(),
        kind: kind.into(),
        namespace: String::new(),
        name: name.clone(),
    })
}

/// What is on the cluster of the guard on `package`.
pub async fn state(c: &kube::Client, package: &str) -> Result<GuardState, String> {
    if !super::fence::policy_api_served(c).await {
        return Ok(GuardState::Unsupported);
    }
    Ok(match k::get(c, &targets(package)[1]).await? {
        None => GuardState::Missing,
        Some(p) if p.pointer("/metadata/ownerReferences/0").is_some() => GuardState::Owned,
        Some(_) => GuardState::Unowned,
    })
}

/// Applies the guard on `package` (switched from `subscription`), owned by
/// ClusterExtension `extension` when it exists.
pub async fn raise(
    c: &kube::Client,
    package: &str,
    subscription: &str,
    extension: &str,
) -> Result<(), String> {
    let uid = Api::<ClusterExtension>::all(c.clone())
        .get_opt(extension)
        .await
        .map_err(|e| format!("reading ClusterExtension {extension}: {e}"))?
        .and_then(|e| e.metadata.uid);
    let (policy, binding) = guard::objects(&Guard {
        package,
        subscription,
        extension,
        extension_uid: uid.as_deref(),
    });
    k::apply(c, &policy).await?;
    k::apply(c, &binding).await?;
    enforced(c, package, subscription).await
}

/// How long `raise` waits for the API server to enforce the guard.
const ENFORCED_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until a dry-run Subscription for `package` in the namespace of `subscription`
/// is refused by the guard (the convert goes on only then: nothing re-created meanwhile
/// slips through).
async fn enforced(c: &kube::Client, package: &str, subscription: &str) -> Result<(), String> {
    let ns = subscription.split_once('/').map_or("default", |(ns, _)| ns);
    wait_for(c, package, ns, true).await
}

/// Probes with a dry-run Subscription for `package` in `ns` until the guard refuses it
/// (`refused`) or no longer does: the API server enforces a policy, or stops enforcing
/// a deleted one, a moment after the write.
async fn wait_for(c: &kube::Client, package: &str, ns: &str, refused: bool) -> Result<(), String> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "Subscription"),
        "subscriptions",
    );
    let subs: Api<DynamicObject> = Api::namespaced_with(c.clone(), ns, &resource);
    let probe: DynamicObject = serde_json::from_value(guard::probe(ns, package))
        .map_err(|e| format!("the guard's probe: {e}"))?;
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + ENFORCED_WAIT;
    loop {
        let refusing = match subs.create(&dry_run, &probe).await {
            Err(kube::Error::Api(e)) if guard::refused_by_guard(&e.message, package) => true,
            // No Subscription API any more (OLM v0 removed): nothing to refuse.
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code != 409 => {
                return Err(format!(
                    "probing the guard with a dry-run Subscription in {ns}: {e}"
                ));
            }
            Err(kube::Error::Api(_)) | Ok(_) => false,
            Err(e) => {
                return Err(format!(
                    "probing the guard with a dry-run Subscription in {ns}: {e}"
                ));
            }
        };
        if refusing == refused {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let what = if refused {
                "enforce"
            } else {
                "stop enforcing the deleted"
            };
            return Err(format!(
                "the API server did not {what} {POLICY_KIND} {} within {}s: run the command again",
                guard::name(package),
                ENFORCED_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Deletes the guard on the package of Subscription `ns/name`, if raised, and waits
/// until the API server no longer enforces it (the rollback re-creates the Subscription
/// right after: seen refused by a guard deleted a second before).
pub async fn lower(c: &kube::Client, ns: &str, name: &str, out: &mut String) -> Result<(), String> {
    let Some((package, _)) = of_backup(c, ns, name).await? else {
        return Ok(());
    };
    let mut raised = false;
    for t in targets(&package) {
        if k::get(c, &t).await?.is_some() {
            raised = true;
            k::delete(c, &t, false).await?;
        }
    }
    if raised {
        wait_for(c, &package, ns, false).await?;
        out.push_str(&format!(
            "done: lower the guard on package {package} ({POLICY_KIND} {})\n",
            guard::name(&package)
        ));
    }
    Ok(())
}
