use super::*;
use crate::api::{BundleMetadata, ClusterExtensionInstallStatus};

fn condition(type_: &str, status: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: "Reason".into(),
        message: String::new(),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ),
        observed_generation: None,
    }
}

fn installed(version: &str, conditions: Vec<Condition>) -> ClusterExtensionStatus {
    ClusterExtensionStatus {
        conditions,
        install: Some(ClusterExtensionInstallStatus {
            bundle: BundleMetadata {
                name: format!("argocd.v{version}"),
                version: version.into(),
                ..Default::default()
            },
            installer: None,
        }),
        ..Default::default()
    }
}

fn lines(m: &Metrics, prefix: &str) -> Vec<String> {
    let text = m.encode().unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

#[test]
fn extension_info_and_conditions_are_labelled_and_replaced() {
    let m = Metrics::new();
    let status = installed(
        "1.0.0",
        vec![
            condition("Installed", "True"),
            condition("Progressing", "True"),
        ],
    );
    m.resolved_from("argocd", "argocd.v1.0.0", "operatorhub");
    m.extension_status("argocd", "argocd-operator", &status);
    assert_eq!(
        lines(&m, "olmv1_clusterextension_info"),
        vec![
            r#"olmv1_clusterextension_info{name="argocd",package="argocd-operator",version="1.0.0",bundle="argocd.v1.0.0",catalog="operatorhub"} 1"#
        ]
    );
    let conditions = lines(&m, "olmv1_clusterextension_condition{");
    assert_eq!(conditions.len(), 6, "{conditions:#?}");
    assert!(
        conditions.contains(
            &r#"olmv1_clusterextension_condition{name="argocd",type="Installed",status="True"} 1"#
                .to_string()
        )
    );
    assert!(
        conditions.contains(
            &r#"olmv1_clusterextension_condition{name="argocd",type="Installed",status="False"} 0"#
                .to_string()
        )
    );

    // A resolution of a newer bundle does not relabel the installed one; its
    // install replaces the info series.
    m.resolved_from("argocd", "argocd.v1.1.0", "community");
    m.extension_status("argocd", "argocd-operator", &status);
    let info = lines(&m, "olmv1_clusterextension_info");
    assert!(info[0].contains(r#"catalog="operatorhub""#), "{info:#?}");
    let status = installed(
        "1.1.0",
        vec![
            condition("Installed", "True"),
            condition("Progressing", "False"),
        ],
    );
    m.extension_status("argocd", "argocd-operator", &status);
    let info = lines(&m, "olmv1_clusterextension_info");
    assert_eq!(info.len(), 1, "{info:#?}");
    assert!(
        info[0].contains(r#"version="1.1.0""#) && info[0].contains(r#"catalog="community""#),
        "{info:#?}"
    );
    assert!(lines(&m, "olmv1_clusterextension_condition{").contains(
        &r#"olmv1_clusterextension_condition{name="argocd",type="Progressing",status="False"} 1"#
            .to_string()
    ));

    m.forget_extension("argocd");
    assert!(lines(&m, "olmv1_clusterextension_info{").is_empty());
    assert!(lines(&m, "olmv1_clusterextension_condition{").is_empty());
}

#[test]
fn catalog_series_errors_and_durations() {
    let m = Metrics::new();
    let status = ClusterCatalogStatus {
        conditions: vec![
            condition("Progressing", "True"),
            condition("Serving", "False"),
        ],
        ..Default::default()
    };
    m.catalog_status("operatorhub", &status);
    m.error(Controller::clustercatalog, "Retrying");
    m.error(Controller::clustercatalog, "Retrying");
    m.error(Controller::clusterextension, "Blocked");
    m.catalog_ingested("operatorhub", Duration::from_millis(300), 4096);
    m.phase(Phase::resolve, Duration::from_millis(20));
    m.reconciled(Controller::clusterextension, Duration::from_millis(20));
    m.http_request(200, Duration::from_millis(1));
    m.set_leader(true);
    m.api_request("GET");
    m.api_request("WATCH");
    assert_eq!(m.api_requests_total(), 2);

    let text = m.encode().unwrap();
    for expected in [
        r#"olmv1_clustercatalog_condition{catalog="operatorhub",type="Serving",status="False"} 1"#,
        r#"olmv1_reconcile_errors_total{controller="clustercatalog",reason="Retrying"} 2"#,
        r#"olmv1_reconcile_errors_total{controller="clusterextension",reason="Blocked"} 1"#,
        r#"olmv1_clustercatalog_content_size_bytes{catalog="operatorhub"} 4096"#,
        "olmv1_clustercatalog_ingest_duration_seconds_count 1",
        "olmv1_clustercatalog_ingest_size_bytes_count 1",
        r#"olmv1_clusterextension_phase_duration_seconds_count{phase="resolve"} 1"#,
        r#"olmv1_reconcile_duration_seconds_count{controller="clusterextension"} 1"#,
        r#"olmv1_catalog_http_request_duration_seconds_count{code="200"} 1"#,
        "olmv1_leader 1",
        r#"olmv1_kube_api_requests_total{verb="WATCH"} 1"#,
        "# TYPE olmv1_reconcile_errors counter",
        "# EOF",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }

    m.forget_catalog("operatorhub");
    let text = m.encode().unwrap();
    assert!(!text.contains(r#"catalog="operatorhub""#), "{text}");
}

#[test]
fn upgrade_available_names_the_versions_and_goes_when_up_to_date() {
    let m = Metrics::new();
    m.upgrade_available("e", "p", Some(("1.0.0", "1.1.0", "ApprovalRequired")));
    assert_eq!(
        lines(&m, "olmv1_clusterextension_upgrade_available{"),
        vec![
            r#"olmv1_clusterextension_upgrade_available{name="e",package="p",installed_version="1.0.0",available_version="1.1.0",reason="ApprovalRequired"} 1"#
        ]
    );
    m.upgrade_available("e", "p", Some(("1.1.0", "1.2.0", "ExcludedBySpec")));
    let now = lines(&m, "olmv1_clusterextension_upgrade_available{");
    assert_eq!(now.len(), 1, "the old series went: {now:?}");
    assert!(now[0].contains(r#"available_version="1.2.0""#));
    m.upgrade_available("e", "p", None);
    assert!(lines(&m, "olmv1_clusterextension_upgrade_available{").is_empty());
    m.upgrade_available("e", "p", Some(("1.1.0", "1.2.0", "ExcludedBySpec")));
    m.forget_extension("e");
    assert!(lines(&m, "olmv1_clusterextension_upgrade_available{").is_empty());
}
