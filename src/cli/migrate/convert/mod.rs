//! `olmv1 migrate convert <namespace>/<name> [--dry-run | --apply]`
//! (docs/how-to/switch-from-olm-v0.md, "convert"): reads what the plan decides from —
//! the Subscription, the backup, the CSV and its copies, InstallPlans, the objects
//! still tied to the CSV (the OperatorCondition among them), the installer account's
//! objects, the ClusterExtension — runs `check` and `olmv1 rbac` for a first run,
//! asks [`convert::plan`] for the steps that remain, prints them, and with `--apply`
//! performs them in order ([`perform`]), stopping at the first failure (running it
//! again continues from there). Decides nothing itself.

use super::kube as k;
use super::{CheckArgs, ConvertArgs, Output, parse_target};
use crate::migrate::olm_v0::backup::{self, Backup, configmap_name};
use crate::migrate::olm_v0::convert::{self, GuardState, Observed, Plan, Step, Target};
use crate::migrate::olm_v0::read::text;
use serde_json::Value;
use std::path::Path;

mod perform;

use perform::execute;
pub(super) use perform::remove_finalizers;

/// Cluster-scoped kinds the finalizer deletes by the CSV's `olm.owner*` labels (and
/// APIServices, which olm-operator deletes when the CSV their labels name is gone).
const LABELLED: [(&str, &str); 5] = [
    ("apiregistration.k8s.io/v1", "APIService"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    ),
];
/// Namespaced kinds OLM v0 ties to the CSV (labels, ownerReferences; reference §1.2).
const NAMESPACED: [(&str, &str); 7] = [
    ("apps/v1", "Deployment"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
];

/// Where OLM v0 puts an aggregated API server's auth-reader RoleBinding.
const KUBE_SYSTEM: &str = "kube-system";

fn v0(kind: &str, version: &str, ns: &str, name: &str) -> Target {
    Target {
        api_version: format!("operators.coreos.com/{version}"),
        kind: kind.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// What `migrate convert` prints, and its exit code (0 planned or done, 1 refused,
/// 2 a step failed, 3 done but OLM v0 had not finished: run it again). Blocking.
pub fn convert(args: &ConvertArgs) -> Result<(String, u8), String> {
    let (ns, name) = parse_target(args.subscription.as_deref().unwrap_or_default())?;
    let kc = args.kubeconfig.as_deref();
    let mut o = super::super::block_on(read(kc, &ns, &name))??;
    if o.backup.is_none() && o.subscription.is_some() {
        first_run(args, &mut o)?;
    }
    super::super::block_on(installer_and_catalog(kc, &mut o))??;
    let plan = convert::plan(&o);
    if plan.refused.is_some() || !args.apply {
        return Ok((
            render(&plan, args.output, false)?,
            u8::from(plan.refused.is_some()),
        ));
    }
    let steps = match args.stop_after {
        Some(n) => &plan.steps[..n.min(plan.steps.len())],
        None => &plan.steps[..],
    };
    let mut out = render(&plan, Output::Table, true)?;
    if o.guard == GuardState::Unsupported {
        out.push_str(&format!(
            "note: the cluster serves no ValidatingAdmissionPolicy ({}): nothing will refuse a Subscription for this package created again later, which would have OLM v0 install it a second time\n",
            crate::migrate::olm_v0::fence::API_VERSION
        ));
    }
    if let Some(csv) = fenced_csv(steps) {
        let raised = super::super::block_on(async {
            let c = super::gather::client(kc).await?;
            super::fence::raise(&c, &ns, &csv, &mut out).await
        })?;
        if let Err(e) = raised {
            out.push_str(&format!(
                "FAILED: fence the CSV's objects off OLM v0: {e}
nothing was changed
"
            ));
            return Ok((out, 2));
        }
    }
    let failed = super::super::block_on(execute(kc, steps, 0, &mut out))??;
    if failed {
        return Ok((out, 2));
    }
    if steps.len() == plan.steps.len() {
        let settled = super::super::block_on(settle(kc, &ns, &name, steps.len(), &mut out))??;
        if settled != Finish::Done {
            return Ok((out, settled.code()));
        }
        super::super::block_on(async {
            let c = super::gather::client(kc).await?;
            super::fence::lower_for_backup(&c, &ns, &name, &mut out).await
        })??;
        let restored = super::super::block_on(restore(kc, &ns, &name, &mut out))??;
        if restored != Finish::Done {
            return Ok((out, restored.code()));
        }
        let rolled = super::super::block_on(super::certificates::roll_onto_reissued(
            kc, &ns, &name, &mut out,
        ))??;
        if rolled != Finish::Done {
            return Ok((out, rolled.code()));
        }
    }
    if steps.len() < plan.steps.len() {
        out.push_str(&format!(
            "stopped after {} step(s) (--stop-after): run convert again to continue\n",
            steps.len()
        ));
    } else if !plan.then.is_empty() {
        out.push_str(&format!("then: {}\n", plan.then));
    }
    Ok((out, 0))
}

/// The CSV to fence off OLM v0 ([`super::fence`]) while `steps` run: the one they untie
/// or delete.
fn fenced_csv(steps: &[Step]) -> Option<String> {
    steps.iter().find_map(|s| match s {
        Step::Untie { csv: (csv, _), .. } => Some(csv.clone()),
        Step::DeleteCsv { target } => Some(target.name.clone()),
        _ => None,
    })
}

/// `check` of the Subscription and the backup a first run writes.
fn first_run(args: &ConvertArgs, o: &mut Observed) -> Result<(), String> {
    let check_args = CheckArgs {
        subscription: args.subscription.clone(),
        all: false,
        output: Output::Json,
        no_rbac: true,
        kubeconfig: args.kubeconfig.clone(),
        insecure_registries: args.insecure_registries.clone(),
    };
    let check = super::checks(&check_args)?
        .into_iter()
        .next()
        .ok_or("the Subscription was not found")?;
    if check.eligible {
        let installer = super::rbac_for(&check, &check_args)
            .unwrap_or_else(|| Err("no catalog bundle to compute it from".into()))
            .and_then(|yaml| objects(&yaml));
        if let Some(sub) = &o.subscription {
            let condition = o.operator_condition.as_ref();
            o.proposed = Some(backup::propose(&check, sub, installer, condition));
        }
    }
    o.check = Some(check);
    Ok(())
}

/// The objects of a multi-document YAML.
fn objects(yaml: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = crate::yaml::from_multiple(yaml, serde_saphyr::Options::default())
        .map_err(|e| format!("reading the installer RBAC: {e}"))?;
    Ok(docs.into_iter().filter(Value::is_object).collect())
}

/// Everything the plan reads, but the check and the installer account.
async fn read(kc: Option<&Path>, ns: &str, name: &str) -> Result<Observed, String> {
    let client = super::gather::client(kc).await?;
    let c = &client;
    let cm = Target {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: ns.into(),
        name: configmap_name(name),
    };
    let live_backup = k::get(c, &cm).await?;
    let backup_uid = live_backup
        .as_ref()
        .and_then(|v| crate::migrate::olm_v0::read::text(v, "/metadata/uid"));
    let backup = live_backup.map(|v| Backup::from_configmap(&v));
    let subscription = k::get(c, &v0("Subscription", "v1alpha1", ns, name)).await?;
    let csv_name = match (&backup, &subscription) {
        (Some(Ok(b)), _) => Some(b.installed_csv.clone()),
        (_, Some(s)) => crate::migrate::olm_v0::read::text(s, "/status/installedCSV"),
        _ => None,
    };
    let ext = Target {
        api_version: "olm.operatorframework.io/v1".into(),
        kind: "ClusterExtension".into(),
        namespace: String::new(),
        name: name.into(),
    };
    let mut o = Observed {
        namespace: ns.into(),
        name: name.into(),
        subscription,
        backup,
        backup_uid,
        extension: k::get(c, &ext).await?,
        ..Observed::default()
    };
    if let Some(csv) = csv_name {
        read_csv(c, &mut o, &csv).await?;
    }
    Ok(o)
}

/// The CSV, its copies and InstallPlans, and the objects tied to it.
async fn read_csv(c: &kube::Client, o: &mut Observed, csv: &str) -> Result<(), String> {
    let ns = o.namespace.clone();
    let csvs = "operators.coreos.com/v1alpha1";
    o.csv = k::get(c, &v0("ClusterServiceVersion", "v1alpha1", &ns, csv)).await?;
    let copies = format!("olm.copiedFrom={ns}");
    o.copied_csvs = k::list(c, csvs, "ClusterServiceVersion", "", Some(&copies))
        .await?
        .into_iter()
        .filter(|v| v["metadata"]["name"] == csv && v["metadata"]["namespace"] != ns.as_str())
        .collect();
    o.install_plans = k::list(c, csvs, "InstallPlan", &ns, None)
        .await?
        .into_iter()
        .filter(|ip| {
            let names_csv = ip
                .pointer("/spec/clusterServiceVersionNames")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|n| n.as_str() == Some(csv)));
            let of_subscription = ip
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r["kind"] == "Subscription" && r["name"] == o.name.as_str())
                });
            names_csv || of_subscription
        })
        .collect();
    o.operator_condition = k::get(c, &v0("OperatorCondition", "v2", &ns, csv)).await?;
    if let Some(cond) = &o.operator_condition {
        o.tied.push(cond.clone());
    }
    let selector = format!("olm.owner={csv},olm.owner.namespace={ns}");
    for (api_version, kind) in LABELLED {
        o.tied
            .extend(k::list(c, api_version, kind, "", Some(&selector)).await?);
    }
    for (api_version, kind) in NAMESPACED {
        o.tied
            .extend(k::list(c, api_version, kind, &ns, None).await?);
    }
    o.tied.retain(|obj| convert::untie(obj, csv, &ns).is_some());
    // An aggregated API server's `<service>-auth-reader` RoleBinding in kube-system:
    // OLM v0 ties it to nothing (olm-v0 reference §1.2); named after the Service of an
    // APIService tied to the CSV.
    let readers: Vec<String> = o
        .tied
        .iter()
        .filter(|t| t["kind"] == "APIService")
        .filter_map(|t| t.pointer("/spec/service/name").and_then(Value::as_str))
        .map(|service| format!("{service}-auth-reader"))
        .collect();
    for name in readers {
        let binding = Target {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "RoleBinding".into(),
            namespace: KUBE_SYSTEM.into(),
            name,
        };
        o.untied_handed_over.extend(k::get(c, &binding).await?);
    }
    if let Some(live) = &o.csv {
        for name in convert::owned_crd_names(live) {
            let crd = Target {
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                namespace: String::new(),
                name,
            };
            o.untied_handed_over.extend(k::get(c, &crd).await?);
        }
    }
    Ok(())
}

