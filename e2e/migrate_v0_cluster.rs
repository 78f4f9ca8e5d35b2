//! `olmv1 migrate` against OLM v0's real programs on a real node, in the tests that act
//! on the whole cluster and so need one of their own (docs/how-to/switch-from-olm-v0.md,
//! "Tests with real OLM v0"): what the convert talks to going away in the middle — the
//! kube-apiserver stopped between two steps, the olmv1 controller killed (SIGKILL)
//! while it takes the installation over — and `convert --all --apply`, which converts
//! every eligible Subscription of the cluster. The controller runs as its own process
//! here (`support::process`), so that it can be killed and started again as a restarted
//! pod would; the control plane is restartable
//! (`support::restartable_node_cluster_with_cert_manager`). An interruption must leave
//! the operator running — the same pod, its ClusterRoles in place — and running the
//! command again (or starting the controller again) must finish the job. The tests
//! take turns (`olm_v0_run::serial`): one restarts the API server, the other sees
//! every Subscription.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ListParams};
use olmv1::api::ClusterExtension;
use olmv1::testenv::demo::BundleSpec;
use std::time::{Duration, Instant};
use support::bundles::publish_on_node;
use support::extensions::{condition, create_catalog, wait_installed, wait_progressing_message};
use support::olm_v0_flow::{
    Upgrade, install_through_subscription, olmv1, operator_pod, start_v0, wait_serving,
    wait_succeeded,
};
use support::process::ControllerProcess;
use support::{eventually, olm_v0, olm_v0_run};

/// The names of the ClusterRoles labelled `selector`.
async fn cluster_roles(admin: &kube::Client, selector: &str) -> Vec<String> {
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let list = roles
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list ClusterRoles");
    list.items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect()
}

/// Which of `names` are missing (ClusterRoles).
async fn missing_roles(admin: &kube::Client, names: &[String]) -> Vec<String> {
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let mut missing = Vec::new();
    for name in names {
        if roles
            .get_opt(name)
            .await
            .expect("read ClusterRole")
            .is_none()
        {
            missing.push(name.clone());
        }
    }
    missing
}

/// What each test of this binary starts from: its turn (`olm_v0_run::serial`), the
/// restartable node cluster, the controller as its own process (`label`) waiting for
/// rollouts, and OLM v0 running.
struct Scene {
    _serial: tokio::sync::MutexGuard<'static, ()>,
    plane: &'static tokio::sync::Mutex<olmv1::testenv::ControlPlane>,
    node: &'static olmv1::testenv::node::RunningNode,
    admin: kube::Client,
    kubeconfig: std::path::PathBuf,
    ctl: ControllerProcess,
    v0: olm_v0_run::Programs,
}

