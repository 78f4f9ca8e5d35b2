//! The permission preflight's pure part: requirements of a set of manifests (bundled
//! roles sized before they are expanded) and the missing-permissions message.
//!
//! The body is `olmv1::fuzzing::permissions` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::permissions(data));
