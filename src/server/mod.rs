//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]), optional TLS for
//! it ([`tls`]) and health probes ([`health`]); the Prometheus metrics are
//! [`crate::metrics`].

pub mod catalog;
pub mod health;
pub mod tls;
