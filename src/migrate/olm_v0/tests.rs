use super::catalog::duration_minutes;
use super::*;
use crate::fbc::model::{Bundle, Channel, ChannelEntry, Package, PackageContent, Property};
use serde_json::json;

const IMAGE: &str = "127.0.0.1:5000/catalogs/demo:v1";

fn subscription() -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "demo", "namespace": "ops"},
        "spec": {"name": "demo-operator", "source": "demo-catalog", "sourceNamespace": "olm",
                 "installPlanApproval": "Manual",
                 "config": {"env": [{"name": "LOG", "value": "debug"}], "selector": {"matchLabels": {"a": "b"}}}},
        "status": {"installedCSV": "demo-operator.v1.2.0", "state": "AtLatestKnown"},
    })
}

fn csv() -> Value {
    json!({
        "metadata": {"name": "demo-operator.v1.2.0", "namespace": "ops", "annotations": {
            "operatorframework.io/properties": r#"{"properties":[{"type":"olm.package","value":{"packageName":"demo-operator","version":"1.2.0"}},{"type":"olm.gvk","value":{"group":"x","kind":"Y","version":"v1"}}]}"#}},
        "spec": {"version": "0.0.1", "installModes": [{"type": "OwnNamespace", "supported": true}],
                 "install": {"spec": {"deployments": [{"name": "demo-controller"}]}}},
        "status": {"phase": "Succeeded", "reason": "InstallSucceeded"},
    })
}

fn operator_group(targets: Value) -> Value {
    json!({"metadata": {"name": "og", "namespace": "ops"}, "spec": {"targetNamespaces": targets}})
}

fn catalog_source(spec: Value) -> Value {
    json!({"metadata": {"name": "demo-catalog", "namespace": "olm"}, "spec": spec})
}

fn operator() -> V0Operator {
    V0Operator {
        subscription: subscription(),
        csv: Some(csv()),
        copied_csv_namespaces: vec![],
        install_plans: vec![json!({"metadata": {"name": "install-abcde"},
            "status": {"phase": "Complete"}})],
        operator_groups: vec![operator_group(json!(["ops"]))],
        catalog_source: Some(catalog_source(json!({"sourceType": "grpc", "image": IMAGE,
            "priority": -100, "updateStrategy": {"registryPoll": {"interval": "10m"}}}))),
        operator_condition: Some(json!({"metadata": {"name": "demo-operator.v1.2.0"}})),
        operator_object: Some("demo-operator.ops".into()),
        crd_owners: vec![],
        cert_provider: crate::bundle::CertProvider::CertManager,
    }
}

fn bundle(name: &str, version: &str, extra: Vec<Property>) -> Bundle {
    let mut properties = vec![Property {
        type_: "olm.package".into(),
        value: json!({"packageName": "demo-operator", "version": version}),
    }];
    properties.extend(extra);
    Bundle {
        schema: "olm.bundle".into(),
        name: name.into(),
        package: "demo-operator".into(),
        image: format!("127.0.0.1:5000/bundles/{name}"),
        properties,
        ..Default::default()
    }
}

fn content(bundles: Vec<Bundle>, in_channel: &[&str]) -> PackageContent {
    PackageContent {
        package: Some(Package {
            schema: "olm.package".into(),
            name: "demo-operator".into(),
            default_channel: "stable".into(),
            ..Default::default()
        }),
        channels: vec![Channel {
            schema: "olm.channel".into(),
            name: "stable".into(),
            package: "demo-operator".into(),
            entries: in_channel
                .iter()
                .map(|n| ChannelEntry {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            properties: vec![],
        }],
        bundles,
        deprecations: vec![],
    }
}

fn serving(name: &str, image: &str, package: Option<PackageContent>) -> CatalogView {
    CatalogView {
        name: name.into(),
        image: Some(image.into()),
        serving: true,
        priority: 0,
        package,
        content_error: None,
    }
}

fn good_catalog() -> CatalogView {
    serving(
        "demo-catalog",
        IMAGE,
        Some(content(
            vec![bundle("demo-operator.v1.2.0", "1.2.0", vec![])],
            &["demo-operator.v1.2.0"],
        )),
    )
}

fn codes(c: &Check) -> Vec<BlockerCode> {
    c.blockers.iter().map(|b| b.code).collect()
}

#[test]
fn an_own_namespace_manual_operator_is_eligible_and_mapped() {
    let c = check(&operator(), &[good_catalog()]);
    assert!(c.eligible, "{:?}", c.blockers);
    assert_eq!(c.subscription, "ops/demo");
    assert_eq!(
        c.version.as_deref(),
        Some("1.2.0"),
        "the olm.package property wins over spec.version"
    );
    let ce = &c.cluster_extension;
    assert_eq!(ce["metadata"]["name"], "demo");
    assert_eq!(
        ce["metadata"]["annotations"]["olm.operatorframework.io/migrated-from-subscription"],
        "ops/demo"
    );
    let cat = &ce["spec"]["source"]["catalog"];
    assert_eq!(cat["packageName"], "demo-operator");
    assert_eq!(
        cat["channels"],
        json!(["stable"]),
        "the default channel made explicit"
    );
    assert_eq!(
        cat["version"], "1.2.0",
        "Manual approval pins the installed version"
    );
    assert_eq!(
        cat["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        "demo-catalog"
    );
    assert_eq!(ce["spec"]["namespace"], "ops");
    assert_eq!(ce["spec"]["serviceAccount"]["name"], "demo-installer");
    let inline = &ce["spec"]["config"]["inline"];
    assert_eq!(inline["watchNamespace"], "ops");
    assert_eq!(inline["deploymentConfig"]["env"][0]["name"], "LOG");
    assert!(inline["deploymentConfig"].get("selector").is_none());
    let plan = c.cluster_catalog.as_ref().expect("catalog plan");
    assert!(plan.reused && plan.manifest.is_none());
    assert_eq!(
        c.installer.bundle_image.as_deref(),
        Some("127.0.0.1:5000/bundles/demo-operator.v1.2.0")
    );
    assert_eq!(
        c.installer.rbac_command.as_deref(),
        Some(
            "olmv1 rbac --catalog demo-catalog demo-operator@1.2.0 --namespace ops --extension demo --watch-namespace ops"
        )
    );
    let kinds: Vec<(&str, V0ObjectAction)> = c
        .v0_objects
        .iter()
        .map(|o| (o.kind.as_str(), o.action))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("Subscription", V0ObjectAction::Remove),
            ("ClusterServiceVersion", V0ObjectAction::Replace),
            ("OperatorCondition", V0ObjectAction::Replace),
            ("InstallPlan", V0ObjectAction::Remove),
            ("Operator", V0ObjectAction::Remove),
            ("OperatorGroup", V0ObjectAction::Keep),
            ("CatalogSource", V0ObjectAction::Keep),
        ]
    );
}

#[test]
fn automatic_all_namespaces_has_no_pin_and_no_watch_namespace() {
    let mut op = operator();
    op.subscription["spec"]["installPlanApproval"] = json!("Automatic");
    op.subscription["spec"]["channel"] = json!("stable");
    op.subscription["spec"]
        .as_object_mut()
        .map(|s| s.remove("config"));
    op.operator_groups = vec![json!({"metadata": {"name": "global"}, "spec": {}})];
    let c = check(&op, &[good_catalog()]);
    assert!(c.eligible, "{:?}", c.blockers);
    let spec = &c.cluster_extension["spec"];
    assert!(spec["source"]["catalog"].get("version").is_none());
    assert!(spec.get("config").is_none(), "{spec}");
}

#[test]
fn single_namespace_watches_the_target() {
    let mut op = operator();
    op.operator_groups = vec![operator_group(json!(["tenant"]))];
    let c = check(&op, &[good_catalog()]);
    assert_eq!(
        c.cluster_extension["spec"]["config"]["inline"]["watchNamespace"],
        "tenant"
    );
}

#[test]
fn an_address_catalog_source_blocks_and_no_catalog_is_planned() {
    let mut op = operator();
    op.catalog_source = Some(catalog_source(
        json!({"sourceType": "grpc", "address": "127.0.0.1:50051"}),
    ));
    let c = check(&op, &[]);
    assert!(!c.eligible);
    assert_eq!(
        codes(&c),
        vec![
            BlockerCode::CatalogSourceNotImage,
            BlockerCode::NotInCatalog
        ]
    );
    assert!(
        c.blockers[0]
            .message
            .contains("a gRPC address (127.0.0.1:50051)"),
        "{}",
        c.blockers[0].message
    );
    assert!(
        c.blockers[1]
            .message
            .contains("there are no ClusterCatalogs")
    );
    assert!(c.cluster_catalog.is_none());
    assert!(c.installer.rbac_command.is_none());
}

#[test]
fn an_address_catalog_source_passes_once_a_cluster_catalog_holds_the_bundle() {
    let mut op = operator();
    op.catalog_source = Some(catalog_source(
        json!({"sourceType": "grpc", "address": "127.0.0.1:50051"}),
    ));
    let c = check(&op, &[good_catalog()]);
    assert!(c.eligible, "{:?}", c.blockers);
    assert!(
        c.cluster_catalog.is_none(),
        "nothing to make from an address"
    );
    assert_eq!(
        c.cluster_extension["spec"]["source"]["catalog"]["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        "demo-catalog"
    );
    // A ConfigMap CatalogSource alike; a missing one still blocks.
    op.catalog_source = Some(catalog_source(
        json!({"sourceType": "configmap", "configMap": "demo"}),
    ));
    assert!(check(&op, &[good_catalog()]).eligible);
    op.catalog_source = None;
    assert_eq!(
        codes(&check(&op, &[good_catalog()])),
        vec![BlockerCode::CatalogSourceNotImage]
    );
}

#[test]
fn a_missing_cluster_catalog_is_planned_with_priority_and_poll_interval() {
    let other = serving("demo-catalog", "example.com/other:v1", None);
    let c = check(&operator(), &[other]);
    let plan = c.cluster_catalog.as_ref().expect("plan");
    assert!(!plan.reused);
    assert_eq!(
        plan.name, "demo-catalog-olm",
        "a name in use gets the namespace appended"
    );
    let m = plan.manifest.as_ref().expect("manifest");
    assert_eq!(m["spec"]["source"]["image"]["ref"], IMAGE);
    assert_eq!(m["spec"]["source"]["image"]["pollIntervalMinutes"], 10);
    assert_eq!(m["spec"]["priority"], -100);
    assert_eq!(codes(&c), vec![BlockerCode::NotInCatalog]);
    assert!(
        c.blockers[0]
            .message
            .contains("demo-catalog: no package \"demo-operator\""),
        "{}",
        c.blockers[0].message
    );
}

#[test]
fn a_digest_image_gets_no_poll_interval() {
    let mut op = operator();
    if let Some(cs) = op.catalog_source.as_mut() {
        cs["spec"]["image"] = json!("r.example/c@sha256:00");
    }
    let c = check(&op, &[]);
    let m = c
        .cluster_catalog
        .and_then(|p| p.manifest)
        .expect("manifest");
    assert!(
        m["spec"]["source"]["image"]
            .get("pollIntervalMinutes")
            .is_none()
    );
}

#[test]
fn a_version_outside_the_channel_or_a_catalog_not_serving_blocks() {
    let mut not_in_channel = good_catalog();
    not_in_channel.package = Some(content(
        vec![bundle("demo-operator.v1.2.0", "1.2.0", vec![])],
        &[],
    ));
    let c = check(&operator(), &[not_in_channel]);
    assert_eq!(codes(&c), vec![BlockerCode::NotInCatalog]);
    assert!(
        c.blockers[0]
            .message
            .contains("is not in channel \"stable\"")
    );
    let mut down = good_catalog();
    down.serving = false;
    let c = check(&operator(), &[down]);
    assert!(c.blockers[0].message.contains("demo-catalog: not Serving"));
}

#[test]
fn a_second_catalog_with_the_bundle_is_used_when_the_image_one_lacks_it() {
    let image_one = serving("demo-catalog", IMAGE, None);
    let mut other = good_catalog();
    other.name = "mirror".into();
    other.image = Some("mirror.example/demo:v1".into());
    let c = check(&operator(), &[image_one, other]);
    assert!(c.eligible, "{:?}", c.blockers);
    assert_eq!(
        c.cluster_extension["spec"]["source"]["catalog"]["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        "mirror"
    );
}

#[test]
fn installation_blockers_are_each_named() {
    let mut op = operator();
    op.subscription["metadata"]["annotations"] = json!({"olm.generated-by": "install-xyz"});
    let csv = op.csv.as_mut().expect("csv");
    csv["status"] = json!({"phase": "Installing", "reason": "InstallWaiting", "message": "deployment not ready"});
    csv["metadata"]["annotations"]["operatorframework.io/properties"] = json!(
        r#"{"properties":[{"type":"olm.package","value":{"packageName":"demo-operator","version":"1.2.0"}},{"type":"olm.package.required","value":{"packageName":"dep","versionRange":">=1"}}]}"#
    );
    // Owned APIServices are no blocker: olmv1 installs them.
    csv["spec"]["apiservicedefinitions"] = json!({"owned": [{"name": "v1.metrics.example.com"}]});
    op.operator_condition =
        Some(json!({"spec": {"overrides": [{"type": "Upgradeable", "status": "False"}]}}));
    op.operator_groups = vec![
        json!({"metadata": {"name": "og"}, "spec": {"targetNamespaces": ["a", "b"], "serviceAccountName": "scoped"}}),
    ];
    let c = check(&op, &[good_catalog()]);
    assert_eq!(
        codes(&c),
        vec![
            BlockerCode::GeneratedDependency,
            BlockerCode::CsvNotSucceeded,
            BlockerCode::Dependencies,
            BlockerCode::ScopedServiceAccount,
        ]
    );
    assert!(
        c.blockers[1]
            .message
            .contains("phase Installing (InstallWaiting: deployment not ready)")
    );
    assert!(c.blockers[2].message.contains("olm.package.required"));
    let condition = c
        .v0_objects
        .iter()
        .find(|o| o.kind == "OperatorCondition")
        .expect("the OperatorCondition listed");
    assert!(condition.why.contains("set: Upgradeable"), "{condition:?}");
    assert!(c.blockers.iter().all(|b| !b.action.is_empty()));
    op.operator_groups[0]["spec"]
        .as_object_mut()
        .map(|s| s.remove("serviceAccountName"));
    let c = check(&op, &[good_catalog()]);
    assert!(codes(&c).contains(&BlockerCode::MultiNamespace));
}

#[test]
fn catalog_bundle_dependencies_block_too() {
    let dep = Property {
        type_: "olm.constraint".into(),
        value: json!({"cel": {"rule": "true"}}),
    };
    let mut cat = good_catalog();
    cat.package = Some(content(
        vec![bundle("demo-operator.v1.2.0", "1.2.0", vec![dep])],
        &["demo-operator.v1.2.0"],
    ));
    let c = check(&operator(), &[cat]);
    assert_eq!(codes(&c), vec![BlockerCode::Dependencies]);
    assert!(c.blockers[0].message.contains("olm.constraint"));
}

/// What the takeover would refuse after OLM v0 was stopped is a blocker before it:
/// another installation owning the CRDs, webhooks without a certificate provider.
#[test]
fn other_owners_of_the_crds_and_webhooks_without_a_provider_block() {
    use super::crd_owners::CrdOwner;
    let mut op = operator();
    op.crd_owners = vec![
        CrdOwner::ClusterServiceVersion {
            crd: "widgets.example.com".into(),
            namespace: "team-b".into(),
            name: "demo-operator.v1.2.0".into(),
        },
        CrdOwner::ClusterExtension {
            crd: "gadgets.example.com".into(),
            name: "gadgets".into(),
        },
    ];
    let c = check(&op, &[good_catalog()]);
    assert_eq!(codes(&c), vec![BlockerCode::SharedCrds]);
    assert_eq!(
        c.blockers[0].message,
        "CRD widgets.example.com is also owned by CSV team-b/demo-operator.v1.2.0 (OLM v0); CRD gadgets.example.com is already managed by ClusterExtension gadgets"
    );
    assert!(c.blockers[0].action.contains("once per cluster"));

    let mut op = operator();
    if let Some(csv) = op.csv.as_mut() {
        csv["spec"]["webhookdefinitions"] = json!([{"type": "ValidatingAdmissionWebhook"}]);
    }
    assert!(
        check(&op, &[good_catalog()]).eligible,
        "cert-manager is served"
    );
    op.cert_provider = crate::bundle::CertProvider::OpenShiftServiceCa;
    assert!(
        check(&op, &[good_catalog()]).eligible,
        "service-ca is served"
    );
    op.cert_provider = crate::bundle::CertProvider::None;
    let c = check(&op, &[good_catalog()]);
    assert_eq!(codes(&c), vec![BlockerCode::CertificateProvider]);
    assert!(c.blockers[0].action.starts_with("install cert-manager"));
    // Without webhooks no provider is needed.
    let mut op = operator();
    op.cert_provider = crate::bundle::CertProvider::None;
    assert!(check(&op, &[good_catalog()]).eligible);
}

#[test]
fn no_installed_csv_and_no_operator_group() {
    let mut op = operator();
    op.csv = None;
    op.operator_groups = vec![];
    let c = check(&op, &[good_catalog()]);
    assert_eq!(
        codes(&c)[..2],
        [BlockerCode::NotInstalled, BlockerCode::OperatorGroup]
    );
    assert!(
        c.blockers[0]
            .message
            .contains("demo-operator.v1.2.0 does not exist")
    );
}

#[test]
fn go_durations_become_minutes() {
    assert_eq!(duration_minutes("10m"), Some(10));
    assert_eq!(duration_minutes("1h30m"), Some(90));
    assert_eq!(duration_minutes("45s"), Some(1));
    assert_eq!(duration_minutes("90s"), Some(2));
    assert_eq!(duration_minutes("1h0m0s"), Some(60));
    assert_eq!(duration_minutes("10"), None);
    assert_eq!(duration_minutes("ten"), None);
    assert_eq!(duration_minutes(""), None);
}

/// OLM v0 resolves the Subscriptions of a namespace together: an InstallPlan shared with
/// another Subscription is left to it, and one not finished blocks (module
/// `install_plans`); an upgrade of its own waiting for approval is deleted.
#[test]
fn install_plans_shared_with_other_subscriptions_stay_and_unfinished_ones_block() {
    let plan = |phase: &str, csvs: Value, subs: &[&str]| {
        let refs: Vec<Value> = subs
            .iter()
            .map(|s| json!({"kind": "Subscription", "name": s}))
            .collect();
        json!({"metadata": {"name": format!("install-{phase}"), "ownerReferences": refs},
            "spec": {"clusterServiceVersionNames": csvs}, "status": {"phase": phase}})
    };
    let installed = json!(["demo-operator.v1.2.0", "other.v1.0.0"]);
    let v0_object = |c: &Check, name: &str| {
        let o = c.v0_objects.iter().find(|o| o.name == name).expect(name);
        (o.action, o.why.clone())
    };
    // Shared and complete: kept, eligible.
    let mut op = operator();
    op.install_plans = vec![plan("Complete", installed.clone(), &["demo", "other"])];
    let c = check(&op, &[good_catalog()]);
    assert!(c.eligible, "{:?}", c.blockers);
    assert_eq!(
        v0_object(&c, "install-Complete"),
        (
            V0ObjectAction::Keep,
            "shared with Subscription other: left to OLM v0".to_string()
        )
    );
    // An upgrade of its own waiting for approval: deleted, never runs, eligible.
    op.install_plans = vec![plan(
        "RequiresApproval",
        json!(["demo-operator.v1.3.0"]),
        &["demo"],
    )];
    let c = check(&op, &[good_catalog()]);
    assert!(c.eligible, "{:?}", c.blockers);
    let (action, why) = v0_object(&c, "install-RequiresApproval");
    assert_eq!(action, V0ObjectAction::Remove);
    assert!(why.contains("can never run"), "{why}");
    // Shared and waiting for approval, or its own being installed: blocked.
    for (ip, message) in [
        (
            plan(
                "RequiresApproval",
                json!(["demo-operator.v1.3.0", "other.v1.1.0"]),
                &["demo", "other"],
            ),
            "InstallPlan install-RequiresApproval (RequiresApproval, installing demo-operator.v1.3.0, other.v1.1.0) is shared with Subscription other, still on OLM v0",
        ),
        (
            plan("Installing", json!(["demo-operator.v1.3.0"]), &["demo"]),
            "InstallPlan install-Installing (Installing) is installing demo-operator.v1.3.0 now",
        ),
    ] {
        op.install_plans = vec![ip];
        let c = check(&op, &[good_catalog()]);
        assert!(!c.eligible);
        let b = c
            .blockers
            .iter()
            .find(|b| b.code == BlockerCode::InstallPlanInFlight)
            .expect("InstallPlan blocker");
        assert_eq!(b.message, message);
        assert!(
            b.action.contains("let OLM v0 finish it first"),
            "{}",
            b.action
        );
    }
}
