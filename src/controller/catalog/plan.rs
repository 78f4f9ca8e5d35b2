//! The pure decisions of a ClusterCatalog reconcile (docs/concepts/catalogs.md §9.1): the next
//! step from what is known of the catalog ([`decide`] over [`Facts`]), whether stored
//! content is still that of the spec ([`next_step`]), polling ([`poll_minutes`],
//! [`poll_delay`]), and what a failure reports ([`verdict`]). No I/O; the executor
//! ([`super::executor`]) does what they say.

use super::Record;
use crate::fbc::FbcError;
use crate::image::ImageError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::time::Duration;

/// What is known of a catalog at the start of a reconcile.
#[derive(Clone, Debug)]
pub(super) struct Facts<'a> {
    pub deleting: bool,
    /// The `olm.operatorframework.io/metadata.name` label names the catalog.
    pub labelled: bool,
    /// `availabilityMode: Unavailable`.
    pub unavailable: bool,
    /// The `delete-server-cache` finalizer is on.
    pub finalized: bool,
    /// The image source (`None`: the spec names none).
    pub content: Option<Current<'a>>,
    /// What the reconciler (or the follower) remembers of the catalog.
    pub record: Option<Record>,
}

/// The next step of a reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Plan<'a> {
    /// Remove the stored content, report the deletion, drop the finalizer; wait.
    Delete,
    /// Set the metadata.name label users select catalogs by, then decide again.
    Label,
    /// Remove the stored content, drop the finalizer, then report `Unavailable`; wait.
    MakeUnavailable,
    /// Add the finalizer; the reconcile runs again at once.
    AddFinalizer,
    /// No image in the spec: a terminal failure.
    NoImage,
    /// The catalog's content ([`next_step`]) from its image source.
    Content(Next, Current<'a>),
}

/// The next step for `facts`, one `pollIntervalMinutes` lasting `unit`.
pub(super) fn decide<'a>(facts: &Facts<'a>, unit: Duration) -> Plan<'a> {
    if facts.deleting {
        return Plan::Delete;
    }
    if !facts.labelled {
        return Plan::Label;
    }
    if facts.unavailable {
        return Plan::MakeUnavailable;
    }
    if !facts.finalized {
        return Plan::AddFinalizer;
    }
    match &facts.content {
        None => Plan::NoImage,
        Some(current) => Plan::Content(
            next_step(facts.record.as_ref(), current, unit),
            current.clone(),
        ),
    }
}

/// The poll interval that applies: none for digest references (their content cannot
/// change; the CRD also rejects `pollIntervalMinutes` with a digest) and none when unset.
pub fn poll_minutes(spec_ref: &str, poll_interval_minutes: Option<i32>) -> Option<i32> {
    if spec_ref.contains('@') {
        None
    } else {
        poll_interval_minutes
    }
}

/// `pollIntervalMinutes` × unit, stretched by up to 1% so that catalogs do not poll
/// in lock-step.
pub fn poll_delay(minutes: i32, unit: Duration, jitter: f64) -> Duration {
    let base = unit.saturating_mul(minutes.max(1) as u32);
    base.mul_f64(1.0 + jitter.clamp(0.0, 0.01))
}

/// When the next reconcile runs on its own: at the poll interval with `jitter` (up to
/// 1%), or never (`None`: on a change only).
pub(super) fn requeue(poll: Option<i32>, unit: Duration, jitter: f64) -> Option<Duration> {
    poll.map(|minutes| poll_delay(minutes, unit, jitter))
}

/// What is known of a catalog's image source at a reconcile, for [`next_step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Current<'a> {
    pub generation: Option<i64>,
    pub spec_ref: &'a str,
    pub content_present: bool,
    /// `status.resolvedSource.image.ref`.
    pub status_resolved: Option<&'a str>,
    /// The poll interval in effect ([`poll_minutes`]).
    pub poll: Option<i32>,
}

/// What a reconcile does about content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Pull the spec's reference (the stored digest is reused if it did not change).
    Pull,
    /// Resolve the tag; pull only if it moved ([`tag_moved`]).
    Poll,
    /// Nothing now; look again after the duration (a poll), or on a change.
    Wait(Option<Duration>),
}

/// Decides from the remembered `record` (the reconciler's, or the follower's on a new
/// leader) whether the stored content is that of the current spec and status — then
/// nothing is pulled, only the tag polled when due (a record without a last poll is
/// due at once) — or the image must be pulled.
pub(super) fn next_step(record: Option<&Record>, current: &Current<'_>, unit: Duration) -> Next {
    let Some(r) = record else {
        return Next::Pull;
    };
    if r.generation != current.generation
        || r.spec_ref != current.spec_ref
        || !current.content_present
        || current.status_resolved != Some(r.resolved_ref.as_str())
    {
        return Next::Pull;
    }
    let Some(minutes) = current.poll else {
        return Next::Wait(None);
    };
    let interval = poll_delay(minutes, unit, 0.0);
    match r.last_poll.map(|t| t.elapsed()) {
        Some(since) if since < interval => Next::Wait(Some(interval - since)),
        _ => Next::Poll,
    }
}

/// Whether a polled tag now names another digest than the stored content (then it is
/// pulled; otherwise nothing is done until the next poll).
pub(super) fn tag_moved(record: &Record, resolved: &str) -> bool {
    resolved != record.resolved_ref
}

/// The `lastUnpacked` of stored content that may be reused for `pulled` (the digest
/// pulled): the stored content's, when `record` (present only while the content is
/// still stored) names the same digest; `None`: store the pulled content.
pub(super) fn reusable(record: Option<&Record>, pulled: &str) -> Option<Time> {
    record
        .filter(|r| r.resolved_ref == pulled)
        .map(|r| r.last_unpacked.clone())
}

/// What failed in a reconcile.
#[derive(Debug)]
pub(super) enum Failure {
    Image(ImageError),
    Store(FbcError),
}

/// What a failure reports: the `Progressing` message, whether it is terminal
/// (`Blocked`: not retried until the spec changes) and the metrics reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Verdict {
    pub message: String,
    pub terminal: bool,
    pub reason: &'static str,
}

/// The verdict on `failure` of the image `spec_ref`. Content problems of an image pinned
/// by digest cannot fix themselves: they are terminal; credentials, missing images and
/// registry trouble can.
pub(super) fn verdict(failure: &Failure, spec_ref: &str) -> Verdict {
    let by_digest = spec_ref.contains('@');
    let terminal = match failure {
        Failure::Image(ImageError::InvalidReference { .. }) => true,
        Failure::Image(e) if e.is_blocked() => true,
        Failure::Image(e) => by_digest && e.is_content_error(),
        Failure::Store(FbcError::Io { .. }) => false,
        Failure::Store(_) => by_digest,
    };
    let reason = match failure {
        Failure::Image(ImageError::InvalidReference { .. }) => "InvalidImageReference",
        Failure::Image(_) => "ImagePullFailed",
        Failure::Store(_) => "StoreFailed",
    };
    Verdict {
        message: failure_message(failure),
        terminal,
        reason,
    }
}

fn failure_message(failure: &Failure) -> String {
    match failure {
        Failure::Image(e) => format!("source catalog content: {e}"),
        Failure::Store(e) => format!("error storing fbc: {e}"),
    }
}
