//! The install namespace from the bundle (docs/how-to/install-namespace.md) against the
//! real control plane (garbage collection and namespace deletion by the real
//! kube-controller-manager), registry and controller. The controller's default installer
//! account (in a namespace of its own) has the generated RBAC of each bundle plus
//! `create`/`delete` on namespaces and `list` for the emptiness check. With the opt-in
//! annotation a missing `spec.namespace` is created with the template's labels and the
//! mark, and removed on uninstall when nothing else lives there; kept (with an Event
//! naming what lives there) otherwise; an existing namespace is never removed; without
//! the opt-in, upstream's validation message stays.
//!
//! In the same binary (its control plane serves no cert-manager; one controller per
//! binary): OpenShift service-ca chosen as the certificate provider once the cluster
//! serves `operator.openshift.io/v1` `ServiceCA` (a stand-in CRD here: the service-ca
//! controller itself, which would issue the Secret and inject the CA, does not run).

use crate::support;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::controller::extension::installer::InstallerAccount;
use olmv1::controller::extension::namespace::{
    ANNOTATION_CREATE_NAMESPACE, ANNOTATION_CREATED_FOR, CSV_SUGGESTED_NAMESPACE_TEMPLATE,
    LABEL_CREATED_BY,
};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use serde_json::{Value, json};
use support::bundles::{self, BundleSpec};
use support::extensions::{
    create_catalog, extension, publish, wait_installed, wait_progressing_message,
};

const INSTALLER_NAMESPACE: &str = "nsi-installers";
const INSTALLER: &str = "installer";

/// The installer account, its namespace rights, and the controller using it as default.
async fn setup() -> kube::Client {
    static SETUP: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    let admin = support::cluster().admin().await;
    SETUP
        .get_or_init(|| async {
            apply(&admin, vec![
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INSTALLER_NAMESPACE}}),
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": INSTALLER, "namespace": INSTALLER_NAMESPACE}}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "nsi-namespaces"}, "rules": [
                    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "delete", "get"]},
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]},
                ]}),
                binding("nsi-namespaces", "nsi-namespaces"),
            ])
            .await;
            support::controller_with(|args| {
                args.default_installer_service_account = Some(InstallerAccount {
                    namespace: INSTALLER_NAMESPACE.into(),
                    name: INSTALLER.into(),
                    source: olmv1::api::InstallerSource::DefaultInstallerServiceAccount,
                });
            });
        })
        .await;
    admin
}

fn binding(name: &str, role: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": INSTALLER, "namespace": INSTALLER_NAMESPACE}]})
}

async fn apply(admin: &kube::Client, objects: Vec<Value>) {
    let objects: Vec<DynamicObject> = objects
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("object"))
        .collect();
    olmv1::testenv::manifests::apply_objects(admin, &objects)
        .await
        .expect("apply");
}

/// Grants the installer the generated RBAC of `spec` installed in `ns`.
async fn grant(admin: &kube::Client, spec: &BundleSpec, ns: &str, ext: &str) {
    grant_rendered(admin, &bundles::render(spec, ns), ext).await;
}

/// Grants the installer the generated RBAC of the `rendered` objects.
async fn grant_rendered(admin: &kube::Client, rendered: &[Value], ext: &str) {
    let rbac =
        installer_rbac(rendered, INSTALLER_NAMESPACE, ext, BundledRbac::Include).expect("rbac");
    let role = rbac.cluster_role["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    apply(
        admin,
        vec![rbac.cluster_role.clone(), binding(&role, &role)],
    )
    .await;
}

/// Publishes `spec` and creates the extension `name` for `ns` (opted in or not).
async fn install(
    admin: &kube::Client,
    spec: BundleSpec,
    ns: &str,
    name: &str,
    opt_in: bool,
) -> Api<ClusterExtension> {
    grant(admin, &spec, ns, name).await;
    let catalog = support::unique("cat");
    let package = spec.package.clone();
    let image = publish(&catalog, &package, &[spec]).await;
    create_catalog(&catalog, &image).await;
    let mut ext = extension(name, ns, &package, json!({}));
    ext.spec.service_account = None;
    if opt_in {
        ext.metadata.annotations =
            Some([(ANNOTATION_CREATE_NAMESPACE.to_string(), "true".to_string())].into());
    }
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create extension");
    api
}

/// The Events about the object `name`.
async fn events_of(admin: &kube::Client, name: &str) -> Vec<Event> {
    let events: Api<Event> = Api::all(admin.clone());
    let selector = format!("involvedObject.name={name}");
    events
        .list(&ListParams::default().fields(&selector))
        .await
        .expect("events")
        .items
}

