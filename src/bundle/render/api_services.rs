//! Section 10 of rendering: owned APIServices (aggregated API servers), as OLM v0's
//! `install/apiservice.go` and `install/certresources.go` install them. Per
//! `spec.apiservicedefinitions.owned[]` one `apiregistration.k8s.io/v1` APIService
//! `<version>.<group>` pointing at the deployment's Service (rendered with the webhook
//! Services, [`super::webhooks::services_and_certificates`]) with the CA injected by the
//! certificate provider; per serving deployment the ClusterRoleBinding
//! `<service>-system:auth-delegator` and the RoleBinding `<service>-auth-reader` in
//! `kube-system` that let an aggregated server delegate authentication and authorization.

use super::{Ctx, inject_ca, object, sa_name_or_default, webhook_service_name};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// OLM v0's `groupPriorityMinimum` and `versionPriority` for the APIServices it creates.
const GROUP_PRIORITY_MINIMUM: i32 = 2000;
const VERSION_PRIORITY: i32 = 15;
/// Where OLM v0 binds an aggregated server's account for authentication reviews.
pub const KUBE_SYSTEM: &str = "kube-system";
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";
pub const AUTH_READER_ROLE: &str = "extension-apiserver-authentication-reader";

/// `<service>-system:auth-delegator` (OLM v0 `AuthDelegatorClusterRoleBindingName`).
pub fn auth_delegator_binding_name(service: &str) -> String {
    format!("{service}-system:auth-delegator")
}

/// `<service>-auth-reader` (OLM v0 `AuthReaderRoleBindingName`).
pub fn auth_reader_binding_name(service: &str) -> String {
    format!("{service}-auth-reader")
}

/// 10. The APIServices and the bindings of their serving deployments' accounts.
pub(super) fn objects(ctx: &Ctx<'_>, out: &mut Vec<Value>) {
    let mut deployments: BTreeSet<&str> = BTreeSet::new();
    for a in ctx.api_services() {
        let svc = webhook_service_name(&a.deployment_name);
        let mut api = Value::Object(object(
            "apiregistration.k8s.io/v1",
            "APIService",
            &a.api_service_name(),
            None,
        ));
        api["spec"] = json!({
            "group": a.group,
            "version": a.version,
            "groupPriorityMinimum": GROUP_PRIORITY_MINIMUM,
            "versionPriority": VERSION_PRIORITY,
            "service": {"namespace": ctx.ns, "name": svc, "port": a.port()},
        });
        inject_ca(ctx, &mut api, &svc);
        out.push(api);
        deployments.insert(a.deployment_name.as_str());
    }
    for d in ctx
        .strategy()
        .deployments
        .iter()
        .filter(|d| deployments.contains(d.name.as_str()))
    {
        let svc = webhook_service_name(&d.name);
        let sa = sa_name_or_default(
            d.spec
                .pointer("/template/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let subjects = json!([{"kind": "ServiceAccount", "name": sa, "namespace": ctx.ns}]);
        let mut crb = Value::Object(object(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            &auth_delegator_binding_name(&svc),
            None,
        ));
        crb["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AUTH_DELEGATOR_CLUSTER_ROLE});
        crb["subjects"] = subjects.clone();
        out.push(crb);
        let mut rb = Value::Object(object(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            &auth_reader_binding_name(&svc),
            Some(KUBE_SYSTEM),
        ));
        rb["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AUTH_READER_ROLE});
        rb["subjects"] = subjects;
        out.push(rb);
    }
}
