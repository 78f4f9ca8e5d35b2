//! The ClusterExtension reconciler (reference §3): finalizer, validation, installed
//! state from the revision record, resolution over the served catalogs, bundle pull,
//! render, CRD upgrade-safety and permission preflights, apply as the installer
//! ServiceAccount, status and Events; uninstall on deletion (A7).
//!
//! Decisions are made by pure functions elsewhere ([`crate::resolve`],
//! [`crate::bundle`], [`crate::preflight`], [`status`]); this module sequences them and
//! does the I/O.

pub mod certs;
pub mod drift;
pub mod prune;
pub mod status;

use crate::api::conditions::{REASON_BLOCKED, REASON_INVALID_CONFIGURATION};
use crate::api::{
    self, ClusterCatalog, ClusterExtension, ClusterExtensionStatus, CrdUpgradeSafetyEnforcement,
};
use crate::apply::{
    self, ApplyError, BundleInfo, InstallError, InstallerClients, Owner, RevisionStore,
    UninstallOptions,
};
use crate::bundle::{self, CertProvider, RenderOptions};
use crate::content::ContentClient;
use crate::image::{ImageError, ImagePuller};
use crate::metrics::{Controller as MetricsController, Metrics, Phase};
use crate::preflight::crd_safety::{self, Enforcement, Verdict};
use crate::resolve::deprecation::{CatalogData, deprecation_conditions};
use crate::resolve::{self, ResolveRequest, UpgradePolicy};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PartialObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use status::{InstalledBundle, Observation, Outcome};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// Annotation that keeps CRDs (and so the users' custom resources) on uninstall (A7).
pub const ANNOTATION_KEEP_CRDS: &str = "olm.operatorframework.io/keep-crds-on-uninstall";

/// Settings of the ClusterExtension reconciler.
#[derive(Clone, Debug)]
pub struct ExtensionSettings {
    /// The controller's namespace (revision records live there).
    pub namespace: String,
    pub service_account: Option<String>,
    pub global_pull_secret: Option<String>,
    pub cert_provider: CertProvider,
    /// Length of one minute of `progressDeadlineMinutes` (shorter in tests).
    pub minute: Duration,
}

pub struct ExtensionContext {
    pub client: kube::Client,
    pub installers: InstallerClients,
    pub puller: Arc<ImagePuller>,
    pub content: ContentClient,
    pub store: RevisionStore,
    pub recorder: Recorder,
    pub settings: ExtensionSettings,
    /// Watches on the managed kinds that trigger drift correction.
    pub drift: drift::DriftWatches,
    /// Per extension: (generation, when failures started), for progressDeadlineMinutes.
    failing_since: Mutex<HashMap<String, (Option<i64>, Instant)>>,
    failures: Mutex<HashMap<String, u32>>,
    /// Where reconciles report durations, errors and status (metrics hook).
    pub metrics: Arc<Metrics>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

impl ExtensionContext {
    pub fn new(
        client: kube::Client,
        base_config: kube::Config,
        puller: Arc<ImagePuller>,
        content: ContentClient,
        settings: ExtensionSettings,
    ) -> Self {
        let store = RevisionStore::new(client.clone(), &settings.namespace);
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "olmv1".into(),
                instance: None,
            },
        );
        ExtensionContext {
            client,
            installers: InstallerClients::new(base_config),
            puller,
            content,
            store,
            recorder,
            settings,
            drift: drift::DriftWatches::new(),
            failing_since: Mutex::default(),
            failures: Mutex::default(),
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Reports into `metrics` (shared with the rest of the process).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.installers.count_requests(metrics.clone());
        self.metrics = metrics;
        self
    }

    fn next_backoff(&self, name: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(name.to_string()).or_default();
        *n = n.saturating_add(1);
        crate::controller::backoff(*n)
    }

    /// The extensions whose last reconcile failed.
    fn failing(&self) -> Vec<String> {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.keys().cloned().collect()
    }

