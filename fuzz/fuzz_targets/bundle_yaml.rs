//! The bundle loader's YAML reading, differentially: whenever the event-level fast path
//! returns documents, the full deserializer (bounded by `olmv1::yaml`) must accept the
//! same text and return the same values. Also exercises the alias-bomb guard.
//!
//! The body is `olmv1::fuzzing::bundle_yaml` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::bundle_yaml(data));
