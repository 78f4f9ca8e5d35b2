//! The install pipeline of one reconcile (docs/reference/api-and-status.md §3 steps 5–8), as the
//! executor's I/O: [`render`] pulls the bundle image and renders it (with cert-manager
//! only when the cluster serves it); [`apply`] runs the preflights
//! ([`crate::preflight::run`]) when the plan asks, applies the rendered objects as the
//! installer account, then reads the live state of what it installed for the rollout
//! status ([`readiness`], §2.5; skipped with `--skip-rollout-wait`). Each step maps its
//! errors to an [`InstallFailure`]; the decisions are in [`super::plan`] (whether to
//! install at all, preflights or not, adoption), [`crate::bundle`],
//! [`crate::preflight`], [`super::certs`] and [`super::rollout`].

use super::plan::{Apply, InstallFailure, Installed, Rendered, migration};
use super::rollout::{self, Readiness};
use super::{ExtensionContext, certs, namespace, outage, prune};
use crate::api::{BundleIdentity, ClusterExtension};
use crate::apply::{self, ApplyError, InstallError, ObjectRef, Owner, RevisionHistory};
use crate::bundle::{self, Bundle, CertProvider, RenderOptions};
use crate::image::DockerConfig;
use crate::metrics::Phase;
use crate::migrate::upstream_helm::{self as helm_release, UpstreamRelease};
use crate::preflight::{self, Preflight, PreflightError};
use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::Value;
use std::time::Instant;

/// Pulls and renders `target` for `ext`: the digest-pinned image and the rendered
/// objects (`epoch`: [`super::outage::Epoch`] when the reconcile started).
pub(crate) async fn render(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    target: &BundleIdentity,
    epoch: u64,
) -> Result<Rendered, InstallFailure> {
    let (loaded, image) = pull(ctx, ext, target, epoch).await?;
    let suggested_namespace = namespace::suggestion(&loaded.csv);
    let pulled = Some(apply::record::PulledBundle::of(&loaded));
    let objects = render_bundle(ctx, ext, loaded).await?;
    Ok(Rendered {
        image,
        objects,
        suggested_namespace,
        pulled,
    })
}

/// What [`apply`] did: the install, and for the drift watches the objects of the
/// installed revision and the generations the apply left them at.
pub(crate) struct AppliedRevision {
    pub installed: Installed,
    pub managed: Vec<ObjectRef>,
    pub generations: Vec<(ObjectRef, i64)>,
}

/// Applies `rendered` as `step` says (preflights first when it asks): what the install
/// did ([`AppliedRevision`]). With an
/// upstream release to adopt (its objects are exactly the rendered ones, checked by the
/// plan), they are applied in place (never deleted or recreated) and the release Secret
/// is marked as adopted. Taking over an OLM v0 installation (the target is exactly its
/// installed CSV, checked by the plan), existing objects no ClusterExtension owns are
/// applied over in place too. Once the preflights passed, a missing install namespace is
/// created when `create_namespace` says so ([`namespace`]), before anything else.
pub(crate) async fn apply(
    ctx: &ExtensionContext,
    owner: &Owner,
    step: &Apply,
    rendered: &Rendered,
    history: Option<&RevisionHistory>,
    create_namespace: Option<NamespaceCreation<'_>>,
) -> Result<AppliedRevision, InstallFailure> {
    let (namespace, account) = (&step.account.namespace, &step.account.name);
    let installer = ctx
        .installers
        .get(namespace, account)
        .map_err(|e| InstallFailure::Retry(e.to_string()))?;
    let options = apply::ApplyOptions {
        refuse_helm_managed: step.refuse_helm_managed,
        adopt_unmanaged: step.adopt_v0.as_ref().map(|v0| v0.mark.clone()),
        // The readiness below is judged from the objects as the apply returned them.
        observe: ctx
            .settings
            .wait_for_rollout
            .then_some(rollout::is_checked as fn(&str, &str) -> bool),
        ..Default::default()
    };
    // The preflights first: nothing is read as the installer beyond them unless they
    // pass (under API Priority and Fairness, a failing attempt adds no burst of reads;
    // e2e/faults.rs, `api_priority_and_fairness_rejects_the_controller`).
    let warnings = preflights(ctx, &installer, owner, step, rendered, history).await?;
    if let Some(creation) = create_namespace {
        ensure_namespace(ctx, &installer, &creation, rendered).await?;
    }

    let started = Instant::now();
    let outcome = apply::install_revision(
        &installer,
        &ctx.store,
        owner,
        step.bundle.clone(),
        &rendered.objects,
        Some(step.account.status()),
        &options,
    )
    .await
    .map_err(|e| match (e, &step.adopt_v0) {
        // An object of the v0 installation is another ClusterExtension's: refused before
        // any object was written (only the pending revision record was).
        (InstallError::Apply(ApplyError::Conflict { message, .. }), Some(v0)) => {
            InstallFailure::AdoptionRefused(migration::refused_message(&v0.subscription, &message))
        }
        (InstallError::Apply(ApplyError::Conflict { message, .. }), None) => {
            InstallFailure::Apply(message)
        }
        (other, _) => InstallFailure::Apply(other.to_string()),
    })?;
    ctx.metrics.phase(Phase::apply, started.elapsed());
    if let Some(release) = &step.adopt {
        mark_adopted(ctx, release, &owner.name).await;
    }
    let managed = outcome
        .history
        .installed()
        .map(|r| r.objects.clone())
        .unwrap_or_default();
    let readiness = if ctx.settings.wait_for_rollout {
        readiness_of_applied(ctx, &outcome.report.observed).await
    } else {
        Readiness::Ready
    };
    let installed = Installed {
        image: rendered.image.clone(),
        applied_changes: outcome.report.changed.len(),
        warnings,
        readiness,
    };
    Ok(AppliedRevision {
        installed,
        managed,
        generations: outcome.report.generations,
    })
}

