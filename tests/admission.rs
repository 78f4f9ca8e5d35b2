//! Admission of ClusterExtension and ClusterCatalog objects by a real kube-apiserver
//! with the generated CRDs installed: every CEL rule and OpenAPI constraint, accepted
//! and rejected, with upstream's messages; defaults; immutability; printer columns;
//! and the `config/` manifests and samples being accepted.

use crate::support;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};

fn ext_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<ClusterExtension>(&()))
}

fn cat_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<ClusterCatalog>(&()))
}

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("valid object")
}

fn ext_spec(catalog: Value) -> Value {
    json!({
        "namespace": "argocd",
        "serviceAccount": {"name": "argocd-installer"},
        "source": {"sourceType": "Catalog", "catalog": catalog},
    })
}

async fn dry_run(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    api.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        obj,
    )
    .await
}

async fn create_ext(spec: Value) -> Result<DynamicObject, kube::Error> {
    let client = support::cluster().admin().await;
    dry_run(
        &ext_api(&client),
        &object("ClusterExtension", &support::unique("ext"), spec),
    )
    .await
}

async fn create_cat(spec: Value) -> Result<DynamicObject, kube::Error> {
    let client = support::cluster().admin().await;
    dry_run(
        &cat_api(&client),
        &object("ClusterCatalog", &support::unique("cat"), spec),
    )
    .await
}

#[track_caller]
fn assert_rejected(result: Result<DynamicObject, kube::Error>, message: &str) {
    match result {
        Ok(obj) => panic!(
            "accepted, expected rejection with {message:?}: {:?}",
            obj.data
        ),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(message),
                "rejected with {text:?}, expected it to contain {message:?}"
            );
        }
    }
}

#[track_caller]
fn assert_accepted(result: Result<DynamicObject, kube::Error>) -> DynamicObject {
    result.unwrap_or_else(|e| panic!("rejected: {e}"))
}

// ---------------------------------------------------------------- ClusterExtension

#[tokio::test]
async fn seed_example_is_accepted_with_defaults() {
    let obj = assert_accepted(
        create_ext(ext_spec(
            json!({"packageName": "openshift-pipelines-operator-rh", "version": "1.14.x"}),
        ))
        .await,
    );
    assert_eq!(
        obj.data["spec"]["source"]["catalog"]["upgradeConstraintPolicy"],
        "CatalogProvided"
    );
    assert!(obj.data["spec"].get("install").is_none());
}

#[tokio::test]
async fn seed_channel_and_policy_examples_are_accepted() {
    for catalog in [
        json!({"packageName": "pipelines", "channels": ["latest"]}),
        json!({"packageName": "pipelines", "channels": ["pipelines-1.14", "latest"], "version": "<1.16"}),
        json!({"packageName": "pipelines", "version": "1.15.0", "upgradeConstraintPolicy": "SelfCertified"}),
        json!({"packageName": "argocd-operator", "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": "operatorhubio"}}}),
        json!({"packageName": "argocd-operator", "selector": {"matchExpressions": [{"key": "example.com/support", "operator": "In", "values": ["true"]}]}}),
    ] {
        assert_accepted(create_ext(ext_spec(catalog)).await);
    }
}

#[tokio::test]
async fn namespace_rules() {
    let mut spec = ext_spec(json!({"packageName": "p"}));
    spec["namespace"] = json!("Not_A_Label");
    assert_rejected(
        create_ext(spec.clone()).await,
        "namespace must be a valid DNS1123 label",
    );
    spec["namespace"] = json!("a".repeat(64));
    assert_rejected(create_ext(spec.clone()).await, "spec.namespace: Too long");
    spec.as_object_mut().expect("object").remove("namespace");
    assert_rejected(create_ext(spec).await, "spec.namespace: Required value");
}

