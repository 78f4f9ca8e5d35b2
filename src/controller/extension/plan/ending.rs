//! How a reconcile ends: `progressDeadlineMinutes` applied to a failure or a rollout
//! ([`deadline`], with its Warning Event), the requeue (backoff, a rollout checked again
//! after [`rollout_recheck`] or, while watches follow its readiness and past its first
//! minute, only as the [`SAFETY_RECHECK`], or waiting for a change), and what the failure bookkeeping
//! records. The bookkeeping is plain state: read before the ending ([`Standing`]),
//! written after it ([`Tally`]) by the caller of the flow.

use super::{Next, Note, Report, warning};
use crate::api::conditions::REASON_PROGRESS_DEADLINE_EXCEEDED;
use crate::controller::extension::status::{Observation, Outcome, deadline_exceeded};
use std::time::Duration;

/// The failure bookkeeping of one extension, as the ending reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// How long the extension has been failing or rolling out at its generation (zero
    /// when it has not).
    pub pending_for: Duration,
    /// The delay before the retry if this reconcile fails (the backoff after one more
    /// failure).
    pub backoff: Duration,
    /// The length of one minute of `progressDeadlineMinutes` (shorter in tests).
    pub minute: Duration,
    /// How long a rollout is checked on the [`rollout_recheck`] schedule even while
    /// watched ([`YOUNG_ROLLOUT`]; shorter in tests).
    pub young: Duration,
    /// Watches that have listed follow the readiness of what the extension installed:
    /// a change of it triggers a reconcile, so a rollout in progress needs no polling.
    pub watched: bool,
    /// Watches that have listed follow what the extension installed, readiness aside:
    /// among it its OperatorCondition, whose hold changing triggers a reconcile, so a
    /// held upgrade needs no polling ([`super::operator::recheck`]).
    pub followed: bool,
}

/// What happens to the count of consecutive failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Count {
    /// Unchanged.
    #[default]
    Keep,
    /// One more failure (the backoff grows).
    Failed,
    /// Applied but not ready yet: the backoff is forgotten, the clock of
    /// `progressDeadlineMinutes` keeps running.
    RollingOut,
    /// The desired state is reached: every earlier failure is forgotten.
    Succeeded,
}

/// What the failure bookkeeping records of one reconcile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// The error reason counted in the metrics, if the reconcile failed.
    pub error: Option<&'static str>,
    /// The clock of `progressDeadlineMinutes` runs (started at this generation unless
    /// it already runs).
    pub pending: bool,
    pub count: Count,
    /// The installed version changed back (a rollback): the clock of
    /// `progressDeadlineMinutes` starts over.
    pub restart: bool,
}

/// How a reconcile ends.
#[derive(Clone, Debug, Default)]
pub struct Ending {
    /// The status to write; `None`: none (an uninstall).
    pub observation: Option<Observation>,
    /// Events to publish, in order.
    pub events: Vec<Note>,
    /// The uninstall is done: the revision record and the finalizers go.
    pub remove: bool,
    pub tally: Tally,
    /// The delay before the next reconcile; `None`: wait for a change.
    pub requeue: Option<Duration>,
}

/// How soon [`Next::Again`] reconciles again.
pub const AGAIN: Duration = Duration::from_secs(1);

/// How soon a rollout in progress whose readiness watches follow
/// ([`Standing::watched`]) is checked again when nothing triggered a reconcile: a safety
/// net in case a watch missed a change (docs/concepts/rollout-status.md, "Readiness
/// from events"), and what refreshes pod waiting reasons, which do not change the
/// Deployment. A stuck rollout costs no API request in between.
pub const SAFETY_RECHECK: Duration = Duration::from_secs(600);

/// How long a rollout is checked on the [`rollout_recheck`] schedule even while watched
/// (the default of [`Standing::young`]):
/// the pods' waiting reasons (`ImagePullBackOff`…) appear in its first minute and are
/// not watched (they do not change the Deployment). A bounded cost per rollout, none
/// while a stuck rollout idles.
pub const YOUNG_ROLLOUT: Duration = Duration::from_secs(60);