/// The preflights `step` asks for, as `installer`; their warnings.
async fn preflights(
    ctx: &ExtensionContext,
    installer: &kube::Client,
    owner: &Owner,
    step: &Apply,
    rendered: &Rendered,
    history: Option<&RevisionHistory>,
) -> Result<Vec<String>, InstallFailure> {
    if !step.preflight {
        return Ok(Vec::new());
    }
    let started = Instant::now();
    let passed = preflight::run(
        &ctx.client,
        installer,
        &Preflight {
            objects: &rendered.objects,
            enforcement: step.enforcement,
            account: (&step.account.namespace, &step.account.name),
            owner,
            history,
        },
    )
    .await
    .map_err(|e| match e {
        // A rollback refused by CRD upgrade safety is terminal (plan::rollback).
        PreflightError::UnsafeCrds(_) => InstallFailure::UnsafeCrds(e.to_string()),
        other => InstallFailure::Retry(other.to_string()),
    })?;
    ctx.metrics.phase(Phase::preflight, started.elapsed());
    Ok(passed.warnings)
}

/// The opt-in creation of the install namespace ([`namespace`]) for `extension`.
pub(crate) struct NamespaceCreation<'a> {
    pub extension: &'a ClusterExtension,
    pub target: namespace::For<'a>,
}

/// Creates the missing install namespace as the installer ([`namespace::cluster::ensure`])
/// and says so in an Event.
async fn ensure_namespace(
    ctx: &ExtensionContext,
    installer: &kube::Client,
    creation: &NamespaceCreation<'_>,
    rendered: &Rendered,
) -> Result<(), InstallFailure> {
    let created = namespace::cluster::ensure(
        &ctx.client,
        installer,
        &creation.target,
        true,
        &rendered.suggested_namespace,
    )
    .await
    .map_err(InstallFailure::Retry)?;
    if let Some(message) = created {
        let note = super::plan::Note {
            warning: false,
            reason: "NamespaceCreated",
            action: "Install",
            message,
        };
        super::executor::emit(ctx, creation.extension, &note).await;
    }
    Ok(())
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
    // Each object is read on its own round trip; a few at a time, results in order.
    let checked: Vec<ObjectRef> = objects
        .iter()
        .filter(|r| rollout::is_checked(&r.group, &r.kind))
        .cloned()
        .collect();
    let reads: Vec<Result<rollout::Observed, String>> = futures::stream::iter(checked)
        .map(|r| async move { observe(ctx, installer, &r).await }.boxed())
        .buffered(READINESS_READS)
        .collect()
        .await;
    let (mut observed, mut unreadable) = (Vec::new(), Vec::new());
    for read in reads {
        match read {
            Ok(o) => observed.push(o),
            Err(why) => unreadable.push(why),
        }
    }
    rollout::assess(&observed).and(Readiness::of(unreadable))
}

/// The readiness of objects as the apply returned them ([`apply::ApplyOptions::observe`]):
/// nothing is read again; only a Deployment already rolling out has its pods listed.
async fn readiness_of_applied(ctx: &ExtensionContext, objects: &[Value]) -> Readiness {
    let observed: Vec<rollout::Observed> = futures::stream::iter(objects.iter().cloned())
        .map(|object| with_pods(ctx, object).boxed())
        .buffered(READINESS_READS)
        .collect()
        .await;
    rollout::assess(&observed)
}

/// Objects whose readiness [`readiness`] reads at once.
const READINESS_READS: usize = 8;

