//! Where a convert starts from (docs/how-to/switch-from-olm-v0.md, "convert"): the
//! backup to work from (the live one, else the one a first run writes before anything
//! else), or why nothing may be done — an unreadable backup, no Subscription, a
//! Subscription that is not eligible, a ClusterExtension of that name that is not its
//! migration — or, when the one blocker is a missing ClusterCatalog, the catalog to
//! create and wait for.

use super::{Observed, Step};
use crate::migrate::olm_v0::backup::{Backup, configmap_name};
use crate::migrate::olm_v0::target::MIGRATED_FROM_ANNOTATION;
use crate::migrate::olm_v0::{BlockerCode, Check};
use serde_json::Value;

pub(super) enum Start {
    Refused(String),
    /// Only a ClusterCatalog is missing: create it (if not yet), then wait.
    Catalog(Option<Box<Step>>, String),
}

/// The backup to work from (live, else the one to write first) and the first steps.
pub(super) fn start(o: &Observed) -> Result<(Backup, Vec<Step>), Start> {
    let subscription = format!("{}/{}", o.namespace, o.name);
    match &o.backup {
        Some(Ok(b)) => return Ok((b.clone(), Vec::new())),
        Some(Err(e)) => {
            return Err(Start::Refused(format!(
                "the backup ConfigMap {}/{} is unreadable ({e}): restore it or delete it if no convert of {subscription} is in progress",
                o.namespace,
                configmap_name(&o.name)
            )));
        }
        None => {}
    }
    if o.subscription.is_none() {
        return Err(Start::Refused(format!(
            "Subscription {subscription} not found, and no backup of a convert in progress ({}/{})",
            o.namespace,
            configmap_name(&o.name)
        )));
    }
    let Some(check) = &o.check else {
        return Err(Start::Refused(format!(
            "Subscription {subscription} was not checked"
        )));
    };
    if let Some(refusal) = blocked(check, o.catalog_exists) {
        return Err(refusal);
    }
    let backup = match &o.proposed {
        Some(Ok(b)) => b.clone(),
        Some(Err(e)) => return Err(Start::Refused(e.clone())),
        None => return Err(Start::Refused("the backup could not be prepared".into())),
    };
    let steps = vec![Step::WriteBackup {
        manifest: backup.configmap(),
    }];
    Ok((backup, steps))
}

/// A convert only starts from an eligible Subscription; when the one blocker is a
/// missing ClusterCatalog that `check` can create, the convert creates it and waits.
fn blocked(check: &Check, catalog_exists: bool) -> Option<Start> {
    if check.eligible {
        return None;
    }
    let only_catalog = check
        .blockers
        .iter()
        .all(|b| b.code == BlockerCode::NotInCatalog);
    match &check.cluster_catalog {
        Some(c) if only_catalog && !c.reused => {
            let step = c
                .manifest
                .clone()
                .filter(|_| !catalog_exists)
                .map(|manifest| Box::new(Step::CreateClusterCatalog { manifest }));
            Some(Start::Catalog(
                step,
                format!(
                    "run convert again once ClusterCatalog {} is Serving the package",
                    c.name
                ),
            ))
        }
        _ => {
            let list: Vec<String> = check
                .blockers
                .iter()
                .map(|b| format!("{} (what to do: {})", b.message, b.action))
                .collect();
            Some(Start::Refused(format!(
                "Subscription {} is not eligible: {}",
                check.subscription,
                list.join("; ")
            )))
        }
    }
}

/// A ClusterExtension of that name that is not this Subscription's migration.
pub(super) fn foreign_extension(o: &Observed, subscription: &str) -> Option<String> {
    let ext = o.extension.as_ref()?;
    let from = ext
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIGRATED_FROM_ANNOTATION))
        .and_then(Value::as_str);
    (from != Some(subscription)).then(|| {
        format!(
            "ClusterExtension {} already exists and is not the migration of Subscription {subscription} (annotation {MIGRATED_FROM_ANNOTATION}): rename or remove it first",
            o.name
        )
    })
}
