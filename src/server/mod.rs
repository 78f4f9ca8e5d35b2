//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]), optional TLS for
//! it ([`tls`]), the catalog server's accept loop with its connection limits ([`conn`]) and health probes ([`health`]), catalogd's mutating
//! admission webhook ([`webhook`]); the Prometheus metrics are [`crate::metrics`].

pub mod catalog;
pub mod conn;
mod gcm;
pub mod health;
pub mod tls;
pub mod webhook;