/// Which installer objects are missing; whether the ClusterCatalog to create exists;
/// the guard on the package.
async fn installer_and_catalog(kc: Option<&Path>, o: &mut Observed) -> Result<(), String> {
    let client = super::gather::client(kc).await?;
    let backup = match (&o.backup, &o.proposed) {
        (Some(Ok(b)), _) | (None, Some(Ok(b))) => Some(b),
        _ => None,
    };
    let installer = backup.map(|b| b.installer.clone()).unwrap_or_default();
    let package = backup.and_then(|b| text(&b.extension, "/spec/source/catalog/packageName"));
    if let Some(package) = package {
        o.guard = super::guard::state(&client, &package).await?;
    }
    for obj in installer {
        if k::get(&client, &Target::of(&obj)).await?.is_none() {
            o.installer_missing.push(obj);
        }
    }
    let to_create = o
        .check
        .as_ref()
        .and_then(|c| c.cluster_catalog.as_ref())
        .filter(|c| !c.reused);
    if let Some(catalog) = to_create {
        let t = Target {
            api_version: "olm.operatorframework.io/v1".into(),
            kind: "ClusterCatalog".into(),
            namespace: String::new(),
            name: catalog.name.clone(),
        };
        o.catalog_exists = k::get(&client, &t).await?.is_some();
    }
    Ok(())
}

