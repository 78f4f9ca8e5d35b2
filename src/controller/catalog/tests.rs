//! Unit tests of the ClusterCatalog reconciler's pure parts: what to pull, polling.
use super::*;

#[test]
fn digest_refs_never_poll() {
    assert_eq!(poll_minutes("quay.io/c@sha256:0123", Some(5)), None);
    assert_eq!(poll_minutes("quay.io/c:latest", Some(5)), Some(5));
    assert_eq!(poll_minutes("quay.io/c:latest", None), None);
}

fn record(last_poll: Option<Instant>) -> Record {
    Record {
        generation: Some(2),
        spec_ref: "r.io/c:latest".into(),
        resolved_ref: "r.io/c@sha256:1111".into(),
        last_unpacked: now(),
        last_poll,
    }
}

fn current(poll: Option<i32>) -> Current<'static> {
    Current {
        generation: Some(2),
        spec_ref: "r.io/c:latest",
        content_present: true,
        status_resolved: Some("r.io/c@sha256:1111"),
        poll,
    }
}

#[test]
fn stored_content_of_the_current_status_is_not_pulled_again() {
    let unit = Duration::from_secs(60);
    // A record the follower left (no poll yet): nothing to pull; a tag is polled now.
    assert_eq!(
        next_step(Some(&record(None)), &current(None), unit),
        Next::Wait(None)
    );
    assert_eq!(
        next_step(Some(&record(None)), &current(Some(5)), unit),
        Next::Poll
    );
    let polled = record(Some(Instant::now()));
    match next_step(Some(&polled), &current(Some(5)), unit) {
        Next::Wait(Some(d)) => assert!(
            d <= Duration::from_secs(300) && d > Duration::from_secs(290),
            "{d:?}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn anything_out_of_date_is_pulled() {
    let unit = Duration::from_secs(60);
    let r = record(None);
    assert_eq!(next_step(None, &current(None), unit), Next::Pull);
    let changed = [
        Current {
            generation: Some(3),
            ..current(None)
        },
        Current {
            spec_ref: "r.io/c:v2",
            ..current(None)
        },
        Current {
            content_present: false,
            ..current(None)
        },
        Current {
            status_resolved: Some("r.io/c@sha256:2222"),
            ..current(None)
        },
        Current {
            status_resolved: None,
            ..current(None)
        },
    ];
    for c in changed {
        assert_eq!(next_step(Some(&r), &c, unit), Next::Pull, "{c:?}");
    }
}

#[test]
fn poll_jitter_is_at_most_one_percent() {
    let unit = Duration::from_secs(60);
    assert_eq!(poll_delay(10, unit, 0.0), Duration::from_secs(600));
    assert_eq!(poll_delay(10, unit, 0.01), Duration::from_secs(606));
    assert_eq!(poll_delay(10, unit, 0.5), Duration::from_secs(606));
}
