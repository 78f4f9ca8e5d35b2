//! A bundle owning an APIService (an aggregated API server) installed by the controller
//! on the real API server with real cert-manager (no node: the server never runs, the
//! rollout wait is off): the APIService `<version>.<group>` with OLM v0's priorities and
//! the CA cert-manager's cainjector puts into it, the Service and Certificate, the
//! auth-delegator ClusterRoleBinding and the kube-system auth-reader RoleBinding, all
//! with olmv1's owner labels, applied by an installer holding only the generated
//! least-privilege RBAC; deleted ones are restored; uninstalling removes them.

use crate::support;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::demo::{BundleSpec, catalog_fbc};
use olmv1::testenv::registry::{push_bundle_image, push_catalog_image};
use serde_json::json;
use std::collections::BTreeMap;
use support::apiservice_bundle::{PORT, api_service_name, api_services, apiservice_bundle, group};
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};
use support::webhook_bundle::{cert_manager_api, render};
use support::{cluster_with_cert_manager, eventually, namespace};

const OWNER: &str = "olm.operatorframework.io/owner-name";

#[tokio::test]
async fn an_owned_api_service_is_installed_with_its_service_certificate_and_bindings() {
    let cluster = cluster_with_cert_manager();
    support::controller();
    let admin = cluster.admin().await;
    let package = support::unique("aggr");
    let spec = BundleSpec::new(&package, "1.0.0");
    let files = apiservice_bundle(&spec, "example.invalid/apiserver:v1");
    let ns = namespace(&admin, "apis").await;
    let name = support::unique("ext");
    let rendered = render(&files, &package, &ns);
    grant_installer(&ns, &name, std::slice::from_ref(&rendered)).await;

    // The installer's generated ClusterRole covers the APIService and the bindings.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role = roles
        .get(&format!("{name}-installer-clusterrole"))
        .await
        .expect("installer role");
    let rules = serde_json::to_value(role.rules.unwrap_or_default()).expect("rules");
    let text = rules.to_string();
    for needle in [
        "\"apiservices\"",
        "\"system:auth-delegator\"",
        "\"extension-apiserver-authentication-reader\"",
        "\"bind\"",
    ] {
        assert!(text.contains(needle), "{needle} in {rules:#}");
    }

    let registry = support::registry();
    let bundle = push_bundle_image(
        registry,
        &format!("bundles/{package}:v1.0.0"),
        &files,
        &package,
        &["stable"],
    )
    .await
    .expect("push bundle")
    .reference;
    let catalog = support::unique("cat");
    let repo_tag = format!("catalogs/{catalog}:latest");
    let fbc = BTreeMap::from([(
        format!("{package}/catalog.json"),
        catalog_fbc(&package, &[(spec.clone(), bundle)]),
    )]);
    push_catalog_image(registry, &repo_tag, &fbc)
        .await
        .expect("push catalog");
    create_catalog(&catalog, &format!("{}/{repo_tag}", registry.host())).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;

    let svc = format!("{}-service", spec.deployment_name());
    let cert = format!("{svc}-cert");
    let apis = api_services(&admin);
    let apiservice = apis
        .get(&api_service_name(&package))
        .await
        .expect("APIService");
    assert_eq!(
        apiservice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNER)),
        Some(&name)
    );
    let s = &apiservice.data["spec"];
    assert_eq!(s["group"], json!(group(&package)));
    assert_eq!(s["version"], json!("v1alpha1"));
    assert_eq!(s["groupPriorityMinimum"], json!(2000));
    assert_eq!(s["versionPriority"], json!(15));
    assert_eq!(
        s["service"],
        json!({"namespace": ns, "name": svc, "port": PORT})
    );

    // cert-manager issues the Certificate; its cainjector puts the CA into the APIService.
    let certificates = cert_manager_api(&admin, &ns, "Certificate");
    eventually(120, "the Certificate Ready", || async {
        let c = serde_json::to_value(certificates.get(&cert).await.ok()?).ok()?;
        olmv1::testenv::cert_manager::ready_condition(&c)
            .is_some_and(|r| r.0)
            .then_some(())
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let ca = secrets
        .get(&cert)
        .await
        .expect("Secret")
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .expect("ca.crt")
        .0;
    eventually(120, "the CA injected into the APIService", || async {
        let a = apis.get(&api_service_name(&package)).await.ok()?;
        let injected: k8s_openapi::ByteString =
            serde_json::from_value(a.data["spec"]["caBundle"].clone()).ok()?;
        (injected.0 == ca).then_some(())
    })
    .await;

    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let service = services.get(&svc).await.expect("Service");
    let ports = serde_json::to_value(service.spec.and_then(|s| s.ports)).expect("ports");
    assert_eq!(
        ports,
        json!([{"name": "6443", "port": PORT, "protocol": "TCP", "targetPort": PORT}])
    );
    let subjects =
        json!([{"kind": "ServiceAccount", "name": format!("{package}-sa"), "namespace": ns}]);
    let crbs: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let crb_name = format!("{svc}-system:auth-delegator");
    let crb = crbs.get(&crb_name).await.expect("auth-delegator binding");
    assert_eq!(crb.role_ref.name, "system:auth-delegator");
    assert_eq!(
        serde_json::to_value(&crb.subjects).expect("subjects"),
        subjects
    );
    assert_eq!(
        crb.metadata.labels.as_ref().and_then(|l| l.get(OWNER)),
        Some(&name)
    );
    let rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), "kube-system");
    let rb_name = format!("{svc}-auth-reader");
    let rb = rbs.get(&rb_name).await.expect("auth-reader binding");
    assert_eq!(
        rb.role_ref.name,
        "extension-apiserver-authentication-reader"
    );
    assert_eq!(rb.role_ref.kind, "Role");
    assert_eq!(
        serde_json::to_value(&rb.subjects).expect("subjects"),
        subjects
    );
    assert_eq!(
        rb.metadata.labels.as_ref().and_then(|l| l.get(OWNER)),
        Some(&name)
    );

    // Drift: a deleted APIService and a deleted kube-system binding come back.
    let apiservice_uid = apiservice.metadata.uid.clone();
    let rb_uid = rb.metadata.uid.clone();
    apis.delete(&api_service_name(&package), &DeleteParams::default())
        .await
        .expect("delete APIService");
    rbs.delete(&rb_name, &DeleteParams::default())
        .await
        .expect("delete RoleBinding");
    let started = std::time::Instant::now();
    eventually(
        20,
        "the APIService and the RoleBinding restored",
        || async {
            let a = apis.get_opt(&api_service_name(&package)).await.ok()??;
            let r = rbs.get_opt(&rb_name).await.ok()??;
            (a.metadata.uid != apiservice_uid && r.metadata.uid != rb_uid).then_some(())
        },
    )
    .await;
    eprintln!(
        "APIService and RoleBinding restored in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Uninstall: the APIService and the bindings go with the rest.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    eventually(180, "the extension gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    eventually(
        120,
        "the APIService, Service and bindings removed",
        || async {
            let gone = [
                apis.get_opt(&api_service_name(&package))
                    .await
                    .ok()?
                    .is_none(),
                services.get_opt(&svc).await.ok()?.is_none(),
                crbs.get_opt(&crb_name).await.ok()?.is_none(),
                rbs.get_opt(&rb_name).await.ok()?.is_none(),
            ];
            gone.iter().all(|g| *g).then_some(())
        },
    )
    .await;
}
