//! `olmv1 rollback NAME [--to VERSION]` (also `kubectl olmv1 rollback`): returns a
//! ClusterExtension to an earlier revision of its revision record
//! (docs/how-to/upgrade-control.md, "Rollback") by setting its
//! `olm.operatorframework.io/rollback-to` annotation — the same edit a GitOps repository
//! can commit; the controller makes the rollback (CRD upgrade safety first) and holds
//! upgrades while the annotation stays. Without `--to`, the newest recorded revision of
//! another version than the installed one; `--clear` removes the annotation (upgrades
//! resume). The record is read (when the caller may list ConfigMaps) to check the
//! version, and the seal of its revision (an edited record is refused,
//! [`refusal`]), before anything is written; the controller checks again, and checks
//! what the revision's image holds before it applies anything.

use super::status::{StatusError, kube_client};
use crate::api::ClusterExtension;
use crate::apply::ownership::OWNER_NAME_LABEL;
use crate::apply::record::{DATA_KEY, RevisionHistory, decode};
use crate::controller::extension::plan::rollback::ANNOTATION_ROLLBACK_TO;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The ClusterExtension to roll back.
    pub name: String,
    /// The version to return to (default: the newest recorded revision of another version than the installed one).
    #[arg(long, conflicts_with = "clear")]
    pub to: Option<String>,
    /// Remove the rollback annotation: upgrades resume.
    #[arg(long)]
    pub clear: bool,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
}

pub fn run(args: RollbackArgs) -> ExitCode {
    super::exit_with(super::block_on(rollback(&args)), |out| println!("{out}"))
}

async fn rollback(args: &RollbackArgs) -> Result<String, StatusError> {
    let client = kube_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let api: Api<ClusterExtension> = Api::all(client.clone());
    let name = &args.name;
    let ext = api
        .get_opt(name)
        .await
        .map_err(|e| StatusError::Api(e.to_string()))?
        .ok_or_else(|| StatusError::NotFound(name.clone()))?;
    let patch = |value: Option<&str>| serde_json::json!({"metadata": {"annotations": {ANNOTATION_ROLLBACK_TO: value}}});
    if args.clear {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch(None)))
            .await
            .map_err(|e| StatusError::Api(e.to_string()))?;
        return Ok(format!(
            "clusterextension/{name}: annotation {ANNOTATION_ROLLBACK_TO} removed; upgrades resume"
        ));
    }
    let installed = ext
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| i.bundle.version.clone());
    let uid = ext.metadata.uid.clone().unwrap_or_default();
    let history = match record(&client, name, &uid).await {
        Ok(history) => history,
        Err(e) if args.to.is_some() => {
            eprintln!(
                "note: the revision record could not be read ({e}); the controller checks the version"
            );
            None
        }
        Err(e) => {
            return Err(StatusError::Api(format!(
                "reading the revision record of {name:?}: {e} (pass --to VERSION)"
            )));
        }
    };
    let recorded = history.as_ref().map(versions);
    let to = choose(
        installed.as_deref(),
        recorded.as_deref(),
        args.to.as_deref(),
    )
    .map_err(StatusError::Api)?;
    if let Some(refused) = history.as_ref().and_then(|h| refusal(h, &to)) {
        return Err(StatusError::Api(refused));
    }
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&patch(Some(&to))),
    )
    .await
    .map_err(|e| StatusError::Api(e.to_string()))?;
    let from = installed.unwrap_or_else(|| "nothing".into());
    Ok(format!(
        "clusterextension/{name}: rolling back from {from} to {to} (annotation {ANNOTATION_ROLLBACK_TO}: {to}; a GitOps repository should carry the same annotation). Upgrades wait until it is removed: `olmv1 rollback {name} --clear`"
    ))
}

/// The revision record of extension `name` (uid `uid`), found by its labels in any
/// namespace (the controller's); `None` when there is none.
async fn record(
    client: &kube::Client,
    name: &str,
    uid: &str,
) -> Result<Option<RevisionHistory>, String> {
    let labels = format!("olm.operatorframework.io/revision-record=true,{OWNER_NAME_LABEL}={name}");
    let list = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default().labels(&labels))
        .await
        .map_err(|e| format!("listing ConfigMaps: {e}"))?;
    for cm in &list.items {
        let Some(data) = cm.binary_data.as_ref().and_then(|d| d.get(DATA_KEY)) else {
            continue;
        };
        if let Ok(history) = decode(&data.0)
            && history.extension == name
            && (uid.is_empty() || history.uid == uid)
        {
            return Ok(Some(history));
        }
    }
    Ok(None)
}

