//! HTTP servers: the catalogd-compatible catalog API, health probes and metrics.

pub mod health;
pub mod tls;
