//! The install steps of one reconcile (docs/api-and-status.md §3 steps 5–8): pull the
//! bundle image, render it (with cert-manager only when the cluster serves it), run
//! the preflights ([`crate::preflight::run`]) unless this is the installed revision
//! again, apply it as the installer account, then read the live state of what it
//! installed for the rollout status (§2.5; skipped with `--skip-rollout-wait`). Each
//! step maps its errors to an [`InstallFailure`]; the decisions are in
//! [`crate::bundle`], [`crate::preflight`], [`super::certs`] and [`super::rollout`].

use super::installer::InstallerAccount;
use super::plan::{InstallFailure, Installed};
use super::rollout::{self, Readiness};
use super::{ExtensionContext, certs, prune};
use crate::api::{BundleIdentity, ClusterExtension, CrdUpgradeSafetyEnforcement};
use crate::apply::{self, ApplyError, InstallError, ObjectRef, Owner, RevisionHistory};
use crate::bundle::{self, Bundle, CertProvider, RenderOptions};
use crate::metrics::Phase;
use crate::migrate::upstream_helm::{self as helm_release, UpstreamRelease};
use crate::preflight::{self, Preflight, crd_safety::Enforcement};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::Value;
use std::time::Instant;

/// Installs `target` for `ext` as `installer`: what the install did, and the objects of the installed
/// revision (for the drift watches). With `adopt` (upstream OLM v1's release of the same
/// bundle, no olmv1 record yet), the release's objects must be exactly the rendered ones:
/// they are then applied in place (never deleted or recreated) and the release Secret is
/// marked as adopted; otherwise nothing is touched.
pub(crate) async fn install(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    installer_account: &InstallerAccount,
    owner: &Owner,
    target: &BundleIdentity,
    history: Option<&RevisionHistory>,
    adopt: Option<&UpstreamRelease>,
) -> Result<(Installed, Vec<ObjectRef>), InstallFailure> {
    let installer = installer_account;
    let (loaded, image) = pull(ctx, target).await?;
    let rendered = render(ctx, ext, loaded).await?;
    if let Some(release) = adopt {
        helm_release::compare_objects(release, &rendered).map_err(|differ| {
            InstallFailure::AdoptionRefused(super::plan::adoption_refused(
                release,
                &differ.to_string(),
            ))
        })?;
    }
    let bundle = target.pulled(&image);
    let (namespace, account) = (&installer.namespace, &installer.name);
    let installer = ctx
        .installers
        .get(namespace, account)
        .map_err(|e| InstallFailure::Retry(e.to_string()))?;

    // The installed revision again (a reconcile after drift, a catalog change that
    // resolves to the same bundle): its CRDs and permissions were checked when it was
    // installed, so only the apply runs.
    let mut warnings = Vec::new();
    if !history.is_some_and(|h| h.is_current(&bundle, &rendered)) {
        let started = Instant::now();
        let passed = preflight::run(
            &ctx.client,
            &installer,
            &Preflight {
                objects: &rendered,
                enforcement: enforcement(ext),
                account: (namespace, account),
                owner,
                history,
            },
        )
        .await
        .map_err(|e| InstallFailure::Retry(e.to_string()))?;
        ctx.metrics.phase(Phase::preflight, started.elapsed());
        warnings = passed.warnings;
    }

    let started = Instant::now();
    let options = apply::ApplyOptions {
        // A first install refuses objects upstream's Helm applier installed unless their
        // release is the one being adopted.
        refuse_helm_managed: history.is_none() && adopt.is_none(),
        ..Default::default()
    };
    let outcome = apply::install_revision(
        &installer,
        &ctx.store,
        owner,
        bundle,
        &rendered,
        Some(installer_account.status()),
        &options,
    )
    .await
    .map_err(|e| match e {
        InstallError::Apply(ApplyError::Conflict { message, .. }) => InstallFailure::Retry(message),
        other => InstallFailure::Retry(other.to_string()),
    })?;
    ctx.metrics.phase(Phase::apply, started.elapsed());
    if let Some(release) = adopt {
        mark_adopted(ctx, release, &owner.name).await;
    }
    let managed = outcome
        .history
        .installed()
        .map(|r| r.objects.clone())
        .unwrap_or_default();
    let readiness = if ctx.settings.wait_for_rollout {
        readiness(ctx, &installer, &managed).await
    } else {
        Readiness::Ready
    };
    let installed = Installed {
        image,
        applied_changes: outcome.report.changed.len(),
        warnings,
        readiness,
    };
    Ok((installed, managed))
}

/// An install that ran past `--install-timeout`: abandoned where it was (every step is
/// idempotent: a partial unpack is never used, applies are server-side) and retried.
pub(crate) fn deadline_passed(
    target: &BundleIdentity,
    deadline: std::time::Duration,
) -> InstallFailure {
    InstallFailure::Retry(format!(
        "installing {} ({}) did not finish within {}s (--install-timeout): the image pull, \
         render, preflights and apply are abandoned and retried; check the registry's \
         speed and the bundle's size",
        target.name,
        target.image,
        deadline.as_secs()
    ))
}