#[tokio::test]
async fn service_account_is_optional_as_upstream_and_validated_when_set() {
    // Current upstream releases made spec.serviceAccount optional: their YAML applies.
    let mut spec = ext_spec(json!({"packageName": "p"}));
    spec.as_object_mut()
        .expect("object")
        .remove("serviceAccount");
    let created = create_ext(spec.clone())
        .await
        .expect("a ClusterExtension without serviceAccount is accepted");
    assert!(created.data["spec"].get("serviceAccount").is_none());
    spec["serviceAccount"] = json!({"name": ""});
    assert_rejected(create_ext(spec.clone()).await, "spec.serviceAccount.name");
    spec["serviceAccount"] = json!({"name": "Bad_Name"});
    assert_rejected(
        create_ext(spec).await,
        "name must be a valid DNS1123 subdomain",
    );
}

#[tokio::test]
async fn source_union_rules() {
    let mut spec = ext_spec(json!({"packageName": "p"}));
    spec["source"] = json!({"sourceType": "Catalog"});
    assert_rejected(
        create_ext(spec.clone()).await,
        "catalog is required when sourceType is Catalog, and forbidden otherwise",
    );
    spec["source"] = json!({"sourceType": "Bundle", "catalog": {"packageName": "p"}});
    assert_rejected(
        create_ext(spec.clone()).await,
        "spec.source.sourceType: Unsupported value: \"Bundle\"",
    );
    spec["source"] = json!({"catalog": {"packageName": "p"}});
    assert_rejected(
        create_ext(spec).await,
        "spec.source.sourceType: Required value",
    );
}

#[tokio::test]
async fn package_name_rules() {
    assert_rejected(
        create_ext(ext_spec(json!({"packageName": "Bad_Package"}))).await,
        "packageName must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters",
    );
    assert_rejected(
        create_ext(ext_spec(json!({"packageName": "a".repeat(254)}))).await,
        "Too long",
    );
    assert_rejected(
        create_ext(ext_spec(json!({"version": "1.0.0"}))).await,
        "spec.source.catalog.packageName: Required value",
    );
    assert_accepted(create_ext(ext_spec(json!({"packageName": "my.operator-pkg"}))).await);
}

#[tokio::test]
async fn channel_rules() {
    assert_rejected(
        create_ext(ext_spec(
            json!({"packageName": "p", "channels": ["stable", "Not_Valid"]}),
        ))
        .await,
        "channels entries must be valid DNS1123 subdomains",
    );
    let many: Vec<String> = (0..257).map(|i| format!("c{i}")).collect();
    assert_rejected(
        create_ext(ext_spec(json!({"packageName": "p", "channels": many}))).await,
        "must have at most 256 items",
    );
    let ok: Vec<String> = (0..256).map(|i| format!("c{i}")).collect();
    assert_accepted(create_ext(ext_spec(json!({"packageName": "p", "channels": ok}))).await);
}

#[tokio::test]
async fn upgrade_constraint_policy_enum() {
    assert_rejected(
        create_ext(ext_spec(
            json!({"packageName": "p", "upgradeConstraintPolicy": "Always"}),
        ))
        .await,
        "Unsupported value: \"Always\"",
    );
    let obj = assert_accepted(
        create_ext(ext_spec(
            json!({"packageName": "p", "upgradeConstraintPolicy": "SelfCertified"}),
        ))
        .await,
    );
    assert_eq!(
        obj.data["spec"]["source"]["catalog"]["upgradeConstraintPolicy"],
        "SelfCertified"
    );
}

