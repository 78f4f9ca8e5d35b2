//! `olmv1 approve NAME [VERSION]` (also `kubectl olmv1 approve`): approves the upgrade
//! of a ClusterExtension under manual approval (docs/how-to/upgrade-control.md) by
//! setting its `olm.operatorframework.io/approved-version` annotation — the same edit a
//! GitOps repository can commit. Without VERSION, the version the controller reports
//! as waiting (Progressing `ApprovalRequired`) is approved. An approval is for exactly
//! that version: a newer one resolved later waits again.

use super::status::{StatusError, kube_client};
use crate::api::{ClusterExtension, conditions};
use crate::controller::extension::plan::control::ANNOTATION_APPROVED_VERSION;
use crate::controller::extension::plan::notice::REASON_APPROVAL_REQUIRED;
use kube::api::{Api, Patch, PatchParams};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The ClusterExtension whose upgrade to approve.
    pub name: String,
    /// The version to approve (default: the one waiting for approval).
    pub version: Option<String>,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
}

pub fn run(args: ApproveArgs) -> ExitCode {
    super::exit_with(super::block_on(approve(&args)), |out| println!("{out}"))
}

async fn approve(args: &ApproveArgs) -> Result<String, StatusError> {
    let client = kube_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let api: Api<ClusterExtension> = Api::all(client);
    let ext = api
        .get_opt(&args.name)
        .await
        .map_err(|e| StatusError::Api(e.to_string()))?
        .ok_or_else(|| StatusError::NotFound(args.name.clone()))?;
    let version = match &args.version {
        Some(v) => v.trim().trim_start_matches('v').to_string(),
        None => waiting(&ext).ok_or_else(|| {
            StatusError::Api(format!(
                "nothing of clusterextension {:?} waits for approval (pass VERSION to approve one ahead)",
                args.name
            ))
        })?,
    };
    let patch =
        serde_json::json!({"metadata": {"annotations": {ANNOTATION_APPROVED_VERSION: version}}});
    api.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| StatusError::Api(e.to_string()))?;
    Ok(format!(
        "clusterextension/{} approved for version {version} (annotation {ANNOTATION_APPROVED_VERSION}); a GitOps repository should carry the same annotation",
        args.name
    ))
}

/// The version the controller reports as waiting for approval: from the Progressing
/// message, which names the command (`olmv1 approve NAME VERSION`).
pub fn waiting(ext: &ClusterExtension) -> Option<String> {
    let status = ext.status.as_ref()?;
    let p = conditions::find(&status.conditions, conditions::TYPE_PROGRESSING)?;
    if p.reason != REASON_APPROVAL_REQUIRED {
        return None;
    }
    let name = ext.metadata.name.as_deref().unwrap_or_default();
    let (_, rest) = p.message.split_once(&format!("approve {name} "))?;
    let version = rest.split(['`', ' ']).next()?.trim();
    (!version.is_empty()).then(|| version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiting_version_is_read_from_progressing() {
        let held = crate::controller::extension::plan::control::Held {
            target: crate::api::BundleIdentity {
                package: "p".into(),
                name: "p.v1.1.0".into(),
                version: "1.1.0".into(),
                release: None,
                image: String::new(),
            },
            approved: None,
            operator: None,
        };
        let ext = |reason: &str| -> ClusterExtension {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
                "metadata": {"name": "e"},
                "spec": {"namespace": "ns", "source": {"sourceType": "Catalog"}},
                "status": {"conditions": [{"type": "Progressing", "status": "True",
                    "reason": reason, "message": held.message("e", Some("1.0.0")),
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
            }))
            .expect("extension")
        };
        assert_eq!(waiting(&ext("ApprovalRequired")).as_deref(), Some("1.1.0"));
        assert_eq!(waiting(&ext("Succeeded")), None);
    }
}
