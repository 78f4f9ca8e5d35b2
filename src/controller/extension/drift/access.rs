//! Which kinds the controller watches itself ([`AccessProbe`]): for each kind, asked of
//! the API server once (discovery, then a SelfSubjectAccessReview for `list` and for
//! `watch` cluster-wide), whether one shared watch as the controller follows it
//! ([`Access::Shared`]) or each extension's own watches as its installer account
//! ([`Access::Own`]). `config/rbac` grants the controller `list, watch` on the kinds
//! bundles usually hold, never on Secrets or ConfigMaps (docs/concepts/installer-permissions.md).

use super::diff::KindKey;
use crate::apply;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, ApiResource, PostParams};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// How a kind is watched.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// By one shared watch, as the controller.
    Shared(ApiResource),
    /// By each extension, as its installer account.
    Own,
}

/// The answers so far, and the controller's client that asks.
#[derive(Default)]
pub(super) struct AccessProbe {
    /// The controller's own client; `None`: every kind is watched as the extensions'.
    pub controller: Option<kube::Client>,
    known: Mutex<HashMap<KindKey, Access>>,
}

impl AccessProbe {
    /// How each of `kinds` is watched ([`Access::Own`] while it cannot be told yet).
    pub async fn of(&self, kinds: BTreeSet<KindKey>) -> HashMap<KindKey, Access> {
        let mut access = HashMap::new();
        for kind in kinds {
            let how = self.access(&kind).await.unwrap_or(Access::Own);
            access.insert(kind, how);
        }
        access
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<KindKey, Access>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How `kind` is to be watched: asked of the API server the first time (discovery,
    /// then whether the controller may list and watch it cluster-wide); `None` while it
    /// cannot be told (not served yet, API errors), which the next call asks again.
    async fn access(&self, kind: &KindKey) -> Option<Access> {
        if let Some(known) = self.known().get(kind) {
            return Some(known.clone());
        }
        let Some(client) = &self.controller else {
            return Some(Access::Own);
        };
        let (resource, _) = apply::Resolver::new(client.clone())
            .resolve(&kind.probe())
            .await
            .ok()??;
        let mut allowed = true;
        for verb in ["list", "watch"] {
            allowed &= may(client, &resource, verb).await?;
        }
        let access = if allowed {
            Access::Shared(resource)
        } else {
            tracing::info!(kind = %kind.kind, group = %kind.group, "the controller may not list and watch this kind cluster-wide: drift is watched as each installer account");
            Access::Own
        };
        self.known().insert(kind.clone(), access.clone());
        Some(access)
    }
}

/// Whether the controller (`client`) may `verb` `resource` in every namespace
/// (`None`: the review failed).
async fn may(client: &kube::Client, resource: &ApiResource, verb: &str) -> Option<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(resource.group.clone()),
                resource: Some(resource.plural.clone()),
                verb: Some(verb.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
    {
        Ok(r) => Some(r.status.is_some_and(|s| s.allowed)),
        Err(e) => {
            tracing::debug!(kind = %resource.kind, error = %e, "asking whether the controller may watch a kind");
            None
        }
    }
}