async fn scene(label: &str) -> Scene {
    let (cluster, plane) = support::restartable_node_cluster_with_cert_manager();
    let serial = olm_v0_run::serial().await;
    let node = cluster.node.as_ref().expect("node");
    let admin = cluster.admin().await;
    let kubeconfig = cluster.admin_kubeconfig.clone();
    let mut ctl = ControllerProcess::start_waiting_for_rollouts(
        label,
        &["--insecure-registry", node.registry.as_str()],
    );
    ctl.wait_listening(60);
    let v0 = start_v0(&admin, &kubeconfig).await;
    Scene {
        _serial: serial,
        plane,
        node,
        admin,
        kubeconfig,
        ctl,
        v0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_convert_survives_a_stopped_kube_apiserver_and_the_takeover_a_killed_controller() {
    let Scene {
        _serial,
        plane,
        node,
        admin,
        kubeconfig,
        mut ctl,
        mut v0,
    } = scene("v0restart").await;

    let Installed {
        inst,
        deployment,
        pod,
        v0_roles,
        ..
    } = install(&admin, node, "v0rst", false, "Automatic", false).await;
    let ns = inst.ns.as_str();
    let target = format!("{ns}/{}", inst.sub);
    let convert = |extra: &[&str]| {
        let mut args = vec!["migrate", "convert", target.as_str(), "--apply"];
        args.extend_from_slice(&["--insecure-registry", node.registry.as_str()]);
        args.extend_from_slice(extra);
        olmv1(&args, &kubeconfig)
    };
    let csvs = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", ns);

    // Stopped after 8 steps (backup, guard, installer, Subscription and InstallPlan deleted,
    // the CRD handed over, the first objects untied), then the kube-apiserver goes away: the convert run now
    // fails, says why, and changes nothing.
    let (code, out, err) = convert(&["--stop-after", "8"]);
    println!("[v0restart] convert --stop-after 8:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    plane
        .lock()
        .await
        .stop_component("kube-apiserver")
        .expect("stop kube-apiserver");
    let started = Instant::now();
    let (code, out, err) = convert(&[]);
    println!(
        "[v0restart] convert --apply, kube-apiserver stopped ({:?}): exit {code}\n{out}{err}",
        started.elapsed()
    );
    assert_ne!(
        code, 0,
        "a convert without an API server cannot succeed: {out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the convert gave up after {:?}",
        started.elapsed()
    );
    let t = Instant::now();
    plane
        .lock()
        .await
        .start_component("kube-apiserver")
        .await
        .expect("start kube-apiserver");
    println!("[v0restart] kube-apiserver back after {:?}", t.elapsed());
    // OLM v0's programs re-list everything after the restart and reconcile the
    // half-converted operator: its CSV is still there, its ClusterRoles too.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(csvs.get_opt(&inst.csv).await.expect("read").is_some());
    assert_eq!(
        missing_roles(&admin, &v0_roles).await,
        Vec::<String>::new(),
        "the operator lost ClusterRoles while the convert was interrupted"
    );
    assert_eq!(operator_pod(&admin, ns, &deployment).await, pod);

    // The convert run again finishes; the controller is killed (SIGKILL) as soon as it
    // starts taking the installation over (its finalizer on the ClusterExtension),
    // while the convert is still finishing, and started again 3 s later.
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let started = Instant::now();
    let killer = {
        let exts = exts.clone();
        let name = inst.sub.clone();
        tokio::spawn(async move {
            eventually(120, "the takeover started (finalizer)", || {
                let exts = exts.clone();
                let name = name.clone();
                async move {
                    let e = exts.get_opt(&name).await.ok()??;
                    (!e.metadata.finalizers.unwrap_or_default().is_empty()).then_some(())
                }
            })
            .await;
            ctl.kill();
            println!(
                "[v0restart] controller killed {:?} after the convert started",
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_secs(3)).await;
            ctl
        })
    };
    let (code, out, err) = tokio::task::block_in_place(|| convert(&[]));
    println!(
        "[v0restart] convert --apply again ({:?}):\n{out}{err}",
        started.elapsed()
    );
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        !out.contains("write the backup"),
        "the backup was written once: {out}"
    );
    let mut ctl = killer.await.expect("the controller killed");
    assert_eq!(
        missing_roles(&admin, &v0_roles).await,
        Vec::<String>::new(),
        "ClusterRoles went missing while the controller was down"
    );
    ctl.restart();
    ctl.wait_listening(60);
    wait_installed(&exts, &inst.sub, "1.0.0").await;
    wait_succeeded(&exts, &inst.sub).await;
    println!(
        "[v0restart] Installed and Succeeded {:?} after the convert started",
        started.elapsed()
    );
    assert!(csvs.get_opt(&inst.csv).await.expect("read").is_none());
    assert_eq!(
        operator_pod(&admin, ns, &deployment).await,
        pod,
        "the pod changed during the interrupted convert and takeover"
    );
    let owned = format!("olm.operatorframework.io/owner-name={}", inst.sub);
    assert!(
        !cluster_roles(&admin, &owned).await.is_empty(),
        "olmv1's ClusterRoles are missing"
    );
    assert_eq!(missing_roles(&admin, &v0_roles).await, Vec::<String>::new());
    // OLM v0, still running, re-created nothing.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(csvs.get_opt(&inst.csv).await.expect("read").is_none());
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    let log = ctl.log_text();
    assert!(!log.contains("panicked"), "the controller panicked: {log}");
    drop(v0);
    drop(ctl);
}

/// One operator installed through a Subscription for `--all`: its install, pod and the
/// catalog server kept running.
struct Installed {
    inst: support::olm_v0_flow::V0Install,
    package: String,
    /// The ClusterCatalog serving the operator's bundles.
    catalog: String,
    deployment: String,
    /// The UID of the operator's Deployment, as OLM v0 made it.
    deployment_uid: Option<String>,
    pod: (String, String, i32),
    /// OLM v0's ClusterRoles of the operator (by its owner label, before the convert).
    v0_roles: Vec<String>,
    _opm: olm_v0_run::Programs,
}

/// `newer_in_catalog`: the ClusterCatalog also serves 1.1.0, which OLM v0's catalog
/// does not (the Subscription stays at 1.0.0).
async fn install(
    admin: &kube::Client,
    node: &olmv1::testenv::node::RunningNode,
    label: &str,
    own_namespace: bool,
    approval: &str,
    newer_in_catalog: bool,
) -> Installed {
    let mut spec = BundleSpec::new(&support::unique(label), "1.0.0");
    spec.operator_image = Some(node.workload_image.clone());
    let catalog = support::unique(&format!("{label}cat"));
    let mut served = vec![spec.clone()];
    if newer_in_catalog {
        let mut next = BundleSpec::new(&spec.package, "1.1.0");
        next.operator_image = spec.operator_image.clone();
        next.replaces = Some(spec.bundle_name());
        served.push(next);
    }
    let image = publish_on_node(&catalog, &spec.package, &served).await;
    create_catalog(&catalog, &image).await;
    let (opm, address) = olm_v0_run::serve_v0_catalog(&spec.package, std::slice::from_ref(&spec));
    wait_serving(admin, &catalog).await;
    let inst = install_through_subscription(admin, &spec, &address, own_namespace, approval).await;
    let deployment = spec.deployment_name();
    let pod = operator_pod(admin, &inst.ns, &deployment).await;
    let deployment_uid = Api::<Deployment>::namespaced(admin.clone(), &inst.ns)
        .get(&deployment)
        .await
        .expect("OLM v0's Deployment")
        .metadata
        .uid;
    let v0_roles = cluster_roles(admin, &format!("olm.owner={}", inst.csv)).await;
    assert!(!v0_roles.is_empty(), "OLM v0 made no ClusterRole");
    Installed {
        inst,
        package: spec.package.clone(),
        catalog,
        deployment,
        deployment_uid,
        pod,
        v0_roles,
        _opm: opm,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convert_all_takes_over_every_subscription_in_place_and_cleanup_all_tidies_up() {
    let Scene {
        _serial,
        node,
        admin,
        kubeconfig,
        ctl,
        mut v0,
        ..
    } = scene("v0all").await;
    let operators = [
        install(&admin, node, "v0alla", false, "Automatic", true).await,
        install(&admin, node, "v0allb", true, "Manual", false).await,
    ];
    let registry = ["--insecure-registry", node.registry.as_str()];

    let mut args = vec!["migrate", "check", "--all"];
    args.extend_from_slice(&registry);
    let (code, out, err) = olmv1(&args, &kubeconfig);
    println!("[v0all] check --all:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    for o in &operators {
        let line = format!("Subscription {}/{}: eligible", o.inst.ns, o.inst.sub);
        assert!(out.contains(&line), "{line} missing from:\n{out}");
    }

    let mut args = vec!["migrate", "convert", "--all", "--apply"];
    args.extend_from_slice(&registry);
    let started = Instant::now();
    let (code, out, err) = olmv1(&args, &kubeconfig);
    println!(
        "[v0all] convert --all --apply ({:?}):\n{out}{err}",
        started.elapsed()
    );
    assert_eq!(code, 0, "{err}\n{out}");
    // Only Subscriptions of this test are left on this cluster (the other test's is
    // converted, or not made yet).
    assert!(
        out.contains("convert --all: 2 Subscription(s): 2 done or planned, 0 refused, 0 failed"),
        "{out}"
    );
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    // The first one's ClusterCatalog also serves 1.1.0 (replacing 1.0.0), and its
    // Subscription was on Automatic approval (its ClusterExtension pins no version): the
    // controller resolves the installed CSV's version until the takeover, takes it over
    // in place, then upgrades along the catalog's edge (docs/how-to/switch-from-olm-v0.md,
    // "The takeover"). The second (Manual approval) stays pinned at 1.0.0.
    let a = &operators[0];
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &a.inst.ns);
    for o in &operators {
        wait_installed(&exts, &o.inst.sub, "1.0.0").await;
    }
    wait_succeeded(&exts, &operators[1].inst.sub).await;
    println!(
        "[v0all] both Installed at 1.0.0 {:?} after convert --all started",
        started.elapsed()
    );
    let adopted = support::extensions::events(&admin, &a.inst.sub, "Adopted").await;
    let took = format!(
        "took over OLM v0's installation of bundle {} version 1.0.0",
        a.inst.csv
    );
    assert!(adopted.iter().any(|m| m.contains(&took)), "{adopted:?}");
    let refused = support::extensions::events(&admin, &a.inst.sub, "AdoptionRefused").await;
    assert!(refused.is_empty(), "{refused:?}");
    // Right after the takeover the spec's range applies: 1.1.0 resolves, and the
    // installer account convert made for 1.0.0 lacks what it adds — the operator runs
    // on, at 1.0.0, the same pod.
    let next = format!("{}.v1.1.0", a.package);
    let waiting = wait_progressing_message(&exts, &a.inst.sub, "pre-authorization failed").await;
    let message = condition(&waiting, "Progressing")
        .expect("Progressing")
        .message;
    assert!(message.contains(&next), "{message}");
    for o in &operators {
        assert_eq!(operator_pod(&admin, &o.inst.ns, &o.deployment).await, o.pod);
    }
    // Granted the documented way, it upgrades: the same Deployment, one new pod.
    Upgrade {
        package: &a.package,
        version: "1.1.0",
        from: "1.0.0",
        catalog: &a.catalog,
        namespace: &a.inst.ns,
        extension: &a.inst.sub,
        registry: &node.registry,
    }
    .grant(&admin, &kubeconfig)
    .await;
    wait_installed(&exts, &a.inst.sub, "1.1.0").await;
    wait_succeeded(&exts, &a.inst.sub).await;
    let live = deployments.get(&a.deployment).await.expect("Deployment");
    assert_eq!(
        live.metadata.uid, a.deployment_uid,
        "the Deployment was replaced"
    );
    let a_pod = operator_pod(&admin, &a.inst.ns, &a.deployment).await;
    assert_ne!(a_pod.1, a.pod.1, "1.1.0 rolled out no new pod");
    let pods = [a_pod, operators[1].pod.clone()];
    for (o, pod) in operators.iter().zip(&pods) {
        let csvs = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", &o.inst.ns);
        assert!(csvs.get_opt(&o.inst.csv).await.expect("read").is_none());
        let subs = olm_v0::api(&admin, "v1alpha1", "Subscription", &o.inst.ns);
        assert!(subs.get_opt(&o.inst.sub).await.expect("read").is_none());
        assert_eq!(
            &operator_pod(&admin, &o.inst.ns, &o.deployment).await,
            pod,
            "the pod of {} changed",
            o.inst.sub
        );
        assert_eq!(
            missing_roles(&admin, &o.v0_roles).await,
            Vec::<String>::new(),
            "OLM v0's ClusterRoles stay until cleanup"
        );
    }

    let (code, out, err) = olmv1(&["migrate", "cleanup", "--all"], &kubeconfig);
    println!("[v0all] cleanup --all:\n{out}{err}");
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("cleanup --all: "), "{out}");
    for (o, pod) in operators.iter().zip(&pods) {
        assert_eq!(
            missing_roles(&admin, &o.v0_roles).await,
            o.v0_roles,
            "cleanup deletes OLM v0's ClusterRoles"
        );
        let owned = format!("olm.operatorframework.io/owner-name={}", o.inst.sub);
        assert!(!cluster_roles(&admin, &owned).await.is_empty());
        assert_eq!(&operator_pod(&admin, &o.inst.ns, &o.deployment).await, pod);
    }
    // OLM v0, still running, re-created nothing.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for o in &operators {
        let csvs = olm_v0::api(&admin, "v1alpha1", "ClusterServiceVersion", &o.inst.ns);
        assert!(csvs.get_opt(&o.inst.csv).await.expect("read").is_none());
    }
    assert!(v0.exited().is_empty(), "OLM v0 stopped: {:?}", v0.exited());
    let log = ctl.log_text();
    assert!(!log.contains("panicked"), "the controller panicked: {log}");
    drop(v0);
    drop(ctl);
}
