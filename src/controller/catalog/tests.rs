//! Unit tests of the ClusterCatalog reconciler's pure parts ([`super::plan`]): the next
//! step, what to pull, polling, failure verdicts.
use super::plan::*;
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

fn facts(content: Option<Current<'static>>) -> Facts<'static> {
    Facts {
        deleting: false,
        labelled: true,
        unavailable: false,
        finalized: true,
        content,
        record: Some(record(None)),
    }
}

#[test]
fn lifecycle_steps_come_first_in_order() {
    let unit = Duration::from_secs(60);
    let all_wrong = Facts {
        deleting: true,
        labelled: false,
        unavailable: true,
        finalized: false,
        ..facts(None)
    };
    assert_eq!(decide(&all_wrong, unit), Plan::Delete);
    let f = Facts {
        deleting: false,
        ..all_wrong
    };
    assert_eq!(
        decide(&f, unit),
        Plan::Label,
        "the label even when unavailable"
    );
    let f = Facts {
        labelled: true,
        ..f
    };
    assert_eq!(
        decide(&f, unit),
        Plan::MakeUnavailable,
        "no finalizer needed"
    );
    let f = Facts {
        unavailable: false,
        ..f
    };
    assert_eq!(decide(&f, unit), Plan::AddFinalizer);
    let f = Facts {
        finalized: true,
        ..f
    };
    assert_eq!(decide(&f, unit), Plan::NoImage);
}

#[test]
fn a_settled_catalog_plans_its_content() {
    let unit = Duration::from_secs(60);
    assert_eq!(
        decide(&facts(Some(current(None))), unit),
        Plan::Content(Next::Wait(None), current(None))
    );
    assert_eq!(
        decide(&facts(Some(current(Some(5)))), unit),
        Plan::Content(Next::Poll, current(Some(5)))
    );
    let unknown = Facts {
        record: None,
        ..facts(Some(current(None)))
    };
    assert_eq!(
        decide(&unknown, unit),
        Plan::Content(Next::Pull, current(None))
    );
}

#[test]
fn a_moved_tag_is_pulled_and_the_same_digest_reuses_stored_content() {
    let r = record(None);
    assert!(!tag_moved(&r, "r.io/c@sha256:1111"));
    assert!(tag_moved(&r, "r.io/c@sha256:2222"));
    assert_eq!(
        reusable(Some(&r), "r.io/c@sha256:1111"),
        Some(r.last_unpacked.clone())
    );
    assert_eq!(reusable(Some(&r), "r.io/c@sha256:2222"), None);
    assert_eq!(reusable(None, "r.io/c@sha256:1111"), None);
}

#[test]
fn content_problems_are_terminal_only_for_digest_references() {
    let missing = || {
        Failure::Image(crate::image::ImageError::MissingLabel {
            image: "i".into(),
            label: "l".into(),
        })
    };
    let by_tag = verdict(&missing(), "r.io/c:latest");
    assert!(!by_tag.terminal);
    assert_eq!(by_tag.reason, "ImagePullFailed");
    assert!(by_tag.message.starts_with("source catalog content: "));
    assert!(verdict(&missing(), "r.io/c@sha256:1111").terminal);
    let invalid = Failure::Image(crate::image::ImageError::InvalidReference {
        reference: "x".into(),
        reason: "y".into(),
    });
    let v = verdict(&invalid, "x");
    assert!(v.terminal);
    assert_eq!(v.reason, "InvalidImageReference");
    let store = Failure::Store(crate::fbc::FbcError::Limit {
        message: "too big".into(),
    });
    assert_eq!(
        verdict(&store, "r.io/c@sha256:1111"),
        Verdict {
            message: "error storing fbc: too big".into(),
            terminal: true,
            reason: "StoreFailed",
        }
    );
    assert!(!verdict(&store, "r.io/c:latest").terminal);
}

#[test]
fn requeue_at_the_poll_interval_or_on_a_change() {
    let unit = Duration::from_secs(60);
    assert_eq!(requeue(None, unit, 0.0), None);
    assert_eq!(requeue(Some(2), unit, 0.0), Some(Duration::from_secs(120)));
}