/// How the work after the steps ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finish {
    Done,
    /// A step failed (exit 2).
    Failed,
    /// OLM v0 or the takeover had not finished within the wait: nothing failed, but
    /// the convert is not complete until it runs again (exit 3).
    Again,
}

impl Finish {
    pub(super) fn code(self) -> u8 {
        match self {
            Finish::Done => 0,
            Finish::Failed => 2,
            Finish::Again => 3,
        }
    }
}

/// How long the convert waits, after its steps, for the CSV to be gone.
const CSV_GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
/// How long reads must find nothing left to do before the convert ends (and the fence
/// goes): catalog-operator may still act on an InstallPlan from its cache for a moment
/// after it is deleted.
const QUIET: std::time::Duration = std::time::Duration::from_secs(3);

/// After the steps: reads the cluster again every second and does what OLM v0 did
/// again meanwhile ([`convert::again`]: InstallPlans made after the first read, a
/// re-created CSV, owner labels put back), until the CSV is gone and reads have found
/// nothing to do for [`QUIET`]. The fence stays up all along (seen with the real OLM
/// v0, e2e/migrate_v0.rs: an InstallPlan made while the convert ran re-created the CSV,
/// which OLM v0 installed once the fence was lowered).
async fn settle(
    kc: Option<&Path>,
    ns: &str,
    name: &str,
    done: usize,
    out: &mut String,
) -> Result<Finish, String> {
    let deadline = tokio::time::Instant::now() + CSV_GONE_WAIT;
    let mut quiet_since: Option<tokio::time::Instant> = None;
    loop {
        let mut o = read(kc, ns, name).await?;
        installer_and_catalog(kc, &mut o).await?;
        let again = convert::again(&o);
        let now = tokio::time::Instant::now();
        if !again.is_empty() {
            quiet_since = None;
            out.push_str(
                "OLM v0 acted on the operator again meanwhile (an InstallPlan, a re-created CSV or owner labels put back): undo it\n",
            );
            if execute(kc, &again, done, out).await? {
                return Ok(Finish::Failed);
            }
        } else if o.csv.is_none() {
            let since = *quiet_since.get_or_insert(now);
            if now.duration_since(since) >= QUIET {
                return Ok(Finish::Done);
            }
        } else {
            quiet_since = None;
        }
        if now >= deadline {
            out.push_str("not finished: the CSV is still being deleted by OLM v0: run convert --apply again once it is gone, to untie anything OLM v0 tied again\n");
            return Ok(Finish::Again);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// The backup ConfigMap of Subscription `ns/name`.
pub(super) fn configmap_target(ns: &str, name: &str) -> Target {
    Target {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: ns.into(),
        name: configmap_name(name),
    }
}

/// How long the convert waits for the takeover to re-create an OperatorCondition that
/// garbage collection removed.
const CONDITION_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// After [`settle`]: puts back what was set in the OperatorCondition when OLM v0's
/// garbage collection removed it during the convert and the takeover re-created it
/// ([`convert::restore_operator_condition`]).
async fn restore(
    kc: Option<&Path>,
    ns: &str,
    name: &str,
    out: &mut String,
) -> Result<Finish, String> {
    let client = super::gather::client(kc).await?;
    let cm = configmap_target(ns, name);
    let Some(Ok(backup)) = k::get(&client, &cm)
        .await?
        .map(|v| Backup::from_configmap(&v))
    else {
        return Ok(Finish::Done);
    };
    let target = v0("OperatorCondition", "v2", ns, &backup.installed_csv);
    let deadline = tokio::time::Instant::now() + CONDITION_WAIT;
    loop {
        let live = k::get(&client, &target).await?;
        let patch = match convert::restore_operator_condition(
            backup.operator_condition.as_ref(),
            live.as_ref(),
        ) {
            convert::Restore::Nothing => return Ok(Finish::Done),
            convert::Restore::Patch(patch) => patch,
            convert::Restore::Wait if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            convert::Restore::Wait => {
                out.push_str(&format!(
                    "not finished: OperatorCondition {ns}/{} is gone and not re-created yet: run convert --apply again once ClusterExtension {name} is installed, to restore what was set in it (kept in {})\n",
                    backup.installed_csv,
                    cm.name
                ));
                return Ok(Finish::Again);
            }
        };
        let keys: Vec<String> = patch["spec"]
            .as_object()
            .map(|m| m.keys().map(|k| format!("spec.{k}")).collect())
            .unwrap_or_default();
        let what = format!(
            "restore {} of OperatorCondition {ns}/{} from the backup (garbage collection removed it during the convert; the takeover re-created it)",
            keys.join(" and "),
            backup.installed_csv
        );
        return match k::merge_patch(&client, &target, &patch).await {
            Ok(()) => {
                out.push_str(&format!("done: {what}\n"));
                Ok(Finish::Done)
            }
            Err(e) => {
                out.push_str(&format!("FAILED: {what}: {e}\n"));
                Ok(Finish::Failed)
            }
        };
    }
}

/// The plan as text (numbered steps), JSON or YAML.
fn render(plan: &Plan, output: Output, applying: bool) -> Result<String, String> {
    if let Some(structured) = super::render::structured(plan, output) {
        return structured;
    }
    let mut out = format!("Subscription {}: ", plan.subscription);
    if let Some(why) = &plan.refused {
        out.push_str(&format!("refused: {why}\n"));
        return Ok(out);
    }
    if plan.steps.is_empty() {
        out.push_str("nothing to do: converted\n");
        return Ok(out);
    }
    let mode = if applying {
        "applying"
    } else {
        "dry run, nothing changed; --apply runs them"
    };
    out.push_str(&format!("{} step(s) ({mode})\n", plan.steps.len()));
    if !applying {
        for (i, s) in plan.steps.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n", i + 1, s.describe()));
        }
        if !plan.then.is_empty() {
            out.push_str(&format!("then: {}\n", plan.then));
        }
    }
    Ok(out)
}
