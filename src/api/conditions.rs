//! Condition vocabulary (types and reasons of docs/reference/api-and-status.md §2) and helpers to set
//! conditions the way `meta.SetStatusCondition` does: lastTransitionTime changes only
//! when the status flips, and messages are capped and stripped of volatile parts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::{Schema, SchemaGenerator, json_schema};

pub const TYPE_INSTALLED: &str = "Installed";
pub const TYPE_PROGRESSING: &str = "Progressing";
pub const TYPE_DEPRECATED: &str = "Deprecated";
pub const TYPE_PACKAGE_DEPRECATED: &str = "PackageDeprecated";
pub const TYPE_CHANNEL_DEPRECATED: &str = "ChannelDeprecated";
pub const TYPE_BUNDLE_DEPRECATED: &str = "BundleDeprecated";
pub const TYPE_SERVING: &str = "Serving";

pub const REASON_SUCCEEDED: &str = "Succeeded";
pub const REASON_FAILED: &str = "Failed";
pub const REASON_ABSENT: &str = "Absent";
pub const REASON_RETRYING: &str = "Retrying";
pub const REASON_BLOCKED: &str = "Blocked";
pub const REASON_INVALID_CONFIGURATION: &str = "InvalidConfiguration";
pub const REASON_ROLLING_OUT: &str = "RollingOut";
pub const REASON_PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
pub const REASON_DEPRECATED: &str = "Deprecated";
pub const REASON_NOT_DEPRECATED: &str = "NotDeprecated";
pub const REASON_DEPRECATION_STATUS_UNKNOWN: &str = "DeprecationStatusUnknown";
pub const REASON_AVAILABLE: &str = "Available";
pub const REASON_UNAVAILABLE: &str = "Unavailable";
pub const REASON_USER_SPECIFIED_UNAVAILABLE: &str = "UserSpecifiedUnavailable";

/// Longest condition message; longer ones are cut and end with [`TRUNCATION_SUFFIX`].
pub const MAX_MESSAGE_BYTES: usize = 32768;
pub const TRUNCATION_SUFFIX: &str = "\n\n... [message truncated]";

/// Caps a message at [`MAX_MESSAGE_BYTES`] (on a char boundary) and removes the
/// `read|write tcp|udp <ip:port>-><ip:port>: ` parts of network errors so that
/// retries do not change the message.
pub fn sanitize_message(message: &str) -> String {
    let cleaned = strip_socket_addresses(message);
    if cleaned.len() <= MAX_MESSAGE_BYTES {
        return cleaned;
    }
    let mut cut = MAX_MESSAGE_BYTES - TRUNCATION_SUFFIX.len();
    while !cleaned.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{}", &cleaned[..cut], TRUNCATION_SUFFIX)
}

fn strip_socket_addresses(message: &str) -> String {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PATTERN.get_or_init(|| {
        regex::Regex::new(r"(read|write) (tcp|udp) [^ ]+->[^ ]+: ").expect("static regex")
    });
    re.replace_all(message, "").into_owned()
}

/// Sets (adds or replaces) a condition. `lastTransitionTime` is kept when the status
/// does not change; returns true when anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) -> bool {
    new.message = sanitize_message(&new.message);
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            new.last_transition_time = if existing.status == new.status {
                existing.last_transition_time.clone()
            } else {
                now
            };
            if *existing == new {
                return false;
            }
            *existing = new;
            true
        }
        None => {
            new.last_transition_time = now;
            conditions.push(new);
            true
        }
    }
}

/// Finds a condition by type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Builds a condition (transition time is filled in by [`set_condition`]).
pub fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
    }
}

/// Like [`condition`] with status `Unknown`.
pub fn unknown(
    type_: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    Condition {
        status: "Unknown".to_string(),
        ..condition(type_, false, reason, message, generation)
    }
}

/// OpenAPI schema of a `conditions` list: a list-map keyed by `type`, each entry the
/// standard `metav1.Condition` with its upstream validation.
pub fn conditions_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string", "maxLength": 32768},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                "reason": {
                    "type": "string", "maxLength": 1024, "minLength": 1,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "type": {
                    "type": "string", "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).expect("valid"))
    }

    #[test]
    fn transition_time_only_changes_when_status_flips() {
        let mut list = Vec::new();
        assert!(set_condition(
            &mut list,
            condition(TYPE_INSTALLED, false, REASON_ABSENT, "a", Some(1)),
            t(10)
        ));
        assert!(set_condition(
            &mut list,
            condition(TYPE_INSTALLED, false, REASON_FAILED, "b", Some(1)),
            t(20)
        ));
        assert_eq!(list[0].last_transition_time, t(10));
        assert!(!set_condition(
            &mut list,
            condition(TYPE_INSTALLED, false, REASON_FAILED, "b", Some(1)),
            t(30)
        ));
        assert!(set_condition(
            &mut list,
            condition(TYPE_INSTALLED, true, REASON_SUCCEEDED, "c", Some(1)),
            t(40)
        ));
        assert_eq!(list[0].last_transition_time, t(40));
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn messages_are_capped_and_stripped() {
        let long = "x".repeat(40_000);
        let capped = sanitize_message(&long);
        assert_eq!(capped.len(), MAX_MESSAGE_BYTES);
        assert!(capped.ends_with(TRUNCATION_SUFFIX));
        let net = "Get \"https://a\": read tcp 10.0.0.1:1234->10.0.0.2:443: connection reset";
        assert_eq!(sanitize_message(net), "Get \"https://a\": connection reset");
    }
}
