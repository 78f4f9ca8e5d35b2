//! Leader election on a `coordination.k8s.io/v1` Lease that costs nothing while idle
//! except the leader's renewals. Every replica runs one watch on the Lease (selected by
//! name; a watch makes no periodic requests, only a reconnect every few minutes). The
//! leader renews (`PUT` with the last seen `resourceVersion`, so concurrent writers
//! conflict) every `retry_period`, retries failed renewals every second, and gives up
//! leadership when it could not renew for `renew_deadline` or when the watch shows
//! another holder. A standby never polls: it tries to acquire only when the lease has
//! no holder (a leader releases it on shutdown) or when it saw no change of the lease
//! for `lease_duration` — measured with its own monotonic clock from the moment it saw
//! the last change, as client-go does, never from the holder's timestamps (clock
//! skew). The decisions ([`standby_decision`], [`leader_decision`], [`observe`]) are
//! pure functions; [`run`] is the thin I/O around them.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use std::time::Duration;
use tokio::time::Instant;

/// Lease timings (client-go's names). Invariant (see [`Timing::validate`]):
/// `retry_period < renew_deadline < lease_duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a standby waits after the last change it saw before taking the lease.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the leader renews.
    pub retry_period: Duration,
}

/// The delay between retries of a failed renewal or acquisition.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

impl Timing {
    /// The defaults: one renewal per 18 s (≈0.056 requests/s with the watches'
    /// reconnects ≈0.062, below upstream OLM v1's 0.066), takeover after a crash at
    /// most 27 s (plus one request) after the leader's last renewal.
    pub const DEFAULT: Timing = Timing {
        lease_duration: Duration::from_secs(27),
        renew_deadline: Duration::from_secs(22),
        retry_period: Duration::from_secs(18),
    };

    /// The timings of the deprecated `--lease-duration-seconds D`: renewal every D/3,
    /// give up after 2D/3 without a renewal (D at least 2 s).
    pub fn from_lease_duration_seconds(seconds: u64) -> Timing {
        let duration = Duration::from_secs(seconds.max(2));
        Timing {
            lease_duration: duration,
            renew_deadline: duration * 2 / 3,
            retry_period: duration / 3,
        }
    }

    /// `retry_period < renew_deadline < lease_duration`, all non-zero.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be at least 1s".into());
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "--leader-elect-renew-deadline ({}s) must be shorter than --leader-elect-lease-duration ({}s): the leader must give up before a standby may take over",
                self.renew_deadline.as_secs_f64(),
                self.lease_duration.as_secs_f64()
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(format!(
                "--leader-elect-retry-period ({}s) must be shorter than --leader-elect-renew-deadline ({}s): the leader must get to renew before it gives up",
                self.retry_period.as_secs_f64(),
                self.renew_deadline.as_secs_f64()
            ));
        }
        Ok(())
    }
}

/// What a replica last saw of the Lease.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The object as last read (its `resourceVersion` guards the next write).
    pub lease: Lease,
    /// When (local monotonic clock) the spec was last seen to change.
    pub changed_at: Instant,
}

impl Observed {
    /// The holder, `None` when released (empty or absent).
    pub fn holder(&self) -> Option<&str> {
        holder_of(&self.lease)
    }
}

fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// The record after seeing `lease` at `now`: the change time moves only when the spec
/// differs from what was seen before (a new `resourceVersion` alone is no sign of life).
pub fn observe(previous: Option<&Observed>, lease: Lease, now: Instant) -> Observed {
    let changed_at = match previous {
        Some(p) if p.lease.spec == lease.spec => p.changed_at,
        _ => now,
    };
    Observed { lease, changed_at }
}

/// What a standby does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandbyStep {
    /// Try to take the lease now.
    Acquire,
    /// Nothing before this instant (unless the watch shows a change).
    WaitUntil(Instant),
}

/// Whether a standby (`me`) takes the lease: when it does not exist, has no holder, is
/// already its own, or did not change for the lease's duration (the holder's
/// `leaseDurationSeconds`, else `timing.lease_duration`) by the local clock.
pub fn standby_decision(
    observed: Option<&Observed>,
    me: &str,
    timing: &Timing,
    now: Instant,
) -> StandbyStep {
    let Some(observed) = observed else {
        return StandbyStep::Acquire;
    };
    match observed.holder() {
        None => return StandbyStep::Acquire,
        Some(holder) if holder == me => return StandbyStep::Acquire,
        Some(_) => {}
    }
    let duration = observed
        .lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
        .unwrap_or(timing.lease_duration);
    let expiry = observed.changed_at + duration;
    if now >= expiry {
        StandbyStep::Acquire
    } else {
        StandbyStep::WaitUntil(expiry)
    }
}

/// What the leader does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderStep {
    /// Renew at this instant.
    RenewAt(Instant),
    /// No successful renewal within the renew deadline: stop leading.
    GiveUp,
}

/// The leader's next step, from its last successful renewal and whether the last
/// attempt after it failed (then it retries every [`RETRY_AFTER_FAILURE`]).
pub fn leader_decision(
    last_renewed: Instant,
    last_attempt_failed: bool,
    timing: &Timing,
    now: Instant,
) -> LeaderStep {
    let deadline = last_renewed + timing.renew_deadline;
    if now >= deadline {
        return LeaderStep::GiveUp;
    }
    if last_attempt_failed {
        LeaderStep::RenewAt((now + RETRY_AFTER_FAILURE).min(deadline))
    } else {
        LeaderStep::RenewAt(last_renewed + timing.retry_period)
    }
}

