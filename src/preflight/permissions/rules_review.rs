//! The installer account's RBAC rules, read with one SelfSubjectRulesReview per scope
//! (sent as the account itself, through the impersonating installer client) and
//! matched against [`Permission`]s the way the RBAC authorizer matches a request. A
//! permission its rules cover needs no SubjectAccessReview; everything else is still
//! decided by one ([`super::sar`]), so the rules can only spare reviews, never refuse.
//!
//! Scopes: a namespace's review lists the rules of the ClusterRoleBindings and of that
//! namespace's RoleBindings, which is what applies to a request in the namespace. A
//! cluster-scoped request (and a non-resource URL) is decided by ClusterRoleBindings
//! only, so its rules are read in [`CLUSTER_SCOPE`], a name no namespace can have (it
//! is not a DNS label): no RoleBinding can add to them there. An authorizer that cannot
//! list its rules (a webhook) reports them `incomplete`; what it alone allows is found
//! by the SubjectAccessReviews. A review that fails (the account may not create
//! SelfSubjectRulesReviews) spares nothing. See docs/concepts/installer-permissions.md §7.3.

use super::Permission;
use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec, SubjectRulesReviewStatus,
};
use kube::api::{Api, PostParams};
use std::collections::{BTreeMap, HashMap};

/// The namespace of the review that lists the rules of cluster-scoped requests: not a
/// DNS label (it has a dot), so no RoleBinding can exist in it.
pub const CLUSTER_SCOPE: &str = "olmv1.cluster-scope";

/// Most scopes reviewed for one evaluation (the namespaces with most checks first; the
/// others are left to SubjectAccessReviews): a bundle spread over hundreds of namespaces
/// costs at most this many rules reviews.
pub const MAX_SCOPES: usize = 8;

/// Rules reviews in flight at once.
const IN_FLIGHT: usize = 4;

/// The scope whose rules decide `p`.
fn scope(p: &Permission) -> &str {
    match p.resource_parts() {
        Some(r) if !r.namespace.is_empty() => r.namespace,
        _ => CLUSTER_SCOPE,
    }
}

/// The account's rules, by scope; a scope missing was not reviewed (or its review
/// failed).
#[derive(Debug, Default)]
pub struct Granted {
    rules: HashMap<String, SubjectRulesReviewStatus>,
}

impl Granted {
    /// `rules` as reviewed in each scope.
    pub fn new(rules: HashMap<String, SubjectRulesReviewStatus>) -> Self {
        Granted { rules }
    }

    /// Whether the rules of `p`'s scope allow it.
    pub fn allows(&self, p: &Permission) -> bool {
        self.rules
            .get(scope(p))
            .is_some_and(|rules| covers(rules, p))
    }

    /// Scopes reviewed.
    pub fn scopes(&self) -> usize {
        self.rules.len()
    }
}

/// Whether `rules` allow `p`, as the RBAC authorizer matches a request against a
/// PolicyRule (k8s.io/kubernetes `pkg/apis/rbac/v1/evaluation_helpers.go`): verb and
/// group equal or `*`; resource equal (`res/sub` for a subresource), `*`, or `*/sub`;
/// resourceNames empty or naming the requested name (an unnamed request matches only
/// rules without names); a non-resource URL equal, `*`, or matched by a `prefix*` rule.
pub fn covers(rules: &SubjectRulesReviewStatus, p: &Permission) -> bool {
    let has = |list: &[String], want: &str| list.iter().any(|v| v == "*" || v == want);
    match p {
        Permission::Resource {
            group,
            resource,
            name,
            verb,
            ..
        } => {
            let sub = resource.split_once('/').map(|(_, s)| s);
            rules.resource_rules.iter().any(|r| {
                has(&r.verbs, verb)
                    && r.api_groups.as_deref().is_some_and(|g| has(g, group))
                    && r.resources
                        .as_deref()
                        .is_some_and(|rs| rs.iter().any(|x| resource_matches(x, resource, sub)))
                    && match r.resource_names.as_deref() {
                        None | Some([]) => true,
                        Some(names) => !name.is_empty() && names.iter().any(|n| n == name),
                    }
            })
        }
        Permission::NonResource { path, verb } => rules.non_resource_rules.iter().any(|r| {
            has(&r.verbs, verb)
                && r.non_resource_urls.as_deref().is_some_and(|urls| {
                    urls.iter().any(|u| {
                        u == "*"
                            || u == path
                            || u.strip_suffix('*').is_some_and(|pre| path.starts_with(pre))
                    })
                })
        }),
    }
}

/// RBAC's `ResourceMatches`: `*`, the exact (combined) resource, or `*/<sub>`.
fn resource_matches(rule: &str, resource: &str, sub: Option<&str>) -> bool {
    rule == "*"
        || rule == resource
        || sub.is_some_and(|s| rule.strip_prefix("*/").is_some_and(|r| r == s))
}

/// The scopes to review for `checks`: at most [`MAX_SCOPES`], those deciding most
/// checks first (ties by name, so the choice is stable).
pub fn scopes_for<'a>(checks: impl IntoIterator<Item = &'a Permission>) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in checks {
        *counts.entry(scope(p)).or_default() += 1;
    }
    let mut scopes: Vec<(&str, usize)> = counts.into_iter().collect();
    scopes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    scopes
        .into_iter()
        .take(MAX_SCOPES)
        .map(|(s, _)| s.to_owned())
        .collect()
}

