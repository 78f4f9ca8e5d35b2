use super::*;
use crate::server::tls::MinVersion;

fn run(role: Role, args: &[&str]) -> (Mapped, Vec<String>) {
    match parse(role, args.iter().map(|s| s.to_string()).collect()) {
        Ok(Outcome::Run(mapped, skipped)) => (*mapped, skipped),
        other => panic!("{args:?}: {other:?}"),
    }
}

fn refused(role: Role, args: &[&str]) -> String {
    match parse(role, args.iter().map(|s| s.to_string()).collect()) {
        Err(ParseError::Invalid(e)) => e,
        Err(ParseError::Clap(e)) => e.to_string(),
        other => panic!("{args:?} accepted: {other:?}"),
    }
}

/// Every flag of upstream's operator-controller (cmd/operator-controller/main.go, klog's
/// InitFlags, the feature-gate flag), each in upstream's syntax.
const OPERATOR_CONTROLLER_FLAGS: &[&str] = &[
    "--metrics-bind-address=:8443",
    "--health-probe-bind-address=:8081",
    "--pprof-bind-address=127.0.0.1:6060",
    "--catalogd-cas-dir=/var/certs",
    "--pull-cas-dir=/var/certs",
    "--tls-cert=/var/certs/tls.cert",
    "--tls-key=/var/certs/tls.key",
    "--tls-profile=modern",
    "--leader-elect",
    "--cache-path=/var/cache",
    "--system-namespace=olmv1-system",
    "--global-pull-secret=openshift-config/pull-secret",
    "--feature-gates=PreflightPermissions=true,SingleOwnNamespaceInstallSupport=true",
    "--feature-gates=WebhookProviderCertManager=true,HelmChartSupport=false",
    "--v=4",
    "--vmodule=",
    "--log_dir=",
    "--log_file=",
    "--log_file_max_size=1800",
    "--logtostderr=true",
    "--alsologtostderr=false",
    "--add_dir_header=false",
    "--skip_headers",
    "--one_output=false",
    "--skip_log_headers=false",
    "--stderrthreshold=2",
    "--log_backtrace_at=:0",
];

#[test]
fn every_upstream_operator_controller_flag_is_accepted_and_mapped() {
    let (m, skipped) = run(Role::OperatorController, OPERATOR_CONTROLLER_FLAGS);
    assert!(skipped.is_empty(), "{skipped:?}");
    let a = &m.args;
    assert_eq!(a.role, Role::OperatorController);
    assert_eq!(a.metrics_bind_address, "0.0.0.0:8443");
    assert_eq!(a.health_probe_bind_address, "0.0.0.0:8081");
    assert_eq!(a.metrics_serving.pprof_bind_address, "127.0.0.1:6060");
    assert_eq!(a.catalogd_cas_dir, Some(PathBuf::from("/var/certs")));
    assert_eq!(a.pull_cas_dir, Some(PathBuf::from("/var/certs")));
    assert_eq!(
        a.metrics_serving.metrics_cert_path,
        Some(PathBuf::from("/var/certs"))
    );
    assert_eq!(a.metrics_serving.metrics_cert_name, "tls.cert");
    assert_eq!(a.metrics_serving.metrics_cert_key, "tls.key");
    assert!(a.metrics_serving.metrics_secure);
    assert_eq!(a.catalog_server.tls_min_version, MinVersion::Tls13);
    assert!(a.leader_elect);
    assert_eq!(a.cache_dir, PathBuf::from("/var/cache"));
    assert_eq!(a.namespace, "olmv1-system");
    assert_eq!(
        a.global_pull_secret.as_deref(),
        Some("openshift-config/pull-secret")
    );
    assert_eq!(m.log_filter, "debug");
    assert!(
        m.notes
            .iter()
            .any(|n| n.starts_with("PreflightPermissions=true")),
        "{:?}",
        m.notes
    );
}

#[test]
fn upstream_operator_controller_defaults() {
    let (m, _) = run(Role::OperatorController, &[]);
    let a = &m.args;
    assert_eq!(a.health_probe_bind_address, "0.0.0.0:8081");
    assert_eq!(a.cache_dir, PathBuf::from("/var/cache"));
    assert!(!a.leader_elect);
    assert_eq!(a.metrics_serving.pprof_address(), None);
    assert_eq!(a.catalogd_cas_dir, None);
    assert_eq!(a.global_pull_secret, None);
    assert_eq!(a.role.lease_name(), "9c4404e7.operatorframework.io");
    assert_eq!(m.log_filter, "info");
    // upstream's model: the controller's own identity installs, said once at start
    let installer = a.default_installer().expect("a default installer");
    assert_eq!(
        installer.to_string(),
        format!(
            "system:serviceaccount:{}:operator-controller-controller-manager",
            a.namespace
        )
    );
    assert_eq!(
        installer.source,
        crate::api::InstallerSource::ControllerIdentity
    );
    let note = m
        .notes
        .iter()
        .find(|n| n.contains("spec.serviceAccount is ignored"));
    assert!(
        note.is_some_and(|n| n.contains("least privilege")),
        "{:?}",
        m.notes
    );
}

