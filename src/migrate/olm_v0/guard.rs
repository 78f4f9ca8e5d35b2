//! The guard `migrate convert` leaves behind on a switched package
//! (docs/how-to/switch-from-olm-v0.md, "After the switch"): a ValidatingAdmissionPolicy
//! that refuses a Subscription for the package — created, or renamed to it — in any
//! namespace. Without it a Subscription coming back (a GitOps tool syncing the one the
//! switch deleted, a script, OLM v0 resolving a dependency on the package) has OLM v0
//! install the package a second time beside its ClusterExtension: a second Deployment,
//! and a CSV owning the CRDs the ClusterExtension owns.
//!
//! Raised before the convert deletes the Subscription; once the ClusterExtension exists
//! it becomes the guard's owner (an ownerReference), so that uninstalling the
//! ClusterExtension lets garbage collection remove the guard with it. `migrate
//! rollback` removes it before it re-creates the Subscription. Identity-free, as the
//! fence ([`super::fence`]): any account's Subscription is refused, the message says
//! what to do instead. Needs Kubernetes 1.30 (the same API as the fence); before that
//! convert says that nothing guards the package. Pure: the objects; the command line
//! applies and deletes them.

use super::fence::{API_VERSION, BINDING_KIND, POLICY_KIND, quoted, subdomain};
use serde_json::{Value, json};

/// The label on the guard's objects (value: the package).
pub const GUARD_LABEL: &str = "olm.operatorframework.io/migrated-package";

/// What the guard protects and who owns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard<'a> {
    /// The package switched to OLM v1.
    pub package: &'a str,
    /// The Subscription it replaced (`<namespace>/<name>`).
    pub subscription: &'a str,
    /// The ClusterExtension that installs the package now.
    pub extension: &'a str,
    /// The ClusterExtension's UID, once it exists (the guard's owner).
    pub extension_uid: Option<&'a str>,
}

/// The name of the guard (policy and binding) of `package`.
pub fn name(package: &str) -> String {
    subdomain(format!("olmv1-migrated-package.{package}"))
}

/// The policy and its binding.
pub fn objects(g: &Guard<'_>) -> (Value, Value) {
    let name = name(g.package);
    let package = quoted(g.package);
    let message = format!(
        "package {} is installed by ClusterExtension {} (switched from OLM v0's Subscription {} by `olmv1 migrate convert`): a Subscription would have OLM v0 install it a second time. To hand it back to OLM v0 run `olmv1 migrate rollback {}`; to install it with OLM v0 anew, delete ClusterExtension {} first",
        g.package, g.extension, g.subscription, g.subscription, g.extension
    );
    let mut metadata = json!({"name": name, "labels": {GUARD_LABEL: g.package}});
    if let Some(uid) = g.extension_uid {
        metadata["ownerReferences"] = json!([{
            "apiVersion": crate::apply::ownership::OWNER_API_VERSION,
            "kind": crate::apply::ownership::OWNER_KIND,
            "name": g.extension,
            "uid": uid,
        }]);
    }
    let policy = json!({
        "apiVersion": API_VERSION,
        "kind": POLICY_KIND,
        "metadata": metadata,
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["operators.coreos.com"], "apiVersions": ["*"],
                "resources": ["subscriptions"], "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }]},
            "variables": [
                {"name": "now", "expression": format!(
                    "has(object.spec) && has(object.spec.name) && object.spec.name == {package}")},
                {"name": "before", "expression": format!(
                    "oldObject != null && has(oldObject.spec) && has(oldObject.spec.name) && oldObject.spec.name == {package}")},
            ],
            "validations": [{
                "expression": "!variables.now || variables.before",
                "message": message,
                "reason": "Forbidden",
            }],
        },
    });
    let mut binding_metadata = metadata.clone();
    binding_metadata["name"] = json!(name);
    let binding = json!({
        "apiVersion": API_VERSION,
        "kind": BINDING_KIND,
        "metadata": binding_metadata,
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    });
    (policy, binding)
}

/// The Subscription whose dry-run creation in `ns` tells whether the guard on
/// `package` is enforced yet (refused once it is).
pub fn probe(ns: &str, package: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": "olmv1-migrated-package-probe", "namespace": ns},
        "spec": {"name": package, "source": "olmv1-probe", "sourceNamespace": ns},
    })
}

/// Whether an API error refusing a Subscription is the guard's doing.
pub fn refused_by_guard(message: &str, package: &str) -> bool {
    message.contains(&name(package))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(uid: Option<&str>) -> Guard<'_> {
        Guard {
            package: "demo",
            subscription: "ops/demo",
            extension: "demo",
            extension_uid: uid,
        }
    }

    #[test]
    fn the_guard_refuses_subscriptions_of_the_package_only() {
        let (policy, binding) = objects(&guard(None));
        assert_eq!(policy["metadata"]["name"], "olmv1-migrated-package.demo");
        assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
        let rules = &policy["spec"]["matchConstraints"]["resourceRules"][0];
        assert_eq!(rules["resources"], json!(["subscriptions"]));
        assert_eq!(rules["apiGroups"], json!(["operators.coreos.com"]));
        let now = policy["spec"]["variables"][0]["expression"]
            .as_str()
            .unwrap_or_default();
        assert!(now.ends_with("object.spec.name == 'demo'"), "{now}");
        let message = policy["spec"]["validations"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains("olmv1 migrate rollback ops/demo"),
            "{message}"
        );
        assert!(policy["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn once_the_extension_exists_it_owns_the_guard() {
        let (policy, binding) = objects(&guard(Some("u-1")));
        for o in [&policy, &binding] {
            let r = &o["metadata"]["ownerReferences"][0];
            assert_eq!(r["kind"], "ClusterExtension");
            assert_eq!(r["name"], "demo");
            assert_eq!(r["uid"], "u-1");
        }
    }

    #[test]
    fn a_refusal_is_recognised_and_quotes_cannot_escape() {
        assert!(refused_by_guard(
            "ValidatingAdmissionPolicy 'olmv1-migrated-package.demo' with binding 'x' denied request",
            "demo"
        ));
        assert!(!refused_by_guard("denied", "demo"));
        assert_eq!(quoted("a'b"), "'a\\'b'");
    }
}
