//! Tests of the applier's pure parts.

use super::*;
use serde_json::json;

#[test]
fn established_condition() {
    let crd = json!({"status": {"conditions": [
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": "False", "message": "not yet"}]}});
    assert_eq!(established(&crd), (false, Some("not yet".into())));
    let crd = json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
    assert!(established(&crd).0);
    assert_eq!(established(&json!({})), (false, None));
}

#[test]
fn invalid_objects_are_rejected_before_any_request() {
    let err =
        refs_of(&[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})]).unwrap_err();
    assert!(matches!(err, ApplyError::InvalidObject { index: 0, .. }));
}

#[test]
fn polls_start_short_and_double_up_to_the_poll_interval() {
    let max = Duration::from_millis(100);
    let delays: Vec<u64> = (0..6)
        .map(|a| poll_delay(a, max).as_millis() as u64)
        .collect();
    assert_eq!(delays, [10, 20, 40, 80, 100, 100]);
    assert_eq!(poll_delay(u32::MAX, max), max);
    assert_eq!(poll_delay(40, max), max);
}
