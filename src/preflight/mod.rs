//! Preflight checks that run before anything of a revision is applied, behind one entry
//! point, [`run`]: CRD upgrade safety ([`crd_safety`], against the live CRDs) and the
//! installer ServiceAccount's permissions ([`permissions`], the account's rules and
//! SubjectAccessReviews, for every object to apply and every object the upgrade
//! prunes). Either failing means nothing is written; both are retryable (a CRD or RBAC
//! change can fix them).
//!
//! The checks themselves are pure ([`crd_safety::check`], [`permissions::requirements`]);
//! this module only fetches what they compare against.

pub mod crd_safety;
pub mod permissions;

use crate::apply::{ObjectRef, Owner, Resolver, RevisionHistory, resource_map};
use crd_safety::{Enforcement, Verdict};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use permissions::{EvaluateError, PermissionError, add_deletions, describe, requirements};
use serde_json::Value;

/// What one preflight run checks.
pub struct Preflight<'a> {
    /// The rendered objects of the revision to apply.
    pub objects: &'a [Value],
    /// `spec.install.preflight.crdUpgradeSafety.enforcement`.
    pub enforcement: Enforcement,
    /// The installer ServiceAccount (namespace, name).
    pub account: (&'a str, &'a str),
    pub owner: &'a Owner,
    /// The revision record: what an upgrade prunes must be deletable too.
    pub history: Option<&'a RevisionHistory>,
}

/// A passed preflight: what it reports without blocking.
#[derive(Debug, Default, PartialEq)]
pub struct Passed {
    /// CRD upgrade-safety findings with `enforcement: None`, one message per CRD (for
    /// a Warning Event).
    pub warnings: Vec<String>,
}

/// Why a preflight blocked the revision. Every variant is retryable; the text is the
/// condition message.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("getting existing resource for CRD {crd:?}: {source}")]
    LiveCrd {
        crd: String,
        #[source]
        source: kube::Error,
    },
    #[error("rendered CRD {crd:?}: {message}")]
    RenderedCrd { crd: String, message: String },
    /// One `validating upgrade for CRD …` message per unsafe CRD, joined by newlines.
    #[error("{}", .0.join("\n"))]
    UnsafeCrds(Vec<String>),
    /// Discovery of the objects' resources failed.
    #[error(transparent)]
    Discovery(#[from] crate::apply::ApplyError),
    #[error("rendered objects: {0}")]
    Objects(#[from] PermissionError),
    /// Missing permissions (the one-message list) or a failed SubjectAccessReview.
    #[error(transparent)]
    Permissions(#[from] EvaluateError),
}

/// Both preflights, at the same time (each only reads): CRD upgrade safety (the
/// `controller` client reads the live CRDs) and the permission check (`installer` reads
/// the account's rules and is used for discovery, `controller` sends the
/// SubjectAccessReviews for what the rules do not cover). When both fail, the CRD
/// upgrade-safety error is the one reported, as when they ran one after the other.
pub async fn run(
    controller: &kube::Client,
    installer: &kube::Client,
    preflight: &Preflight<'_>,
) -> Result<Passed, PreflightError> {
    let (namespace, name) = preflight.account;
    let (safety, permissions) = futures::future::join(
        crd_upgrade_safety(controller, preflight.objects, preflight.enforcement),
        check_permissions(
            controller,
            installer,
            namespace,
            name,
            preflight.owner,
            preflight.objects,
            preflight.history,
        ),
    )
    .await;
    let warnings = safety?;
    permissions?;
    Ok(Passed { warnings })
}

/// Live CRDs read at once by [`crd_upgrade_safety`].
const LIVE_CRD_READS: usize = 4;

/// CRD upgrade safety of every CRD among `objects` against its live version (a CRD not
/// yet on the cluster passes). Returns the warnings of `enforcement: None`.
pub async fn crd_upgrade_safety(
    client: &kube::Client,
    objects: &[Value],
    enforcement: Enforcement,
) -> Result<Vec<String>, PreflightError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut rendered = Vec::new();
    for obj in objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let crd = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let nodes = crd_safety::schema_nodes(obj);
        if nodes > crd_safety::MAX_SCHEMA_NODES {
            let message = crd_safety::CrdInputError::TooLarge {
                name: crd.clone(),
                nodes,
            }
            .to_string();
            return Err(PreflightError::RenderedCrd { crd, message });
        }
        rendered.push((crd, obj));
    }
    // The live CRDs are read a few at a time (each read is a round trip; at most
    // LIVE_CRD_READS of them are held at once), and checked in the bundle's order.
    let (mut warnings, mut blocked) = (Vec::new(), Vec::new());
    for chunk in rendered.chunks(LIVE_CRD_READS) {
        let lives = futures::future::join_all(chunk.iter().map(|(crd, _)| crds.get_opt(crd))).await;
        for ((crd, obj), live) in chunk.iter().zip(lives) {
            let live = match live {
                Ok(Some(live)) => live,
                Ok(None) => continue,
                Err(source) => {
                    let crd = crd.clone();
                    return Err(PreflightError::LiveCrd { crd, source });
                }
            };
            match judge(enforcement, crd, obj, &live)? {
                Verdict::Safe => {}
                Verdict::Blocked(message) => blocked.push(message),
                Verdict::Warn(message) => {
                    tracing::warn!(%crd, findings = %message, "CRD upgrade safety disabled; proceeding despite unsafe changes");
                    warnings.push(message);
                }
            }
        }
    }
    if blocked.is_empty() {
        Ok(warnings)
    } else {
        Err(PreflightError::UnsafeCrds(blocked))
    }
}

/// The verdict of CRD upgrade safety on the rendered CRD `obj` (named `crd`) against its
/// `live` version.
fn judge(
    enforcement: Enforcement,
    crd: &str,
    obj: &Value,
    live: &CustomResourceDefinition,
) -> Result<Verdict, PreflightError> {
    let new: CustomResourceDefinition =
        serde_json::from_value(obj.clone()).map_err(|e| PreflightError::RenderedCrd {
            crd: crd.to_string(),
            message: e.to_string(),
        })?;
    Ok(crd_safety::verdict(
        enforcement,
        crd,
        &crd_safety::check(live, &new),
    ))
}

/// The permission preflight for installing `objects` as the ServiceAccount
/// `account_namespace/account_name`, including `get`/`delete` on what the upgrade prunes
/// (from `history`). `installer` reads the account's rules (SelfSubjectRulesReviews) and
/// is used for discovery; `controller` sends the SubjectAccessReviews for the rest.
pub async fn check_permissions(
    controller: &kube::Client,
    installer: &kube::Client,
    account_namespace: &str,
    account_name: &str,
    owner: &Owner,
    objects: &[Value],
    history: Option<&RevisionHistory>,
) -> Result<(), PreflightError> {
    let resolver = Resolver::new(installer.clone());
    let dropped: Vec<Value> = history
        .map(|h| h.dropped_by(objects))
        .unwrap_or_default()
        .iter()
        .map(ObjectRef::to_stub)
        .collect();
    let mut all = objects.to_vec();
    all.extend(dropped.iter().cloned());
    let map = resource_map(&resolver, &all).await?;
    let infos = describe(objects, &map)?;
    let mut req = requirements(objects, &infos, &owner.name);
    add_deletions(&mut req, &describe(&dropped, &map)?);
    permissions::preflight(controller, installer, account_namespace, account_name, &req).await?;
    Ok(())
}
