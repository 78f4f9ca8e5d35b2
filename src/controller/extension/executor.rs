//! [`KubeExecutor`]: the reconcile's I/O against the cluster — the finalizer, the
//! namespace and installer-account lookups, the revision record, upstream OLM v1's
//! release, the backup of an OLM v0 installation being taken over, resolution over the
//! served catalogs, the install pipeline ([`super::pipeline`]: render, apply,
//! readiness) within `--install-timeout`, the drift
//! watches and their cache of unchanged installs, the uninstall steps (delete, remove the
//! record and finalizers), status and Events. Decides nothing: every step is named by
//! [`super::plan`].

use super::flow::Executor;
use super::installer::{self, InstallerAccount};
use super::plan::migration::{self, Migration, V0Takeover};
use super::plan::{Apply, DeleteFailure, Deletion, InstallFailure, Installed, Note, Rendered};
use super::rollout::Readiness;
use super::status::{self, Observation};
use super::{ExtensionContext, dependencies, drift, namespace, pipeline};
use crate::api::{self, BundleIdentity, ClusterExtension, ClusterExtensionStatus};
use crate::apply::{
    self, ApplyError, ObjectRef, Owner, RevisionHistory, UninstallOptions, UninstallReport,
};
use crate::controller::common;
use crate::metrics::Phase;
use crate::migrate::upstream_helm::{self as helm_release, UpstreamRelease};
use crate::resolve::{self, Explanation, ResolveRequest};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use std::sync::OnceLock;
use std::time::Instant;

/// The executor of one reconcile of `ext`.
pub(crate) struct KubeExecutor<'a> {
    ctx: &'a ExtensionContext,
    ext: &'a ClusterExtension,
    api: Api<ClusterExtension>,
    owner: Owner,
    /// Who installs ([`installer::choose`]).
    installer: Result<InstallerAccount, String>,
    /// When this reconcile's install must be done by (`--install-timeout`), set by its
    /// first step.
    install_deadline: OnceLock<tokio::time::Instant>,
    /// [`super::outage::Epoch`] when this reconcile started.
    epoch: u64,
    /// The record and upstream's release, read beside the validation ([`Prefetched`]).
    prefetched: std::sync::Mutex<Prefetched>,
}

/// The lookups of an extension that has nothing installed yet (no install in its
/// status) that its first install needs next: read while it is validated rather than
/// one after the other (the plan asks for them in turn: validation, record, upstream's
/// release). An extension with an install reads them when the plan asks.
#[derive(Default)]
struct Prefetched {
    record: Option<Result<Option<RevisionHistory>, String>>,
    upstream: Option<Result<Option<UpstreamRelease>, String>>,
}

impl<'a> KubeExecutor<'a> {
    pub fn new(ctx: &'a ExtensionContext, ext: &'a ClusterExtension) -> Self {
        let field = ctx.settings.service_account_field;
        if let Some(warning) = installer::ignored_warning(&ext.spec, field) {
            // upstream logs it on every reconcile (the operator-controller role only)
            tracing::info!(extension = %ext.name_any(), "{warning}");
        }
        KubeExecutor {
            ctx,
            ext,
            api: Api::all(ctx.client.clone()),
            owner: Owner::new(ext.name_any(), ext.uid().unwrap_or_default()),
            installer: installer::choose(&ext.spec, ctx.settings.default_installer.as_ref(), field),
            install_deadline: OnceLock::new(),
            epoch: ctx.outage.epoch.now(),
            prefetched: Default::default(),
        }
    }
}