/// The recorded versions, newest first, each once.
pub fn versions(history: &RevisionHistory) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in history.revisions.iter().rev() {
        if !out.contains(&r.bundle.version) {
            out.push(r.bundle.version.clone());
        }
    }
    out
}

/// Why a rollback to `to` is refused: the newest revision of `to` in `history` fails its
/// seal (the record was edited after it was written); `None` when it passes or has none.
pub fn refusal(history: &RevisionHistory, to: &str) -> Option<String> {
    let revision = history
        .revisions
        .iter()
        .rev()
        .find(|r| r.bundle.version == to)?;
    let mismatch = history.check_integrity(revision.number).err()?;
    Some(format!("rollback to {to} refused: {mismatch}"))
}

/// The version to roll back to: `to` when given (checked against `recorded`, the
/// record's versions newest first, when it was read), else the newest recorded one
/// other than `installed`.
pub fn choose(
    installed: Option<&str>,
    recorded: Option<&[String]>,
    to: Option<&str>,
) -> Result<String, String> {
    let to = to.map(|v| v.trim().trim_start_matches('v').to_string());
    match (to, recorded) {
        (Some(to), Some(recorded)) if !recorded.contains(&to) => Err(format!(
            "version {to} is not in the revision record (recorded: {}); the record keeps the last {} revisions",
            recorded.join(", "),
            crate::apply::record::KEEP_REVISIONS
        )),
        (Some(to), _) => Ok(to),
        (None, Some(recorded)) => recorded
            .iter()
            .find(|v| Some(v.as_str()) != installed)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "the revision record has no other version than {} to roll back to",
                    installed.unwrap_or("the installed one")
                )
            }),
        (None, None) => Err("no revision record found (pass --to VERSION)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_one_asked_for_if_recorded_else_the_previous_one() {
        let recorded = vec!["1.1.0".to_string(), "1.0.0".to_string()];
        let r = Some(recorded.as_slice());
        assert_eq!(choose(Some("1.1.0"), r, None).as_deref(), Ok("1.0.0"));
        assert_eq!(
            choose(Some("1.1.0"), r, Some("v1.0.0")).as_deref(),
            Ok("1.0.0")
        );
        let missing = choose(Some("1.1.0"), r, Some("0.9.0")).expect_err("not recorded");
        assert!(missing.contains("recorded: 1.1.0, 1.0.0"), "{missing}");
        assert_eq!(choose(None, None, Some("0.9.0")).as_deref(), Ok("0.9.0"));
        assert!(choose(Some("1.1.0"), Some(&recorded[..1]), None).is_err());
        assert!(choose(None, None, None).is_err());
    }

    #[test]
    fn a_revision_edited_after_it_was_recorded_is_refused() {
        let mut h = RevisionHistory::new(&crate::apply::Owner::new("foo", "u"));
        for v in ["1.0.0", "1.1.0"] {
            let b = crate::api::BundleIdentity {
                package: "foo".into(),
                name: format!("foo.v{v}"),
                version: v.into(),
                release: None,
                image: format!("r/foo@sha256:{v}"),
            };
            let n = h.begin(b, &[serde_json::json!({"kind": "ConfigMap", "v": v})]);
            h.complete(n);
        }
        assert_eq!(refusal(&h, "1.0.0"), None);
        assert_eq!(refusal(&h, "0.9.0"), None, "not recorded: choose says so");
        h.revisions[0].bundle.image = "r/foo@sha256:1.1.0".into();
        let refused = refusal(&h, "1.0.0").expect("edited");
        assert!(
            refused.starts_with("rollback to 1.0.0 refused: revision 1 of record olmv1-revision-foo names bundle foo.v1.0.0 version 1.0.0 but fails its integrity check"),
            "{refused}"
        );
    }
}