    fn succeeded(&self, name: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.failing_since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// How long this extension has been failing at this generation.
    fn failing_for(&self, name: &str, generation: Option<i64>) -> Duration {
        let mut map = self.failing_since.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map
            .entry(name.to_string())
            .or_insert((generation, Instant::now()));
        if entry.0 != generation {
            *entry = (generation, Instant::now());
        }
        entry.1.elapsed()
    }
}

/// Runs the reconciler until the stream ends.
///
/// What triggers a reconcile, and what does not (so that a controller with hundreds of
/// installed extensions makes no API requests while nothing changes):
/// - a ClusterExtension's spec, finalizers or deletion ([`extension_trigger`]) — not the
///   status the reconciler itself writes;
/// - a ClusterCatalog change that can change resolution ([`catalog_trigger`]: spec,
///   labels, the resolved image, Serving, deletion) re-reconciles every extension — not
///   its `lastUnpacked`/poll bookkeeping;
/// - an RBAC object change re-reconciles only the extensions that are failing (a
///   permission preflight failure is retried at once), never the installed ones;
/// - drift of a managed object ([`drift`]) reconciles its extension.
pub async fn run(ctx: Arc<ExtensionContext>) {
    let client = ctx.client.clone();
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let primary = watcher(extensions, watcher::Config::default())
        .default_backoff()
        .modify(|e| e.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects()
        .predicate_filter(extension_trigger, PredicateConfig::default());
    let controller = Controller::for_stream(primary, reader.clone());
    let all = move || {
        reader
            .state()
            .iter()
            .map(|e| ObjectRef::from_obj(e.as_ref()))
            .collect::<Vec<_>>()
    };
    let catalogs = changed_only(
        watcher(
            Api::<ClusterCatalog>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
        catalog_trigger,
    );
    let failing = {
        let ctx = ctx.clone();
        move || {
            ctx.failing()
                .into_iter()
                .map(|name| ObjectRef::new(&name))
                .collect::<Vec<_>>()
        }
    };
    let (f1, f2, f3, f4) = (failing.clone(), failing.clone(), failing.clone(), failing);
    controller
        .watches_stream(catalogs, move |_| all())
        .watches_stream(rbac_events::<ClusterRole>(&client), move |_| f1())
        .watches_stream(rbac_events::<ClusterRoleBinding>(&client), move |_| f2())
        .watches_stream(rbac_events::<Role>(&client), move |_| f3())
        .watches_stream(rbac_events::<RoleBinding>(&client), move |_| f4())
        .reconcile_on(ctx.drift.trigger_stream())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "extension reconcile loop");
            }
        })
        .await;
}

/// What of a ClusterExtension asks for a reconcile: its generation (spec, and deletion:
/// the API server bumps it when setting `deletionTimestamp`), finalizers and whether it
/// is being deleted. Status and annotation updates do not.
pub fn extension_trigger(e: &ClusterExtension) -> Option<u64> {
    let meta = e.meta();
    Some(hash_of(&(
        meta.generation,
        meta.deletion_timestamp.is_some(),
        &meta.finalizers,
    )))
}

/// What of a ClusterCatalog can change resolution: its spec (generation), labels (catalog
/// selectors), the digest it serves, whether it is Serving, and its deletion.
pub fn catalog_trigger(c: &ClusterCatalog) -> Option<u64> {
    let meta = c.meta();
    let status = c.status.as_ref();
    let resolved = status
        .and_then(|s| s.resolved_source.as_ref())
        .map(|r| r.image.ref_.as_str());
    let serving = status
        .and_then(|s| api::conditions::find(&s.conditions, "Serving").map(|c| c.status.as_str()));
    Some(hash_of(&(
        meta.generation,
        &meta.labels,
        meta.deletion_timestamp.is_some(),
        resolved,
        serving,
    )))
}

fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(value)
}

/// The objects of `events` (a watcher) whose `key` changed since they were last seen,
/// and every deleted one.
fn changed_only<K>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    key: fn(&K) -> Option<u64>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Send + 'static,
{
    let mut seen: HashMap<String, Option<u64>> = HashMap::new();
    events.flat_map(move |event| {
        let changed: Vec<Result<K, watcher::Error>> = match event {
            Err(e) => vec![Err(e)],
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                let k = key(&o);
                if seen.insert(o.name_any(), k) == Some(k) {
                    Vec::new()
                } else {
                    vec![Ok(o)]
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                seen.remove(&o.name_any());
                vec![Ok(o)]
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => Vec::new(),
        };
        futures::stream::iter(changed)
    })
}

/// Every change of an RBAC kind, metadata only.
fn rbac_events<K>(
    client: &kube::Client,
) -> futures::stream::BoxStream<'static, Result<PartialObjectMeta<K>, watcher::Error>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watcher(
        Api::<PartialObjectMeta<K>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects()
    .boxed()
}

fn error_policy(
    ext: Arc<ClusterExtension>,
    error: &ExtensionError,
    ctx: Arc<ExtensionContext>,
) -> Action {
    tracing::warn!(extension = %ext.name_any(), error = %error, "reconcile failed");
    ctx.metrics
        .error(MetricsController::clusterextension, "ApiError");
    Action::requeue(ctx.next_backoff(&ext.name_any()))
}

