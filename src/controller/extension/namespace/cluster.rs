//! The reads and writes of the install namespace's life ([`super`] decides): whether it
//! exists (read as the controller, which validation already does), its creation and
//! deletion as the installer account — the namespace and its labels (Pod Security among
//! them) are bundle content, so the installer's RBAC decides, as for every other object
//! (docs/concepts/installer-permissions.md): the controller's own role gains nothing —
//! and, at uninstall, what still lives in it: every namespaced kind discovery lists,
//! listed as the installer account (a kind it may not list leaves the namespace in place).

use super::{For, Removal, Resident, Step, Suggestion};
use crate::apply::ObjectRef;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope, verbs};

/// The most objects of one kind read at uninstall; a full page means "something lives
/// there" anyway.
const PAGE: u32 = 100;

/// Before applying: creates `target.namespace` as the installer when [`super::decide`]
/// says so. `Ok(Some(note))`: created (the Event's message); `Err`: the install fails
/// with that message (retried).
pub async fn ensure(
    controller: &kube::Client,
    installer: &kube::Client,
    target: &For<'_>,
    opted_in: bool,
    suggestion: &Suggestion,
) -> Result<Option<String>, String> {
    if !opted_in {
        return Ok(None);
    }
    let ns = target.namespace;
    let exists = Api::<Namespace>::all(controller.clone())
        .get_opt(ns)
        .await
        .map_err(|e| format!("getting namespace {ns:?}: {e}"))?
        .is_some();
    match super::decide(target, exists, opted_in, suggestion) {
        Step::Nothing => Ok(None),
        Step::Refuse(message) => Err(message),
        Step::Create { object, note } => {
            let namespace: Namespace =
                serde_json::from_value(object).map_err(|e| format!("namespace {ns:?}: {e}"))?;
            match Api::<Namespace>::all(installer.clone())
                .create(&PostParams::default(), &namespace)
                .await
            {
                Ok(_) => Ok(Some(note)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
                Err(kube::Error::Api(e)) if e.code == 403 => Err(format!(
                    "creating namespace {ns:?} ({}): the installer account is missing the rule APIGroups:[\"\"] Resources:[namespaces] Verbs:[create]: {}",
                    super::ANNOTATION_CREATE_NAMESPACE,
                    e.message
                )),
                Err(e) => Err(format!("creating namespace {ns:?}: {e}")),
            }
        }
    }
}

/// After the uninstall deleted `deleted`: deletes `target.namespace` as the installer
/// when olmv1 created it for the extension and nothing else lives there. The Event
/// (warning?, message), if any.
pub async fn remove(
    controller: &kube::Client,
    installer: &kube::Client,
    target: &For<'_>,
    deleted: &[ObjectRef],
) -> Option<(bool, String)> {
    let ns = target.namespace;
    let live = match Api::<Namespace>::all(controller.clone()).get_opt(ns).await {
        Ok(Some(live)) => live,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(namespace = ns, error = %e, "reading the install namespace at uninstall");
            return None;
        }
    };
    let meta = &live.metadata;
    let created = super::created_for(
        target,
        &meta.labels.clone().unwrap_or_default(),
        &meta.annotations.clone().unwrap_or_default(),
    );
    if !created || meta.deletion_timestamp.is_some() {
        return None;
    }
    let lingering = residents_settled(controller, installer, ns)
        .await
        .map(|found| super::lingering(&found, deleted, target.extension));
    match super::removal(target, created, &lingering) {
        Removal::NotOurs => None,
        Removal::Keep(message) => Some((true, message)),
        Removal::Delete => match Api::<Namespace>::all(installer.clone())
            .delete(ns, &DeleteParams::background())
            .await
        {
            Ok(_) => Some((
                false,
                format!(
                    "deleted namespace {ns:?}, created for ClusterExtension {:?}",
                    target.extension
                ),
            )),
            Err(e) => Some((
                true,
                format!(
                    "namespace {ns:?} was created for ClusterExtension {:?} but is kept: deleting it: {e}",
                    target.extension
                ),
            )),
        },
    }
}

/// [`residents`], asked again (up to [`ATTEMPTS`] times, a second apart) when it fails:
/// discovery and the lists race other uninstalls removing their CRDs (a group that
/// vanishes between discovery and its list), which says nothing about this namespace.
async fn residents_settled(
    controller: &kube::Client,
    installer: &kube::Client,
    ns: &str,
) -> Result<Vec<Resident>, String> {
    let mut attempt = 1;
    loop {
        match residents(controller, installer, ns).await {
            Err(why) if attempt < ATTEMPTS => {
                tracing::debug!(namespace = ns, attempt, error = %why, "listing the install namespace again");
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            done => return done,
        }
    }
}

/// How often [`residents_settled`] asks.
const ATTEMPTS: u32 = 3;

/// Every object in `ns` of every namespaced kind the cluster serves (discovery as the
/// controller, lists as the installer); `Err`: a kind could not be listed. A kind no
/// longer served when listed (404: its CRD went meanwhile) holds nothing.
async fn residents(
    controller: &kube::Client,
    installer: &kube::Client,
    ns: &str,
) -> Result<Vec<Resident>, String> {
    let discovery = Discovery::new(controller.clone())
        .run()
        .await
        .map_err(|e| format!("discovery: {e}"))?;
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) {
                continue;
            }
            if resource.kind == "Event" {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(installer.clone(), ns, &resource);
            let list = match api.list_metadata(&ListParams::default().limit(PAGE)).await {
                Ok(list) => list,
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => {
                    return Err(format!(
                        "listing {} in namespace {ns:?}: {e}",
                        resource.plural
                    ));
                }
            };
            for item in list.items {
                let meta = item.metadata;
                found.push(Resident {
                    group: resource.group.clone(),
                    kind: resource.kind.clone(),
                    name: meta.name.unwrap_or_default(),
                    owners: meta
                        .owner_references
                        .unwrap_or_default()
                        .into_iter()
                        .map(|o| (o.kind, o.name))
                        .collect(),
                    owner_label: meta
                        .labels
                        .and_then(|mut l| l.remove(crate::apply::ownership::OWNER_NAME_LABEL)),
                    deleting: meta.deletion_timestamp.is_some(),
                });
            }
        }
    }
    Ok(found)
}