async fn notes(admin: &kube::Client, name: &str, reason: &str) -> Vec<String> {
    events_of(admin, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

/// Deletes the extension and waits until its finalizer let it go: up to 150 s, above the
/// uninstall's own bound for one phase (`ApplyOptions::delete_timeout`, 120 s: a CRD
/// goes only after the API server's finalizer removed its custom resources). A timeout
/// names what the extension still showed, and its Events.
async fn delete_and_wait(api: &Api<ClusterExtension>, name: &str) {
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete extension");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(150);
    while std::time::Instant::now() < deadline {
        if matches!(api.get_opt(name).await, Ok(None)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let shown = match api.get_opt(name).await {
        Ok(None) => return,
        Ok(Some(e)) => format!(
            "finalizers {:?}, conditions {:?}",
            e.metadata.finalizers,
            e.status.map(|s| s.conditions).unwrap_or_default()
        ),
        Err(e) => format!("reading it: {e}"),
    };
    let told: Vec<String> = events_of(&support::cluster().admin().await, name)
        .await
        .into_iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect();
    panic!("{name} not gone 150 s after its deletion: {shown}; Events: {told:#?}");
}

fn template_bundle() -> BundleSpec {
    let mut spec = BundleSpec::new(&support::unique("pkg"), "1.0.0");
    let template = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "suggested-elsewhere",
        "labels": {"pod-security.kubernetes.io/enforce": "baseline", "example.com/team": "widgets"},
        "annotations": {"example.com/owner": "team-widgets"},
    }});
    spec.csv_annotations = vec![(
        CSV_SUGGESTED_NAMESPACE_TEMPLATE.into(),
        template.to_string(),
    )];
    spec
}

#[tokio::test]
async fn created_from_the_template_and_removed_with_the_extension_when_empty() {
    let admin = setup().await;
    let (ns, name) = (support::unique("nsc"), support::unique("ext"));
    let api = install(&admin, template_bundle(), &ns, &name, true).await;
    let e = wait_installed(&api, &name, "1.0.0").await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let live = namespaces.get(&ns).await.expect("namespace created");
    let labels = live.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("baseline")
    );
    assert_eq!(
        labels.get("example.com/team").map(String::as_str),
        Some("widgets")
    );
    assert_eq!(labels.get(LABEL_CREATED_BY), Some(&name));
    let annotations = live.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("example.com/owner").map(String::as_str),
        Some("team-widgets")
    );
    assert_eq!(
        annotations.get(ANNOTATION_CREATED_FOR),
        e.metadata.uid.as_ref()
    );
    let created = notes(&admin, &name, "NamespaceCreated").await;
    assert!(
        created
            .iter()
            .any(|n| n.contains("suggests namespace \"suggested-elsewhere\"")),
        "{created:?}"
    );

    delete_and_wait(&api, &name).await;
    let deleted = support::eventually(20, "the NamespaceDeleted Event", || async {
        let found = notes(&admin, &name, "NamespaceDeleted").await;
        if found.is_empty() {
            let kept = notes(&admin, &name, "NamespaceKept").await;
            assert!(kept.is_empty(), "{kept:?}");
        }
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(
        deleted,
        vec![format!(
            "deleted namespace {ns:?}, created for ClusterExtension {name:?}"
        )]
    );
    // Garbage collection of the Deployment's ReplicaSet and Pod did not hold it; the
    // namespace controller finishes the deletion.
    support::eventually(60, &format!("namespace {ns} gone"), || async {
        matches!(namespaces.get_opt(&ns).await, Ok(None)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn kept_with_an_event_when_something_else_lives_there() {
    let admin = setup().await;
    let (ns, name) = (support::unique("nsk"), support::unique("ext"));
    let api = install(&admin, template_bundle(), &ns, &name, true).await;
    wait_installed(&api, &name, "1.0.0").await;
    let user: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "user-data"}})).expect("cm");
    Api::<ConfigMap>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &user)
        .await
        .expect("user ConfigMap");

    delete_and_wait(&api, &name).await;
    let kept = support::eventually(20, "the NamespaceKept Event", || async {
        let found = notes(&admin, &name, "NamespaceKept").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(
        kept,
        vec![format!(
            "namespace {ns:?} was created for ClusterExtension {name:?} but is kept: other objects live there: ConfigMap/user-data"
        )]
    );
    let live = Api::<Namespace>::all(admin.clone())
        .get(&ns)
        .await
        .expect("kept");
    assert!(live.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn an_existing_namespace_is_never_removed() {
    let admin = setup().await;
    let ns = support::namespace(&admin, "nse").await;
    let name = support::unique("ext");
    let api = install(&admin, template_bundle(), &ns, &name, true).await;
    wait_installed(&api, &name, "1.0.0").await;
    let live = Api::<Namespace>::all(admin.clone())
        .get(&ns)
        .await
        .expect("namespace");
    assert!(
        !live
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(LABEL_CREATED_BY)
    );
    delete_and_wait(&api, &name).await;
    let live = Api::<Namespace>::all(admin.clone())
        .get(&ns)
        .await
        .expect("namespace");
    assert!(live.metadata.deletion_timestamp.is_none());
    assert!(notes(&admin, &name, "NamespaceCreated").await.is_empty());
    assert!(notes(&admin, &name, "NamespaceDeleted").await.is_empty());
    assert!(notes(&admin, &name, "NamespaceKept").await.is_empty());
}

#[tokio::test]
async fn without_the_opt_in_a_missing_namespace_fails_as_upstream_says() {
    let admin = setup().await;
    let (ns, name) = (support::unique("nsn"), support::unique("ext"));
    let api = install(&admin, template_bundle(), &ns, &name, false).await;
    let message = format!(
        "operation cannot proceed due to the following validation error(s): namespace {ns:?} not found"
    );
    wait_progressing_message(&api, &name, &message).await;
    assert!(matches!(
        Api::<Namespace>::all(admin.clone()).get_opt(&ns).await,
        Ok(None)
    ));
    delete_and_wait(&api, &name).await;
}

#[tokio::test]
async fn webhooks_get_openshift_service_ca_when_the_cluster_serves_it() {
    let admin = setup().await;
    apply(&admin, vec![json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicecas.operator.openshift.io"},
        "spec": {"group": "operator.openshift.io", "scope": "Cluster",
            "names": {"plural": "servicecas", "singular": "serviceca", "kind": "ServiceCA", "listKind": "ServiceCAList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    })])
    .await;
    support::eventually(30, "ServiceCA served", || async {
        admin
            .list_api_group_resources("operator.openshift.io/v1")
            .await
            .ok()
            .filter(|l| l.resources.iter().any(|r| r.kind == "ServiceCA"))
    })
    .await;
    let ns = support::namespace(&admin, "sca").await;
    let name = support::unique("ext");
    let mut spec = BundleSpec::new(&support::unique("hooks"), "1.0.0");
    spec.webhook = true;
    let options = olmv1::bundle::RenderOptions {
        cert_provider: olmv1::bundle::CertProvider::OpenShiftServiceCa,
        ..Default::default()
    };
    let rendered =
        olmv1::testenv::demo::render_with_options(&spec, &ns, None, &options).expect("render");
    grant_rendered(&admin, &rendered, &name).await;
    let catalog = support::unique("cat");
    let package = spec.package.clone();
    let image = publish(&catalog, &package, &[spec]).await;
    create_catalog(&catalog, &image).await;
    let mut ext = extension(&name, &ns, &package, json!({}));
    ext.spec.service_account = None;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;

    let owned =
        ListParams::default().labels(&format!("olm.operatorframework.io/owner-name={name}"));
    let services = Api::<k8s_openapi::api::core::v1::Service>::namespaced(admin.clone(), &ns)
        .list(&owned)
        .await
        .expect("services");
    let annotated: Vec<String> = services
        .items
        .iter()
        .filter_map(|s| {
            s.metadata
                .annotations
                .as_ref()?
                .get("service.beta.openshift.io/serving-cert-secret-name")
                .cloned()
        })
        .collect();
    assert_eq!(annotated.len(), 1, "{services:?}");
    assert!(annotated[0].ends_with("-service-cert"), "{annotated:?}");
    let hooks =
        Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
            admin.clone(),
        )
        .list(&owned)
        .await
        .expect("webhook configurations");
    assert_eq!(hooks.items.len(), 1);
    let annotations = hooks.items[0]
        .metadata
        .annotations
        .clone()
        .unwrap_or_default();
    assert_eq!(
        annotations
            .get("service.beta.openshift.io/inject-cabundle")
            .map(String::as_str),
        Some("true")
    );
    assert!(!annotations.contains_key("cert-manager.io/inject-ca-from"));
    delete_and_wait(&api, &name).await;
}