/// Every flag of upstream's catalogd (cmd/catalogd/main.go, klog, feature gates).
const CATALOGD_FLAGS: &[&str] = &[
    "--metrics-bind-address=:7443",
    "--health-probe-bind-address=:8081",
    "--pprof-bind-address=0",
    "--leader-elect=true",
    "--system-namespace=olmv1-system",
    "--catalogs-server-addr=:8443",
    "--external-address=catalogd-service.olmv1-system.svc",
    "--cache-dir=/var/cache/",
    "--gc-interval=6h",
    "--tls-cert=/var/certs/tls.crt",
    "--tls-key=/var/certs/tls.key",
    "--tls-profile=intermediate",
    "--webhook-server-port=9443",
    "--pull-cas-dir=/var/ca-certs",
    "--global-pull-secret=openshift-config/pull-secret",
    "--feature-gates=APIV1MetasHandler=true",
    "-v=6",
    "--vmodule=",
    "--log_dir=",
    "--log_file=",
    "--log_file_max_size=10",
    "--logtostderr",
    "--alsologtostderr",
    "--add_dir_header",
    "--skip_headers=false",
    "--one_output",
    "--skip_log_headers",
    "--stderrthreshold=INFO",
    "--log_backtrace_at=:0",
];

#[test]
fn every_upstream_catalogd_flag_is_accepted_and_mapped() {
    let (m, skipped) = run(Role::Catalogd, CATALOGD_FLAGS);
    assert!(skipped.is_empty(), "{skipped:?}");
    let a = &m.args;
    assert_eq!(a.role, Role::Catalogd);
    assert_eq!(a.metrics_bind_address, "0.0.0.0:7443");
    assert_eq!(a.catalog_server_bind_address, "0.0.0.0:8443");
    assert_eq!(a.external_address, "catalogd-service.olmv1-system.svc");
    assert_eq!(a.cache_dir, PathBuf::from("/var/cache/"));
    assert_eq!(
        a.workers.cache_gc_interval,
        std::time::Duration::from_secs(6 * 3600)
    );
    assert_eq!(
        a.catalog_server_tls_cert,
        Some(PathBuf::from("/var/certs/tls.crt"))
    );
    assert_eq!(
        a.catalog_server_tls_key,
        Some(PathBuf::from("/var/certs/tls.key"))
    );
    assert_eq!(a.pull_cas_dir, Some(PathBuf::from("/var/ca-certs")));
    assert!(a.leader_elect);
    assert_eq!(a.metrics_serving.pprof_address(), None);
    assert_eq!(m.log_filter, "trace");
    assert_eq!(a.role.lease_name(), "catalogd-operator-lock");
    assert_eq!(
        a.webhook,
        Some(crate::server::webhook::WebhookServing {
            bind_address: "0.0.0.0:9443".into(),
            cert: PathBuf::from("/var/certs/tls.crt"),
            key: PathBuf::from("/var/certs/tls.key"),
        })
    );
    assert_eq!(a.default_installer(), None);
}

#[test]
fn upstream_catalogd_defaults() {
    let (m, _) = run(Role::Catalogd, &[]);
    let a = &m.args;
    assert_eq!(a.catalog_server_bind_address, "0.0.0.0:8443");
    assert_eq!(a.external_address, "catalogd-service.olmv1-system.svc");
    assert_eq!(
        a.workers.cache_gc_interval,
        std::time::Duration::from_secs(12 * 3600)
    );
    assert_eq!(a.catalog_server_tls_cert, None);
    // upstream needs the certificates for its webhook server: not served without them
    assert_eq!(a.webhook, None);
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("mutating webhook is not served on port 9443")),
        "{:?}",
        m.notes
    );
}

#[test]
fn go_flag_syntax_with_a_separate_value_and_bools() {
    let (m, _) = run(
        Role::OperatorController,
        &["--cache-path", "/tmp/c", "-v", "5", "--leader-elect=false"],
    );
    assert_eq!(m.args.cache_dir, PathBuf::from("/tmp/c"));
    assert_eq!(m.log_filter, "debug");
    assert!(!m.args.leader_elect);
    let (m, _) = run(Role::OperatorController, &["--leader-elect=T"]);
    assert!(m.args.leader_elect);
}