/// Version range strings the CRD accepts (docs/concepts/resolution.md §4.3 and its tables).
const ACCEPTED_VERSIONS: &[&str] = &[
    "1.14.0",
    "1.14.x",
    "1.14.X",
    "1.14.*",
    "1.x",
    "1",
    "1.2",
    "v1.2",
    "v1.2.3",
    "=1.2.3",
    "!=1.x",
    "!=1.2.3",
    ">1.2.3",
    "<1.2.3",
    ">=1.11, <1.13",
    ">=1.11,<1.13",
    ">= 1.2.0, < 2.0.0",
    "=>1.2",
    "=<1.2",
    "<=1.2.3",
    "~1.2",
    "~1.2.3",
    "~>1.2.3",
    "~1",
    "^0.2.3",
    "^1.2.x",
    "^2.x",
    "^2.3",
    "^0.0",
    "1.0.0 || 2.x",
    ">=1.2.3 <2.0.0",
    ">1.15, <1.17",
    "<1.16",
    ">1.11.1",
    "1.0.0-alpha.1",
    "1.0.0+build.5",
    "1.0.0-rc.1+meta",
    ">=1.2.3-0 <2.0.0",
    "*",
    "x",
    "1.2.3 || >=2.0.0 <3.0.0 || 5.x",
    ">=0.2.3, <0.3.0",
    ">= 2.3, < 3",
    "9.x",
];

/// Strings it rejects with `invalid version expression` (or by length).
const REJECTED_VERSIONS: &[&str] = &[
    "1.0.0 - 2.0.0",
    ">=1.0.0 && <2.0.0",
    "1.0.0; 2.0.0",
    "==1.0.0",
    "<<1.0.0",
    ">>1.0.0",
    ">~1.0.0",
    "=!1.0.0",
    "!1.0.0",
    "1.2.3.4",
    "01.2.3",
    "1.02.3",
    "1.2.03",
    "1.0.0+build_meta",
    "1.*.*",
    "latest",
    "v",
    "1.2.3.",
    ">=",
    "abc",
    "1.2.3,",
    "|| 1.0.0",
];

#[tokio::test]
async fn version_ranges_accepted() {
    for version in ACCEPTED_VERSIONS {
        let result = create_ext(ext_spec(json!({"packageName": "p", "version": version}))).await;
        assert!(
            result.is_ok(),
            "{version:?} should be accepted: {:?}",
            result.err()
        );
    }
}

#[tokio::test]
async fn version_ranges_rejected() {
    for version in REJECTED_VERSIONS {
        let result = create_ext(ext_spec(json!({"packageName": "p", "version": version}))).await;
        match result {
            Ok(_) => panic!("{version:?} should be rejected"),
            Err(e) => assert!(
                e.to_string().contains("invalid version expression"),
                "{version:?}: {e}"
            ),
        }
    }
    let long = format!(">={}", "1.2.3 ".repeat(11));
    assert!(long.len() > 64);
    assert_rejected(
        create_ext(ext_spec(json!({"packageName": "p", "version": long}))).await,
        "Too long",
    );
    assert!(ACCEPTED_VERSIONS.len() + REJECTED_VERSIONS.len() >= 40);
}

#[tokio::test]
async fn install_and_preflight_rules() {
    let mut spec = ext_spec(json!({"packageName": "p"}));
    spec["install"] = json!({});
    assert_rejected(
        create_ext(spec.clone()).await,
        "at least one of [preflight] are required when install is specified",
    );
    spec["install"] = json!({"preflight": {}});
    assert_rejected(
        create_ext(spec.clone()).await,
        "at least one of [crdUpgradeSafety] are required when preflight is specified",
    );
    spec["install"] = json!({"preflight": {"crdUpgradeSafety": {}}});
    assert_rejected(
        create_ext(spec.clone()).await,
        "enforcement: Required value",
    );
    spec["install"] = json!({"preflight": {"crdUpgradeSafety": {"enforcement": "Loose"}}});
    assert_rejected(
        create_ext(spec.clone()).await,
        "Unsupported value: \"Loose\"",
    );
    for enforcement in ["None", "Strict"] {
        spec["install"] = json!({"preflight": {"crdUpgradeSafety": {"enforcement": enforcement}}});
        assert_accepted(create_ext(spec.clone()).await);
    }
}

