//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]), optional TLS for
//! it ([`tls`]), and health probes ([`health`]).

pub mod catalog;
pub mod health;
pub mod tls;
