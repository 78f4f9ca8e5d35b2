//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]) and optional TLS
//! for it ([`tls`]); health probes and metrics are added beside them.

pub mod catalog;
pub mod tls;
