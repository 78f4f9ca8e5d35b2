//! [`KubeExecutor`]: the reconcile's I/O against the cluster — the finalizer, the
//! namespace and installer-account lookups, the revision record, resolution over the
//! served catalogs, the install steps ([`super::install`]), the uninstall
//! ([`super::finalize`]), status, Events and the failure bookkeeping. Decides nothing.

use super::flow::Executor;
use super::installer::{self, InstallerAccount};
use super::plan::{InstallFailure, Installed, Note};
use super::rollout::Readiness;
use super::status::{self, Observation};
use super::{ExtensionContext, ExtensionError, drift, finalize, install};
use crate::api::{self, BundleIdentity, ClusterCatalog, ClusterExtension, ClusterExtensionStatus};
use crate::apply::{Owner, RevisionHistory};
use crate::controller::common;
use crate::metrics::{Controller as MetricsController, Phase};
use crate::migrate::upstream_helm::{self as helm_release, UpstreamRelease};
use crate::resolve::{self, Resolution, ResolveError, ResolveRequest};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use std::time::{Duration, Instant};

/// The executor of one reconcile of `ext`.
pub(crate) struct KubeExecutor<'a> {
    pub ctx: &'a ExtensionContext,
    pub ext: &'a ClusterExtension,
    pub api: Api<ClusterExtension>,
    pub owner: Owner,
    /// Who installs ([`installer::choose`]).
    pub installer: Result<InstallerAccount, String>,
}

impl<'a> KubeExecutor<'a> {
    pub fn new(ctx: &'a ExtensionContext, ext: &'a ClusterExtension) -> Self {
        KubeExecutor {
            ctx,
            ext,
            api: Api::all(ctx.client.clone()),
            owner: Owner::new(ext.name_any(), ext.uid().unwrap_or_default()),
            installer: installer::choose(&ext.spec, ctx.settings.default_installer.as_ref()),
        }
    }
}

