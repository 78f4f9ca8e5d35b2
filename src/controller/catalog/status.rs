//! What a ClusterCatalog's status says after a reconcile (docs/concepts/catalogs.md §2.2, §9.1): a pure
//! function of the current status and the outcome of this reconcile. On errors the
//! `Serving` condition is left as it was, because previously stored content keeps
//! being served; unknown condition types are dropped.

use crate::api::ClusterCatalogStatus;
use crate::api::conditions::{self, *};
use crate::api::{ClusterCatalogUrls, ResolvedCatalogSource, ResolvedImageSource, SourceKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub const MSG_SERVING: &str = "Serving desired content from resolved source";
pub const MSG_UNPACKED: &str = "Successfully unpacked and stored content from resolved source";
pub const MSG_UNAVAILABLE: &str = "Catalog availability mode is set to Unavailable";
/// Reason of the Warning Event listing the FBC invariant violations of stored content.
pub const REASON_INVALID_CONTENT: &str = "InvalidCatalogContent";
/// Longest Event note the API server accepts (events.k8s.io/v1: 1 KiB).
const MAX_EVENT_NOTE: usize = 1024;

/// The note of the [`REASON_INVALID_CONTENT`] Event for the invariant violations of newly
/// stored content (each already `file:line: problem`), cut to what an Event holds with
/// the number of problems left out; `None` when there are none.
pub fn invariant_warnings_message(warnings: &[String]) -> Option<String> {
    if warnings.is_empty() {
        return None;
    }
    let head = format!(
        "stored and served with {} FBC invariant violation(s) (catalogd does not check them; resolution of an affected package may fail): ",
        warnings.len()
    );
    let mut message = head;
    for (i, w) in warnings.iter().enumerate() {
        let item = conditions::sanitize_message(w);
        let sep = if i == 0 { "" } else { "; " };
        let rest = warnings.len() - i;
        let more = format!("; … and {rest} more");
        if message.len() + sep.len() + item.len() + more.len() > MAX_EVENT_NOTE {
            let tail = if i == 0 {
                format!("… {rest} problem(s), too long to list")
            } else {
                more
            };
            message.push_str(&tail);
            break;
        }
        message.push_str(sep);
        message.push_str(&item);
    }
    Some(message)
}

/// The result of one reconcile of a ClusterCatalog.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// `availabilityMode: Unavailable`: content removed, nothing served.
    Unavailable,
    /// Content stored and served.
    Serving {
        resolved_ref: String,
        base_url: String,
        last_unpacked: Time,
    },
    /// Something failed; `terminal` failures are not retried until the spec changes.
    Failed { message: String, terminal: bool },
    /// The catalog is being deleted and its content is gone.
    Deleted,
}

/// The status to write after `outcome`.
pub fn next_status(
    current: &ClusterCatalogStatus,
    outcome: &Outcome,
    generation: Option<i64>,
    now: &Time,
) -> ClusterCatalogStatus {
    let mut status = current.clone();
    status
        .conditions
        .retain(|c| c.type_ == TYPE_SERVING || c.type_ == TYPE_PROGRESSING);
    let mut set = |c| {
        conditions::set_condition(&mut status.conditions, c, now.clone());
    };
    match outcome {
        Outcome::Unavailable => {
            set(condition(
                TYPE_SERVING,
                false,
                REASON_USER_SPECIFIED_UNAVAILABLE,
                MSG_UNAVAILABLE,
                generation,
            ));
            set(condition(
                TYPE_PROGRESSING,
                true,
                REASON_SUCCEEDED,
                MSG_UNAVAILABLE,
                generation,
            ));
            status.resolved_source = None;
            status.urls = None;
            status.last_unpacked = None;
        }
        Outcome::Serving {
            resolved_ref,
            base_url,
            last_unpacked,
        } => {
            set(condition(
                TYPE_SERVING,
                true,
                REASON_AVAILABLE,
                MSG_SERVING,
                generation,
            ));
            set(condition(
                TYPE_PROGRESSING,
                true,
                REASON_SUCCEEDED,
                MSG_UNPACKED,
                generation,
            ));
            status.resolved_source = Some(ResolvedCatalogSource {
                type_: SourceKind::Image,
                image: ResolvedImageSource {
                    ref_: resolved_ref.clone(),
                },
            });
            status.urls = Some(ClusterCatalogUrls {
                base: base_url.clone(),
            });
            status.last_unpacked = Some(last_unpacked.clone());
        }
        Outcome::Failed { message, terminal } => {
            let c = if *terminal {
                condition(
                    TYPE_PROGRESSING,
                    false,
                    REASON_BLOCKED,
                    message.clone(),
                    generation,
                )
            } else {
                condition(
                    TYPE_PROGRESSING,
                    true,
                    REASON_RETRYING,
                    message.clone(),
                    generation,
                )
            };
            set(c);
        }
        Outcome::Deleted => {
            set(condition(
                TYPE_SERVING,
                false,
                REASON_UNAVAILABLE,
                "",
                generation,
            ));
            status.resolved_source = None;
            status.urls = None;
            status.last_unpacked = None;
        }
    }
    status
}