/// What an install of `target` for `ext` as `installer` is made of, for telling whether
/// a reconcile would make the same install again
/// ([`super::drift::DriftWatches::unchanged`]): the extension (uid, generation: any spec
/// change installs again), the installer account, the bundle. `None` when the install
/// must run whatever was installed before: `installed` (the installed revision's
/// bundle) is another bundle or none, or the image is referenced by tag (it may name
/// other content now).
pub(crate) fn fingerprint(
    ext: &ClusterExtension,
    installer: &InstallerAccount,
    target: &BundleIdentity,
    installed: Option<&BundleIdentity>,
) -> Option<String> {
    let installed = installed?;
    let same = installed.package == target.package
        && installed.name == target.name
        && installed.version == target.version;
    if !same || !target.image.contains("@sha256:") {
        return None;
    }
    Some(format!(
        "{}|{}|{}/{}|{}|{}|{}|{}",
        ext.metadata.uid.as_deref().unwrap_or_default(),
        ext.metadata.generation.unwrap_or_default(),
        installer.namespace,
        installer.name,
        target.package,
        target.name,
        target.version,
        target.image,
    ))
}

/// Marks the adopted release Secret (label and annotation; left in place so that going
/// back to upstream finds its release). A failure is logged: olmv1's record exists now,
/// so the release is never read again.
async fn mark_adopted(ctx: &ExtensionContext, release: &UpstreamRelease, extension: &str) {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.settings.namespace);
    let patch = helm_release::adopted_patch(&apply::record::record_name(extension));
    if let Err(e) = api
        .patch(
            &release.secret,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(secret = %release.secret, error = %e, "marking the adopted upstream release");
    }
}

/// The readiness of the installed objects that report it ([`rollout::is_checked`]), read
/// as the installer account (which may `get` what it installed). For a Deployment that
/// is not available, its pods are listed as the controller for their waiting reasons
/// (skipped when that is not allowed).
pub(crate) async fn readiness(
    ctx: &ExtensionContext,
    installer: &kube::Client,
    objects: &[ObjectRef],
) -> Readiness {
    let mut observed = Vec::new();
    let mut unreadable = Vec::new();
    for r in objects
        .iter()
        .filter(|r| rollout::is_checked(&r.group, &r.kind))
    {
        let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
        let plural = format!("{}s", r.kind.to_ascii_lowercase());
        let resource = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<DynamicObject> = if r.namespace.is_empty() {
            Api::all_with(installer.clone(), &resource)
        } else {
            Api::namespaced_with(installer.clone(), &r.namespace, &resource)
        };
        let object = match api.get_opt(&r.name).await {
            Ok(Some(o)) => serde_json::to_value(&o).unwrap_or(Value::Null),
            Ok(None) => {
                unreadable.push(rollout::unreadable(&r.kind, &r.name, "not found"));
                continue;
            }
            Err(e) => {
                let why = format!("cannot be read: {e}");
                unreadable.push(rollout::unreadable(&r.kind, &r.name, why));
                continue;
            }
        };
        let pods = if r.kind == "Deployment" && rollout::state_of(&object).is_some() {
            pods_of(ctx, &r.namespace, &object).await
        } else {
            Vec::new()
        };
        observed.push(rollout::Observed { object, pods });
    }
    rollout::assess(&observed).and(Readiness::of(unreadable))
}

/// The pods `deployment` selects, as the controller; none when they cannot be listed.
async fn pods_of(ctx: &ExtensionContext, namespace: &str, deployment: &Value) -> Vec<Value> {
    let Some(selector) = rollout::pod_selector(deployment) else {
        return Vec::new();
    };
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .collect(),
        Err(e) => {
            tracing::debug!(namespace, selector, error = %e, "listing pods for the rollout status");
            Vec::new()
        }
    }
}

/// Pulls and loads the bundle image: the bundle and its digest-pinned reference.
async fn pull(
    ctx: &ExtensionContext,
    target: &BundleIdentity,
) -> Result<(Bundle, String), InstallFailure> {
    let started = Instant::now();
    let settings = &ctx.settings;
    let secrets = crate::controller::pull_secrets::read(
        &ctx.client,
        &settings.namespace,
        settings.service_account.as_deref(),
        settings.global_pull_secret.as_deref(),
    )
    .await;
    let (loaded, pulled) = bundle::load_image(
        &ctx.puller,
        &target.image,
        &secrets,
        &bundle::LoadOptions::default(),
    )
    .await
    .map_err(|e| {
        // Content errors of an image pinned by digest never fix themselves.
        if e.is_terminal(bundle::is_digest_reference(&target.image)) {
            InstallFailure::Blocked(e.to_string())
        } else {
            InstallFailure::Retry(e.to_string())
        }
    })?;
    ctx.metrics.phase(Phase::pull, started.elapsed());
    Ok((loaded, pulled.reference))
}