async fn reconcile(
    ext: Arc<ClusterExtension>,
    ctx: Arc<ExtensionContext>,
) -> Result<Action, ExtensionError> {
    let span = tracing::info_span!("reconcile", extension = %ext.name_any());
    let (started, metrics) = (Instant::now(), ctx.metrics.clone());
    let result = reconcile_extension(ext, ctx).instrument(span).await;
    metrics.reconciled(MetricsController::clusterextension, started.elapsed());
    result
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// The installed bundle as the status reports it, from the revision record.
fn installed_of(history: Option<&apply::RevisionHistory>) -> Option<InstalledBundle> {
    history
        .and_then(|h| h.installed())
        .map(|r| InstalledBundle {
            name: r.bundle.bundle_name.clone(),
            version: r.bundle.version.clone(),
            release: r.bundle.release.clone(),
            image: r.bundle.image.clone(),
        })
}

/// The bundle this reconcile installs.
struct Target {
    name: String,
    package: String,
    version: String,
    release: Option<String>,
    image: String,
}

async fn reconcile_extension(
    ext: Arc<ClusterExtension>,
    ctx: Arc<ExtensionContext>,
) -> Result<Action, ExtensionError> {
    let name = ext.name_any();
    let api: Api<ClusterExtension> = Api::all(ctx.client.clone());
    let uid = ext.uid().unwrap_or_default();
    let owner = Owner::new(name.clone(), uid);
    let generation = ext.meta().generation;
    let namespace = ext.spec.namespace.clone();
    let account = ext.spec.service_account.name.clone();

    if ext.meta().deletion_timestamp.is_some() {
        return finalize(&api, &ext, &ctx, &owner).await;
    }
    if !ext
        .finalizers()
        .iter()
        .any(|f| f == api::FINALIZER_EXTENSION)
    {
        let mut finalizers = ext.finalizers().to_vec();
        finalizers.push(api::FINALIZER_EXTENSION.to_string());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": ext.resource_version()}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(Action::requeue(Duration::ZERO));
    }

    // 2. Validate what the API server cannot.
    let errors = validate(&ctx, &namespace, &account).await;
    if !errors.is_empty() {
        ctx.metrics
            .error(MetricsController::clusterextension, "ValidationFailed");
        let outcome = Outcome::ValidationFailed(status::validation_failed(&errors));
        let obs = Observation {
            generation,
            installed: None,
            outcome,
            deprecation: None,
        };
        write_status(&api, &ext, &ctx, &obs).await?;
        return Ok(Action::requeue(ctx.next_backoff(&name)));
    }

    // 3. Installed state.
    let history = match ctx.store.load(&owner).await {
        Ok(h) => h,
        Err(e) => {
            ctx.metrics.error(
                MetricsController::clusterextension,
                "RevisionRecordUnavailable",
            );
            let obs = Observation {
                generation,
                installed: None,
                outcome: Outcome::Retrying(format!("retrying to get installed bundle: {e}")),
                deprecation: None,
            };
            write_status(&api, &ext, &ctx, &obs).await?;
            return Ok(Action::requeue(ctx.next_backoff(&name)));
        }
    };
    let installed = installed_of(history.as_ref());

    // 4. Resolve.
    let Some(filter) = ext.spec.source.catalog.clone() else {
        let obs = Observation {
            generation,
            installed,
            outcome: Outcome::Blocked {
                reason: REASON_BLOCKED,
                message: "catalog is required when sourceType is Catalog".into(),
            },
            deprecation: None,
        };
        write_status(&api, &ext, &ctx, &obs).await?;
        return Ok(Action::await_change());
    };
    let channels = filter.channels.clone().unwrap_or_default();
    let resolve_started = Instant::now();
    let catalogs = Api::<ClusterCatalog>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?;
    let contents = ctx
        .content
        .catalog_contents(
            &catalogs.items,
            &filter.package_name,
            filter.selector.as_ref(),
        )
        .await;
    let inputs: Vec<_> = contents.iter().map(|c| c.input()).collect();
    let request = ResolveRequest {
        package: filter.package_name.clone(),
        channels: channels.clone(),
        version_range: filter.version.clone().filter(|v| !v.is_empty()),
        selector: filter.selector.clone(),
        policy: match filter.upgrade_constraint_policy {
            api::UpgradeConstraintPolicy::CatalogProvided => UpgradePolicy::CatalogProvided,
            api::UpgradeConstraintPolicy::SelfCertified => UpgradePolicy::SelfCertified,
        },
        installed: installed.as_ref().map(|b| resolve::InstalledBundle {
            name: b.name.clone(),
            version: b.version.clone(),
            release: b.release.clone(),
        }),
    };
    let installed_name = installed.as_ref().map(|b| b.name.as_str());
    // Set when no catalog provides the package any more and the installed bundle is kept.
    let mut maintained = None;
    let resolved = resolve::resolve(&request, &inputs);
    ctx.metrics.phase(Phase::resolve, resolve_started.elapsed());
    let (target, deprecation) = match resolved {
        Ok(resolution) => {
            let b = &resolution.bundle;
            ctx.metrics.resolved_from(&name, &b.name, &b.catalog);
            let deprecation = deprecation_conditions(
                CatalogData::Available(resolution.deprecation.as_ref()),
                &channels,
                installed_name,
            );
            let b = resolution.bundle;
            let release = Some(b.version.status_release()).filter(|r| !r.is_empty());
            let target = Target {
                name: b.name,
                package: b.package,
                version: b.version.status_version(),
                release,
                image: b.image,
            };
            (target, deprecation)
        }
        Err(e) => {
            let deprecation =
                deprecation_conditions(CatalogData::Unavailable, &channels, installed_name);
            // No catalog has the package any more (deleted): keep maintaining what is installed.
            let keep = e.no_catalog_had_package()
                && filter.version.as_deref().is_none_or(|v| {
                    installed
                        .as_ref()
                        .is_some_and(|i| i.version == v || v.is_empty())
                });
            match (keep, history.as_ref().and_then(|h| h.installed())) {
                (true, Some(rev)) => {
                    tracing::info!(extension = %name, "no catalog provides the package any more; maintaining the installed bundle");
                    maintained = Some(format!(
                        "no ClusterCatalog provides package {:?} any more: maintaining the installed bundle {:?} (version {})",
                        filter.package_name, rev.bundle.bundle_name, rev.bundle.version
                    ));
                    let target = Target {
                        name: rev.bundle.bundle_name.clone(),
                        package: rev.bundle.package.clone(),
                        version: rev.bundle.version.clone(),
                        release: rev.bundle.release.clone(),
                        image: rev.bundle.image.clone(),
                    };
                    (target, deprecation)
                }
                _ => {
                    let message = e.to_string();
                    ctx.metrics
                        .error(MetricsController::clusterextension, "ResolutionFailed");
                    emit(
                        &ctx,
                        &ext,
                        EventType::Warning,
                        "ResolutionFailed",
                        "Resolve",
                        &message,
                    )
                    .await;
                    return fail(
                        &api,
                        &ext,
                        &ctx,
                        installed,
                        Some(deprecation),
                        Outcome::Retrying(message),
                    )
                    .await;
                }
            }
        }
    };

    // 5.–8. Pull, render, preflights, apply.
    match install(&ext, &ctx, &owner, &target, history.as_ref()).await {
        Ok(done) => {
            ctx.drift.ensure(
                &name,
                (&namespace, &account),
                &ctx.installers,
                &done.managed,
            );
            let bundle = InstalledBundle {
                name: target.name.clone(),
                version: target.version.clone(),
                release: target.release.clone(),
                image: done.image.clone(),
            };
            let changed = installed.as_ref() != Some(&bundle);
            if changed {
                let (reason, note) = match &installed {
                    Some(old) => (
                        "Upgraded",
                        format!(
                            "upgraded from {} to {} ({})",
                            old.version, bundle.version, bundle.name
                        ),
                    ),
                    None => (
                        "Installed",
                        format!(
                            "installed bundle {} version {}",
                            bundle.name, bundle.version
                        ),
                    ),
                };
                emit(&ctx, &ext, EventType::Normal, reason, "Install", &note).await;
            } else if done.applied_changes > 0 {
                let note = format!(
                    "restored {} object(s) that differed from the installed revision",
                    done.applied_changes
                );
                emit(
                    &ctx,
                    &ext,
                    EventType::Normal,
                    "DriftCorrected",
                    "Apply",
                    &note,
                )
                .await;
            }
            for warning in &done.warnings {
                emit(
                    &ctx,
                    &ext,
                    EventType::Warning,
                    "CRDUpgradeSafety",
                    "Preflight",
                    warning,
                )
                .await;
            }
            let deprecation =
                deprecation_conditions_after_install(&contents, &request, &channels, &bundle.name)
                    .unwrap_or(deprecation);
            let obs = Observation {
                generation,
                installed: Some(bundle),
                outcome: maintained.map_or(Outcome::Succeeded, Outcome::Maintained),
                deprecation: Some(deprecation),
            };
            write_status(&api, &ext, &ctx, &obs).await?;
            ctx.succeeded(&name);
            Ok(Action::await_change())
        }
        Err(failure) => {
            let reason = match &failure {
                InstallFailure::Retry(_) => "InstallFailed",
                InstallFailure::InvalidConfiguration(_) => REASON_INVALID_CONFIGURATION,
                InstallFailure::Blocked(_) => REASON_BLOCKED,
            };
            ctx.metrics
                .error(MetricsController::clusterextension, reason);
            let outcome = match failure {
                InstallFailure::Retry(message) => Outcome::Retrying(status::for_resolved_bundle(
                    &target.name,
                    &target.version,
                    message,
                )),
                InstallFailure::InvalidConfiguration(message) => Outcome::Blocked {
                    reason: REASON_INVALID_CONFIGURATION,
                    message,
                },
                InstallFailure::Blocked(message) => Outcome::Blocked {
                    reason: REASON_BLOCKED,
                    message: status::for_resolved_bundle(&target.name, &target.version, message),
                },
            };
            let message = match &outcome {
                Outcome::Retrying(m) | Outcome::Blocked { message: m, .. } => m.clone(),
                _ => String::new(),
            };
            emit(
                &ctx,
                &ext,
                EventType::Warning,
                "InstallFailed",
                "Install",
                &message,
            )
            .await;
            fail(&api, &ext, &ctx, installed, Some(deprecation), outcome).await
        }
    }
}

/// After a successful install the deprecation conditions describe the newly installed
/// bundle (reference §2.1).
fn deprecation_conditions_after_install(
    contents: &[crate::content::CatalogContent],
    request: &ResolveRequest,
    channels: &[String],
    installed: &str,
) -> Option<[crate::resolve::deprecation::DeprecationCondition; 4]> {
    let inputs: Vec<_> = contents.iter().map(|c| c.input()).collect();
    let resolution = resolve::resolve(request, &inputs).ok()?;
    Some(deprecation_conditions(
        CatalogData::Available(resolution.deprecation.as_ref()),
        channels,
        Some(installed),
    ))
}

/// Reports a failed reconcile; `Retrying` is retried with backoff, and turns into
/// `ProgressDeadlineExceeded` once it lasted longer than `progressDeadlineMinutes`.
async fn fail(
    api: &Api<ClusterExtension>,
    ext: &ClusterExtension,
    ctx: &ExtensionContext,
    installed: Option<InstalledBundle>,
    deprecation: Option<[crate::resolve::deprecation::DeprecationCondition; 4]>,
    mut outcome: Outcome,
) -> Result<Action, ExtensionError> {
    let name = ext.name_any();
    let generation = ext.meta().generation;
    let failing_for = ctx.failing_for(&name, generation);
    let deadline = ext.spec.progress_deadline_minutes.map(|minutes| {
        (
            minutes,
            ctx.settings.minute.saturating_mul(minutes.max(0) as u32),
        )
    });
    // Time left before the deadline: the next retry comes no later than that, so that
    // the deadline is reported when it passes, not up to a whole backoff later.
    let mut until_deadline = None;
    if let (Some((minutes, deadline)), Outcome::Retrying(last)) = (deadline, &outcome) {
        if failing_for >= deadline {
            outcome = Outcome::DeadlineExceeded {
                minutes,
                last: last.clone(),
            };
        } else {
            until_deadline = Some(deadline - failing_for + Duration::from_millis(100));
        }
    }
    let retry = !matches!(outcome, Outcome::Blocked { .. });
    let obs = Observation {
        generation,
        installed,
        outcome,
        deprecation,
    };
    write_status(api, ext, ctx, &obs).await?;
    Ok(if retry {
        let backoff = ctx.next_backoff(&name);
        Action::requeue(until_deadline.map_or(backoff, |left| backoff.min(left)))
    } else {
        Action::await_change()
    })
}

enum InstallFailure {
    Retry(String),
    InvalidConfiguration(String),
    Blocked(String),
}

struct Installed {
    image: String,
    applied_changes: usize,
    warnings: Vec<String>,
    /// The objects of the installed revision (for the drift watches).
    managed: Vec<apply::ObjectRef>,
}

async fn install(
    ext: &ClusterExtension,
    ctx: &ExtensionContext,
    owner: &Owner,
    target: &Target,
    history: Option<&apply::RevisionHistory>,
) -> Result<Installed, InstallFailure> {
    let namespace = &ext.spec.namespace;
    let account = &ext.spec.service_account.name;

    // 5. Pull and unpack.
    let pull_started = Instant::now();
    let secrets = crate::controller::pull_secrets(
        &ctx.client,
        &ctx.settings.namespace,
        ctx.settings.service_account.as_deref(),
        ctx.settings.global_pull_secret.as_deref(),
    )
    .await;
    let (loaded, pulled) = bundle::load_image(
        &ctx.puller,
        &target.image,
        &secrets,
        &bundle::LoadOptions::default(),
    )
    .await
    .map_err(|e| match e {
        bundle::BundleImageError::Pull(ImageError::InvalidReference { .. }) => {
            InstallFailure::Blocked(e.to_string())
        }
        other => InstallFailure::Retry(other.to_string()),
    })?;
    ctx.metrics.phase(Phase::pull, pull_started.elapsed());

    // 6. Render (CPU work, off the async workers).
    let render_started = Instant::now();
    let config = ext
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.clone())
        .map(Value::Object);
    // Without cert-manager, a bundle with webhooks is unsupported (§5.2): say so before
    // anything is written rather than fail on kinds the cluster does not serve.
    let mut cert_provider = ctx.settings.cert_provider;
    if cert_provider == CertProvider::CertManager && certs::has_webhooks(&loaded.csv) {
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
        cert_provider = certs::effective(cert_provider, served.as_ref());
    }
    let options = RenderOptions { cert_provider };
    let ns = namespace.clone();
    let mut rendered = tokio::task::spawn_blocking(move || {
        bundle::render_owned(loaded, &ns, config.as_ref(), &options).map_err(|e| match e {
            bundle::RenderError::Config(c) => InstallFailure::InvalidConfiguration(format!(
                "invalid ClusterExtension configuration: {c}"
            )),
            other => InstallFailure::Retry(other.to_string()),
        })
    })
    .await
    .map_err(|e| InstallFailure::Retry(format!("render task failed: {e}")))??;
    ctx.metrics.phase(Phase::render, render_started.elapsed());

    // Fields the bundle's CRDs do not declare would fail server-side apply; the API
    // server drops them on create, and so does this.
    let pruned = prune::prune_custom_resources(&mut rendered);
    if !pruned.is_empty() {
        tracing::warn!(fields = %pruned.join(", "), "dropping fields that the bundle's CRDs do not declare");
    }

    // The installed revision again (a reconcile after drift, a catalog change that
    // resolves to the same bundle): its CRDs and permissions were checked when it was
    // installed, so only the apply runs.
    let info = BundleInfo {
        package: target.package.clone(),
        bundle_name: target.name.clone(),
        version: target.version.clone(),
        release: target.release.clone(),
        image: pulled.reference.clone(),
    };
    let current = history.is_some_and(|h| h.is_current(&info, &rendered));

    // 7a. CRD upgrade safety against the live CRDs.
    let preflight_started = Instant::now();
    let enforcement = match ext
        .spec
        .install
        .as_ref()
        .and_then(|i| i.preflight.as_ref())
        .and_then(|p| p.crd_upgrade_safety.as_ref())
        .map(|c| c.enforcement)
    {
        Some(CrdUpgradeSafetyEnforcement::None) => Enforcement::None,
        _ => Enforcement::Strict,
    };
    let mut warnings = Vec::new();
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut blocked = Vec::new();
    for obj in rendered
        .iter()
        .filter(|o| !current && o["kind"] == "CustomResourceDefinition")
    {
        let crd_name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let live = crds.get_opt(&crd_name).await.map_err(|e| {
            InstallFailure::Retry(format!(
                "getting existing resource for CRD {crd_name:?}: {e}"
            ))
        })?;
        let Some(live) = live else { continue };
        let new: CustomResourceDefinition = serde_json::from_value(obj.clone())
            .map_err(|e| InstallFailure::Retry(format!("rendered CRD {crd_name:?}: {e}")))?;
        let findings = crd_safety::check(&live, &new);
        match crd_safety::verdict(enforcement, &crd_name, &findings) {
            Verdict::Safe => {}
            Verdict::Blocked(message) => blocked.push(message),
            Verdict::Warn(message) => {
                tracing::warn!(crd = %crd_name, findings = %message, "CRD upgrade safety disabled; proceeding despite unsafe changes");
                warnings.push(message);
            }
        }
    }
    if !blocked.is_empty() {
        return Err(InstallFailure::Retry(blocked.join("\n")));
    }

    // 7b. Permission preflight, then 8. apply as the installer account.
    let installer = ctx
        .installers
        .get(namespace, account)
        .map_err(|e| InstallFailure::Retry(e.to_string()))?;
    if !current {
        apply::check_permissions(
            &ctx.client,
            &installer,
            namespace,
            account,
            owner,
            &rendered,
            history,
        )
        .await
        .map_err(|e| InstallFailure::Retry(e.to_string()))?;
        ctx.metrics
            .phase(Phase::preflight, preflight_started.elapsed());
    }
    let apply_started = Instant::now();
    let outcome = apply::install_revision(
        &installer,
        &ctx.store,
        owner,
        info,
        &rendered,
        &apply::ApplyOptions::default(),
    )
    .await
    .map_err(|e| match e {
        InstallError::Apply(ApplyError::Conflict { message, .. }) => InstallFailure::Retry(message),
        other => InstallFailure::Retry(other.to_string()),
    })?;
    ctx.metrics.phase(Phase::apply, apply_started.elapsed());
    Ok(Installed {
        image: pulled.reference,
        applied_changes: outcome.report.changed.len(),
        warnings,
        managed: outcome
            .history
            .installed()
            .map(|r| r.objects.clone())
            .unwrap_or_default(),
    })
}

