//! ClusterExtensions without `spec.serviceAccount` (YAML written for current upstream
//! releases) on a controller started with `--default-installer-service-account`: they
//! install as that account, least privilege kept, and the Event and
//! `status.install.installer` name the identity; an extension that names its own
//! account shows `source: ServiceAccount` there.
//! (Refusal without a default is in e2e/extensions.rs, whose controller has none.)

use crate::support;

use kube::api::{Api, ListParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::controller::extension::installer::InstallerAccount;
use serde_json::json;
use support::bundles::{self, BundleSpec};
use support::extensions::{create_catalog, extension, grant_installer, publish, wait_installed};

#[tokio::test]
async fn without_service_account_the_default_installer_installs() {
    let admin = support::cluster().admin().await;
    let package = support::unique("pkg");
    let ns = support::namespace(&admin, "dflt").await;
    let name = support::unique("ext");
    let v1 = BundleSpec::new(&package, "1.0.0");
    // The default installer account: least-privilege RBAC for this extension only.
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    support::controller_with(|args| {
        args.default_installer_service_account = Some(InstallerAccount {
            namespace: ns.clone(),
            name: format!("{name}-installer"),
            source: olmv1::api::InstallerSource::DefaultInstallerServiceAccount,
        });
    });
    let catalog = support::unique("cat");
    let image = publish(&catalog, &package, &[v1]).await;
    create_catalog(&catalog, &image).await;

    let mut ext = extension(&name, &ns, &package, json!({}));
    ext.spec.service_account = None;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(&PostParams::default(), &ext)
        .await
        .expect("created without serviceAccount");
    let e = wait_installed(&api, &name, "1.0.0").await;
    assert!(e.spec.service_account.is_none());
    // The status names who installed, and why that identity.
    let installer = e
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .and_then(|i| i.installer.clone())
        .expect("status.install.installer");
    assert_eq!(
        installer.username,
        format!("system:serviceaccount:{ns}:{name}-installer")
    );
    assert_eq!(
        installer.source,
        olmv1::api::InstallerSource::DefaultInstallerServiceAccount
    );

    // On the same controller, an extension that names its own account: that account
    // installs, and the status says so (one test: the controller's flags are per binary).
    let package2 = support::unique("pkg");
    let name2 = support::unique("ext");
    let named = BundleSpec::new(&package2, "1.0.0");
    grant_installer(&ns, &name2, &[bundles::render(&named, &ns)]).await;
    let catalog2 = support::unique("cat");
    let image2 = publish(&catalog2, &package2, &[named]).await;
    create_catalog(&catalog2, &image2).await;
    api.create(
        &PostParams::default(),
        &extension(&name2, &ns, &package2, json!({})),
    )
    .await
    .expect("created with serviceAccount");
    let e = wait_installed(&api, &name2, "1.0.0").await;
    let installer = e
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .and_then(|i| i.installer.clone())
        .expect("status.install.installer");
    assert_eq!(
        installer.username,
        format!("system:serviceaccount:{ns}:{name2}-installer")
    );
    assert_eq!(
        installer.source,
        olmv1::api::InstallerSource::ServiceAccount
    );

    let events: Api<k8s_openapi::api::core::v1::Event> = Api::all(admin.clone());
    let selector = format!("involvedObject.name={name}");
    let notes: Vec<String> = events
        .list(&ListParams::default().fields(&selector))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Installed"))
        .filter_map(|e| e.message)
        .collect();
    let identity = format!("as system:serviceaccount:{ns}:{name}-installer");
    assert!(
        notes.iter().any(|n| n.ends_with(&identity)),
        "{notes:?} should name {identity}"
    );
}