/// Renders the bundle for the extension's namespace and configuration (CPU work, off
/// the async workers), then drops fields its CRDs do not declare from its custom
/// resources (server-side apply would reject them; the API server drops them on create).
async fn render(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    loaded: Bundle,
) -> Result<Vec<Value>, InstallFailure> {
    let started = Instant::now();
    let config = ext
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.clone())
        .map(Value::Object);
    let options = RenderOptions {
        cert_provider: cert_provider(ctx, &loaded).await?,
    };
    let namespace = ext.spec.namespace.clone();
    let mut rendered = tokio::task::spawn_blocking(move || {
        bundle::render_owned(loaded, &namespace, config.as_ref(), &options).map_err(|e| match e {
            bundle::RenderError::Config(c) => InstallFailure::InvalidConfiguration(format!(
                "invalid ClusterExtension configuration: {c}"
            )),
            other => InstallFailure::Retry(other.to_string()),
        })
    })
    .await
    .map_err(|e| InstallFailure::Retry(format!("render task failed: {e}")))??;
    ctx.metrics.phase(Phase::render, started.elapsed());
    let pruned = prune::prune_custom_resources(&mut rendered);
    if !pruned.is_empty() {
        tracing::warn!(fields = %pruned.join(", "), "dropping fields that the bundle's CRDs do not declare");
    }
    Ok(rendered)
}

/// The certificate provider to render with. Without cert-manager, a bundle with
/// webhooks is unsupported: say so before anything is written rather than fail on
/// kinds the cluster does not serve.
async fn cert_provider(
    ctx: &ExtensionContext,
    loaded: &Bundle,
) -> Result<CertProvider, InstallFailure> {
    let configured = ctx.settings.cert_provider;
    if configured != CertProvider::CertManager || !certs::has_webhooks(&loaded.csv) {
        return Ok(configured);
    }
    let served = match ctx
        .client
        .list_api_group_resources(certs::CERT_MANAGER_API)
        .await
    {
        Ok(list) => Some(list),
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => {
            return Err(InstallFailure::Retry(format!(
                "discovering {}: {e}",
                certs::CERT_MANAGER_API
            )));
        }
    };
    Ok(certs::effective(configured, served.as_ref()))
}

/// `spec.install.preflight.crdUpgradeSafety.enforcement` (Strict when absent).
fn enforcement(ext: &ClusterExtension) -> Enforcement {
    let configured = ext
        .spec
        .install
        .as_ref()
        .and_then(|i| i.preflight.as_ref())
        .and_then(|p| p.crd_upgrade_safety.as_ref())
        .map(|c| c.enforcement);
    match configured {
        Some(CrdUpgradeSafetyEnforcement::None) => Enforcement::None,
        _ => Enforcement::Strict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::InstallerSource;

    fn bundle(version: &str, image: &str) -> BundleIdentity {
        BundleIdentity {
            package: "p".into(),
            name: format!("p.v{version}"),
            version: version.into(),
            release: None,
            image: image.into(),
        }
    }

    #[test]
    fn the_same_install_again_has_the_same_fingerprint_and_anything_else_another() {
        let mut ext: ClusterExtension = serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "e", "uid": "u1", "generation": 1},
            "spec": {"namespace": "ns", "source": {"sourceType": "Catalog",
                "catalog": {"packageName": "p"}}},
        }))
        .unwrap();
        let installer = InstallerAccount {
            namespace: "ns".into(),
            name: "sa".into(),
            source: InstallerSource::ServiceAccount,
        };
        let digest = "r/p@sha256:aa";
        let target = bundle("1.0.0", digest);
        let installed = bundle("1.0.0", "r/p@sha256:aa");
        let first = fingerprint(&ext, &installer, &target, Some(&installed));
        assert!(first.is_some());
        assert_eq!(
            first,
            fingerprint(&ext, &installer, &target, Some(&target)),
            "after the install, as before the next one"
        );
        assert_eq!(
            fingerprint(&ext, &installer, &target, None),
            None,
            "nothing installed"
        );
        let older = bundle("0.9.0", "r/p@sha256:bb");
        assert_eq!(
            fingerprint(&ext, &installer, &target, Some(&older)),
            None,
            "an upgrade"
        );
        let tagged = bundle("1.0.0", "r/p:v1.0.0");
        assert_eq!(
            fingerprint(&ext, &installer, &tagged, Some(&tagged)),
            None,
            "a tag may name other content now"
        );
        let other_account = InstallerAccount {
            name: "other".into(),
            ..installer.clone()
        };
        assert_ne!(
            fingerprint(&ext, &other_account, &target, Some(&installed)),
            first
        );
        ext.metadata.generation = Some(2);
        assert_ne!(
            fingerprint(&ext, &installer, &target, Some(&installed)),
            first
        );
    }
}
