//! The bundle loader's YAML reading, differentially: whenever the event-level fast path
//! returns documents, the full deserializer (bounded by `olmv1::yaml`) must accept the
//! same text and return the same values. Also exercises the alias-bomb guard.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::bundle::LoadOptions;
use olmv1::bundle::fuzz_api::{fast_documents, full_documents};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = LoadOptions {
        max_file_bytes: 1 << 20,
        max_yaml_nodes: 100_000,
        ..LoadOptions::default()
    };
    let full = full_documents(text, &opts);
    if let Some(fast) = fast_documents(text, &opts) {
        match full {
            Ok(full) => assert_eq!(fast, full, "fast path and deserializer disagree"),
            Err(e) => panic!("fast path accepted what the deserializer refuses: {e}"),
        }
    }
    let _ = olmv1::yaml::check_aliases(text);
});