#[tokio::test]
async fn config_rules() {
    let mut spec = ext_spec(json!({"packageName": "p"}));
    spec["config"] = json!({"configType": "Inline"});
    assert_rejected(
        create_ext(spec.clone()).await,
        "inline is required when configType is Inline, and forbidden otherwise",
    );
    spec["config"] = json!({"configType": "Inline", "inline": {}});
    assert_rejected(
        create_ext(spec.clone()).await,
        "should have at least 1 properties",
    );
    spec["config"] = json!({"configType": "File", "inline": {"a": 1}});
    assert_rejected(
        create_ext(spec.clone()).await,
        "Unsupported value: \"File\"",
    );
    spec["config"] = json!({"configType": "Inline", "inline": {"watchNamespace": "team-a", "deploymentConfig": {"nodeSelector": {"a": "b"}}}});
    let obj = assert_accepted(create_ext(spec).await);
    assert_eq!(
        obj.data["spec"]["config"]["inline"]["deploymentConfig"]["nodeSelector"]["a"],
        "b"
    );
}

#[tokio::test]
async fn progress_deadline_bounds() {
    for (minutes, ok) in [(9, false), (10, true), (720, true), (721, false)] {
        let mut spec = ext_spec(json!({"packageName": "p"}));
        spec["progressDeadlineMinutes"] = json!(minutes);
        let result = create_ext(spec).await;
        assert_eq!(
            result.is_ok(),
            ok,
            "progressDeadlineMinutes {minutes}: {:?}",
            result.err()
        );
    }
}

#[tokio::test]
async fn namespace_and_package_name_are_immutable() {
    let client = support::cluster().admin().await;
    let api = ext_api(&client);
    let name = support::unique("immutable");
    api.create(
        &PostParams::default(),
        &object(
            "ClusterExtension",
            &name,
            ext_spec(json!({"packageName": "p"})),
        ),
    )
    .await
    .expect("create");
    let patch = |spec: Value| Patch::Merge(json!({"spec": spec}));
    let err = api
        .patch(
            &name,
            &PatchParams::default(),
            &patch(json!({"namespace": "other"})),
        )
        .await
        .expect_err("namespace change must be rejected");
    assert!(err.to_string().contains("namespace is immutable"), "{err}");
    let err = api
        .patch(
            &name,
            &PatchParams::default(),
            &patch(json!({"source": {"catalog": {"packageName": "q"}}})),
        )
        .await
        .expect_err("packageName change must be rejected");
    assert!(
        err.to_string().contains("packageName is immutable"),
        "{err}"
    );
    // Changing the installer account, the version and channels is allowed.
    api.patch(
        &name,
        &PatchParams::default(),
        &patch(json!({"serviceAccount": {"name": "other-installer"}, "source": {"catalog": {"version": "2.x", "channels": ["fast"]}}})),
    )
    .await
    .expect("serviceAccount, version and channels may change");
    api.delete(&name, &Default::default())
        .await
        .expect("delete");
}

#[tokio::test]
async fn status_bundle_version_must_be_semver() {
    let client = support::cluster().admin().await;
    let api = ext_api(&client);
    let name = support::unique("status");
    api.create(
        &PostParams::default(),
        &object(
            "ClusterExtension",
            &name,
            ext_spec(json!({"packageName": "p"})),
        ),
    )
    .await
    .expect("create");
    let status = |version: &str| {
        Patch::Merge(
            json!({"status": {"install": {"bundle": {"name": "p.v1.0.0", "version": version}}}}),
        )
    };
    let err = api
        .patch_status(&name, &PatchParams::default(), &status("not-a-version"))
        .await
        .expect_err("bad version");
    assert!(
        err.to_string()
            .contains("version must be well-formed semver"),
        "{err}"
    );
    api.patch_status(&name, &PatchParams::default(), &status("1.0.0+2"))
        .await
        .expect("semver with release");
    api.delete(&name, &Default::default())
        .await
        .expect("delete");
}

// ---------------------------------------------------------------- ClusterCatalog

fn image_spec(image: Value) -> Value {
    json!({"source": {"type": "Image", "image": image}})
}

const DIGEST: &str = "sha256:a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1";

