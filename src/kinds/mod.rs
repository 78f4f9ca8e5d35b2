//! What this project knows about Kubernetes kinds, in one table: for every (group, kind)
//! it has an opinion on, the REST resource, whether objects are namespaced, whether a
//! registry+v1 bundle may ship it as an "other" manifest (and if the renderer moves it
//! into the install namespace), and the phase it is applied in. Bundle validation and
//! rendering, the permission preflight and the apply order all read [`KINDS`]; a kind
//! missing here is "unknown" to all of them (custom resources, discovery-only kinds).
//! [`ResourceMap`] extends the table with the kinds CRDs and discovery define. Pure
//! data and lookups; no I/O, no dependency on any other module of the crate.

/// One apply phase; phases run in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PhaseKind {
    Namespaces,
    Policies,
    ServiceAccounts,
    Config,
    Storage,
    Crds,
    Roles,
    Bindings,
    Services,
    Workloads,
    Autoscalers,
    Monitoring,
    /// Kinds this table does not know (custom resources of bundled CRDs and others).
    Other,
    Webhooks,
}

/// Whether a registry+v1 bundle may carry a kind among its "other" manifests (upstream's
/// supported-kinds lists, matched by kind alone), and where the renderer puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleOther {
    /// Rejected by validation ("unsupported resource").
    Unsupported,
    /// Accepted; the install namespace is forced on it.
    InstallNamespace,
    /// Accepted as it is (upstream's cluster-scoped list).
    AsIs,
}

/// One row of [`KINDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// API group (`""` for the core group).
    pub group: &'static str,
    pub kind: &'static str,
    /// The plural REST resource, when the offline resource map of the permission
    /// preflight knows the kind without discovery.
    pub resource: Option<&'static str>,
    pub namespaced: bool,
    pub bundle_other: BundleOther,
    pub phase: PhaseKind,
}

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";
const MONITORING: &str = "monitoring.coreos.com";
const CERT_MANAGER: &str = "cert-manager.io";
const CONSOLE: &str = "console.openshift.io";

const fn row(
    group: &'static str,
    kind: &'static str,
    resource: Option<&'static str>,
    namespaced: bool,
    bundle_other: BundleOther,
    phase: PhaseKind,
) -> KindInfo {
    KindInfo {
        group,
        kind,
        resource,
        namespaced,
        bundle_other,
        phase,
    }
}

mod resources;

pub use resources::{ResourceInfo, ResourceMap, guess_plural, kind_of, split_api_version};

use BundleOther::{AsIs, InstallNamespace as InNs, Unsupported as No};
use PhaseKind as P;

