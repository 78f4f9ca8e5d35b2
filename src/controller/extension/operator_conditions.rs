//! The I/O of the operator's own say (docs/how-to/upgrade-control.md, "The operator's
//! own say"): whether the cluster serves `operators.coreos.com/v2` `OperatorCondition`
//! (discovery, remembered for [`TTL`]: a burst of reconciles asks once, an idle
//! controller never; asked only when an install renders or an upgrade is decided), and reading one OperatorCondition as the installer account (which
//! applied it). The decisions are in [`super::plan::operator`] and
//! [`crate::bundle::operator_condition`].

use crate::bundle::operator_condition::{self, API_VERSION, KIND};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a discovery answer is used.
pub const TTL: Duration = Duration::from_secs(10);

/// The last discovery answer, and when it was had.
#[derive(Debug, Default)]
pub struct Served(Mutex<Option<(Instant, bool)>>);

impl Served {
    /// Whether the cluster serves OperatorCondition. When discovery fails, the last
    /// answer stands (else `Err`): a passing failure must not drop the OperatorCondition
    /// from what an install renders (that would delete it).
    pub async fn get(&self, client: &kube::Client) -> Result<bool, String> {
        let known = self.0.lock().ok().and_then(|k| *k);
        if let Some((at, served)) = known
            && at.elapsed() < TTL
        {
            return Ok(served);
        }
        let served = match client.list_api_group_resources(API_VERSION).await {
            Ok(list) => list.resources.iter().any(|r| r.kind == KIND),
            Err(kube::Error::Api(e)) if e.code == 404 => false,
            Err(e) => {
                return known
                    .map(|(_, served)| served)
                    .ok_or_else(|| format!("discovering {API_VERSION}: {e}"));
            }
        };
        if let Ok(mut k) = self.0.lock() {
            *k = Some((Instant::now(), served));
        }
        Ok(served)
    }
}

fn resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(operator_condition::GROUP, "v2", KIND);
    ApiResource::from_gvk_with_plural(&gvk, "operatorconditions")
}

/// The OperatorCondition `name` in `namespace` read through `client`: upgradeable (or
/// absent: re-created by the next install), or what holds the upgrade.
pub async fn read(client: &kube::Client, namespace: &str, name: &str) -> Result<(), String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource());
    let object = api.get_opt(name).await.map_err(|e| {
        format!("OperatorCondition {name} in namespace {namespace} could not be read: {e}")
    })?;
    let Some(object) = object else {
        return Ok(());
    };
    let value = serde_json::to_value(&object).map_err(|e| e.to_string())?;
    operator_condition::upgradeable(&value)
}
