//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]), health probes
//! ([`health`]), TLS serving ([`tls`]) and metrics.

pub mod catalog;
pub mod health;
pub mod tls;