/// How soon a rollout in progress is checked again when no watch follows its readiness
/// yet (the install of this reconcile, or watches that have not listed): every 15 s at
/// first, then a quarter of how long it has been rolling out, at most every 2 minutes.
pub fn rollout_recheck(rolling_for: Duration) -> Duration {
    (rolling_for / 4).clamp(Duration::from_secs(15), Duration::from_secs(120))
}

/// The ending of `report`: `progressDeadlineMinutes` (`deadline_minutes`) applied to
/// failures after progress began and to rollouts (`before`: the Progressing reason
/// before this reconcile), then the requeue and the bookkeeping `report.next` asks for.
pub fn end(
    mut report: Report,
    standing: &Standing,
    deadline_minutes: Option<i32>,
    before: Option<&str>,
) -> Ending {
    let mut until_deadline = None;
    let pending = matches!(report.next, Next::Failed | Next::RollingOut);
    if pending {
        let (outcome, left) = deadline(
            report.observation.outcome,
            standing.pending_for,
            deadline_minutes,
            standing.minute,
        );
        report.observation.outcome = outcome;
        until_deadline = left;
        report
            .events
            .extend(deadline_event(before, &report.observation.outcome));
    }
    let capped = |delay: Duration| until_deadline.map_or(delay, |left: Duration| delay.min(left));
    let (requeue, count) = match report.next {
        Next::Done => (None, Count::Succeeded),
        Next::AwaitChange => (None, Count::Keep),
        Next::Again => (Some(AGAIN), Count::Succeeded),
        Next::Retry => (Some(standing.backoff), Count::Failed),
        Next::RollingOut if standing.watched && standing.pending_for >= standing.young => {
            (Some(capped(SAFETY_RECHECK)), Count::RollingOut)
        }
        Next::RollingOut => (
            Some(capped(rollout_recheck(standing.pending_for))),
            Count::RollingOut,
        ),
        Next::Failed if report.observation.outcome.is_terminal() => (None, Count::Keep),
        Next::Failed => (Some(capped(standing.backoff)), Count::Failed),
    };
    Ending {
        observation: Some(report.observation),
        events: report.events,
        remove: false,
        tally: Tally {
            error: report.error,
            pending,
            count,
            restart: false,
        },
        requeue,
    }
}

/// `progressDeadlineMinutes` (one minute lasting `minute`): a `Retrying` or `RollingOut`
/// outcome that has lasted `failing_for` becomes `ProgressDeadlineExceeded` once past the
/// deadline, with its message as the last status;
/// before that, also returns the time left (the next retry comes no later, so the
/// deadline is reported when it passes, not up to a whole backoff later).
pub fn deadline(
    outcome: Outcome,
    failing_for: Duration,
    deadline_minutes: Option<i32>,
    minute: Duration,
) -> (Outcome, Option<Duration>) {
    let (Some(minutes), Some(last)) = (deadline_minutes, outcome.pending()) else {
        return (outcome, None);
    };
    let deadline = minute.saturating_mul(minutes.max(0) as u32);
    if failing_for >= deadline {
        (Outcome::DeadlineExceeded { minutes, last }, None)
    } else {
        (
            outcome,
            Some(deadline - failing_for + Duration::from_millis(100)),
        )
    }
}

