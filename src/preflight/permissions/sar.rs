//! Evaluating [`Requirements`] for a ServiceAccount: its own rules first
//! ([`rules_review`]), then SubjectAccessReviews sent by the controller's own identity,
//! many in flight at once, for what the rules did not cover.

use super::{ExpansionError, Permission, Requirements, missing_message, rules_review};
use futures::FutureExt;
use futures::StreamExt;
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
    /// The account lacks permissions; the message is that of docs/concepts/installer-permissions.md §7.3, one line per rule.
    #[error("{0}")]
    Missing(String),
    /// A bundled role too large to check grant by grant, and the account lacks bind and
    /// escalate on it (see [`super::rules`]).
    #[error(transparent)]
    TooLarge(#[from] ExpansionError),
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
    if let Some(r) = p.resource_parts() {
        let (resource, sub) = match r.resource.split_once('/') {
            Some((r, s)) => (r, Some(s.to_owned())),
            None => (r.resource, None),
        };
        spec.resource_attributes = Some(ResourceAttributes {
            namespace: Some(r.namespace.to_owned()).filter(|s| !s.is_empty()),
            group: Some(r.group.to_owned()),
            resource: Some(resource.to_owned()),
            subresource: sub,
            name: Some(r.name.to_owned()).filter(|s| !s.is_empty()),
            verb: Some(r.verb.to_owned()),
            ..Default::default()
        });
    } else if let Permission::NonResource { path, verb } = p {
        spec.non_resource_attributes = Some(NonResourceAttributes {
            path: Some(path.clone()),
            verb: Some(verb.clone()),
        });
    }
    SubjectAccessReview {
        spec,
        ..Default::default()
    }
}

/// The unnamed form of a named resource permission (`None` for others). For RBAC an
/// allowed unnamed request implies every name is allowed.
pub fn unnamed(p: &Permission) -> Option<Permission> {
    p.resource_parts()
        .filter(|r| !r.name.is_empty())
        .map(|r| Permission::resource(r.namespace, r.group, r.resource, "", r.verb))
}

/// The checks of the first round: every permission, named ones replaced by their
/// unnamed form when several names share it (one unnamed check may then spare them
/// all). A name alone on its (namespace, resource, verb) is checked as it is: a named
/// review is allowed by an unnamed grant too, so its unnamed check would only add one.
pub fn first_round(all: &BTreeSet<Permission>) -> BTreeSet<Permission> {
    let mut names: HashMap<Permission, usize> = HashMap::new();
    for u in all.iter().filter_map(unnamed) {
        *names.entry(u).or_default() += 1;
    }
    all.iter()
        .map(|p| match unnamed(p) {
            Some(u) if names.get(&u).is_some_and(|n| *n > 1) => u,
            _ => p.clone(),
        })
        .collect()
}

/// The named checks still open after the first round.
pub fn second_round(
    all: &BTreeSet<Permission>,
    first: &HashMap<Permission, bool>,
) -> Vec<Permission> {
    all.iter()
        .filter(|p| !first.contains_key(*p))
        .filter(|p| unnamed(p).is_none_or(|u| !first.get(&u).copied().unwrap_or(false)))
        .cloned()
        .collect()
}

/// Every check of `checks`, with a window of reviews in flight that starts at one and
/// grows by one with each answer, up to `concurrency` (a slow start: the window doubles
/// every round trip). Stops at the first failure: when the API server refuses reviews
/// (throttled by API Priority and Fairness, restarting) an attempt costs a few requests,
/// not `concurrency` (`e2e/faults.rs`, `api_priority_and_fairness_rejects_the_controller`).
async fn review_all(
    api: &Api<SubjectAccessReview>,
    user: &str,
    groups: &[String],
    checks: Vec<Permission>,
    concurrency: usize,
) -> Result<Vec<(Permission, bool)>, kube::Error> {
    let one = |p: Permission| {
        let api = api.clone();
        let body = review(user, groups, &p);
        async move {
            let out = api.create(&PostParams::default(), &body).await?;
            let allowed = out.status.is_some_and(|s| s.allowed);
            Ok::<_, kube::Error>((p, allowed))
        }
        .boxed()
    };
    let mut out = Vec::with_capacity(checks.len());
    let mut pending = checks.into_iter();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    let mut window = 1;
    loop {
        while in_flight.len() < window {
            match pending.next() {
                Some(p) => in_flight.push(one(p)),
                None => break,
            }
        }
        match in_flight.next().await {
            Some(answer) => {
                out.push(answer?);
                window = (window + 1).min(concurrency.max(1));
            }
            None => return Ok(out),
        }
    }
}

/// What an evaluation found, and the reviews it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// The permissions missing (empty = all held).
    pub missing: BTreeSet<Permission>,
    /// Scopes whose rules were read with a SelfSubjectRulesReview.
    pub rules_reviews: usize,
    /// SubjectAccessReviews sent for what the rules did not cover.
    pub access_reviews: usize,
}

