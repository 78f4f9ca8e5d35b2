use super::*;

fn lease(holder: Option<&str>, duration: Option<i32>, renew: i64) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("olmv1-controller".into()),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: duration,
            renew_time: jiff::Timestamp::from_second(renew).ok().map(MicroTime),
            ..Default::default()
        }),
    }
}

const T: Timing = Timing {
    lease_duration: Duration::from_secs(27),
    renew_deadline: Duration::from_secs(22),
    retry_period: Duration::from_secs(18),
};

#[test]
fn defaults_are_valid_and_meet_the_budget() {
    assert_eq!(Timing::DEFAULT.validate(), Ok(()));
    // Renewals alone at most 0.066 requests/s; failover after a crash at most 30 s.
    assert!(1.0 / Timing::DEFAULT.retry_period.as_secs_f64() <= 0.066);
    assert!(Timing::DEFAULT.lease_duration < Duration::from_secs(30));
}

#[test]
fn validation_names_the_flags() {
    let bad = Timing {
        renew_deadline: Duration::from_secs(27),
        ..T
    };
    let e = bad.validate().unwrap_err();
    assert!(e.contains("--leader-elect-renew-deadline"), "{e}");
    let bad = Timing {
        retry_period: Duration::from_secs(22),
        ..T
    };
    let e = bad.validate().unwrap_err();
    assert!(e.contains("--leader-elect-retry-period"), "{e}");
    let bad = Timing {
        retry_period: Duration::ZERO,
        ..T
    };
    assert!(bad.validate().is_err());
}

#[test]
fn legacy_lease_duration_maps_to_valid_timings() {
    for d in [0, 1, 2, 5, 15, 137] {
        let t = Timing::from_lease_duration_seconds(d);
        assert_eq!(t.validate(), Ok(()), "{d}: {t:?}");
    }
    let t = Timing::from_lease_duration_seconds(15);
    assert_eq!(t.retry_period, Duration::from_secs(5));
    assert_eq!(t.renew_deadline, Duration::from_secs(10));
}

#[test]
fn standby_acquires_a_missing_released_or_own_lease() {
    let now = Instant::now();
    assert_eq!(standby_decision(None, "b", &T, now), StandbyStep::Acquire);
    for holder in [None, Some(""), Some("b")] {
        let o = observe(None, lease(holder, Some(27), 0), now);
        assert_eq!(
            standby_decision(Some(&o), "b", &T, now),
            StandbyStep::Acquire,
            "{holder:?}"
        );
    }
}

#[test]
fn standby_waits_for_the_lease_duration_from_the_last_change_it_saw() {
    let t0 = Instant::now();
    // The holder's renew time is far in the past (skewed clock): irrelevant.
    let o = observe(None, lease(Some("a"), Some(10), 0), t0);
    assert_eq!(
        standby_decision(Some(&o), "b", &T, t0 + Duration::from_secs(3)),
        StandbyStep::WaitUntil(t0 + Duration::from_secs(10))
    );
    assert_eq!(
        standby_decision(Some(&o), "b", &T, t0 + Duration::from_secs(10)),
        StandbyStep::Acquire
    );
    // Without leaseDurationSeconds, the own lease duration.
    let o = observe(None, lease(Some("a"), None, 0), t0);
    assert_eq!(
        standby_decision(Some(&o), "b", &T, t0),
        StandbyStep::WaitUntil(t0 + T.lease_duration)
    );
}

#[test]
fn only_a_changed_spec_restarts_the_clock() {
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_secs(5);
    let first = observe(None, lease(Some("a"), Some(10), 100), t0);
    // Same spec, new resourceVersion (e.g. a relist): no sign of life.
    let mut same = lease(Some("a"), Some(10), 100);
    same.metadata.resource_version = Some("2".into());
    let o = observe(Some(&first), same, t1);
    assert_eq!(o.changed_at, t0);
    assert_eq!(o.lease.metadata.resource_version.as_deref(), Some("2"));
    // A renewal: the clock restarts.
    let o = observe(Some(&o), lease(Some("a"), Some(10), 105), t1);
    assert_eq!(o.changed_at, t1);
}

#[test]
fn leader_renews_every_retry_period_and_gives_up_after_the_deadline() {
    let t0 = Instant::now();
    assert_eq!(
        leader_decision(t0, false, &T, t0),
        LeaderStep::RenewAt(t0 + T.retry_period)
    );
    // A failed attempt: retry soon, never past the deadline.
    let late = t0 + Duration::from_secs(21) + Duration::from_millis(500);
    assert_eq!(
        leader_decision(t0, true, &T, t0 + T.retry_period),
        LeaderStep::RenewAt(t0 + T.retry_period + RETRY_AFTER_FAILURE)
    );
    assert_eq!(
        leader_decision(t0, true, &T, late),
        LeaderStep::RenewAt(t0 + T.renew_deadline)
    );
    assert_eq!(
        leader_decision(t0, true, &T, t0 + T.renew_deadline),
        LeaderStep::GiveUp
    );
}

#[test]
fn claiming_counts_transitions_and_keeps_the_acquire_time_on_renewal() {
    let now = jiff::Timestamp::from_second(1000).unwrap();
    let later = jiff::Timestamp::from_second(1018).unwrap();
    let fresh = claimed(None, "a", &T, now);
    assert_eq!(fresh.holder_identity.as_deref(), Some("a"));
    assert_eq!(fresh.lease_transitions, Some(0));
    assert_eq!(fresh.lease_duration_seconds, Some(27));
    let held = Lease {
        spec: Some(fresh),
        ..Default::default()
    };
    let renewed = claimed(Some(&held), "a", &T, later);
    assert_eq!(renewed.acquire_time, Some(MicroTime(now)));
    assert_eq!(renewed.renew_time, Some(MicroTime(later)));
    assert_eq!(renewed.lease_transitions, Some(0));
    let taken = claimed(Some(&held), "b", &T, later);
    assert_eq!(taken.acquire_time, Some(MicroTime(later)));
    assert_eq!(taken.lease_transitions, Some(1));
    let gone = released(&held, later);
    assert_eq!(gone.holder_identity, None);
    assert_eq!(gone.lease_transitions, Some(0));
}