impl KubeExecutor<'_> {
    /// Reads the record and upstream's release ([`Prefetched`]) for an extension with
    /// nothing installed.
    async fn prefetch(&self) {
        let installed = self
            .ext
            .status
            .as_ref()
            .is_some_and(|s| s.install.is_some());
        if installed {
            return;
        }
        let (record, upstream) = futures::join!(self.read_record(), self.read_upstream());
        let mut prefetched = self.prefetched();
        prefetched.record = Some(record);
        prefetched.upstream = Some(upstream);
    }

    /// The installer account and a client acting as it.
    fn installer_client(&self) -> Result<(&InstallerAccount, kube::Client), String> {
        let account = self.installer.as_ref().map_err(Clone::clone)?;
        let client = self
            .ctx
            .installers
            .get(&account.namespace, &account.name)
            .map_err(|e| e.to_string())?;
        Ok((account, client))
    }

    fn prefetched(&self) -> std::sync::MutexGuard<'_, Prefetched> {
        self.prefetched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn read_record(&self) -> Result<Option<RevisionHistory>, String> {
        self.ctx
            .store
            .load(&self.owner)
            .await
            .map_err(|e| e.to_string())
    }

    async fn read_upstream(&self) -> Result<Option<UpstreamRelease>, String> {
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
        // Both reads at once; the account's errors count only when the namespace passes.
        let namespaces = Api::<Namespace>::all(client.clone());
        let (found, account_errors, ()) = futures::join!(
            namespaces.get_opt(namespace),
            self.validate_account(installer),
            self.prefetch()
        );
        match found {
            Ok(Some(_)) => {}
            // Unless it is to be created after the preflights (pipeline::apply), by an
            // installer account that lives elsewhere.
            Ok(None) => errors.extend(namespace::missing(
                namespace,
                self.opted_in(),
                &installer.namespace,
            )),
            Err(e) => errors.push(format!("getting namespace {namespace:?}: {e}")),
        }
        if !errors.is_empty() {
            return errors;
        }
        account_errors
    }

    async fn load_record(&self) -> Result<Option<RevisionHistory>, String> {
        let prefetched = self.prefetched().record.take();
        match prefetched {
            Some(read) => read,
            None => self.read_record().await,
        }
    }

    async fn load_upstream(&self) -> Result<Option<UpstreamRelease>, String> {
        let prefetched = self.prefetched().upstream.take();
        match prefetched {
            Some(read) => read,
            None => self.read_upstream().await,
        }
    }

    async fn load_v0_backup(&self, migration: &Migration) -> Result<V0Takeover, String> {
        // Read in the extension's own namespace only, as its installer account (convert
        // grants it `get` on its backup): the controller reads nothing a ClusterExtension
        // names on its author's behalf, so status never echoes what the author's
        // installer could not read (SECURITY.md, "Takeovers").
        let (namespace, name) = migration::backup_location(migration)?;
        let (account, client) = self.installer_client()?;
        let configmap = Api::<ConfigMap>::namespaced(client, namespace)
            .get_opt(name)
            .await
            .map_err(|e| match e {
                kube::Error::Api(ae) if ae.code == 403 => format!(
                    "the installer account {}/{} may not read the backup ConfigMap {} (get configmaps {name} in {namespace}; `olmv1 migrate convert` grants it with a Role {})",
                    account.namespace,
                    account.name,
                    migration.backup,
                    crate::migrate::olm_v0::backup::reader_role_name(&account.name),
                ),
                e => format!("getting backup ConfigMap {}: {e}", migration.backup),
            })?
            .ok_or_else(|| format!("backup ConfigMap {} not found", migration.backup))?;
        let value = serde_json::to_value(&configmap)
            .map_err(|e| format!("backup ConfigMap {}: {e}", migration.backup))?;
        migration::from_backup(migration, &value)
    }

    async fn operator_conditions_served(&self) -> bool {
        // Unknown (discovery failed, nothing remembered): no hold; the install's render
        // asks again and retries when it still fails.
        let served = self.ctx.operator_conditions.get(&self.ctx.client).await;
        served.unwrap_or_default()
    }

    async fn read_operator_condition(&self, name: &str) -> Result<(), String> {
        let (_, client) = self.installer_client()?;
        super::operator_conditions::read(&client, &self.ext.spec.namespace, name).await
    }

    async fn resolve(&self, request: &ResolveRequest) -> Result<Explanation, kube::Error> {
        let started = Instant::now();
        let catalogs = self.ctx.catalogs.list(&self.ctx.client).await?;
        let contents = self
            .ctx
            .content
            .catalog_contents(&catalogs, &request.package, request.selector.as_ref())
            .await;
        let inputs: Vec<_> = contents.iter().map(|c| c.input()).collect();
        // The verdict on every bundle too: the upgrade notice (plan::notice). A winner
        // with dependencies installs when they hold on the cluster (dependencies.rs).
        let (explained, deps) = resolve::explain_with_dependencies(request, &inputs);
        let explained =
            dependencies::settle_resolution(self.ctx, self.ext, &catalogs, explained, &deps)
                .await?;
        self.ctx.metrics.phase(Phase::resolve, started.elapsed());
        if let Ok(r) = &explained.result {
            let name = self.ext.name_any();
            self.ctx
                .metrics
                .resolved_from(&name, &r.bundle.name, &r.bundle.catalog);
        }
        Ok(explained)
    }

    fn unchanged(&self, fingerprint: &str) -> Option<Installed> {
        let unchanged = self.ctx.drift.unchanged(&self.ext.name_any(), fingerprint);
        if unchanged.is_some() {
            tracing::debug!(extension = %self.ext.name_any(), "installed revision unchanged and no drift: install skipped");
        }
        unchanged
    }

    async fn read_readiness(
        &self,
        account: &InstallerAccount,
        objects: &[ObjectRef],
    ) -> Option<Readiness> {
        let client = self
            .ctx
            .installers
            .get(&account.namespace, &account.name)
            .ok()?;
        let readiness = pipeline::readiness(self.ctx, &client, objects).await;
        self.ctx
            .drift
            .note_readiness(&self.ext.name_any(), readiness.clone());
        Some(readiness)
    }

    async fn render(&self, target: &BundleIdentity) -> Result<Rendered, InstallFailure> {
        self.ctx.drift.begin_install(&self.ext.name_any());
        let render = pipeline::render(self.ctx, self.ext, target, self.epoch);
        self.within_install_timeout(target, render).await
    }

    async fn apply(
        &self,
        step: &Apply,
        rendered: &Rendered,
        history: Option<&RevisionHistory>,
    ) -> Result<Installed, InstallFailure> {
        let creation = self.opted_in().then(|| pipeline::NamespaceCreation {
            extension: self.ext,
            target: self.namespace_target(),
        });
        let apply = pipeline::apply(self.ctx, &self.owner, step, rendered, history, creation);
        let applied = self.within_install_timeout(&step.target, apply).await?;
        let (installed, managed) = (applied.installed, applied.managed);
        let clean = step.fingerprint.clone().map(|fingerprint| drift::Clean {
            fingerprint,
            installed: Installed {
                applied_changes: 0,
                warnings: Vec::new(),
                ..installed.clone()
            },
        });
        let account = &step.account;
        self.ctx
            .drift
            .ensure(
                &self.ext.name_any(),
                (&account.namespace, &account.name),
                &self.ctx.installers,
                &managed,
                clean,
                &applied.generations,
            )
            .await;
        Ok(installed)
    }

    async fn check_drift(
        &self,
        account: &InstallerAccount,
        rendered: &Rendered,
    ) -> Result<Vec<String>, String> {
        let installer = self
            .ctx
            .installers
            .get(&account.namespace, &account.name)
            .map_err(|e| e.to_string())?;
        super::dry_run::drifted(&installer, &self.owner, &rendered.objects).await
    }

    fn stop_watches(&self) {
        self.ctx.drift.stop(&self.ext.name_any());
    }

    async fn delete(&self, deletion: &Deletion) -> Result<UninstallReport, DeleteFailure> {
        let ctx = self.ctx;
        let (namespace, account) = (&deletion.account.namespace, &deletion.account.name);
        let installer = ctx
            .installers
            .get(namespace, account)
            .map_err(|e| DeleteFailure::Failed(e.to_string()))?;
        let options = UninstallOptions {
            keep_crds: deletion.keep_crds,
            apply: Default::default(),
        };
        let uninstalled = apply::uninstall(
            &ctx.client,
            &installer,
            namespace,
            account,
            &self.owner,
            &deletion.objects,
            &options,
        )
        .await;
        let result = match uninstalled {
            Ok(report) => {
                self.remove_namespace(&installer, &report.deleted).await;
                Ok(report)
            }
            Err(ApplyError::InstallerAccountMissing { .. }) => Err(DeleteFailure::AccountMissing),
            Err(e) => return Err(DeleteFailure::Failed(e.to_string())),
        };
        ctx.installers.forget(namespace, account);
        result
    }

    async fn remove(&self) -> Result<(), kube::Error> {
        let name = self.ext.name_any();
        dependencies::report_left(self.ctx, self.ext).await;
        if let Err(e) = self.ctx.store.delete(&name).await {
            tracing::warn!(extension = %name, error = %e, "deleting the revision record");
        }
        // Upstream's second finalizer, left on extensions taken over from upstream OLM v1
        // (docs/how-to/switch-from-upstream.md): nothing else would remove it.
        common::remove_finalizers(
            &self.api,
            self.ext,
            &[api::FINALIZER_EXTENSION, api::FINALIZER_EXTENSION_CONTENT],
        )
        .await?;
        self.ctx.metrics.forget_extension(&name);
        if let Ok(mut reported) = self.ctx.reported.lock() {
            reported.remove(&name);
        }
        Ok(())
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
        if let Some(n) = &observation.control.upgrade {
            self.ctx.metrics.upgrade_available(
                &self.ext.name_any(),
                package.map(|c| c.package_name.as_str()).unwrap_or_default(),
                n.newest()
                    .map(|newest| (n.installed.as_str(), newest, n.reason)),
            );
        }
        common::write_status_guarded(&self.api, self.ext, &current, &next).await?;
        if let (Some(install), Ok(mut reported)) = (&next.install, self.ctx.reported.lock()) {
            reported.insert(self.ext.name_any(), install.bundle.clone());
        }
        Ok(())
    }

    fn last_reported(&self) -> Option<crate::api::BundleMetadata> {
        let reported = self.ctx.reported.lock().ok()?;
        reported.get(&self.ext.name_any()).cloned()
    }

    async fn emit(&self, note: &Note) {
        emit(self.ctx, self.ext, note).await;
    }
}

