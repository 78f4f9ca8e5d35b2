//! registry+v1 bundle loading, validation and rendering. The input is split on lines
//! `@@@`: the first part is `metadata/annotations.yaml`, the second (when not empty)
//! `metadata/properties.yaml`, every further part one file in `manifests/`.
//!
//! The body is `olmv1::fuzzing::bundle_load` (shared with the un-instrumented replay in
//! `tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| olmv1::fuzzing::bundle_load(data));