/// Namespace and installer ServiceAccount exist.
async fn validate(ctx: &ExtensionContext, namespace: &str, account: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match Api::<Namespace>::all(ctx.client.clone())
        .get_opt(namespace)
        .await
    {
        Ok(Some(_)) => {}
        Ok(None) => errors.push(format!("namespace {namespace:?} not found")),
        Err(e) => errors.push(format!("getting namespace {namespace:?}: {e}")),
    }
    if errors.is_empty() {
        match Api::<ServiceAccount>::namespaced(ctx.client.clone(), namespace).get_opt(account).await {
            Ok(Some(_)) => {}
            Ok(None) => errors.push(format!(
                "service account {account:?} not found in namespace {namespace:?}: unable to authenticate with the Kubernetes cluster."
            )),
            Err(e) => errors.push(format!("getting service account {account:?} in namespace {namespace:?}: {e}")),
        }
    }
    errors
}

/// Uninstall (A7): everything the extension installed, through its installer account,
/// then the finalizer. A missing installer account does not block deletion: the
/// ownerReferences let garbage collection remove the objects.
async fn finalize(
    api: &Api<ClusterExtension>,
    ext: &ClusterExtension,
    ctx: &ExtensionContext,
    owner: &Owner,
) -> Result<Action, ExtensionError> {
    let name = ext.name_any();
    ctx.drift.stop(&name);
    if !ext
        .finalizers()
        .iter()
        .any(|f| f == api::FINALIZER_EXTENSION)
    {
        return Ok(Action::await_change());
    }
    let namespace = &ext.spec.namespace;
    let account = &ext.spec.service_account.name;
    let history = match ctx.store.load(owner).await {
        Ok(h) => h,
        Err(e) => {
            ctx.metrics
                .error(MetricsController::clusterextension, "UninstallFailed");
            emit(
                ctx,
                ext,
                EventType::Warning,
                "UninstallFailed",
                "Uninstall",
                &format!("reading the revision record: {e}"),
            )
            .await;
            return Ok(Action::requeue(ctx.next_backoff(&name)));
        }
    };
    let objects = history
        .as_ref()
        .map(|h| h.all_objects())
        .unwrap_or_default();
    let keep_crds = ext
        .annotations()
        .get(ANNOTATION_KEEP_CRDS)
        .is_some_and(|v| v == "true");
    let installer = match ctx.installers.get(namespace, account) {
        Ok(c) => c,
        Err(e) => {
            return Ok(uninstall_failed(ctx, ext, &e.to_string()).await);
        }
    };
    let options = UninstallOptions {
        keep_crds,
        apply: Default::default(),
    };
    match apply::uninstall(
        &ctx.client,
        &installer,
        namespace,
        account,
        owner,
        &objects,
        &options,
    )
    .await
    {
        Ok(report) => {
            let note = format!(
                "uninstalled: {} object(s) deleted{}",
                report.deleted.len(),
                if report.kept.is_empty() {
                    String::new()
                } else {
                    format!(", {} CRD(s) kept", report.kept.len())
                }
            );
            emit(
                ctx,
                ext,
                EventType::Normal,
                "Uninstalled",
                "Uninstall",
                &note,
            )
            .await;
        }
        Err(ApplyError::InstallerAccountMissing { .. }) => {
            let note = apply::garbage_collection_fallback(namespace, account, &name, &objects);
            emit(
                ctx,
                ext,
                EventType::Warning,
                "InstallerAccountMissing",
                "Uninstall",
                &note,
            )
            .await;
        }
        Err(e) => {
            return Ok(uninstall_failed(ctx, ext, &e.to_string()).await);
        }
    }
    if let Err(e) = ctx.store.delete(&name).await {
        tracing::warn!(extension = %name, error = %e, "deleting the revision record");
    }
    ctx.installers.forget(namespace, account);
    let finalizers: Vec<&String> = ext
        .finalizers()
        .iter()
        .filter(|f| *f != api::FINALIZER_EXTENSION)
        .collect();
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": ext.resource_version()}});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    ctx.succeeded(&name);
    ctx.metrics.forget_extension(&name);
    Ok(Action::await_change())
}