#[tokio::test]
async fn catalog_defaults() {
    let obj = assert_accepted(
        create_cat(image_spec(
            json!({"ref": "quay.io/operatorhubio/catalog:latest"}),
        ))
        .await,
    );
    assert_eq!(obj.data["spec"]["priority"], 0);
    assert_eq!(obj.data["spec"]["availabilityMode"], "Available");
}

#[tokio::test]
async fn catalog_refs_accepted() {
    for r in [
        "quay.io/operatorhubio/catalog:latest",
        "registry.redhat.io/redhat/redhat-operator-index:v4.18",
        "127.0.0.1:5000/test/catalog:v1",
        "localhost:5000/catalog:v1.2.3",
        &format!("quay.io/operatorhubio/catalog@{DIGEST}"),
        &format!("127.0.0.1:5000/team/catalog@{DIGEST}"),
        "quay.io/a_b/c__d/e-f.g:tag_1.2-x",
    ] {
        let result = create_cat(image_spec(json!({"ref": r}))).await;
        assert!(result.is_ok(), "{r} should be accepted: {:?}", result.err());
    }
}

#[tokio::test]
async fn catalog_ref_rules() {
    let cases: &[(&str, &str)] = &[
        (
            "quay.io/operatorhubio/catalog",
            "must end with a digest or a tag",
        ),
        (
            "-bad.example.com/catalog:latest",
            "must start with a valid domain",
        ),
        ("quay.io/UPPER:latest", "a valid name is required"),
        (
            "quay.io/catalog:-tag",
            "tag is invalid. valid tags must begin with a word character",
        ),
        (
            "quay.io/catalog@1sha:0123456789abcdef0123456789abcdef",
            "digest algorithm is not valid",
        ),
        (
            "quay.io/catalog@sha256:0123abcd",
            "digest is not valid. the encoded string must be at least 32 characters",
        ),
        (
            "quay.io/catalog@sha256:zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            "digest is not valid. the encoded string must only contain hex characters (A-F, a-f, 0-9)",
        ),
    ];
    for (r, message) in cases {
        assert_rejected(create_cat(image_spec(json!({"ref": r}))).await, message);
    }
    let long_tag = format!("quay.io/catalog:{}", "t".repeat(128));
    assert_rejected(
        create_cat(image_spec(json!({"ref": long_tag}))).await,
        "tag is invalid. the tag must not be more than 127 characters",
    );
    let too_long = format!("quay.io/{}:latest", "a".repeat(1000));
    assert_rejected(
        create_cat(image_spec(json!({"ref": too_long}))).await,
        "Too long",
    );
}

#[tokio::test]
async fn catalog_poll_interval_rules() {
    assert_rejected(
        create_cat(image_spec(
            json!({"ref": format!("quay.io/catalog@{DIGEST}"), "pollIntervalMinutes": 10}),
        ))
        .await,
        "cannot specify pollIntervalMinutes while using digest-based image",
    );
    assert_rejected(
        create_cat(image_spec(
            json!({"ref": "quay.io/catalog:latest", "pollIntervalMinutes": 0}),
        ))
        .await,
        "should be greater than or equal to 1",
    );
    assert_accepted(
        create_cat(image_spec(
            json!({"ref": "quay.io/catalog:latest", "pollIntervalMinutes": 1}),
        ))
        .await,
    );
}

#[tokio::test]
async fn catalog_source_union_and_enums() {
    assert_rejected(
        create_cat(json!({"source": {"type": "Image"}})).await,
        "image is required when source type is Image, and forbidden otherwise",
    );
    assert_rejected(
        create_cat(json!({"source": {"type": "Git", "image": {"ref": "quay.io/c:latest"}}})).await,
        "Unsupported value: \"Git\"",
    );
    let mut spec = image_spec(json!({"ref": "quay.io/c:latest"}));
    spec["availabilityMode"] = json!("Sometimes");
    assert_rejected(
        create_cat(spec.clone()).await,
        "Unsupported value: \"Sometimes\"",
    );
    spec["availabilityMode"] = json!("Unavailable");
    spec["priority"] = json!(-2147483648i64);
    assert_accepted(create_cat(spec.clone()).await);
    spec["priority"] = json!(2147483648i64);
    assert!(
        create_cat(spec).await.is_err(),
        "priority beyond int32 must be rejected"
    );
    let client = support::cluster().admin().await;
    let no_spec: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": support::unique("nospec")}
    }))
    .expect("object");
    assert_rejected(
        dry_run(&cat_api(&client), &no_spec).await,
        "spec: Required value",
    );
}

