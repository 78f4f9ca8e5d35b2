//! Evaluating [`Requirements`] for a ServiceAccount with SubjectAccessReviews sent by the
//! controller's own identity, many in flight at once.

use super::{Permission, Requirements, missing_message};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use std::collections::{BTreeSet, HashMap};

/// SubjectAccessReviews in flight at once.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// Errors of the permission preflight.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    /// The account lacks permissions; the message is reference §7's, one line per rule.
    #[error("{0}")]
    Missing(String),
    #[error("checking permissions of {user}: creating a SubjectAccessReview: {source}")]
    Review {
        user: String,
        #[source]
        source: kube::Error,
    },
}

/// The user name and groups of a ServiceAccount, as the API server authenticates it.
pub fn service_account_identity(namespace: &str, name: &str) -> (String, Vec<String>) {
    (
        format!("system:serviceaccount:{namespace}:{name}"),
        vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_owned(),
        ],
    )
}

fn review(user: &str, groups: &[String], p: &Permission) -> SubjectAccessReview {
    let mut spec = SubjectAccessReviewSpec {
        user: Some(user.to_owned()),
        groups: Some(groups.to_vec()),
        ..Default::default()
    };
    match p {
        Permission::Resource {
            namespace,
            group,
            resource,
            name,
            verb,
        } => {
            let (resource, sub) = match resource.split_once('/') {
                Some((r, s)) => (r, Some(s.to_owned())),
                None => (resource.as_str(), None),
            };
            spec.resource_attributes = Some(ResourceAttributes {
                namespace: Some(namespace.clone()).filter(|s| !s.is_empty()),
                group: Some(group.clone()),
                resource: Some(resource.to_owned()),
                subresource: sub,
                name: Some(name.clone()).filter(|s| !s.is_empty()),
                verb: Some(verb.clone()),
                ..Default::default()
            });
        }
        Permission::NonResource { path, verb } => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some(verb.clone()),
            });
        }
    }
    SubjectAccessReview {
        spec,
        ..Default::default()
    }
}

/// Evaluates `req` for the ServiceAccount `namespace/name` with at most `concurrency`
/// SubjectAccessReviews in flight; returns the missing permissions (empty = all held).
pub async fn evaluate(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    req: &Requirements,
    concurrency: usize,
) -> Result<BTreeSet<Permission>, EvaluateError> {
    let (user, groups) = service_account_identity(namespace, name);
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let checks: Vec<Permission> = req.all_checks().into_iter().collect();
    let results: HashMap<Permission, bool> = futures::stream::iter(checks)
        .map(|p| {
            let api = api.clone();
            let body = review(&user, &groups, &p);
            async move {
                let out = api.create(&PostParams::default(), &body).await?;
                let allowed = out.status.is_some_and(|s| s.allowed);
                Ok::<_, kube::Error>((p, allowed))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
        .map_err(|source| EvaluateError::Review {
            user: user.clone(),
            source,
        })?;
    Ok(req.missing(|p| results.get(p).copied().unwrap_or(false)))
}

/// [`evaluate`], turning missing permissions into [`EvaluateError::Missing`].
pub async fn preflight(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    req: &Requirements,
) -> Result<(), EvaluateError> {
    let missing = evaluate(client, namespace, name, req, DEFAULT_CONCURRENCY).await?;
    match missing_message(&missing) {
        Some(msg) => Err(EvaluateError::Missing(msg)),
        None => Ok(()),
    }
}
