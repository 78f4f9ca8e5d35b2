//! The fence `migrate convert` raises around a CSV while it unties OLM v0's objects from
//! it (olm-v0 reference §3.3): a ValidatingAdmissionPolicy, enforced by the API server
//! itself, that refuses any write tying an object to that CSV again — creating an
//! object with OLM v0's owner labels or an ownerReference to the CSV, or adding either
//! to an object that lacks it.
//!
//! Why: untying is what OLM v0 watches for. olm-operator sees its Deployment, webhook
//! configurations or bindings lose their `olm.owner` labels, marks the CSV failed and
//! installs it again — a full update of the Deployment with the CSV's ownerReference
//! back, new webhook configurations, the ServiceAccount re-owned. When such a write
//! lands after the CSV is deleted, the garbage collector finds an ownerReference to an
//! owner that no longer exists and deletes the object: the operator's Deployment goes
//! and its pods restart (seen with the real OLM v0 under load, e2e/migrate_v0.rs).
//! Identity-free on purpose: OLM v0 runs under any account; nobody else ties objects to
//! a CSV, and the writes of the untie itself (removing the ties) and of the garbage
//! collector (removing ownerReferences) pass. The convert lowers the fence once the
//! CSV is gone; `rollback` and `cleanup` lower one left by an interrupted convert.
//!
//! Pure: the objects and the probe; the command line creates, probes and deletes.

use serde_json::{Value, json};

/// The API of the fence's objects (GA since Kubernetes 1.30).
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";
pub const POLICY_KIND: &str = "ValidatingAdmissionPolicy";
pub const BINDING_KIND: &str = "ValidatingAdmissionPolicyBinding";

/// The label on the fence's objects (value: the CSV's namespace).
pub const FENCE_LABEL: &str = "olm.operatorframework.io/migration-fence";

/// The name of the fence (policy and binding) around CSV `csv` of namespace `ns`.
pub fn name(ns: &str, csv: &str) -> String {
    subdomain(format!("olmv1-migration-fence.{ns}.{csv}"))
}

/// `name` cut to a DNS subdomain: at most 253 characters (a namespace ≤ 63, a CSV or
/// package name ≤ 253), not ending in `.` or `-` (also the guard's, [`super::guard`]).
pub(super) fn subdomain(mut name: String) -> String {
    name.truncate(253);
    name.trim_end_matches(['.', '-']).to_string()
}

/// A CEL string literal of `s` (names and namespaces are DNS names; quoted anyway).
pub(super) fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The CEL expression: `o` (an object, possibly null) is tied to the CSV.
fn tied(o: &str, ns: &str, csv: &str) -> String {
    let (csv, ns) = (quoted(csv), quoted(ns));
    format!(
        "({o} != null && ((has({o}.metadata.labels) && 'olm.owner' in {o}.metadata.labels \
         && {o}.metadata.labels['olm.owner'] == {csv} \
         && 'olm.owner.namespace' in {o}.metadata.labels \
         && {o}.metadata.labels['olm.owner.namespace'] == {ns}) \
         || (has({o}.metadata.ownerReferences) && {o}.metadata.ownerReferences.exists(r, \
         r.kind == 'ClusterServiceVersion' && r.name == {csv}))))"
    )
}

/// The policy and its binding around CSV `csv` of namespace `ns`.
pub fn objects(ns: &str, csv: &str) -> (Value, Value) {
    let name = name(ns, csv);
    let labels = json!({ FENCE_LABEL: ns });
    let message = format!(
        "olmv1 migrate convert is switching the operator of CSV {ns}/{csv} to OLM v1: \
         nothing may tie an object to that CSV again meanwhile (the convert removes this \
         {POLICY_KIND} {name} at its end; `olmv1 migrate rollback` removes it too)"
    );
    let policy = json!({
        "apiVersion": API_VERSION,
        "kind": POLICY_KIND,
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "*",
            }]},
            // Cheap filter first: only objects carrying any OLM v0 tie are evaluated.
            "matchConditions": [{
                "name": "carries-an-olm-v0-tie",
                "expression": "(has(object.metadata.labels) && 'olm.owner' in object.metadata.labels) \
                    || (has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, r.kind == 'ClusterServiceVersion'))",
            }],
            "variables": [
                {"name": "tied", "expression": tied("object", ns, csv)},
                {"name": "wasTied", "expression": tied("oldObject", ns, csv)},
            ],
            "validations": [{
                "expression": "!variables.tied || variables.wasTied",
                "message": message,
                "reason": "Forbidden",
            }],
        },
    });
    let binding = json!({
        "apiVersion": API_VERSION,
        "kind": BINDING_KIND,
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    });
    (policy, binding)
}

/// The object whose dry-run creation tells whether the fence is enforced yet: a
/// ConfigMap in `ns` tied to the CSV by OLM v0's labels (refused once it is).
pub fn probe(ns: &str, csv: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "olmv1-migration-fence-probe",
            "namespace": ns,
            "labels": super::convert::owner_labels(csv, ns),
        },
    })
}

/// Whether an API error refusing the probe is the fence's doing.
pub fn refused_by_fence(message: &str, ns: &str, csv: &str) -> bool {
    message.contains(&name(ns, csv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_is_named_for_the_csv_and_bound_to_deny() {
        let (policy, binding) = objects("ops", "op.v1.0.0");
        assert_eq!(
            policy["metadata"]["name"],
            "olmv1-migration-fence.ops.op.v1.0.0"
        );
        assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
        assert_eq!(policy["metadata"]["labels"][FENCE_LABEL], "ops");
        let rules = &policy["spec"]["matchConstraints"]["resourceRules"][0];
        assert_eq!(rules["operations"], json!(["CREATE", "UPDATE"]));
    }

    #[test]
    fn the_expressions_name_exactly_this_csv_and_namespace() {
        let (policy, _) = objects("ops", "op.v1.0.0");
        let tied = policy["spec"]["variables"][0]["expression"]
            .as_str()
            .unwrap_or_default();
        assert!(
            tied.contains("labels['olm.owner'] == 'op.v1.0.0'"),
            "{tied}"
        );
        assert!(
            tied.contains("labels['olm.owner.namespace'] == 'ops'"),
            "{tied}"
        );
        assert!(tied.contains("r.name == 'op.v1.0.0'"), "{tied}");
        let was = policy["spec"]["variables"][1]["expression"]
            .as_str()
            .unwrap_or_default();
        assert!(was.starts_with("(oldObject != null"), "{was}");
    }

    #[test]
    fn a_long_name_is_cut_to_a_dns_subdomain() {
        let csv = "a".repeat(250);
        let n = name("ns", &csv);
        assert_eq!(n.len(), 253);
        assert!(!n.ends_with('.'));
    }

    #[test]
    fn quotes_in_names_cannot_escape_the_literal() {
        assert_eq!(quoted("a'b"), "'a\\'b'");
    }

    #[test]
    fn the_probe_carries_the_ties_and_the_refusal_is_recognised() {
        let p = probe("ops", "op.v1.0.0");
        assert_eq!(p["metadata"]["labels"]["olm.owner"], "op.v1.0.0");
        let msg = "admission webhook denied: ValidatingAdmissionPolicy 'olmv1-migration-fence.ops.op.v1.0.0' with binding 'x' denied request";
        assert!(refused_by_fence(msg, "ops", "op.v1.0.0"));
        assert!(!refused_by_fence(msg, "ops", "other.v1"));
    }
}
