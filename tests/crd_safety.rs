//! The CRD upgrade-safety check against a real kube-apiserver: a CRD installed with
//! objects in two stored versions (`status.storedVersions` maintained by the API server)
//! is compared with new CRDs by `check` and by `olmv1 crd-diff --from-cluster`, and a
//! large real CRD read back after the API server normalised it must not produce findings
//! against its own file.
//!
//! Every test uses its own CRD group, so the tests run in parallel on one control plane.

use crate::support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use olmv1::preflight::crd_safety::{self, Finding, Location, Rule, check, message, parse_crd};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------------------
// Building CRDs
// ---------------------------------------------------------------------------------------

/// The `spec` schema the tests start from: a string with an enum, an integer with a
/// maximum, a required field.
fn spec_schema() -> Value {
    json!({
        "type": "object",
        "description": "Desired state of the widget.",
        "required": ["owner"],
        "properties": {
            "color": {"type": "string", "enum": ["red", "green", "blue"], "description": "Paint."},
            "replicas": {"type": "integer", "maximum": 10, "description": "How many."},
            "owner": {"type": "string", "description": "Who is responsible."}
        }
    })
}

fn root_schema(spec: Value) -> Value {
    json!({
        "type": "object",
        "description": "A widget.",
        "properties": {"spec": spec}
    })
}

fn version(name: &str, served: bool, storage: bool, spec: Value) -> Value {
    json!({
        "name": name,
        "served": served,
        "storage": storage,
        "schema": {"openAPIV3Schema": root_schema(spec)}
    })
}

fn crd_name(group: &str) -> String {
    format!("widgets.{group}")
}

/// A Widget CRD of `group` as an operator author would write it (no status).
fn widget_crd(group: &str, versions: Vec<Value>) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(group)},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": versions
        }
    }))
    .expect("valid CRD")
}

/// The CRD as it is after the upgrade that made v1 the storage version.
fn both_versions(spec: Value) -> Vec<Value> {
    vec![
        version("v1alpha1", true, false, spec.clone()),
        version("v1", true, true, spec),
    ]
}

fn unique_group(prefix: &str) -> String {
    format!("{}.example.com", support::unique(prefix))
}

fn crd_api(client: &kube::Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

fn widget_api(client: &kube::Client, group: &str, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: format!("{group}/{version}"),
        kind: "Widget".to_owned(),
        plural: "widgets".to_owned(),
    };
    Api::namespaced_with(client.clone(), "default", &resource)
}

async fn wait_established(client: &kube::Client, name: &str) -> CustomResourceDefinition {
    let api = crd_api(client);
    support::eventually(90, &format!("CRD {name} Established"), || {
        let api = api.clone();
        let name = name.to_owned();
        async move {
            let crd = api.get(&name).await.ok()?;
            let established = crd
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(crd)
        }
    })
    .await
}

async fn create_widget(client: &kube::Client, group: &str, version: &str, name: &str) {
    let api = widget_api(client, group, version);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/{version}"),
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"color": "blue", "replicas": 3, "owner": "team-a"}
    }))
    .expect("valid widget");
    // The handler for a just-established CRD can take a moment to appear.
    support::eventually(30, &format!("creating widget {name}"), || {
        let api = api.clone();
        let obj = obj.clone();
        async move { api.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;
}

/// Installs the Widget CRD of `group` with v1alpha1 as the storage version, creates a
/// widget, then upgrades the CRD to store v1 (v1alpha1 still served) and creates another
/// widget. Returns the live CRD, whose `status.storedVersions` is `[v1alpha1, v1]`.
async fn install_widgets(client: &kube::Client, group: &str) -> CustomResourceDefinition {
    let api = crd_api(client);
    let name = crd_name(group);
    let first = widget_crd(group, vec![version("v1alpha1", true, true, spec_schema())]);
    api.create(&PostParams::default(), &first)
        .await
        .unwrap_or_else(|e| panic!("creating CRD {name}: {e}"));
    let live = wait_established(client, &name).await;
    assert_eq!(crd_safety::stored_versions(&live), ["v1alpha1"]);
    create_widget(client, group, "v1alpha1", "first").await;

    let mut upgraded = widget_crd(group, both_versions(spec_schema()));
    upgraded.metadata.resource_version = live.metadata.resource_version.clone();
    api.replace(&name, &PostParams::default(), &upgraded)
        .await
        .unwrap_or_else(|e| panic!("making v1 the storage version of {name}: {e}"));
    let live = support::eventually(30, "storedVersions [v1alpha1, v1]", || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let crd = api.get(&name).await.ok()?;
            let stored = crd.status.as_ref()?.stored_versions.clone()?;
            (stored == ["v1alpha1", "v1"]).then_some(crd)
        }
    })
    .await;
    create_widget(client, group, "v1", "second").await;
    // Both widgets are readable through both served versions.
    for v in ["v1alpha1", "v1"] {
        let list = widget_api(client, group, v)
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("listing widgets as {v}: {e}"));
        assert_eq!(list.items.len(), 2, "widgets as {v}");
    }
    live
}