/// The Warning Event when `outcome` newly exceeds `progressDeadlineMinutes` (`before`:
/// the Progressing reason before this reconcile).
pub fn deadline_event(before: Option<&str>, outcome: &Outcome) -> Option<Note> {
    let Outcome::DeadlineExceeded { minutes, last } = outcome else {
        return None;
    };
    (before != Some(REASON_PROGRESS_DEADLINE_EXCEEDED)).then(|| {
        warning(
            REASON_PROGRESS_DEADLINE_EXCEEDED,
            "Rollout",
            deadline_exceeded(*minutes, last),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::REASON_BLOCKED;

    fn report(outcome: Outcome, next: Next) -> Report {
        Report {
            observation: Observation {
                generation: Some(1),
                installed: None,
                installer: None,
                control: Default::default(),
                outcome,
                deprecation: None,
            },
            events: Vec::new(),
            error: None,
            next,
        }
    }

    const STANDING: Standing = Standing {
        pending_for: Duration::from_secs(100),
        backoff: Duration::from_secs(8),
        minute: Duration::from_secs(60),
        young: YOUNG_ROLLOUT,
        watched: false,
        followed: false,
    };

    #[test]
    fn each_next_has_its_requeue_and_bookkeeping() {
        let ending = |outcome, next| {
            let e = end(report(outcome, next), &STANDING, None, None);
            (e.requeue, e.tally.pending, e.tally.count)
        };
        let retrying = || Outcome::Retrying("x".into());
        assert_eq!(
            ending(Outcome::Succeeded, Next::Done),
            (None, false, Count::Succeeded)
        );
        assert_eq!(
            ending(retrying(), Next::AwaitChange),
            (None, false, Count::Keep)
        );
        assert_eq!(
            ending(retrying(), Next::Retry),
            (Some(Duration::from_secs(8)), false, Count::Failed),
            "a failure before progress began does not start the deadline's clock"
        );
        assert_eq!(
            ending(retrying(), Next::Failed),
            (Some(Duration::from_secs(8)), true, Count::Failed)
        );
        let blocked = Outcome::Blocked {
            reason: REASON_BLOCKED,
            message: "x".into(),
        };
        assert_eq!(
            ending(blocked, Next::Failed),
            (None, true, Count::Keep),
            "terminal: waits for a change"
        );
        let rolling = Outcome::RollingOut {
            version: "1".into(),
            waiting: "w".into(),
        };
        assert_eq!(
            ending(rolling, Next::RollingOut),
            (Some(Duration::from_secs(25)), true, Count::RollingOut)
        );
    }

    #[test]
    fn a_watched_rollout_waits_for_events_with_a_safety_recheck_capped_by_the_deadline() {
        let rolling = || {
            let outcome = Outcome::RollingOut {
                version: "1".into(),
                waiting: "w".into(),
            };
            report(outcome, Next::RollingOut)
        };
        let watched = Standing {
            watched: true,
            ..STANDING
        };
        let e = end(rolling(), &watched, None, None);
        assert_eq!(e.requeue, Some(SAFETY_RECHECK));
        let young = Standing {
            pending_for: Duration::from_secs(20),
            ..watched
        };
        let e = end(rolling(), &young, None, None);
        assert_eq!(
            e.requeue,
            Some(Duration::from_secs(15)),
            "pod reasons first"
        );
        assert_eq!(e.tally.count, Count::RollingOut);
        // 100 s rolling out, 2 minutes allowed: checked again when the deadline passes.
        let e = end(rolling(), &watched, Some(2), None);
        assert_eq!(
            e.requeue,
            Some(Duration::from_secs(20) + Duration::from_millis(100))
        );
        let failed = report(Outcome::Retrying("x".into()), Next::Failed);
        assert_eq!(
            end(failed, &watched, None, None).requeue,
            Some(Duration::from_secs(8)),
            "failures keep their backoff"
        );
    }

    #[test]
    fn the_deadline_caps_the_retry_and_is_reported_once() {
        let failed = || report(Outcome::Retrying("pull failed".into()), Next::Failed);
        let early = end(failed(), &STANDING, Some(2), None);
        assert_eq!(
            early.requeue,
            Some(Duration::from_secs(8)),
            "20 s left: the backoff comes first"
        );
        let standing = Standing {
            pending_for: Duration::from_secs(115),
            ..STANDING
        };
        let close = end(failed(), &standing, Some(2), None);
        assert_eq!(
            close.requeue,
            Some(Duration::from_secs(5) + Duration::from_millis(100))
        );
        let late = Standing {
            pending_for: Duration::from_secs(120),
            ..STANDING
        };
        let exceeded = end(failed(), &late, Some(2), None);
        assert!(matches!(
            exceeded.observation.map(|o| o.outcome),
            Some(Outcome::DeadlineExceeded { minutes: 2, .. })
        ));
        assert_eq!(exceeded.events.len(), 1);
        let again = end(
            failed(),
            &late,
            Some(2),
            Some(REASON_PROGRESS_DEADLINE_EXCEEDED),
        );
        assert!(again.events.is_empty());
    }
}
