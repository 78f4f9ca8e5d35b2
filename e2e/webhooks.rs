//! End to end with real cert-manager on the real node (`support::node_cluster_with_cert_manager`):
//! a bundle whose CSV declares a validating, a mutating and a conversion webhook
//! (served by `hack/testimage webhook`) is installed by olmv1 with cert-manager as the
//! certificate provider. cert-manager issues the certificate, its cainjector puts the
//! CA into the webhook configurations and the CRD's conversion webhook, the operator
//! pod starts with the certificate mounted, and the API server really calls the three
//! webhooks. Then the uninstall removes what olmv1 installed.

use crate::support;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::demo::{BundleSpec, catalog_fbc};
use olmv1::testenv::registry::{TestRegistry, push_bundle_image, push_catalog_image};
use serde_json::json;
use std::collections::BTreeMap;
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};
use support::webhook_bundle::{
    self, assert_testimage_serves_webhooks, cert_manager_api, group, render, webhook_bundle,
};
use support::{eventually, namespace, node_cluster_with_cert_manager};

#[tokio::test]
async fn a_bundle_with_three_webhooks_runs_with_certificates_from_cert_manager() {
    assert_testimage_serves_webhooks();
    let cluster = node_cluster_with_cert_manager();
    let node = cluster.node.as_ref().expect("node");
    // olmv1's controller as its own ServiceAccount (config/ RBAC), waiting for rollouts,
    // pulling from the node registry.
    support::controller_with(|args| {
        args.skip_rollout_wait = false;
        args.insecure_registries.push(node.registry.clone());
    });
    let admin = cluster.admin().await;

    let package = support::unique("hooks");
    let spec = BundleSpec::new(&package, "1.0.0");
    let files = webhook_bundle(&spec, &node.workload_image);
    let ns = namespace(&admin, "webhooks").await;
    let name = support::unique("ext");
    grant_installer(&ns, &name, &[render(&files, &package, &ns)]).await;

    let registry = TestRegistry::existing(&node.registry).expect("registry");
    let bundle = push_bundle_image(
        &registry,
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
    push_catalog_image(&registry, &repo_tag, &fbc)
        .await
        .expect("push catalog");
    create_catalog(&catalog, &format!("{}/{repo_tag}", node.registry)).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;

    // cert-manager issued the Certificate olmv1 rendered; its Secret holds the pair.
    let svc = format!("{}-service", spec.deployment_name());
    let cert_name = format!("{svc}-cert");
    let certificates = cert_manager_api(&admin, &ns, "Certificate");
    eventually(120, "the Certificate Ready", || async {
        let c = certificates.get(&cert_name).await.ok()?;
        let v = serde_json::to_value(&c).ok()?;
        olmv1::testenv::cert_manager::ready_condition(&v)
            .is_some_and(|r| r.0)
            .then_some(())
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let secret = secrets.get(&cert_name).await.expect("certificate Secret");
    let data = secret.data.expect("Secret data");
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        assert!(
            data.get(key).is_some_and(|v| !v.0.is_empty()),
            "{key} in Secret {cert_name}"
        );
    }
    let issued_ca = data.get("ca.crt").map(|v| v.0.clone()).unwrap_or_default();

    // cainjector put that CA into both webhook configurations and the CRD conversion.
    let group = group(&package);
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let (vname, mname) = (format!("vwidget.{group}"), format!("mwidget.{group}"));
    eventually(120, "caBundle injected everywhere", || async {
        let v = validating.get(&vname).await.ok()?;
        let m = mutating.get(&mname).await.ok()?;
        let c = crds.get(&spec.crd_name()).await.ok()?;
        let v_ok = v
            .webhooks?
            .iter()
            .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&issued_ca));
        let m_ok = m
            .webhooks?
            .iter()
            .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&issued_ca));
        let conversion = c.spec.conversion?;
        let c_ok =
            conversion.webhook?.client_config?.ca_bundle.map(|b| b.0) == Some(issued_ca.clone());
        (v_ok && m_ok && c_ok).then_some(())
    })
    .await;

    // olmv1 waited for the rollout: the Certificate and the Deployment are ready.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let e = api.get(&name).await.expect("extension");
        let p = support::extensions::condition(&e, "Progressing").expect("Progressing");
        if p.status == "True" && p.reason == "Succeeded" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Progressing not Succeeded after 180 s: {}/{}: {}",
            p.status,
            p.reason,
            p.message
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }

    // The operator pod runs with the certificate mounted and is Ready.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    eventually(180, "the webhook operator available", || async {
        let d = deployments.get(&spec.deployment_name()).await.ok()?;
        (d.status?.available_replicas? >= 1).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&format!("app={}", spec.deployment_name())))
        .await
        .expect("pods");
    assert!(
        listed.items.iter().any(|p| {
            let s = p.status.as_ref();
            s.and_then(|s| s.phase.as_deref()) == Some("Running")
                && s.and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        }),
        "a Running, Ready operator pod: {:?}",
        listed.items.iter().map(|p| &p.status).collect::<Vec<_>>()
    );
    let pod_spec = listed.items[0].spec.as_ref().expect("pod spec");
    let secret_volumes: Vec<String> = pod_spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    assert_eq!(
        secret_volumes,
        vec![cert_name.clone(), cert_name.clone()],
        "the apiservice-cert and webhook-cert volumes, both from cert-manager's Secret"
    );

    assert_eq!(
        webhook_bundle::exercise(&admin, &ns, &package, "").await,
        vname
    );

    // olmv1's drift correction and the cainjector do not fight over the webhook
    // configurations: the injected caBundle is a field olmv1 does not apply.
    let versions = || async {
        (
            validating
                .get(&vname)
                .await
                .expect("vwc")
                .metadata
                .resource_version,
            mutating
                .get(&mname)
                .await
                .expect("mwc")
                .metadata
                .resource_version,
        )
    };
    let before = versions().await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(versions().await, before, "webhook configurations rewritten");

    // Uninstall: the Widgets go with their CRD, and everything olmv1 installed goes.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    eventually(180, "the extension gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let issuers = cert_manager_api(&admin, &ns, "Issuer");
    eventually(120, "every installed object removed", || async {
        let gone = [
            deployments
                .get_opt(&spec.deployment_name())
                .await
                .ok()?
                .is_none(),
            services.get_opt(&svc).await.ok()?.is_none(),
            certificates.get_opt(&cert_name).await.ok()?.is_none(),
            issuers
                .list(&Default::default())
                .await
                .ok()?
                .items
                .is_empty(),
            validating.get_opt(&vname).await.ok()?.is_none(),
            mutating.get_opt(&mname).await.ok()?.is_none(),
            crds.get_opt(&spec.crd_name()).await.ok()?.is_none(),
        ];
        gone.iter().all(|g| *g).then_some(())
    })
    .await;
}