/// Replaces the live CRD with `new` on the API server (used for changes the check calls
/// safe: the API server must accept them and the existing widgets must stay readable).
async fn apply_and_read_widgets(
    client: &kube::Client,
    group: &str,
    live: &CustomResourceDefinition,
    mut new: CustomResourceDefinition,
    read_as: &[&str],
) {
    let name = crd_name(group);
    new.metadata.resource_version = live.metadata.resource_version.clone();
    crd_api(client)
        .replace(&name, &PostParams::default(), &new)
        .await
        .unwrap_or_else(|e| panic!("applying the safe new CRD {name}: {e}"));
    for v in read_as {
        let api = widget_api(client, group, v);
        let widgets = support::eventually(30, &format!("reading widgets as {v}"), || {
            let api = api.clone();
            async move {
                let list = api.list(&Default::default()).await.ok()?;
                (list.items.len() == 2).then_some(list)
            }
        })
        .await;
        for w in &widgets.items {
            assert_eq!(w.data["spec"]["owner"], "team-a", "{v}: {:?}", w.data);
            assert_eq!(w.data["spec"]["color"], "blue", "{v}: {:?}", w.data);
        }
    }
}

fn texts(findings: &[Finding]) -> Vec<String> {
    findings.iter().map(ToString::to_string).collect()
}

// ---------------------------------------------------------------------------------------
// 1 + 2: the live CRD against new CRDs
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn removing_a_stored_version_is_found() {
    let client = support::cluster().admin().await;
    let group = unique_group("svr");
    let live = install_widgets(&client, &group).await;
    let name = crd_name(&group);

    // v1alpha1 is no longer in spec.versions although objects were stored as v1alpha1.
    let new = widget_crd(&group, vec![version("v1", true, true, spec_schema())]);
    let findings = check(&live, &new);
    assert_eq!(
        texts(&findings),
        ["storedVersionRemoval: stored versions removed : [v1alpha1]"]
    );
    assert_eq!(findings[0].rule, Rule::StoredVersionRemoval);
    assert_eq!(findings[0].location, Location::Crd);
    assert_eq!(
        message(&name, &findings),
        format!(
            "validating upgrade for CRD \"{name}\": storedVersionRemoval: stored versions removed : [v1alpha1]"
        )
    );

    // The API server agrees: it refuses the same update.
    let mut attempt = new.clone();
    attempt.metadata.resource_version = live.metadata.resource_version.clone();
    let err = crd_api(&client)
        .replace(
            &name,
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &attempt,
        )
        .await
        .expect_err("the API server accepted removing a stored version");
    assert!(err.to_string().contains("storedVersions"), "{err}");

    // Dropping only the *served* flag of v1alpha1 keeps it and is safe.
    let unserved = widget_crd(
        &group,
        vec![
            version("v1alpha1", false, false, spec_schema()),
            version("v1", true, true, spec_schema()),
        ],
    );
    assert_eq!(texts(&check(&live, &unserved)), Vec::<String>::new());
}