/// An uninstall that could not finish: counted, reported as a Warning Event, retried
/// with backoff.
async fn uninstall_failed(ctx: &ExtensionContext, ext: &ClusterExtension, message: &str) -> Action {
    ctx.metrics
        .error(MetricsController::clusterextension, "UninstallFailed");
    emit(
        ctx,
        ext,
        EventType::Warning,
        "UninstallFailed",
        "Uninstall",
        message,
    )
    .await;
    Action::requeue(ctx.next_backoff(&ext.name_any()))
}

async fn write_status(
    api: &Api<ClusterExtension>,
    ext: &ClusterExtension,
    ctx: &ExtensionContext,
    observation: &Observation,
) -> Result<(), ExtensionError> {
    let current = ext.status.clone().unwrap_or_default();
    let next: ClusterExtensionStatus = status::next_status(&current, observation, &now());
    let package = ext
        .spec
        .source
        .catalog
        .as_ref()
        .map(|c| c.package_name.as_str());
    ctx.metrics
        .extension_status(&ext.name_any(), package.unwrap_or_default(), &next);
    if next == current {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension",
        "status": next,
    });
    api.patch_status(
        &ext.name_any(),
        &PatchParams::apply(crate::apply::FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

async fn emit(
    ctx: &ExtensionContext,
    ext: &ClusterExtension,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(
            crate::api::conditions::sanitize_message(note)
                .chars()
                .take(1024)
                .collect(),
        ),
        action: action.to_string(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &ext.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(status: Value, generation: i64) -> ClusterExtension {
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
            "metadata": {"name": "e", "generation": generation, "finalizers": ["f"]},
            "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                     "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}},
            "status": status,
        }))
        .unwrap()
    }

    fn catalog(resolved: &str, serving: &str, last_unpacked: &str) -> ClusterCatalog {
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": "c", "generation": 1, "labels": {"a": "b"}},
            "spec": {"source": {"type": "Image", "image": {"ref": "r:1"}}},
            "status": {
                "conditions": [{"type": "Serving", "status": serving, "reason": "Available",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "resolvedSource": {"type": "Image", "image": {"ref": resolved}},
                "lastUnpacked": last_unpacked,
            },
        }))
        .unwrap()
    }

    #[test]
    fn own_status_writes_do_not_trigger_but_spec_finalizers_and_deletion_do() {
        let base = extension_trigger(&ext(json!({}), 1));
        assert_eq!(
            base,
            extension_trigger(&ext(json!({"observedGeneration": 1}), 1))
        );
        assert_ne!(base, extension_trigger(&ext(json!({}), 2)));
        let mut no_finalizer = ext(json!({}), 1);
        no_finalizer.metadata.finalizers = None;
        assert_ne!(base, extension_trigger(&no_finalizer));
        let mut deleting = ext(json!({}), 1);
        deleting.metadata.deletion_timestamp = Some(now());
        assert_ne!(base, extension_trigger(&deleting));
    }

    #[test]
    fn catalog_bookkeeping_does_not_trigger_but_content_and_serving_do() {
        let base = catalog_trigger(&catalog("r@sha256:1", "True", "2026-01-01T00:00:00Z"));
        assert_eq!(
            base,
            catalog_trigger(&catalog("r@sha256:1", "True", "2026-01-02T00:00:00Z")),
            "lastUnpacked"
        );
        assert_ne!(
            base,
            catalog_trigger(&catalog("r@sha256:2", "True", "2026-01-01T00:00:00Z"))
        );
        assert_ne!(
            base,
            catalog_trigger(&catalog("r@sha256:1", "False", "2026-01-01T00:00:00Z"))
        );
        let mut relabelled = catalog("r@sha256:1", "True", "2026-01-01T00:00:00Z");
        relabelled.metadata.labels = None;
        assert_ne!(base, catalog_trigger(&relabelled));
    }

    #[tokio::test]
    async fn changed_only_passes_changes_and_deletions() {
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(catalog(
                "d1",
                "True",
                "2026-01-01T00:00:01Z",
            ))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(catalog(
                "d1",
                "True",
                "2026-01-01T00:00:02Z",
            ))),
            Ok(watcher::Event::Apply(catalog(
                "d2",
                "True",
                "2026-01-01T00:00:02Z",
            ))),
            Ok(watcher::Event::Apply(catalog(
                "d2",
                "True",
                "2026-01-01T00:00:03Z",
            ))),
            Ok(watcher::Event::Delete(catalog(
                "d2",
                "True",
                "2026-01-01T00:00:03Z",
            ))),
        ]);
        let passed: Vec<String> = changed_only(events, catalog_trigger)
            .map(|r| {
                r.unwrap()
                    .status
                    .and_then(|s| s.resolved_source)
                    .map(|r| r.image.ref_)
                    .unwrap_or_default()
            })
            .collect()
            .await;
        assert_eq!(passed, vec!["d1", "d2", "d2"]);
    }
}