/// The arguments upstream's Helm chart (v1.11.0, helm/olmv1) renders with its standard
/// values (cert-manager.yaml) and its experimental values (experimental.yaml on top):
/// both start; the experimental alpha gates not done here are logged as without effect
/// (e2e/upstream_chart.rs runs the chart itself).
#[test]
fn upstream_chart_arguments_start_both_programs_with_standard_and_experimental_values() {
    let common = [
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=:8443",
        "--leader-elect",
        "--feature-gates=WebhookProviderCertManager=true",
        "--tls-cert=/var/certs/tls.crt",
        "--tls-key=/var/certs/tls.key",
        "--catalogd-cas-dir=/var/ca-certs",
        "--pull-cas-dir=/var/ca-certs",
    ];
    let standard = [
        "--feature-gates=BoxcutterRuntime=false",
        "--feature-gates=BundleReleaseSupport=false",
        "--feature-gates=DeploymentConfig=false",
        "--feature-gates=SingleOwnNamespaceInstallSupport=false",
        "--feature-gates=WebhookProviderOpenshiftServiceCA=false",
    ];
    let experimental = [
        "--feature-gates=BoxcutterRuntime=true",
        "--feature-gates=BundleReleaseSupport=true",
        "--feature-gates=DeploymentConfig=true",
        "--feature-gates=SingleOwnNamespaceInstallSupport=true",
        "--feature-gates=WebhookProviderOpenshiftServiceCA=false",
    ];
    let catalogd = [
        "--leader-elect",
        "--metrics-bind-address=:7443",
        "--external-address=catalogd-service.olmv1-system.svc",
        "--tls-cert=/var/certs/tls.crt",
        "--tls-key=/var/certs/tls.key",
        "--pull-cas-dir=/var/ca-certs",
    ];
    for (gates, catalogd_gates) in [
        (&standard, &["--feature-gates=APIV1MetasHandler=false"][..]),
        (
            &experimental,
            &[
                "--feature-gates=APIV1MetasHandler=true",
                "--feature-gates=GraphQLCatalogQueries=true",
            ][..],
        ),
    ] {
        let args: Vec<&str> = common.iter().chain(gates.iter()).copied().collect();
        let (m, skipped) = run(Role::OperatorController, &args);
        assert!(skipped.is_empty(), "{skipped:?}");
        let boxcutter = m.notes.iter().find(|n| n.starts_with("BoxcutterRuntime="));
        let on = gates[0].ends_with("=true");
        assert_eq!(
            boxcutter.is_some_and(|n| n.contains("not implemented here and has no effect")),
            on,
            "{:?}",
            m.notes
        );
        let args: Vec<&str> = catalogd
            .iter()
            .chain(catalogd_gates.iter())
            .copied()
            .collect();
        let (m, skipped) = run(Role::Catalogd, &args);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(
            m.notes
                .iter()
                .any(|n| n.starts_with("GraphQLCatalogQueries=true is not implemented")),
            on,
            "{:?}",
            m.notes
        );
    }
}

#[test]
fn unsupported_feature_gates_are_refused_naming_the_gate() {
    for gate in ["HelmChartSupport", "SyntheticPermissions"] {
        let e = refused(
            Role::OperatorController,
            &[&format!("--feature-gates={gate}=true")],
        );
        assert!(e.contains(gate) && e.contains("remove the gate"), "{e}");
        // off is what this controller does: accepted
        run(
            Role::OperatorController,
            &[&format!("--feature-gates={gate}=false")],
        );
    }
    let e = refused(
        Role::OperatorController,
        &["--feature-gates=NoSuchGate=true"],
    );
    assert!(e.contains("unrecognized feature gate: NoSuchGate"), "{e}");
    let e = refused(Role::Catalogd, &["--feature-gates=HelmChartSupport=true"]);
    assert!(e.contains("unrecognized feature gate"), "{e}");
    let e = refused(Role::OperatorController, &["--feature-gates=AllAlpha=true"]);
    assert!(e.contains("AllAlpha"), "{e}");
    let e = refused(Role::OperatorController, &["--feature-gates=X"]);
    assert!(e.contains("missing bool value"), "{e}");
}

#[test]
fn upstream_checks_of_tls_and_metrics_flags() {
    let e = refused(Role::OperatorController, &["--tls-cert=/a/tls.crt"]);
    assert!(e.contains("must be used together"), "{e}");
    let e = refused(Role::OperatorController, &["--metrics-bind-address=:8443"]);
    assert!(e.contains("requires tls-cert and tls-key"), "{e}");
    let (m, _) = run(
        Role::OperatorController,
        &["--tls-cert=/c/tls.crt", "--tls-key=/c/tls.key"],
    );
    assert_eq!(m.args.metrics_bind_address, "0.0.0.0:8443");
    let e = refused(Role::OperatorController, &["--tls-profile=weird"]);
    assert!(e.contains("--tls-profile"), "{e}");
    let e = refused(Role::OperatorController, &["--global-pull-secret=a/b/c"]);
    assert!(e.contains("<namespace>/<name>"), "{e}");
}