#[tokio::test]
async fn removing_a_field_is_found() {
    let client = support::cluster().admin().await;
    let group = unique_group("rmf");
    let live = install_widgets(&client, &group).await;
    let name = crd_name(&group);

    let mut spec = spec_schema();
    spec["properties"]
        .as_object_mut()
        .unwrap()
        .remove("replicas");
    let new = widget_crd(&group, both_versions(spec));
    let findings = check(&live, &new);
    let expected = [
        "existingFieldRemoval: removed field : v1.^.spec.replicas",
        "existingFieldRemoval: removed field : v1alpha1.^.spec.replicas",
    ];
    assert_eq!(texts(&findings), expected);
    assert!(
        findings
            .iter()
            .all(|f| f.rule == Rule::ExistingFieldRemoval && f.crd == name)
    );
    assert_eq!(
        message(&name, &findings),
        format!(
            "validating upgrade for CRD \"{name}\": {}; {}",
            expected[0], expected[1]
        )
    );
}

#[tokio::test]
async fn removing_an_enum_value_is_found() {
    let client = support::cluster().admin().await;
    let group = unique_group("enum");
    let live = install_widgets(&client, &group).await;
    let name = crd_name(&group);

    // "blue" is the colour of both existing widgets.
    let mut spec = spec_schema();
    spec["properties"]["color"]["enum"] = json!(["red", "green"]);
    let new = widget_crd(&group, both_versions(spec));
    let findings = check(&live, &new);
    let expected = [
        "v1: ^.spec.color: enum: allowed enum values removed : [\"blue\"]",
        "v1alpha1: ^.spec.color: enum: allowed enum values removed : [\"blue\"]",
    ];
    assert_eq!(texts(&findings), expected);
    assert!(findings.iter().all(|f| f.rule == Rule::Enum));
    assert_eq!(
        message(&name, &findings),
        format!(
            "validating upgrade for CRD \"{name}\": {}; {}",
            expected[0], expected[1]
        )
    );

    // The opposite direction (a value added) is safe.
    let mut spec = spec_schema();
    spec["properties"]["color"]["enum"] = json!(["red", "green", "blue", "black"]);
    assert_eq!(
        texts(&check(&live, &widget_crd(&group, both_versions(spec)))),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn description_only_changes_pass_and_apply() {
    let client = support::cluster().admin().await;
    let group = unique_group("desc");
    let live = install_widgets(&client, &group).await;

    let mut spec = spec_schema();
    spec["description"] = json!("The desired state, reworded.");
    spec["properties"]["color"]["description"] = json!("Paint colour (British spelling).");
    spec["properties"]["replicas"]
        .as_object_mut()
        .unwrap()
        .remove("description");
    spec["properties"]["owner"]["description"] = json!("A team name.");
    let new = widget_crd(&group, both_versions(spec));
    assert_ne!(
        serde_json::to_value(&new.spec).unwrap(),
        serde_json::to_value(&live.spec).unwrap()
    );
    let findings = check(&live, &new);
    assert_eq!(texts(&findings), Vec::<String>::new());
    assert_eq!(
        crd_safety::verdict(
            crd_safety::Enforcement::Strict,
            &crd_name(&group),
            &findings
        ),
        crd_safety::Verdict::Safe
    );
    apply_and_read_widgets(&client, &group, &live, new, &["v1alpha1", "v1"]).await;
}

#[tokio::test]
async fn new_optional_field_and_new_version_pass_and_apply() {
    let client = support::cluster().admin().await;
    let group = unique_group("add");
    let live = install_widgets(&client, &group).await;

    let mut spec = spec_schema();
    spec["properties"]["label"] = json!({"type": "string", "maxLength": 63});
    let new = widget_crd(
        &group,
        vec![
            version("v1alpha1", true, false, spec.clone()),
            version("v1", true, true, spec.clone()),
            version("v2", true, false, spec),
        ],
    );
    assert_eq!(texts(&check(&live, &new)), Vec::<String>::new());
    apply_and_read_widgets(&client, &group, &live, new, &["v1alpha1", "v1", "v2"]).await;

    // The control: the same new field made required is found, in every version.
    let mut spec = spec_schema();
    spec["properties"]["label"] = json!({"type": "string"});
    spec["required"] = json!(["owner", "label"]);
    let findings = check(&live, &widget_crd(&group, both_versions(spec)));
    assert_eq!(
        texts(&findings),
        [
            "v1: ^.spec: required: new required fields: [label]",
            "v1alpha1: ^.spec: required: new required fields: [label]",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// 3: `olmv1 crd-diff`
// ---------------------------------------------------------------------------------------

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn crd_diff(args: &[&std::ffi::OsStr]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .arg("crd-diff")
        .args(args)
        .env("KUBECONFIG", &support::cluster().admin_kubeconfig)
        .output()
        .expect("running olmv1 crd-diff");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn write_yaml(dir: &Path, file: &str, value: &impl serde::Serialize) -> PathBuf {
    let path = dir.join(file);
    let text = serde_saphyr::to_string(value).expect("YAML");
    std::fs::write(&path, text).expect("writing a test file");
    path
}

#[tokio::test]
async fn crd_diff_from_cluster() {
    let client = support::cluster().admin().await;
    let group = unique_group("cli");
    install_widgets(&client, &group).await;
    let name = crd_name(&group);
    let dir = tempfile::tempdir().unwrap();

    // Unsafe: a field removed.
    let mut spec = spec_schema();
    spec["properties"].as_object_mut().unwrap().remove("owner");
    spec["required"] = json!([]);
    let removed = write_yaml(
        dir.path(),
        "removed.yaml",
        &widget_crd(&group, both_versions(spec)),
    );
    let run = tokio::task::spawn_blocking({
        let name = name.clone();
        move || crd_diff(&["--from-cluster".as_ref(), name.as_ref(), removed.as_ref()])
    })
    .await
    .unwrap();
    assert_eq!(
        run.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    let findings = [
        "existingFieldRemoval: removed field : v1.^.spec.owner",
        "existingFieldRemoval: removed field : v1alpha1.^.spec.owner",
    ];
    assert!(
        run.stdout.contains(&format!(
            "CRD \"{name}\": 2 problem(s) block the upgrade:\n  - {}\n  - {}\n",
            findings[0], findings[1]
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "condition message: validating upgrade for CRD \"{name}\": {}; {}",
            findings[0], findings[1]
        )),
        "{}",
        run.stdout
    );

    // Safe: a new optional field; the stored versions come from the live CRD.
    let mut spec = spec_schema();
    spec["properties"]["label"] = json!({"type": "string"});
    let safe = write_yaml(
        dir.path(),
        "safe.yaml",
        &widget_crd(&group, both_versions(spec)),
    );
    let run = tokio::task::spawn_blocking({
        let name = name.clone();
        move || crd_diff(&["--from-cluster".as_ref(), name.as_ref(), safe.as_ref()])
    })
    .await
    .unwrap();
    assert_eq!(
        run.code,
        Some(0),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    assert_eq!(
        run.stdout,
        format!("CRD \"{name}\": safe to upgrade (stored versions: [v1alpha1, v1])\n")
    );

    // Dropping v1alpha1 is caught because the live CRD stored objects as v1alpha1.
    let dropped = write_yaml(
        dir.path(),
        "dropped.yaml",
        &widget_crd(&group, vec![version("v1", true, true, spec_schema())]),
    );
    let run = tokio::task::spawn_blocking({
        let name = name.clone();
        let dropped = dropped.clone();
        move || crd_diff(&["--from-cluster".as_ref(), name.as_ref(), dropped.as_ref()])
    })
    .await
    .unwrap();
    assert_eq!(
        run.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout
            .contains("  - storedVersionRemoval: stored versions removed : [v1alpha1]\n"),
        "{}",
        run.stdout
    );

    // A CRD name that does not exist.
    let missing = format!("gadgets.{group}");
    let run = tokio::task::spawn_blocking({
        let missing = missing.clone();
        let dropped = dropped.clone();
        move || {
            crd_diff(&[
                "--from-cluster".as_ref(),
                missing.as_ref(),
                dropped.as_ref(),
            ])
        }
    })
    .await
    .unwrap();
    assert_eq!(
        run.code,
        Some(2),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(&format!(
            "error: CRD \"{missing}\" does not exist on the cluster"
        )),
        "{}",
        run.stderr
    );

    // A new file that is not a CRD.
    let config_map = write_yaml(
        dir.path(),
        "cm.yaml",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
    );
    let run = tokio::task::spawn_blocking({
        let name = name.clone();
        move || {
            crd_diff(&[
                "--from-cluster".as_ref(),
                name.as_ref(),
                config_map.as_ref(),
            ])
        }
    })
    .await
    .unwrap();
    assert_eq!(
        run.code,
        Some(2),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "cm.yaml: not a CustomResourceDefinition: the document has apiVersion \"v1\" and kind \"ConfigMap\""
        ),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn crd_diff_files_with_stored_versions_from_the_old_file() {
    let client = support::cluster().admin().await;
    let group = unique_group("files");
    let live = install_widgets(&client, &group).await;
    let dir = tempfile::tempdir().unwrap();

    // The old CRD as `kubectl get crd -o yaml` would save it: with status.storedVersions.
    let old = write_yaml(dir.path(), "old.yaml", &live);
    let old_text = std::fs::read_to_string(&old).unwrap();
    let reread = parse_crd(&old_text).expect("the saved live CRD parses");
    assert_eq!(crd_safety::stored_versions(&reread), ["v1alpha1", "v1"]);

    let new = write_yaml(
        dir.path(),
        "new.yaml",
        &widget_crd(&group, vec![version("v1", true, true, spec_schema())]),
    );
    let (o, n) = (old.clone(), new.clone());
    let run = tokio::task::spawn_blocking(move || crd_diff(&[o.as_ref(), n.as_ref()]))
        .await
        .unwrap();
    assert_eq!(
        run.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout
            .contains("  - storedVersionRemoval: stored versions removed : [v1alpha1]\n"),
        "{}",
        run.stdout
    );

    // Overriding the stored versions: only v1 has objects, so dropping v1alpha1 is safe.
    let run = tokio::task::spawn_blocking(move || {
        crd_diff(&[
            old.as_ref(),
            new.as_ref(),
            "--stored-versions".as_ref(),
            "v1".as_ref(),
        ])
    })
    .await
    .unwrap();
    assert_eq!(
        run.code,
        Some(0),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout
            .ends_with("safe to upgrade (stored versions: [v1])\n"),
        "{}",
        run.stdout
    );
}

// ---------------------------------------------------------------------------------------
// 4: a large real CRD, normalised by the API server
// ---------------------------------------------------------------------------------------

/// The largest `apiextensions.k8s.io/v1` CRD file of sn-operator 0.19.7.
fn largest_sn_operator_crd() -> Option<(PathBuf, CustomResourceDefinition)> {
    let bundles = olmv1::testenv::shared_dir("fixtures/bundles")?;
    let manifests = bundles.join("sn-operator/0.19.7/manifests");
    let mut best: Option<(u64, PathBuf, CustomResourceDefinition)> = None;
    for entry in std::fs::read_dir(&manifests).expect("reading sn-operator manifests") {
        let path = entry.expect("directory entry").path();
        let size = std::fs::metadata(&path).expect("metadata").len();
        if best.as_ref().is_some_and(|(s, _, _)| *s >= size) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("reading a manifest");
        if let Ok(crd) = parse_crd(&text) {
            best = Some((size, path, crd));
        }
    }
    let (_, path, crd) = best.expect("sn-operator 0.19.7 has CRDs");
    Some((path, crd))
}

#[tokio::test]
async fn large_real_crd_normalised_by_the_api_server_has_no_findings() {
    let Some((path, mut file_crd)) = largest_sn_operator_crd() else {
        return;
    };
    // A group of its own (the schema does not depend on it).
    let group = format!("{}.{}", support::unique("big"), file_crd.spec.group);
    let name = format!("{}.{group}", file_crd.spec.names.plural);
    file_crd.spec.group = group;
    file_crd.metadata.name = Some(name.clone());

    let client = support::cluster().admin().await;
    crd_api(&client)
        .create(&PostParams::default(), &file_crd)
        .await
        .unwrap_or_else(|e| panic!("creating {} as {name}: {e}", path.display()));
    let live = wait_established(&client, &name).await;
    assert!(
        !crd_safety::stored_versions(&live).is_empty(),
        "{:?}",
        live.status
    );

    // Read back, the API server's copy differs from the file in form (defaults filled in,
    // status, metadata) but not in what it accepts.
    for (what, findings) in [
        ("live -> file", check(&live, &file_crd)),
        ("file -> live", check(&file_crd, &live)),
        ("live -> live", check(&live, &live)),
    ] {
        assert_eq!(
            texts(&findings),
            Vec::<String>::new(),
            "{what} for {}: {}",
            path.display(),
            message(&name, &findings)
        );
    }

    // The check is not blind on this CRD: a field removed from the file copy is found.
    let mut changed = file_crd.clone();
    let spec = changed.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
        .and_then(|s| s.properties.as_mut())
        .expect("the CRD has spec properties");
    let field = spec.keys().next().expect("a spec field").clone();
    spec.remove(&field);
    let version = changed.spec.versions[0].name.clone();
    let findings = check(&live, &changed);
    assert!(
        findings.iter().any(|f| f.rule == Rule::ExistingFieldRemoval
            && f.path == format!("^.spec.{field}")
            && f.location == Location::Version(version.clone())),
        "{}",
        message(&name, &findings)
    );
}

/// Hand-written forms the API server stores differently than written (integral floats in
/// `default` and `enum` come back as integers, empty strings and `false` flags are
/// dropped): the copy read back must not look like a change against the file.
#[tokio::test]
async fn api_server_rewrites_of_hand_written_schemas_are_not_findings() {
    let group = unique_group("norm");
    let name = crd_name(&group);
    let text = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {name}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: Widget, plural: widgets}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: []
            properties:
              ratio:
                type: number
                default: 1.0
                enum: [1.0, 2.5, 3e2, 0.0]
              count:
                type: integer
                default: 2.0
                minimum: 0.0
                maximum: 1e3
                nullable: false
              name:
                type: string
                pattern: ""
                format: ""
                description: ""
              tags:
                type: array
                uniqueItems: false
                items: {{type: string, enum: ["a", "b"]}}
              settings:
                type: object
                default: {{limit: 5.0, mode: "fast"}}
                properties:
                  limit: {{type: number}}
                  mode: {{type: string}}
              labels:
                type: object
                additionalProperties: true
              limits:
                type: object
                additionalProperties: {{type: integer, default: 0.0, exclusiveMinimum: false}}
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{{type: integer}}, {{type: string}}]
                default: 80.0
                x-kubernetes-embedded-resource: false
              extra:
                type: object
                properties: {{}}
                x-kubernetes-preserve-unknown-fields: true
                x-kubernetes-validations: []
"#
    );
    let file_crd = parse_crd(&text).expect("the test CRD parses");
    let client = support::cluster().admin().await;
    crd_api(&client)
        .create(&PostParams::default(), &file_crd)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    let live = wait_established(&client, &name).await;
    let live_spec = serde_json::to_value(&live.spec.versions[0].schema).unwrap();
    let file_spec = serde_json::to_value(&file_crd.spec.versions[0].schema).unwrap();
    assert_ne!(live_spec, file_spec, "the API server rewrote nothing");

    for (what, findings) in [
        ("live -> file", check(&live, &file_crd)),
        ("file -> live", check(&file_crd, &live)),
    ] {
        assert_eq!(
            texts(&findings),
            Vec::<String>::new(),
            "{what}: {}\nlive: {live_spec:#}\nfile: {file_spec:#}",
            message(&name, &findings)
        );
    }
}

// ---------------------------------------------------------------------------------------
// The README's real upgrade pairs, with the old CRD installed on the API server
// ---------------------------------------------------------------------------------------

/// Installs the old CRD of a fixture pair (under a group of its own), reads it back and
/// checks the new CRD against that live copy, as the reconciler does. Returns the findings
/// as text, or None when the fixtures are absent.
async fn live_fixture_pair(old: &str, new: &str) -> Option<Vec<String>> {
    let bundles = olmv1::testenv::shared_dir("fixtures/bundles")?;
    let read = |rel: &str| {
        let text = std::fs::read_to_string(bundles.join(rel)).expect("reading a fixture");
        parse_crd(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
    };
    let (mut old_crd, mut new_crd) = (read(old), read(new));
    let group = format!("{}.{}", support::unique("pair"), old_crd.spec.group);
    let name = format!("{}.{group}", old_crd.spec.names.plural);
    for crd in [&mut old_crd, &mut new_crd] {
        crd.spec.group = group.clone();
        crd.metadata.name = Some(name.clone());
    }
    let client = support::cluster().admin().await;
    crd_api(&client)
        .create(&PostParams::default(), &old_crd)
        .await
        .unwrap_or_else(|e| panic!("creating {old} as {name}: {e}"));
    let live = wait_established(&client, &name).await;
    let from_live = texts(&check(&live, &new_crd));
    // The live copy gives exactly the verdict of the files.
    assert_eq!(
        from_live,
        texts(&check(&old_crd, &new_crd)),
        "{old} -> {new}"
    );
    Some(from_live)
}

#[tokio::test]
async fn camel_karavan_3_18_5_to_3_20_0_against_the_live_crd_is_unsafe() {
    let Some(f) = live_fixture_pair(
        "camel-karavan-operator/3.18.5/manifests/karavans.camel.apache.org.crd.yml",
        "camel-karavan-operator/3.20.0/manifests/karavans.camel.apache.org.crd.yml",
    )
    .await
    else {
        return;
    };
    assert_eq!(f, ["existingFieldRemoval: removed field : v1.^.spec.type"]);
}

#[tokio::test]
async fn camel_karavan_3_20_0_to_3_20_1_against_the_live_crd_is_safe() {
    let Some(f) = live_fixture_pair(
        "camel-karavan-operator/3.20.0/manifests/karavans.camel.apache.org.crd.yml",
        "camel-karavan-operator/3.20.1/manifests/karavans.camel.apache.org.crd.yml",
    )
    .await
    else {
        return;
    };
    assert_eq!(f, Vec::<String>::new());
}

#[tokio::test]
async fn limitador_0_3_0_to_0_4_0_against_the_live_crd_is_safe() {
    let Some(f) = live_fixture_pair(
        "limitador-operator/0.3.0/manifests/limitador.kuadrant.io_limitadors.yaml",
        "limitador-operator/0.4.0/manifests/limitador.kuadrant.io_limitadors.yaml",
    )
    .await
    else {
        return;
    };
    assert_eq!(f, Vec::<String>::new());
}

#[tokio::test]
async fn cluster_manager_0_6_0_to_0_7_0_against_the_live_crd_is_unsafe_for_the_enum_only() {
    let Some(f) = live_fixture_pair(
        "cluster-manager/0.6.0/manifests/operator.open-cluster-management.io_clustermanagers.yaml",
        "cluster-manager/0.7.0/manifests/operator.open-cluster-management.io_clustermanagers.yaml",
    )
    .await
    else {
        return;
    };
    assert_eq!(
        f,
        [r#"v1: ^.spec.deployOption.mode: enum: allowed enum values removed : ["Detached"]"#]
    );
}
