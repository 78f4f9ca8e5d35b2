//! Preflight checks that run before anything is applied: CRD upgrade safety and the
//! installer ServiceAccount permission check.

pub mod crd_safety;
pub mod permissions;