#[test]
fn custom_tls_profile_flags_in_both_programs() {
    for role in [Role::OperatorController, Role::Catalogd] {
        let (m, skipped) = run(
            role,
            &[
                "--tls-profile=custom",
                "--tls-custom-ciphers=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
                "--tls-custom-curves",
                "X25519,secp384r1",
                "--tls-custom-version=TLSv1.3",
            ],
        );
        assert!(skipped.is_empty(), "{skipped:?}");
        let tls = m.args.catalog_server.tls_options();
        assert_eq!(tls.min_version, MinVersion::Tls13);
        assert_eq!(tls.cipher_suites.len(), 2);
        assert_eq!(tls.groups, ["X25519", "secp384r1"]);
        let e = refused(
            role,
            &["--tls-profile=custom", "--tls-custom-curves=secp521r1"],
        );
        assert!(e.contains("secp521r1") && e.contains("rustls"), "{e}");
        let (m, _) = run(role, &["--tls-custom-version=TLSv1.0"]);
        assert_eq!(m.args.catalog_server.tls_min_version, MinVersion::Tls12);
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("ignored with --tls-profile=intermediate")),
            "{:?}",
            m.notes
        );
    }
}

#[test]
fn unknown_flags_are_skipped_not_fatal() {
    let (m, skipped) = run(
        Role::OperatorController,
        &[
            "--leader-elect",
            "--some-future-flag=1",
            "--another",
            "value",
            "--cache-path=/x",
        ],
    );
    assert_eq!(skipped, ["--some-future-flag=1", "--another", "value"]);
    assert!(m.args.leader_elect);
    assert_eq!(m.args.cache_dir, PathBuf::from("/x"));
}

#[test]
fn help_lists_every_upstream_flag() {
    use clap::CommandFactory;
    let help = OperatorControllerFlags::command().render_help().to_string();
    for flag in OPERATOR_CONTROLLER_FLAGS {
        let name = flag.split('=').next().unwrap_or(flag);
        assert!(
            help.contains(name),
            "operator-controller --help lacks {name}"
        );
    }
    let help = CatalogdFlags::command().render_help().to_string();
    for flag in CATALOGD_FLAGS {
        let name = flag.split('=').next().unwrap_or(flag);
        let name = if name == "-v" { "--v" } else { name };
        assert!(help.contains(name), "catalogd --help lacks {name}");
    }
}

#[test]
fn program_names_select_the_role() {
    use std::ffi::OsStr;
    assert_eq!(
        role_of(Some(OsStr::new("/operator-controller"))),
        Some(Role::OperatorController)
    );
    assert_eq!(role_of(Some(OsStr::new("/catalogd"))), Some(Role::Catalogd));
    assert_eq!(role_of(Some(OsStr::new("/usr/bin/olmv1"))), None);
    assert_eq!(role_of(None), None);
    assert!(matches!(
        parse(Role::Catalogd, vec!["version".into()]),
        Ok(Outcome::Version)
    ));
}

#[test]
fn the_definitions_are_consistent() {
    use clap::CommandFactory;
    OperatorControllerFlags::command().debug_assert();
    CatalogdFlags::command().debug_assert();
}

/// `--help` lists exactly the gates each program accepts (gates::OPERATOR_CONTROLLER,
/// gates::CATALOGD).
#[test]
fn feature_gates_help_lists_every_accepted_gate() {
    use clap::CommandFactory;
    for (mut command, gates) in [
        (
            OperatorControllerFlags::command(),
            gates::OPERATOR_CONTROLLER,
        ),
        (CatalogdFlags::command(), gates::CATALOGD),
    ] {
        let help = command.render_long_help().to_string();
        let (_, listed) = help
            .split_once("Options are: ")
            .unwrap_or_else(|| panic!("no gate list in:\n{help}"));
        let listed: Vec<&str> = listed
            .split(|c: char| c == ',' || c.is_whitespace())
            .take_while(|w| w.is_empty() || w.chars().all(|c| c.is_ascii_alphanumeric()))
            .filter(|w| !w.is_empty())
            .collect();
        let mut accepted: Vec<&str> = gates.iter().map(|(name, _)| *name).collect();
        accepted.sort_unstable();
        assert_eq!(listed, accepted, "{help}");
    }
}