/// The lease `me` writes to take (when `previous` is another holder's or nobody's) or
/// renew (when it is already `me`'s) it at wall-clock `now`.
pub fn claimed(
    previous: Option<&Lease>,
    me: &str,
    timing: &Timing,
    now: jiff::Timestamp,
) -> LeaseSpec {
    let spec = previous.and_then(|l| l.spec.clone()).unwrap_or_default();
    let mine = spec.holder_identity.as_deref() == Some(me);
    let transitions = spec.lease_transitions.unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(
            i32::try_from(timing.lease_duration.as_secs()).unwrap_or(i32::MAX),
        ),
        acquire_time: if mine {
            spec.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if mine || previous.is_none() {
            transitions
        } else {
            transitions + 1
        }),
        ..spec
    }
}

/// The lease as `me` leaves it on shutdown: no holder, so that a standby takes over at
/// once (client-go's `ReleaseOnCancel`).
pub fn released(lease: &Lease, now: jiff::Timestamp) -> LeaseSpec {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(now)),
        ..spec
    }
}

/// One replica in the election.
pub struct Elector {
    pub api: Api<Lease>,
    pub name: String,
    pub identity: String,
    pub timing: Timing,
}

enum Role {
    Standby,
    Leader { last_renewed: Instant, failed: bool },
}

impl Elector {
    /// Competes for the lease until `leader`'s receivers are gone (then releases it if
    /// held) or leadership is lost (then sends `false` and ends).
    pub async fn run(self, leader: tokio::sync::watch::Sender<bool>) {
        use futures::StreamExt;
        let config = crate::controller::common::watch_config()
            .fields(&format!("metadata.name={}", self.name));
        let stream = watcher(self.api.clone(), config).default_backoff();
        tokio::pin!(stream);
        let mut observed: Option<Observed> = None;
        // Nothing is decided before the watch delivered the first state.
        let mut synced = false;
        let mut role = Role::Standby;
        loop {
            let now = Instant::now();
            let wake = match (&role, synced) {
                (_, false) => None,
                (Role::Standby, true) => {
                    match standby_decision(observed.as_ref(), &self.identity, &self.timing, now) {
                        StandbyStep::Acquire => Some(now),
                        StandbyStep::WaitUntil(at) => Some(at),
                    }
                }
                (
                    Role::Leader {
                        last_renewed,
                        failed,
                    },
                    true,
                ) => match leader_decision(*last_renewed, *failed, &self.timing, now) {
                    LeaderStep::RenewAt(at) => Some(at),
                    LeaderStep::GiveUp => {
                        tracing::warn!(lease = %self.name, identity = %self.identity, "could not renew the lease within the renew deadline");
                        let _ = leader.send(false);
                        return;
                    }
                },
            };
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = leader.closed() => {
                    if matches!(role, Role::Leader { .. }) {
                        self.release(observed.as_ref()).await;
                    }
                    return;
                }
                event = stream.next() => {
                    let Some(event) = event else { return };
                    match event {
                        Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                            observed = Some(observe(observed.as_ref(), lease, Instant::now()));
                        }
                        Ok(watcher::Event::Delete(_)) => observed = None,
                        Ok(watcher::Event::Init) => {}
                        Ok(watcher::Event::InitDone) => synced = true,
                        Err(e) => tracing::debug!(error = %e, "watching the lease"),
                    }
                    if matches!(role, Role::Leader { .. })
                        && let Some(holder) = observed.as_ref().and_then(|o| o.holder())
                        && holder != self.identity
                    {
                        tracing::warn!(lease = %self.name, %holder, "another replica holds the lease");
                        let _ = leader.send(false);
                        return;
                    }
                }
                () = sleep => {
                    let now = Instant::now();
                    match self.write(observed.as_ref()).await {
                        Ok(lease) => {
                            observed = Some(observe(observed.as_ref(), lease, now));
                            if matches!(role, Role::Standby) {
                                tracing::info!(lease = %self.name, identity = %self.identity, "acquired the lease");
                                let _ = leader.send(true);
                            }
                            role = Role::Leader { last_renewed: now, failed: false };
                        }
                        Err(e) => {
                            tracing::debug!(lease = %self.name, error = %e, "writing the lease");
                            match &mut role {
                                Role::Leader { failed, .. } => *failed = true,
                                // Lost a race or the API failed: decide again on the
                                // next change, or retry after a moment.
                                Role::Standby => {
                                    tokio::time::sleep(RETRY_AFTER_FAILURE).await;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Creates the lease or replaces it (guarded by the observed `resourceVersion`)
    /// with this replica as holder and a fresh renew time.
    async fn write(&self, observed: Option<&Observed>) -> kube::Result<Lease> {
        let spec = claimed(
            observed.map(|o| &o.lease),
            &self.identity,
            &self.timing,
            jiff::Timestamp::now(),
        );
        match observed {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(o) => {
                let mut lease = o.lease.clone();
                lease.metadata.managed_fields = None;
                lease.spec = Some(spec);
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        }
    }

    async fn release(&self, observed: Option<&Observed>) {
        let Some(o) = observed else { return };
        let mut lease = o.lease.clone();
        lease.metadata.managed_fields = None;
        lease.spec = Some(released(&o.lease, jiff::Timestamp::now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released the lease"),
            Err(e) => tracing::warn!(lease = %self.name, error = %e, "releasing the lease"),
        }
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