impl Executor for KubeExecutor<'_> {
    fn installer(&self) -> Result<InstallerAccount, String> {
        self.installer.clone()
    }

    async fn add_finalizer(&self) -> Result<(), kube::Error> {
        common::add_finalizer(&self.api, self.ext, api::FINALIZER_EXTENSION).await?;
        Ok(())
    }

    async fn validate(&self) -> Vec<String> {
        let client = &self.ctx.client;
        let namespace = &self.ext.spec.namespace;
        let Ok(installer) = &self.installer else {
            return Vec::new();
        };
        let mut errors = Vec::new();
        match Api::<Namespace>::all(client.clone())
            .get_opt(namespace)
            .await
        {
            Ok(Some(_)) => {}
            Ok(None) => errors.push(format!("namespace {namespace:?} not found")),
            Err(e) => errors.push(format!("getting namespace {namespace:?}: {e}")),
        }
        if !errors.is_empty() {
            return errors;
        }
        let (account, namespace) = (&installer.name, &installer.namespace);
        match Api::<ServiceAccount>::namespaced(client.clone(), namespace)
            .get_opt(account)
            .await
        {
            Ok(Some(_)) => {}
            Ok(None) => errors.push(format!(
                "service account {account:?} not found in namespace {namespace:?}: unable to authenticate with the Kubernetes cluster."
            )),
            Err(e) => errors.push(format!(
                "getting service account {account:?} in namespace {namespace:?}: {e}"
            )),
        }
        errors
    }

    async fn load_record(&self) -> Result<Option<RevisionHistory>, String> {
        self.ctx
            .store
            .load(&self.owner)
            .await
            .map_err(|e| e.to_string())
    }

    async fn load_upstream(&self) -> Result<Option<UpstreamRelease>, String> {
        // The release Secrets in the controller's namespace (upstream's olmv1-system),
        // selected by the `name` label both storages set (classic releases and chunked
        // indexes; chunk Secrets carry no `name`).
        let namespace = &self.ctx.settings.namespace;
        let name = self.ext.name_any();
        let secrets = Api::<Secret>::namespaced(self.ctx.client.clone(), namespace)
            .list(&ListParams::default().labels(&format!("name={name}")))
            .await
            .map_err(|e| format!("listing Secrets in namespace {namespace:?}: {e}"))?;
        let Some(secret) = helm_release::latest(&secrets.items, &name) else {
            return Ok(None);
        };
        // Adopted earlier (olmv1's record was deleted since): olmv1's own history took
        // over; the release is stale.
        if helm_release::is_adopted(secret) {
            return Ok(None);
        }
        match helm_release::storage_of(secret) {
            Some(helm_release::Storage::Chunked) => {
                // The chunk Secrets the index names (at most MAX_CHUNKS, checked there),
                // fetched by name; a missing one stays absent and is reported by the decode.
                let names = helm_release::chunk_names(secret).map_err(|e| e.to_string())?;
                let api = Api::<Secret>::namespaced(self.ctx.client.clone(), namespace);
                let mut chunks = std::collections::BTreeMap::new();
                for chunk in names {
                    if let Some(s) = api.get_opt(&chunk).await.map_err(|e| {
                        format!("getting Secret {chunk:?} in namespace {namespace:?}: {e}")
                    })? {
                        chunks.insert(chunk, s);
                    }
                }
                helm_release::decode_chunked(secret, &chunks)
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
            _ => helm_release::decode(secret)
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    }

    async fn resolve(
        &self,
        request: &ResolveRequest,
    ) -> Result<Result<Resolution, ResolveError>, kube::Error> {
        let started = Instant::now();
        let catalogs = Api::<ClusterCatalog>::all(self.ctx.client.clone())
            .list(&ListParams::default())
            .await?;
        let contents = self
            .ctx
            .content
            .catalog_contents(&catalogs.items, &request.package, request.selector.as_ref())
            .await;
        let inputs: Vec<_> = contents.iter().map(|c| c.input()).collect();
        let resolved = resolve::resolve(request, &inputs);
        self.ctx.metrics.phase(Phase::resolve, started.elapsed());
        if let Ok(r) = &resolved {
            let name = self.ext.name_any();
            self.ctx
                .metrics
                .resolved_from(&name, &r.bundle.name, &r.bundle.catalog);
        }
        Ok(resolved)
    }

    async fn install(
        &self,
        target: &BundleIdentity,
        history: Option<&RevisionHistory>,
        adopt: Option<&UpstreamRelease>,
    ) -> Result<Installed, InstallFailure> {
        let installer = self
            .installer
            .as_ref()
            .map_err(|message| InstallFailure::Blocked(message.clone()))?;
        let name = self.ext.name_any();
        let installed_bundle = history.and_then(|h| h.installed()).map(|r| &r.bundle);
        // The same install again while nothing drifted (a catalog update or a resync
        // resolving to the installed bundle): nothing to pull, render or apply.
        if adopt.is_none()
            && let Some(fingerprint) =
                install::fingerprint(self.ext, installer, target, installed_bundle)
            && let Some(mut installed) = self.ctx.drift.unchanged(&name, &fingerprint)
        {
            tracing::debug!(extension = %name, "installed revision unchanged and no drift: install skipped");
            if installed.readiness != Readiness::Ready
                && let Ok(client) = self
                    .ctx
                    .installers
                    .get(&installer.namespace, &installer.name)
            {
                // A rollout in progress: only its readiness is read again.
                let objects = history
                    .and_then(|h| h.installed())
                    .map(|r| r.objects.as_slice())
                    .unwrap_or_default();
                installed.readiness = install::readiness(self.ctx, &client, objects).await;
                self.ctx
                    .drift
                    .note_readiness(&name, installed.readiness.clone());
            }
            return Ok(installed);
        }
        self.ctx.drift.forget_clean(&name);
        let install = install::install(
            self.ctx,
            self.ext,
            installer,
            &self.owner,
            target,
            history,
            adopt,
        );
        let (installed, managed) = match self.ctx.settings.install_timeout {
            Some(deadline) => tokio::time::timeout(deadline, install)
                .await
                .map_err(|_| install::deadline_passed(target, deadline))??,
            None => install.await?,
        };
        let clean =
            install::fingerprint(self.ext, installer, target, Some(target)).map(|fingerprint| {
                drift::Clean {
                    fingerprint,
                    installed: Installed {
                        applied_changes: 0,
                        warnings: Vec::new(),
                        ..installed.clone()
                    },
                }
            });
        self.ctx
            .drift
            .ensure(
                &name,
                (&installer.namespace, &installer.name),
                &self.ctx.installers,
                &managed,
                clean,
            )
            .await;
        Ok(installed)
    }

    async fn uninstall(&self) -> Result<Action, ExtensionError> {
        finalize::finalize(self).await
    }

    async fn write_status(&self, observation: &Observation) -> Result<(), kube::Error> {
        let current = self.ext.status.clone().unwrap_or_default();
        let next: ClusterExtensionStatus =
            status::next_status(&current, observation, &Time(jiff::Timestamp::now()));
        let package = self.ext.spec.source.catalog.as_ref();
        self.ctx.metrics.extension_status(
            &self.ext.name_any(),
            package.map(|c| c.package_name.as_str()).unwrap_or_default(),
            &next,
        );
        common::write_status_guarded(&self.api, self.ext, &current, &next).await?;
        Ok(())
    }

    async fn emit(&self, note: &Note) {
        emit(self.ctx, self.ext, note).await;
    }

    fn count_error(&self, reason: &str) {
        self.ctx
            .metrics
            .error(MetricsController::clusterextension, reason);
    }

    fn failing_for(&self) -> Duration {
        self.ctx
            .failures
            .failing_for(&self.ext.name_any(), self.ext.metadata.generation)
    }

    fn next_backoff(&self) -> Duration {
        self.ctx.failures.next_backoff(&self.ext.name_any())
    }

    fn succeeded(&self) {
        self.ctx.failures.succeeded(&self.ext.name_any());
    }

    fn rolling_out(&self) {
        self.ctx.failures.reset_backoff(&self.ext.name_any());
    }

    fn minute(&self) -> Duration {
        self.ctx.settings.minute
    }
}

/// Publishes `note` as an Event on `ext` (message cleaned and cut to 1 KiB); a failure
/// to publish is logged, never fails the reconcile.
pub(crate) async fn emit(ctx: &ExtensionContext, ext: &ClusterExtension, note: &Note) {
    let event = Event {
        type_: if note.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: note.reason.to_string(),
        note: Some(
            crate::api::conditions::sanitize_message(&note.message)
                .chars()
                .take(1024)
                .collect(),
        ),
        action: note.action.to_string(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &ext.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event");
    }
}