/// Every kind this project knows, one row each.
#[rustfmt::skip]
pub const KINDS: &[KindInfo] = &[
    //  group                    kind                                resource                                  namespaced other phase
    row("",                      "Namespace",                        Some("namespaces"),                        false, No,   P::Namespaces),
    row("",                      "ServiceAccount",                   Some("serviceaccounts"),                   true,  InNs, P::ServiceAccounts),
    row("",                      "Secret",                           Some("secrets"),                           true,  InNs, P::Config),
    row("",                      "ConfigMap",                        Some("configmaps"),                        true,  InNs, P::Config),
    row("",                      "Service",                          Some("services"),                          true,  InNs, P::Services),
    row("",                      "PersistentVolume",                 Some("persistentvolumes"),                 false, No,   P::Storage),
    row("",                      "PersistentVolumeClaim",            Some("persistentvolumeclaims"),            true,  No,   P::Storage),
    row("",                      "ResourceQuota",                    Some("resourcequotas"),                    true,  No,   P::Policies),
    row("",                      "LimitRange",                       Some("limitranges"),                       true,  No,   P::Policies),
    row("",                      "Pod",                              Some("pods"),                              true,  No,   P::Workloads),
    row("",                      "Endpoints",                        Some("endpoints"),                         true,  No,   P::Other),
    row("apps",                  "Deployment",                       Some("deployments"),                       true,  No,   P::Workloads),
    row("apps",                  "StatefulSet",                      Some("statefulsets"),                      true,  No,   P::Workloads),
    row("apps",                  "DaemonSet",                        Some("daemonsets"),                        true,  No,   P::Workloads),
    row("apps",                  "ReplicaSet",                       Some("replicasets"),                       true,  No,   P::Workloads),
    row("batch",                 "Job",                              Some("jobs"),                              true,  No,   P::Workloads),
    row("batch",                 "CronJob",                          Some("cronjobs"),                          true,  No,   P::Workloads),
    row(RBAC,                    "ClusterRole",                      Some("clusterroles"),                      false, AsIs, P::Roles),
    row(RBAC,                    "ClusterRoleBinding",               Some("clusterrolebindings"),               false, AsIs, P::Bindings),
    row(RBAC,                    "Role",                             Some("roles"),                             true,  InNs, P::Roles),
    row(RBAC,                    "RoleBinding",                      Some("rolebindings"),                      true,  InNs, P::Bindings),
    row("apiextensions.k8s.io",  "CustomResourceDefinition",         Some("customresourcedefinitions"),         false, No,   P::Crds),
    row(ADMISSION,               "ValidatingWebhookConfiguration",   Some("validatingwebhookconfigurations"),   false, No,   P::Webhooks),
    row(ADMISSION,               "MutatingWebhookConfiguration",     Some("mutatingwebhookconfigurations"),     false, No,   P::Webhooks),
    row(ADMISSION,               "ValidatingAdmissionPolicy",        Some("validatingadmissionpolicies"),       false, No,   P::Webhooks),
    row(ADMISSION,               "ValidatingAdmissionPolicyBinding", Some("validatingadmissionpolicybindings"), false, No,   P::Webhooks),
    row("apiregistration.k8s.io", "APIService",                      Some("apiservices"),                       false, No,   P::Webhooks),
    row("scheduling.k8s.io",     "PriorityClass",                    Some("priorityclasses"),                   false, AsIs, P::Policies),
    row("storage.k8s.io",        "StorageClass",                     Some("storageclasses"),                    false, No,   P::Storage),
    row("networking.k8s.io",     "NetworkPolicy",                    Some("networkpolicies"),                   true,  InNs, P::Policies),
    row("networking.k8s.io",     "Ingress",                          Some("ingresses"),                         true,  No,   P::Other),
    row("policy",                "PodDisruptionBudget",              Some("poddisruptionbudgets"),              true,  InNs, P::Policies),
    row("policy",                "PodSecurityPolicy",                None,                                      false, No,   P::Policies),
    row("autoscaling",           "HorizontalPodAutoscaler",          Some("horizontalpodautoscalers"),          true,  No,   P::Autoscalers),
    // Namespaced in the API, but on upstream's cluster-scoped list of bundle kinds.
    row("autoscaling.k8s.io",    "VerticalPodAutoscaler",            Some("verticalpodautoscalers"),            true,  AsIs, P::Autoscalers),
    row(MONITORING,              "ServiceMonitor",                   Some("servicemonitors"),                   true,  InNs, P::Monitoring),
    row(MONITORING,              "PodMonitor",                       Some("podmonitors"),                       true,  InNs, P::Monitoring),
    row(MONITORING,              "PrometheusRule",                   Some("prometheusrules"),                   true,  InNs, P::Monitoring),
    row(CERT_MANAGER,            "Certificate",                      Some("certificates"),                      true,  No,   P::Services),
    row(CERT_MANAGER,            "Issuer",                           Some("issuers"),                           true,  No,   P::Services),
    row(CERT_MANAGER,            "ClusterIssuer",                    Some("clusterissuers"),                    false, No,   P::Services),
    row(CONSOLE,                 "ConsoleYAMLSample",                Some("consoleyamlsamples"),                false, AsIs, P::Other),
    row(CONSOLE,                 "ConsoleQuickStart",                Some("consolequickstarts"),                false, AsIs, P::Other),
    row(CONSOLE,                 "ConsoleCLIDownload",               Some("consoleclidownloads"),               false, AsIs, P::Other),
    row(CONSOLE,                 "ConsoleLink",                      Some("consolelinks"),                      false, AsIs, P::Other),
    row(CONSOLE,                 "ConsolePlugin",                    Some("consoleplugins"),                    false, AsIs, P::Other),
    row("operators.coreos.com",  "ClusterServiceVersion",            None,                                      true,  InNs, P::Other),
];

/// Groups whose every kind, listed in [`KINDS`] or not, is applied in one phase.
const GROUP_PHASES: &[(&str, PhaseKind)] = &[(MONITORING, PhaseKind::Monitoring)];

