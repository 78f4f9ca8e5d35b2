//! The catalog HTTP API over a small stored catalog: the first line of the input is the
//! request target (path and query), the next lines are `Name: value` headers; a leading
//! `HEAD ` selects HEAD. Invariant: no request makes the server fail (5xx).
//!
//! The body is `olmv1::fuzzing::catalog_query` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::catalog_query(data));