/// `lastUnpacked` is reported with second precision.
pub fn truncate_to_seconds(t: std::time::SystemTime) -> Time {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    #[test]
    fn invariant_warnings_are_listed_and_capped() {
        use super::invariant_warnings_message as msg;
        assert_eq!(msg(&[]), None);
        let two = vec![
            "a.json:3: package \"p\" has no defaultChannel".to_string(),
            "a.json:9: channel \"c\" of package \"p\" names missing bundle \"b\"".to_string(),
        ];
        let m = msg(&two).unwrap();
        assert!(
            m.starts_with("stored and served with 2 FBC invariant violation(s)"),
            "{m}"
        );
        assert!(m.ends_with(&format!("{}; {}", two[0], two[1])), "{m}");
        let many: Vec<String> = (0..100)
            .map(|i| format!("catalog.json:{i}: package \"p{i}\" has no defaultChannel"))
            .collect();
        let m = msg(&many).unwrap();
        assert!(m.len() <= 1024, "{}", m.len());
        assert!(m.contains("catalog.json:0: "), "{m}");
        assert!(m.contains(" more"), "{m}");
        assert!(!m.contains("catalog.json:99:"), "{m}");
        let huge = vec!["x".repeat(2000)];
        let m = msg(&huge).unwrap();
        assert!(m.len() <= 1024 && m.ends_with("too long to list"), "{m}");
    }

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn t(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).expect("time"))
    }

    fn cond<'a>(s: &'a ClusterCatalogStatus, type_: &str) -> &'a Condition {
        conditions::find(&s.conditions, type_).expect("condition present")
    }

    fn serving() -> Outcome {
        Outcome::Serving {
            resolved_ref: "r@sha256:1".into(),
            base_url: "https://x/catalogs/c".into(),
            last_unpacked: t(5),
        }
    }

    #[test]
    fn serving_sets_both_conditions_and_status_fields() {
        let s = next_status(&Default::default(), &serving(), Some(3), &t(10));
        let serving = cond(&s, TYPE_SERVING);
        assert_eq!(
            (
                serving.status.as_str(),
                serving.reason.as_str(),
                serving.message.as_str()
            ),
            ("True", "Available", MSG_SERVING)
        );
        assert_eq!(serving.observed_generation, Some(3));
        let progressing = cond(&s, TYPE_PROGRESSING);
        assert_eq!(
            (
                progressing.status.as_str(),
                progressing.reason.as_str(),
                progressing.message.as_str()
            ),
            ("True", "Succeeded", MSG_UNPACKED)
        );
        assert_eq!(
            s.resolved_source.as_ref().map(|r| r.image.ref_.as_str()),
            Some("r@sha256:1")
        );
        assert_eq!(
            s.urls.as_ref().map(|u| u.base.as_str()),
            Some("https://x/catalogs/c")
        );
        assert_eq!(s.last_unpacked, Some(t(5)));
    }

    #[test]
    fn errors_keep_serving_untouched() {
        let s = next_status(&Default::default(), &serving(), Some(1), &t(10));
        let failed = next_status(
            &s,
            &Outcome::Failed {
                message: "source catalog content: boom".into(),
                terminal: false,
            },
            Some(2),
            &t(20),
        );
        assert_eq!(cond(&failed, TYPE_SERVING), cond(&s, TYPE_SERVING));
        let p = cond(&failed, TYPE_PROGRESSING);
        assert_eq!(
            (p.status.as_str(), p.reason.as_str(), p.message.as_str()),
            ("True", "Retrying", "source catalog content: boom")
        );
        assert_eq!(failed.resolved_source, s.resolved_source);
        let blocked = next_status(
            &s,
            &Outcome::Failed {
                message: "bad ref".into(),
                terminal: true,
            },
            Some(2),
            &t(20),
        );
        let p = cond(&blocked, TYPE_PROGRESSING);
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("False", "Blocked"));
    }

    #[test]
    fn unavailable_clears_everything_served() {
        let s = next_status(&Default::default(), &serving(), Some(1), &t(10));
        let u = next_status(&s, &Outcome::Unavailable, Some(2), &t(20));
        let serving = cond(&u, TYPE_SERVING);
        assert_eq!(
            (
                serving.status.as_str(),
                serving.reason.as_str(),
                serving.message.as_str()
            ),
            ("False", "UserSpecifiedUnavailable", MSG_UNAVAILABLE)
        );
        let p = cond(&u, TYPE_PROGRESSING);
        assert_eq!(
            (p.status.as_str(), p.reason.as_str(), p.message.as_str()),
            ("True", "Succeeded", MSG_UNAVAILABLE)
        );
        assert!(u.resolved_source.is_none() && u.urls.is_none() && u.last_unpacked.is_none());
    }

    #[test]
    fn unknown_conditions_are_dropped_and_deleted_is_unavailable() {
        let mut s = next_status(&Default::default(), &serving(), Some(1), &t(10));
        s.conditions
            .push(condition("Foo", true, "Bar", "x", Some(1)));
        let d = next_status(&s, &Outcome::Deleted, Some(1), &t(20));
        assert!(conditions::find(&d.conditions, "Foo").is_none());
        let serving = cond(&d, TYPE_SERVING);
        assert_eq!(
            (
                serving.status.as_str(),
                serving.reason.as_str(),
                serving.message.as_str()
            ),
            ("False", "Unavailable", "")
        );
    }

    #[test]
    fn same_outcome_twice_changes_nothing() {
        let s = next_status(&Default::default(), &serving(), Some(1), &t(10));
        assert_eq!(next_status(&s, &serving(), Some(1), &t(99)), s);
    }
}