/// Evaluates `req` for the ServiceAccount `namespace/name`. First the account's own
/// rules, read as the account through `installer` ([`rules_review`]): what they cover
/// is held. The rest is decided by SubjectAccessReviews sent by `controller`, at most
/// `concurrency` in flight, in two rounds: unnamed checks first (an account holding a
/// verb on a whole resource needs no per-name checks), then the named checks that are
/// still open. A bundled role too large to check grant by grant ([`super::rules`])
/// without bind+escalate on it is [`EvaluateError::TooLarge`].
pub async fn evaluate(
    controller: &kube::Client,
    installer: &kube::Client,
    namespace: &str,
    name: &str,
    req: &Requirements,
    concurrency: usize,
) -> Result<Evaluation, EvaluateError> {
    let (user, groups) = service_account_identity(namespace, name);
    let api: Api<SubjectAccessReview> = Api::all(controller.clone());
    let err = |source| EvaluateError::Review {
        user: user.clone(),
        source,
    };
    let all = req.all_checks();
    let granted = rules_review::review(installer, rules_review::scopes_for(&all)).await;
    let open: BTreeSet<Permission> = all.into_iter().filter(|p| !granted.allows(p)).collect();
    let first: Vec<Permission> = first_round(&open).into_iter().collect();
    let mut access_reviews = first.len();
    let mut results: HashMap<Permission, bool> =
        review_all(&api, &user, &groups, first, concurrency)
            .await
            .map_err(err)?
            .into_iter()
            .collect();
    let second = second_round(&open, &results);
    access_reviews += second.len();
    results.extend(
        review_all(&api, &user, &groups, second, concurrency)
            .await
            .map_err(err)?,
    );
    let reviewed = |p: &Permission| results.get(p).copied().unwrap_or(false);
    let allowed = |p: &Permission| {
        granted.allows(p) || reviewed(p) || unnamed(p).is_some_and(|u| reviewed(&u))
    };
    if let Some(e) = req.too_large(allowed) {
        return Err(EvaluateError::TooLarge(e.clone()));
    }
    Ok(Evaluation {
        missing: req.missing(allowed),
        rules_reviews: granted.scopes(),
        access_reviews,
    })
}

/// [`evaluate`], turning missing permissions into [`EvaluateError::Missing`].
pub async fn preflight(
    controller: &kube::Client,
    installer: &kube::Client,
    namespace: &str,
    name: &str,
    req: &Requirements,
) -> Result<Evaluation, EvaluateError> {
    let evaluation = evaluate(
        controller,
        installer,
        namespace,
        name,
        req,
        DEFAULT_CONCURRENCY,
    )
    .await?;
    match missing_message(&evaluation.missing) {
        Some(msg) => Err(EvaluateError::Missing(msg)),
        None => Ok(evaluation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_skip_names_covered_by_the_resource() {
        let all: BTreeSet<Permission> = [
            Permission::resource("ns", "", "configmaps", "a", "get"),
            Permission::resource("ns", "", "configmaps", "b", "get"),
            Permission::resource("ns", "", "configmaps", "a", "delete"),
            Permission::resource("ns", "", "configmaps", "", "create"),
            Permission::NonResource {
                path: "/metrics".into(),
                verb: "get".into(),
            },
        ]
        .into_iter()
        .collect();
        let first = first_round(&all);
        // get on configmaps (two names share it), delete of "a" as it is (the only name
        // deleted), create on configmaps, /metrics
        assert_eq!(first.len(), 4);
        assert!(first.contains(&Permission::resource("ns", "", "configmaps", "", "get")));
        assert!(first.contains(&Permission::resource("ns", "", "configmaps", "a", "delete")));
        let results: HashMap<Permission, bool> = first
            .iter()
            .map(|p| {
                let allowed = !matches!(p, Permission::Resource { verb, .. } if verb == "get");
                (p.clone(), allowed)
            })
            .collect();
        // unnamed get refused: both names are checked; delete of "a" was answered
        assert_eq!(
            second_round(&all, &results),
            vec![
                Permission::resource("ns", "", "configmaps", "a", "get"),
                Permission::resource("ns", "", "configmaps", "b", "get"),
            ]
        );
    }

    #[test]
    fn reviews_carry_the_service_account_identity() {
        let (user, groups) = service_account_identity("ns", "sa");
        let r = review(
            &user,
            &groups,
            &Permission::resource(
                "",
                "olm.operatorframework.io",
                "clusterextensions/finalizers",
                "e",
                "update",
            ),
        );
        assert_eq!(r.spec.user.as_deref(), Some("system:serviceaccount:ns:sa"));
        assert_eq!(r.spec.groups.as_ref().map(Vec::len), Some(3));
        let a = r.spec.resource_attributes.unwrap();
        assert_eq!(a.resource.as_deref(), Some("clusterextensions"));
        assert_eq!(a.subresource.as_deref(), Some("finalizers"));
        assert_eq!(a.name.as_deref(), Some("e"));
        assert_eq!(a.namespace, None);
    }
}
