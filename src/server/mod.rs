//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]), optional TLS for
//! it ([`tls`]), health probes ([`health`]) and Prometheus metrics ([`metrics`]).

pub mod catalog;
pub mod health;
pub mod metrics;
pub mod tls;
