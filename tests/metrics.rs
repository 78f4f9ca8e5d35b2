//! The secured `/metrics` and the profiling endpoints of the `olmv1 controller`
//! process on a real API server with RBAC: by default HTTPS, 401 without a token or
//! with a garbage one, 403 for a ServiceAccount without `olmv1-metrics-reader`, the
//! metrics for one bound to it; `--metrics-secure=false` serves plain HTTP. With
//! `--pprof-bind-address` the CPU and heap profiles are gzip'd pprof protobuf behind
//! the same checks; without it nothing more listens; an open profiling address without
//! TLS and authorization is refused at start.

use crate::support;

use std::io::Read;
use support::metrics::{METRICS_READER, get, reader_token, token};
use support::process::ControllerProcess;

fn free_port() -> u16 {
    olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"))
}

/// Waits until `url` answers `expected` (with `token`), returns the body.
async fn eventually_status(url: &str, token: Option<&str>, expected: u16) -> bytes::Bytes {
    support::eventually(60, &format!("{url} answering {expected}"), || async {
        match get(url, token).await {
            Ok((status, body)) if status == expected => Some(body),
            _ => None,
        }
    })
    .await
}

#[tokio::test]
async fn metrics_need_a_token_allowed_to_read_them() {
    let admin = support::cluster().admin().await;
    let mut process = ControllerProcess::start("secure-metrics", &[]);
    process.wait_listening(60);
    let url = format!("https://127.0.0.1:{}/metrics", process.metrics_port);

    eventually_status(&url, None, 401).await;
    let (status, _) = get(&url, Some("not-a-token")).await.expect("garbage token");
    assert_eq!(status, 401, "a garbage token");

    let stranger = token(&admin, "no-metrics-role", None).await;
    let (status, body) = get(&url, Some(&stranger)).await.expect("stranger");
    assert_eq!(status, 403, "no role: {}", String::from_utf8_lossy(&body));
    assert!(
        String::from_utf8_lossy(&body).contains("system:serviceaccount:olmv1-system:"),
        "the 403 names the user: {}",
        String::from_utf8_lossy(&body)
    );

    let reader = reader_token().await;
    let (status, body) = get(&url, Some(&reader)).await.expect("reader");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{METRICS_READER}: {text}");
    assert!(text.contains("olmv1_leader"), "metrics text: {text}");
    // Cached decisions answer the same.
    let (status, _) = get(&url, Some(&reader)).await.expect("reader again");
    assert_eq!(status, 200);
    let (status, _) = get(&url, Some(&stranger)).await.expect("stranger again");
    assert_eq!(status, 403);

    // Plain HTTP is not served.
    let plain = reqwest::get(format!("http://127.0.0.1:{}/metrics", process.metrics_port)).await;
    assert!(
        plain.map(|r| r.status().as_u16() != 200).unwrap_or(true),
        "plain HTTP must not serve the metrics"
    );

    // No profiling listener without --pprof-bind-address.
    let mut expected = vec![
        process.health_port,
        process.catalog_port,
        process.metrics_port,
    ];
    expected.sort_unstable();
    assert_eq!(process.listening_ports(), expected);
    assert!(process.try_wait().is_none(), "{}", process.log_text());
}

/// gunzips a profile after checking the gzip magic bytes.
fn gunzip_profile(what: &str, body: &[u8]) -> Vec<u8> {
    assert!(
        body.len() > 2 && body[..2] == [0x1f, 0x8b],
        "{what}: not gzip ({} bytes): {}",
        body.len(),
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    let mut decoded = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut decoded)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!decoded.is_empty(), "{what}: empty profile");
    decoded
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn profiles_behind_the_same_checks() {
    let admin = support::cluster().admin().await;
    let pprof_port = free_port();
    let pprof = format!("--pprof-bind-address=127.0.0.1:{pprof_port}");
    let mut process = ControllerProcess::start_with_env(
        "pprof",
        &[&pprof],
        &[("_RJEM_MALLOC_CONF", "prof:true,prof_active:false")],
    );
    process.wait_listening(60);
    let base = format!("https://127.0.0.1:{pprof_port}/debug/pprof");
    eventually_status(&format!("{base}/heap"), None, 401).await;
    // The metrics reader may not profile.
    let reader = reader_token().await;
    let (status, _) = get(&format!("{base}/heap"), Some(&reader))
        .await
        .expect("heap as reader");
    assert_eq!(status, 403);

    // A role with the profiling paths.
    let role = support::unique("pprof-reader");
    let roles: kube::Api<k8s_openapi::api::rbac::v1::ClusterRole> = kube::Api::all(admin.clone());
    let cluster_role: k8s_openapi::api::rbac::v1::ClusterRole =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": role},
            "rules": [{"nonResourceURLs": ["/debug/pprof/*"], "verbs": ["get"]}],
        }))
        .expect("role");
    roles
        .create(&kube::api::PostParams::default(), &cluster_role)
        .await
        .expect("creating the pprof role");
    let profiler = token(&admin, "profiler", Some(&role)).await;

    let (status, body) = get(&format!("{base}/profile?seconds=2"), Some(&profiler))
        .await
        .expect("CPU profile");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let cpu = gunzip_profile("CPU profile", &body);
    assert!(
        contains(&cpu, "nanoseconds"),
        "CPU profile has no cpu/nanoseconds sample type"
    );

    let (status, body) = get(&format!("{base}/heap"), Some(&profiler))
        .await
        .expect("heap profile");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    gunzip_profile("heap profile", &body);

    let (status, _) = get(&format!("{base}/profile?seconds=nope"), Some(&profiler))
        .await
        .expect("bad seconds");
    assert_eq!(status, 400);

    let mut expected = vec![
        process.health_port,
        process.catalog_port,
        process.metrics_port,
        pprof_port,
    ];
    expected.sort_unstable();
    assert_eq!(process.listening_ports(), expected);
}

#[tokio::test]
async fn insecure_metrics_are_plain_http_and_keep_profiling_on_loopback() {
    let open = format!("--pprof-bind-address=0.0.0.0:{}", free_port());
    let mut refused = ControllerProcess::start("open-pprof", &["--metrics-secure=false", &open]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = refused.try_wait() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {}",
            refused.log_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(!status.success());
    assert!(
        refused.log_text().contains("not a loopback address"),
        "{}",
        refused.log_text()
    );

    let mut process = ControllerProcess::start("insecure-metrics", &["--metrics-secure=false"]);
    process.wait_listening(60);
    let url = format!("http://127.0.0.1:{}/metrics", process.metrics_port);
    let body = support::eventually(60, "plain HTTP metrics", || async {
        let response = reqwest::get(&url).await.ok()?;
        (response.status() == 200).then_some(())?;
        response.text().await.ok()
    })
    .await;
    assert!(body.contains("olmv1_leader"), "{body}");
}
