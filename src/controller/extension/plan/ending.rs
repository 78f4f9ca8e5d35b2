//! How a reconcile ends: `progressDeadlineMinutes` applied to a failure or a rollout
//! ([`deadline`], with its Warning Event), the requeue (backoff, a rollout checked again
//! after [`rollout_recheck`], or waiting for a change), and what the failure bookkeeping
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

/// How soon a rollout in progress is checked again when nothing triggered a reconcile
/// (readiness changes of the installed objects trigger one at once; this is the safety
/// net, and what refreshes pod waiting reasons, which do not change the Deployment):
/// every 15 s at first, then a quarter of how long it has been rolling out, at most
/// every 2 minutes (a rollout stuck for days costs little).
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
        Next::Retry => (Some(standing.backoff), Count::Failed),
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