impl KubeExecutor<'_> {
    /// Whether a missing install namespace is created ([`namespace::opted_in`]).
    fn opted_in(&self) -> bool {
        namespace::opted_in(self.ext.annotations(), self.ctx.settings.create_namespaces)
    }

    /// The extension the install namespace is created for.
    fn namespace_target(&self) -> namespace::For<'_> {
        namespace::For {
            namespace: &self.ext.spec.namespace,
            extension: &self.owner.name,
            uid: &self.owner.uid,
        }
    }

    /// The installer account exists (validation).
    async fn validate_account(&self, installer: &InstallerAccount) -> Vec<String> {
        let client = &self.ctx.client;
        let mut errors = Vec::new();
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

    /// After the uninstall: the install namespace goes when olmv1 created it for the
    /// extension and nothing else lives there; an Event says what happened to it.
    async fn remove_namespace(&self, installer: &kube::Client, deleted: &[ObjectRef]) {
        let target = self.namespace_target();
        let removed =
            namespace::cluster::remove(&self.ctx.client, installer, &target, deleted).await;
        if let Some((warning, message)) = removed {
            let note = Note {
                warning,
                reason: if warning {
                    "NamespaceKept"
                } else {
                    "NamespaceDeleted"
                },
                action: "Uninstall",
                message,
            };
            emit(self.ctx, self.ext, &note).await;
        }
    }

    /// Runs one step of the install within `--install-timeout`, counted from the first
    /// step of this reconcile's install (the pull).
    async fn within_install_timeout<T>(
        &self,
        target: &BundleIdentity,
        step: impl Future<Output = Result<T, InstallFailure>>,
    ) -> Result<T, InstallFailure> {
        let Some(timeout) = self.ctx.settings.install_timeout else {
            return step.await;
        };
        let deadline = *self
            .install_deadline
            .get_or_init(|| tokio::time::Instant::now() + timeout);
        tokio::time::timeout_at(deadline, step)
            .await
            .map_err(|_| pipeline::deadline_passed(target, timeout))?
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