/// Reviews the rules of the account behind `installer` (a client impersonating it) in
/// each of `scopes`, a few at a time. A failed review leaves its scope out.
pub async fn review(installer: &kube::Client, scopes: Vec<String>) -> Granted {
    let api: Api<SelfSubjectRulesReview> = Api::all(installer.clone());
    let reviewed: Vec<Option<(String, SubjectRulesReviewStatus)>> =
        futures::stream::iter(scopes)
            .map(|namespace| {
                let api = api.clone();
                async move {
                    let body = SelfSubjectRulesReview {
                        spec: SelfSubjectRulesReviewSpec {
                            namespace: Some(namespace.clone()),
                        },
                        ..Default::default()
                    };
                    match api.create(&PostParams::default(), &body).await {
                        Ok(out) => out.status.map(|s| (namespace, s)),
                        Err(error) => {
                            tracing::debug!(%namespace, %error, "rules review failed; SubjectAccessReviews decide its scope");
                            None
                        }
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
    Granted::new(reviewed.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authorization::v1::{NonResourceRule, ResourceRule};

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> ResourceRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        ResourceRule {
            verbs: v(verbs),
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            resource_names: Some(v(names)).filter(|n| !n.is_empty()),
        }
    }

    fn status(rules: Vec<ResourceRule>, urls: &[&str]) -> SubjectRulesReviewStatus {
        SubjectRulesReviewStatus {
            resource_rules: rules,
            non_resource_rules: vec![NonResourceRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(urls.iter().map(|u| u.to_string()).collect()),
            }],
            incomplete: false,
            evaluation_error: None,
        }
    }

    #[test]
    fn matches_like_the_rbac_authorizer() {
        let rules = status(
            vec![
                rule(&["get", "update"], &[""], &["configmaps"], &["a"]),
                rule(&["create"], &[""], &["configmaps"], &[]),
                rule(&["*"], &["apps"], &["deployments", "*/scale"], &[]),
                rule(
                    &["update"],
                    &["olm.operatorframework.io"],
                    &["clusterextensions/finalizers"],
                    &["e"],
                ),
            ],
            &["/metrics", "/healthz/*"],
        );
        let cm = |name: &str, verb: &str| Permission::resource("ns", "", "configmaps", name, verb);
        assert!(covers(&rules, &cm("a", "get")));
        assert!(!covers(&rules, &cm("b", "get")), "another name");
        assert!(
            !covers(&rules, &cm("", "get")),
            "unnamed request, named rule"
        );
        assert!(
            covers(&rules, &cm("x", "create")),
            "unnamed rule covers every name"
        );
        assert!(!covers(&rules, &cm("a", "delete")));
        let apps = |res: &str, verb: &str| Permission::resource("ns", "apps", res, "", verb);
        assert!(covers(&rules, &apps("deployments", "patch")));
        assert!(
            covers(&rules, &apps("statefulsets/scale", "get")),
            "*/scale"
        );
        assert!(!covers(&rules, &apps("deployments/status", "get")));
        assert!(
            !covers(
                &rules,
                &Permission::resource("ns", "", "deployments", "", "get")
            ),
            "group"
        );
        let fin = |name: &str| {
            Permission::resource(
                "",
                "olm.operatorframework.io",
                "clusterextensions/finalizers",
                name,
                "update",
            )
        };
        assert!(covers(&rules, &fin("e")));
        assert!(!covers(&rules, &fin("f")));
        let url = |path: &str, verb: &str| Permission::NonResource {
            path: path.into(),
            verb: verb.into(),
        };
        assert!(covers(&rules, &url("/metrics", "get")));
        assert!(covers(&rules, &url("/healthz/ready", "get")), "prefix*");
        assert!(!covers(&rules, &url("/metrics", "post")));
        assert!(!covers(&rules, &url("/metricsx", "get")));
    }

    #[test]
    fn cluster_scoped_and_namespaced_permissions_are_decided_in_their_own_scope() {
        let all = status(vec![rule(&["*"], &["*"], &["*"], &[])], &["*"]);
        let granted = Granted::new([("ns".to_string(), all)].into_iter().collect());
        assert!(granted.allows(&Permission::resource("ns", "", "secrets", "", "get")));
        // A RoleBinding in "ns" grants nothing cluster-wide: its rules do not decide.
        assert!(!granted.allows(&Permission::resource("", "", "namespaces", "", "get")));
        assert!(!granted.allows(&Permission::NonResource {
            path: "/metrics".into(),
            verb: "get".into()
        }));
        assert!(!granted.allows(&Permission::resource("other", "", "secrets", "", "get")));
    }

    #[test]
    fn scopes_are_bounded_and_busiest_first() {
        let mut checks: Vec<Permission> = (0..20)
            .map(|i| Permission::resource(&format!("ns-{i:02}"), "", "configmaps", "", "get"))
            .collect();
        checks.extend(
            (0..3).map(|i| Permission::resource("", "", "namespaces", &format!("n{i}"), "get")),
        );
        checks.push(Permission::resource("ns-19", "", "secrets", "", "get"));
        let scopes = scopes_for(&checks);
        assert_eq!(scopes.len(), MAX_SCOPES);
        assert_eq!(scopes[0], CLUSTER_SCOPE);
        assert_eq!(scopes[1], "ns-19");
        assert_eq!(scopes[2], "ns-00");
    }
}