/// One object of [`readiness`] as the installer sees it (and a Deployment's pods), or
/// why it cannot be read.
async fn observe(
    ctx: &ExtensionContext,
    installer: &kube::Client,
    r: &ObjectRef,
) -> Result<rollout::Observed, String> {
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
        Ok(None) => return Err(rollout::unreadable(&r.kind, &r.name, "not found")),
        Err(e) => {
            let why = format!("cannot be read: {e}");
            return Err(rollout::unreadable(&r.kind, &r.name, why));
        }
    };
    Ok(with_pods(ctx, object).await)
}

/// `object` with its pods when they can show in its readiness message
/// ([`rollout::reads_pods`]; listed as the controller).
async fn with_pods(ctx: &ExtensionContext, object: Value) -> rollout::Observed {
    let pods = if rollout::reads_pods(&object) {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        pods_of(ctx, namespace, &object).await
    } else {
        Vec::new()
    };
    rollout::Observed { object, pods }
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

/// Pulls and loads the bundle image: the bundle and its digest-pinned reference. A
/// retryable failure leaves a memo for the next retry ([`super::outage`]), stamped with
/// `epoch`, the epoch when the reconcile started.
async fn pull(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    target: &BundleIdentity,
    epoch: u64,
) -> Result<(Bundle, String), InstallFailure> {
    let started = Instant::now();
    let secrets = pull_secrets(ctx).await;
    let pulled = pull_with(ctx, &target.image, &secrets).await;
    if let Err(InstallFailure::Retry(error)) = &pulled {
        let (name, memo) = outage::memo(ext, epoch, &target.image, &secrets, error);
        ctx.outage.keep(&name, memo);
    }
    let pulled = pulled?;
    ctx.metrics.phase(Phase::pull, started.elapsed());
    Ok(pulled)
}

/// The registry credentials (the global pull secret, the controller account's
/// `imagePullSecrets`), read now.
pub(crate) async fn pull_secrets(ctx: &ExtensionContext) -> DockerConfig {
    let settings = &ctx.settings;
    crate::controller::pull_secrets::read(
        &ctx.client,
        &settings.namespace,
        settings.service_account.as_deref(),
        settings.global_pull_secret.as_deref(),
    )
    .await
}

/// Pulls and loads `image` with `secrets`, its errors mapped to an [`InstallFailure`].
pub(crate) async fn pull_with(
    ctx: &ExtensionContext,
    image: &str,
    secrets: &DockerConfig,
) -> Result<(Bundle, String), InstallFailure> {
    let (loaded, pulled) =
        bundle::load_image(&ctx.puller, image, secrets, &bundle::LoadOptions::default())
            .await
            .map_err(|e| {
                // Content errors of an image pinned by digest never fix themselves.
                if e.is_terminal(bundle::is_digest_reference(image)) {
                    InstallFailure::Blocked(e.to_string())
                } else {
                    InstallFailure::Retry(e.to_string())
                }
            })?;
    Ok((loaded, pulled.reference))
}

/// Renders the bundle for the extension's namespace and configuration (CPU work, off
/// the async workers), then drops fields its CRDs do not declare from its custom
/// resources (server-side apply would reject them; the API server drops them on create).
async fn render_bundle(
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
    let operator_condition = ctx
        .operator_conditions
        .get(&ctx.client)
        .await
        .map_err(InstallFailure::Retry)?;
    let options = RenderOptions {
        cert_provider: cert_provider(ctx, &loaded).await?,
        operator_condition,
        dependencies_checked: true,
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

/// The certificate provider to render with (cert-manager, else OpenShift service-ca,
/// when the cluster serves them: [`certs::effective`]). Without either, a bundle with
/// webhooks is unsupported: say so before anything is written rather than fail on kinds
/// the cluster does not serve.
async fn cert_provider(
    ctx: &ExtensionContext,
    loaded: &Bundle,
) -> Result<CertProvider, InstallFailure> {
    let configured = ctx.settings.cert_provider;
    if configured != CertProvider::CertManager || !certs::has_webhooks(&loaded.csv) {
        return Ok(configured);
    }
    let cert_manager = served(ctx, certs::CERT_MANAGER_API).await?;
    let service_ca = match certs::effective(configured, cert_manager.as_ref(), None) {
        CertProvider::None => served(ctx, certs::SERVICE_CA_API).await?,
        _ => None,
    };
    Ok(certs::effective(
        configured,
        cert_manager.as_ref(),
        service_ca.as_ref(),
    ))
}

/// The discovery of `group_version`; `None` when the cluster does not serve it.
async fn served(
    ctx: &ExtensionContext,
    group_version: &str,
) -> Result<Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList>, InstallFailure>
{
    match ctx.client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(Some(list)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(InstallFailure::Retry(format!(
            "discovering {group_version}: {e}"
        ))),
    }
}
