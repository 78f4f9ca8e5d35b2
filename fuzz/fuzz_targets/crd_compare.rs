//! CRD reading and upgrade-safety comparison: the input is two CRDs (YAML or JSON)
//! separated by a line `====`; the first is the live CRD, the second the new one. Both
//! the comparison and its message must complete for any pair that parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olmv1::preflight::crd_safety::{check, message, parse_crd};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (old, new) = text.split_once("\n====\n").unwrap_or((text, text));
    let (Ok(old), Ok(new)) = (parse_crd(old), parse_crd(new)) else {
        return;
    };
    let findings = check(&old, &new);
    let _ = message(&old.metadata.name.clone().unwrap_or_default(), &findings);
    let _ = check(&new, &old);
});
