//! Applying YAML manifests (like `kubectl apply --server-side`) with discovery, and
//! setting up the controller's own identity from `config/`: its namespace,
//! ServiceAccount, ClusterRole and bindings exactly as shipped, plus a kubeconfig with
//! a token for that ServiceAccount (TokenRequest), so tests prove the shipped RBAC.

use super::TestEnvError;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use std::path::Path;

/// Field manager of objects the tooling applies.
pub const FIELD_MANAGER: &str = "olmv1-testenv";

/// Parses a multi-document YAML stream into objects (empty documents skipped).
pub fn parse_objects(source_name: &str, yaml: &str) -> Result<Vec<DynamicObject>, TestEnvError> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).map_err(|e| TestEnvError::Manifest {
            source_name: source_name.to_string(),
            message: e.to_string(),
        })?;
    docs.into_iter()
        .filter(|d| !d.is_null())
        .map(|d| {
            serde_json::from_value(d).map_err(|e| TestEnvError::Manifest {
                source_name: source_name.to_string(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// Server-side applies objects in order, resolving each kind through discovery.
/// `refresh` re-runs discovery first (after CRDs were added).
pub async fn apply_objects(
    client: &kube::Client,
    objects: &[DynamicObject],
) -> Result<(), TestEnvError> {
    let discovery = discover(client).await?;
    for obj in objects {
        let types = obj.types.as_ref().ok_or_else(|| TestEnvError::Manifest {
            source_name: obj.metadata.name.clone().unwrap_or_default(),
            message: "object without apiVersion/kind".into(),
        })?;
        let gvk = kube::api::GroupVersionKind::try_from(types)
            .map_err(|e| TestEnvError::Kube(e.to_string()))?;
        let (resource, caps) = discovery.resolve_gvk(&gvk).ok_or_else(|| {
            TestEnvError::Kube(format!(
                "the API server does not serve {}/{}",
                types.api_version, types.kind
            ))
        })?;
        let name = obj.metadata.name.clone().unwrap_or_default();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata.namespace.as_deref().unwrap_or("default"),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await
        .map_err(|e| TestEnvError::Kube(format!("applying {} {name}: {e}", types.kind)))?;
    }
    Ok(())
}

/// Full discovery, retried for a few seconds: a group the API server has just started
/// (or stopped) serving — a CRD created or deleted a moment ago — is listed before its
/// versions answer, and discovery fails with a 404 meanwhile.
async fn discover(client: &kube::Client) -> Result<Discovery, TestEnvError> {
    let mut attempt = 0;
    loop {
        match Discovery::new(client.clone()).run().await {
            Ok(d) => return Ok(d),
            Err(e) if attempt < 20 => {
                tracing::debug!(error = %e, attempt, "discovery failed; retrying");
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            Err(e) => return Err(TestEnvError::Kube(format!("discovery: {e}"))),
        }
    }
}

/// Applies every `.yaml` file of a directory (sorted; not recursive).
pub async fn apply_dir(client: &kube::Client, dir: &Path) -> Result<usize, TestEnvError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| TestEnvError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("yaml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| TestEnvError::io(file, e))?;
        objects.extend(parse_objects(&file.display().to_string(), &text)?);
    }
    apply_objects(client, &objects).await?;
    Ok(objects.len())
}

/// Namespace and name of the controller's ServiceAccount in `config/`.
pub const CONTROLLER_NAMESPACE: &str = "olmv1-system";
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "olmv1-controller";

/// Installs the CRDs (`crds/`), the namespace and RBAC of `config/` and writes a
/// kubeconfig for the controller's ServiceAccount at `kubeconfig`.
pub async fn install_controller_identity(
    admin: &kube::Client,
    project: &Path,
    server: &str,
    ca_pem: &str,
    kubeconfig: &Path,
) -> Result<(), TestEnvError> {
    apply_dir(admin, &project.join("crds")).await?;
    apply_dir(admin, &project.join("config").join("base")).await?;
    apply_dir(admin, &project.join("config").join("rbac")).await?;
    let api: Api<ServiceAccount> = Api::namespaced(admin.clone(), CONTROLLER_NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(7 * 24 * 3600),
            ..Default::default()
        },
        ..Default::default()
    };
    let token = api
        .create_token_request(CONTROLLER_SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .map_err(|e| TestEnvError::Kube(format!("token for the controller ServiceAccount: {e}")))?;
    let token = token
        .status
        .map(|s| s.token)
        .ok_or_else(|| TestEnvError::Kube("TokenRequest returned no token".into()))?;
    super::write_kubeconfig(
        kubeconfig,
        server,
        ca_pem,
        &token,
        CONTROLLER_SERVICE_ACCOUNT,
    )
}
