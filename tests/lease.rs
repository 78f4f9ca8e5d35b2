//! Leader election on the real control plane with short timings: two `olmv1 controller
//! --leader-elect` processes; while idle the standby makes (almost) no API requests —
//! it watches the Lease — and the leader one renewal per retry period; after SIGKILL of
//! the leader the standby takes over within the lease duration, after SIGTERM at once
//! (the leader released the lease). Inconsistent timings stop the process at start
//! with an error naming the flags.
use crate::support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use std::time::{Duration, Instant};
use support::process::{ControllerProcess, NAMESPACE};

const LEASE: u64 = 6;
const RENEW_DEADLINE: u64 = 4;
const RETRY: u64 = 2;

fn start(identity: &str) -> ControllerProcess {
    let (lease, deadline, retry) = (
        format!("{LEASE}s"),
        format!("{RENEW_DEADLINE}s"),
        RETRY.to_string(),
    );
    ControllerProcess::start(
        identity,
        &[
            "--leader-elect",
            "--leader-election-identity",
            identity,
            "--leader-elect-lease-duration",
            &lease,
            "--leader-elect-renew-deadline",
            &deadline,
            "--leader-elect-retry-period",
            &retry,
        ],
    )
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

async fn is_leader(p: &ControllerProcess) -> Option<bool> {
    Some(sample(&p.metrics().await?, "olmv1_leader")? == 1.0)
}

/// The sum of `olmv1_kube_api_requests_total` over all verbs.
async fn api_requests(p: &ControllerProcess) -> f64 {
    let text = p.metrics().await.expect("metrics");
    text.lines()
        .filter(|l| l.starts_with("olmv1_kube_api_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_watches_and_takes_over_after_a_crash() {
    let admin = support::cluster().admin().await;
    let leases: Api<Lease> = Api::namespaced(admin, NAMESPACE);
    let mut a = Some(start("lease-a"));
    let mut b = Some(start("lease-b"));
    let leader_is_a = support::eventually(60, "one leader", || async {
        let (la, lb) = (is_leader(a.as_ref()?).await?, is_leader(b.as_ref()?).await?);
        let h = support::lease_holder(&leases).await?;
        (la != lb && h == if la { "lease-a" } else { "lease-b" }).then_some(la)
    })
    .await;
    let (leader, standby) = if leader_is_a {
        (a.as_ref().expect("a"), b.as_ref().expect("b"))
    } else {
        (b.as_ref().expect("b"), a.as_ref().expect("a"))
    };

    // Idle: the leader renews once per retry period, the standby only watches.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let window = Duration::from_secs(20);
    let (l0, s0) = (api_requests(leader).await, api_requests(standby).await);
    tokio::time::sleep(window).await;
    let (l1, s1) = (api_requests(leader).await, api_requests(standby).await);
    eprintln!(
        "idle API requests over {}s (lease {LEASE}s, renew deadline {RENEW_DEADLINE}s, retry {RETRY}s): leader {}, standby {}",
        window.as_secs(),
        l1 - l0,
        s1 - s0
    );
    let renewals = window.as_secs() / RETRY;
    assert!(
        l1 - l0 >= (renewals - 2) as f64,
        "leader renewals {}",
        l1 - l0
    );
    assert!(
        l1 - l0 <= (renewals + 2) as f64,
        "leader requests {}",
        l1 - l0
    );
    assert!(s1 - s0 <= 1.0, "standby requests while idle: {}", s1 - s0);
    assert_eq!(standby_is(standby, &leases).await, Some(false));

    // SIGKILL of the leader: the standby takes over within the lease duration.
    let standby_id = standby.label.clone();
    let killed_at = Instant::now();
    if leader_is_a {
        drop(a.take());
    } else {
        drop(b.take());
    }
    let survivor = a.as_ref().or(b.as_ref()).expect("survivor");
    let takeover = support::eventually(3 * LEASE, "takeover", || async {
        (support::lease_holder(&leases).await.as_deref() == Some(standby_id.as_str())
            && is_leader(survivor).await == Some(true))
        .then(|| killed_at.elapsed())
    })
    .await;
    eprintln!("takeover after SIGKILL of the leader: {takeover:?} (lease {LEASE}s)");
    assert!(
        takeover <= Duration::from_secs(LEASE + 2),
        "takeover took {takeover:?}"
    );

    // SIGTERM of a leader releases the lease: a standby takes over at once, well below
    // the lease duration.
    let c = start("lease-c");
    support::eventually(60, "a new standby", || async {
        is_leader(&c).await.filter(|l| !*l)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut survivor = if leader_is_a { b.take() } else { a.take() }.expect("survivor");
    let pid = survivor.pid().expect("pid").to_string();
    let stopped_at = Instant::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let takeover = support::eventually(3 * LEASE, "takeover after SIGTERM", || async {
        (support::lease_holder(&leases).await.as_deref() == Some("lease-c")
            && is_leader(&c).await == Some(true))
        .then(|| stopped_at.elapsed())
    })
    .await;
    eprintln!("takeover after SIGTERM of the leader: {takeover:?} (lease {LEASE}s)");
    assert!(
        takeover < Duration::from_secs(3),
        "takeover took {takeover:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = survivor.try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        status.success(),
        "clean exit on SIGTERM expected, got {status}"
    );
}

/// The standby's leader gauge, checked against the lease holder.
async fn standby_is(p: &ControllerProcess, leases: &Api<Lease>) -> Option<bool> {
    let h = support::lease_holder(leases).await?;
    assert_ne!(h, p.label, "the standby holds the lease");
    is_leader(p).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inconsistent_timings_stop_the_process_at_start() {
    let mut p = ControllerProcess::start(
        "lease-bad",
        &[
            "--leader-elect",
            "--leader-elect-lease-duration",
            "10",
            "--leader-elect-renew-deadline",
            "10s",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = p.try_wait() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running: {}", p.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!status.success());
    let log = p.log_text();
    assert!(
        log.contains("--leader-elect-renew-deadline") && log.contains("must be shorter"),
        "{log}"
    );
}

/// The figures of the defaults (`cargo test --test integration lease:: -- --ignored --nocapture`):
/// idle requests/s of leader + standby over 120 s, and the takeover time after SIGKILL
/// of the leader, three times (killed at varying points of the renewal period).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "takes about 4 minutes"]
async fn measure_the_defaults() {
    let admin = support::cluster().admin().await;
    let leases: Api<Lease> = Api::namespaced(admin, NAMESPACE);
    let defaults = |identity: &str| {
        ControllerProcess::start(
            identity,
            &["--leader-elect", "--leader-election-identity", identity],
        )
    };
    let mut replicas = [defaults("default-a"), defaults("default-b")];
    let leader_of = |h: &str| usize::from(h == "default-b");
    let h = support::eventually(90, "one leader", || async {
        support::lease_holder(&leases).await
    })
    .await;
    support::eventually(30, "leader gauge", || async {
        is_leader(&replicas[leader_of(&h)]).await.filter(|l| *l)
    })
    .await;
    // The new leader's reconcilers start (lists, watches) first: not idle yet.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let window = Duration::from_secs(120);
    let before = [
        api_requests(&replicas[0]).await,
        api_requests(&replicas[1]).await,
    ];
    tokio::time::sleep(window).await;
    let after = [
        api_requests(&replicas[0]).await,
        api_requests(&replicas[1]).await,
    ];
    let (l, s) = (leader_of(&h), 1 - leader_of(&h));
    let total = after[0] + after[1] - before[0] - before[1];
    eprintln!(
        "FIGURE idle: {total} requests in {}s = {:.3} requests/s (leader {}, standby {})",
        window.as_secs(),
        total / window.as_secs_f64(),
        after[l] - before[l],
        after[s] - before[s]
    );
    let mut takeovers = Vec::new();
    for round in 0..3u64 {
        let h = support::lease_holder(&leases).await.expect("holder");
        let (l, s) = (leader_of(&h), 1 - leader_of(&h));
        // Kill at different points of the 18 s renewal period.
        tokio::time::sleep(Duration::from_secs(1 + round * 7)).await;
        let killed_at = Instant::now();
        replicas[l].kill();
        let survivor_id = replicas[s].label.clone();
        let took = support::eventually(60, "takeover", || async {
            (support::lease_holder(&leases).await.as_deref() == Some(survivor_id.as_str())
                && is_leader(&replicas[s]).await == Some(true))
            .then(|| killed_at.elapsed())
        })
        .await;
        eprintln!("FIGURE takeover {round}: {took:?}");
        takeovers.push(took);
        replicas[l].restart();
        replicas[l].wait_listening(60);
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    takeovers.sort();
    eprintln!("FIGURE takeover median: {:?}", takeovers[1]);
    assert!(takeovers[2] <= Duration::from_secs(30), "{takeovers:?}");
}
