//! The integration tests: one binary, one module per area (`tests/<area>.rs`), the
//! harness in `support` compiled once. `hack/test.sh integration` runs each area in a
//! process of its own: an area's tests share the real control plane (etcd,
//! kube-apiserver with RBAC, kube-controller-manager), registries and controller that
//! `support` starts on first use in that process, as a test binary of its own did
//! (docs/design/tests.md). One area by hand: `cargo test --test integration <area>::`.

mod support;

mod admission;
mod admission_policy;
mod api_services;
mod apply;
mod argo_health;
mod bundles;
mod catalog_coverage;
mod catalogs;
mod cert_manager;
mod chart;
mod cli_status;
mod crd_safety;
mod dependencies;
mod deploy;
mod docs;
mod drift;
mod fuzz_cost;
mod fuzz_replay;
mod house;
mod install_namespace;
mod lease;
mod metrics;
mod migrate_v0;
mod mirrors;
mod operations;
mod operator_condition;
mod prereqs;
mod quiet_start;
mod rbac;
mod release;
mod resolve;
mod rollback;
mod scale;
mod secrets;
mod signatures;
mod switch;
mod upgrade_control;
mod upstream_ha;
mod upstream_roles;
mod yaml_bombs;
