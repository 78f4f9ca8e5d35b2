//! The end-to-end tests: one binary, one module per area (`e2e/<area>.rs`) on the
//! harness of `tests/support`. `hack/test.sh e2e` runs each area in a process of its
//! own, with its own control plane and, for most, a real node (docs/design/tests.md).
//! One area by hand: `cargo test --test e2e <area>::`.

#[path = "../tests/support/mod.rs"]
mod support;

// An aggregated API server (owned APIService) on a real node with cert-manager.
mod api_services;
mod catalogd_compat;
// The Helm chart charts/olmv1 installed with helm (hack/build-helm.sh) on a real node.
mod chart;
mod extensions;
mod extensions_crash;
mod extensions_more;
// Faults mid-flight (API server, etcd, registry restarts, throttling, cut watches):
// the control plane of its process, which the tests stop and start.
mod faults;
mod hostile_bundle;
mod installer_identity;
// OLM v0's real olm-operator and catalog-operator (hack/build-olm-v0.sh) install an
// operator on the node; `olmv1 migrate` takes it over in place and rolls back.
mod migrate_v0;
mod migrate_v0_cluster;
mod node;
// Deadline-based upgrade remediation on a real node.
mod remediation;
mod rollout;
mod rollout_idle;
mod upstream_chart;
mod webhooks;
