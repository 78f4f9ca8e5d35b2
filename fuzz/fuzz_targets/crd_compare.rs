//! CRD reading and upgrade-safety comparison: the input is two CRDs (YAML or JSON)
//! separated by a line `====`; the first is the live CRD, the second the new one. Both
//! the comparison and its message must complete for any pair that parses.
//!
//! The body is `olmv1::fuzzing::crd_compare` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::crd_compare(data));