/// The row of (group, kind), if the table has one.
pub fn lookup(group: &str, kind: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.group == group && k.kind == kind)
}

/// The apply phase of a (group, kind); [`PhaseKind::Other`] for unknown kinds.
pub fn phase_of(group: &str, kind: &str) -> PhaseKind {
    if let Some(row) = lookup(group, kind) {
        return row.phase;
    }
    GROUP_PHASES
        .iter()
        .find(|(g, _)| *g == group)
        .map_or(PhaseKind::Other, |(_, p)| *p)
}

/// Whether a bundle may ship `kind` as an "other" manifest; matched by kind alone, as
/// upstream does.
pub fn bundle_other(kind: &str) -> BundleOther {
    KINDS
        .iter()
        .find(|k| k.kind == kind && k.bundle_other != BundleOther::Unsupported)
        .map_or(BundleOther::Unsupported, |k| k.bundle_other)
}

/// Kubernetes' own API groups and the version each has served, unchanged, since at
/// least v1.22 (the oldest cluster this project supports is newer): a kind of
/// [`KINDS`] in one of them, at that version, is served on every cluster.
const GA_VERSIONS: &[(&str, &str)] = &[
    ("", "v1"),
    ("apps", "v1"),
    ("batch", "v1"),
    (RBAC, "v1"),
    ("apiextensions.k8s.io", "v1"),
    ("apiregistration.k8s.io", "v1"),
    ("scheduling.k8s.io", "v1"),
    ("storage.k8s.io", "v1"),
    ("networking.k8s.io", "v1"),
    ("policy", "v1"),
    (ADMISSION, "v1"),
];

/// Kinds of Kubernetes' own groups that became GA later than [`GA_VERSIONS`] says.
const LATE_GA: &[&str] = &[
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// (resource, namespaced) of a kind every API server serves at `version` (its group's
/// GA version, [`GA_VERSIONS`]): what discovery would answer, without asking it.
/// `None` for every other kind and version (discovery decides).
pub fn served_everywhere(group: &str, version: &str, kind: &str) -> Option<(&'static str, bool)> {
    if LATE_GA.contains(&kind) || !GA_VERSIONS.contains(&(group, version)) {
        return None;
    }
    let row = lookup(group, kind)?;
    row.resource.map(|r| (r, row.namespaced))
}

/// The kinds the offline resource map knows: (group, kind, resource, namespaced).
pub fn builtin_resources() -> impl Iterator<Item = (&'static str, &'static str, &'static str, bool)>
{
    KINDS
        .iter()
        .filter_map(|k| k.resource.map(|r| (k.group, k.kind, r, k.namespaced)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn kinds_served_everywhere_need_no_discovery() {
        assert_eq!(
            served_everywhere("apps", "v1", "Deployment"),
            Some(("deployments", true))
        );
        assert_eq!(
            served_everywhere(RBAC, "v1", "ClusterRole"),
            Some(("clusterroles", false))
        );
        assert_eq!(served_everywhere("apps", "v1beta1", "Deployment"), None);
        assert_eq!(
            served_everywhere(ADMISSION, "v1", "ValidatingAdmissionPolicy"),
            None
        );
        assert_eq!(served_everywhere(MONITORING, "v1", "ServiceMonitor"), None);
        assert_eq!(served_everywhere("policy", "v1", "PodSecurityPolicy"), None);
        assert_eq!(served_everywhere("", "v1", "Widget"), None);
    }

    #[test]
    fn one_row_per_group_and_kind() {
        let mut seen = HashSet::new();
        for k in KINDS {
            assert!(
                seen.insert((k.group, k.kind)),
                "{}/{} twice",
                k.group,
                k.kind
            );
        }
    }

    #[test]
    fn bundle_kinds_are_matched_by_kind_alone() {
        assert_eq!(bundle_other("Secret"), BundleOther::InstallNamespace);
        assert_eq!(bundle_other("ClusterRole"), BundleOther::AsIs);
        assert_eq!(bundle_other("Deployment"), BundleOther::Unsupported);
        assert_eq!(bundle_other("Widget"), BundleOther::Unsupported);
    }

    #[test]
    fn whole_groups_have_a_phase() {
        assert_eq!(phase_of(MONITORING, "Alertmanager"), PhaseKind::Monitoring);
        assert_eq!(phase_of("example.com", "Widget"), PhaseKind::Other);
    }
}