#[tokio::test]
async fn catalog_status_rules() {
    let client = support::cluster().admin().await;
    let api = cat_api(&client);
    let name = support::unique("catstatus");
    api.create(
        &PostParams::default(),
        &object(
            "ClusterCatalog",
            &name,
            image_spec(json!({"ref": "quay.io/c:latest"})),
        ),
    )
    .await
    .expect("create");
    let status = |r: &str, base: &str| {
        Patch::Merge(
            json!({"status": {"resolvedSource": {"type": "Image", "image": {"ref": r}}, "urls": {"base": base}}}),
        )
    };
    let err = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &status("quay.io/c:latest", "https://x/catalogs/c"),
        )
        .await
        .expect_err("resolved ref must be a digest");
    assert!(err.to_string().contains("must end with a digest"), "{err}");
    let err = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &status(&format!("quay.io/c@{DIGEST}"), "ftp://x/catalogs/c"),
        )
        .await
        .expect_err("ftp scheme");
    assert!(
        err.to_string()
            .contains("scheme must be either http or https"),
        "{err}"
    );
    api.patch_status(
        &name,
        &PatchParams::default(),
        &status(
            &format!("quay.io/c@{DIGEST}"),
            "https://catalogd-service.olmv1-system.svc/catalogs/c",
        ),
    )
    .await
    .expect("valid status");
    api.delete(&name, &Default::default())
        .await
        .expect("delete");
}

// ---------------------------------------------------------------- printer columns

async fn table_columns(client: &kube::Client, plural: &str) -> Vec<String> {
    let req = http::Request::get(format!("/apis/olm.operatorframework.io/v1/{plural}"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .expect("request");
    let table: Value = client.request(req).await.expect("table");
    table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn printer_columns() {
    let client = support::cluster().admin().await;
    assert_eq!(
        table_columns(&client, "clusterextensions").await,
        [
            "Name",
            "Installed Bundle",
            "Version",
            "Installed",
            "Progressing",
            "Age"
        ]
    );
    assert_eq!(
        table_columns(&client, "clustercatalogs").await,
        ["Name", "LastUnpacked", "Serving", "Age"]
    );
}

#[tokio::test]
async fn printer_columns_show_status_values() {
    let client = support::cluster().admin().await;
    let api = ext_api(&client);
    let name = support::unique("columns");
    api.create(
        &PostParams::default(),
        &object(
            "ClusterExtension",
            &name,
            ext_spec(json!({"packageName": "p"})),
        ),
    )
    .await
    .expect("create");
    let now = "2026-01-01T00:00:00Z";
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "install": {"bundle": {"name": "p.v1.2.3", "version": "1.2.3"}},
            "conditions": [
                {"type": "Installed", "status": "True", "reason": "Succeeded", "message": "ok", "lastTransitionTime": now},
                {"type": "Progressing", "status": "True", "reason": "Succeeded", "message": "Desired state reached", "lastTransitionTime": now},
            ]
        }})),
    )
    .await
    .expect("status");
    let req = http::Request::get(format!(
        "/apis/olm.operatorframework.io/v1/clusterextensions/{name}"
    ))
    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .expect("request");
    let table: Value = client.request(req).await.expect("table");
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[1], "p.v1.2.3");
    assert_eq!(cells[2], "1.2.3");
    assert_eq!(cells[3], "True");
    assert_eq!(cells[4], "True");
    api.delete(&name, &Default::default())
        .await
        .expect("delete");
}
