//! HTTP servers: the catalogd-compatible catalog API ([`catalog`]), health probes and metrics.

pub mod catalog;
