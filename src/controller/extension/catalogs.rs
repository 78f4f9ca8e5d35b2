//! The ClusterCatalogs a resolution reads ([`CatalogView`]): the objects of the watch
//! that already triggers reconciles on catalog changes ([`super::run`]), kept in a
//! reflector store, so that a reconcile reads no catalog from the API server (as
//! upstream's operator-controller reads them from its informer cache). The store is
//! updated before a change reaches the trigger, so the reconcile a catalog change causes
//! sees that change. Until the store has listed once, or where no watch runs (a
//! reconcile driven without [`super::run`]), the catalogs are listed from the API
//! server as before.

use crate::api::ClusterCatalog;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::Store;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a reconcile waits for the store's first list before it lists the catalogs
/// itself (a watch that cannot list, e.g. without RBAC, then fails the reconcile with
/// the API server's own error, as before).
const FIRST_LIST_WAIT: Duration = Duration::from_secs(10);

/// Where resolution reads the ClusterCatalogs.
#[derive(Default)]
pub struct CatalogView {
    store: OnceLock<Store<ClusterCatalog>>,
}

impl CatalogView {
    /// Reads from `store` from now on (once; a second store is ignored).
    pub fn watch_with(&self, store: Store<ClusterCatalog>) {
        let _ = self.store.set(store);
    }

    /// The ClusterCatalogs, sorted by name (the order of a LIST).
    pub async fn list(&self, client: &kube::Client) -> Result<Vec<ClusterCatalog>, kube::Error> {
        if let Some(store) = self.store.get()
            && let Ok(Ok(())) =
                tokio::time::timeout(FIRST_LIST_WAIT, store.wait_until_ready()).await
        {
            return Ok(sorted(
                store.state().iter().map(|c| (**c).clone()).collect(),
            ));
        }
        let listed = Api::<ClusterCatalog>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        Ok(sorted(listed.items))
    }
}

fn sorted(mut catalogs: Vec<ClusterCatalog>) -> Vec<ClusterCatalog> {
    catalogs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    catalogs
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    fn catalog(name: &str) -> ClusterCatalog {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": name},
            "spec": {"source": {"type": "Image", "image": {"ref": "example.com/c:v1"}}},
        }))
        .expect("a valid ClusterCatalog")
    }

    /// A client whose every request fails at once: a read that reaches it is an error.
    fn unreachable_client() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        kube::Client::try_from(config).expect("a client")
    }

    #[tokio::test]
    async fn a_listed_store_answers_sorted_without_the_api_server() {
        let (reader, mut writer) = reflector::store();
        for event in [
            Event::Init,
            Event::InitApply(catalog("zeta")),
            Event::InitApply(catalog("alpha")),
            Event::InitDone,
            Event::Apply(catalog("mid")),
            Event::Delete(catalog("zeta")),
        ] {
            writer.apply_watcher_event(&event);
        }
        let view = CatalogView::default();
        view.watch_with(reader);
        let names: Vec<_> = view
            .list(&unreachable_client())
            .await
            .expect("read from the store")
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(names, ["alpha", "mid"]);
    }

    #[tokio::test]
    async fn without_a_store_the_api_server_is_asked() {
        let view = CatalogView::default();
        assert!(view.list(&unreachable_client()).await.is_err());
    }
}
