//! The catalog follower: on a replica that is not the leader, keeps the local catalog
//! store (what this replica's catalog server serves) in sync with what the leader
//! published, so that every replica behind the Service answers alike and a new leader
//! starts with a warm store. It watches ClusterCatalogs and, for each one whose status
//! says `Serving=True` with a digest-pinned `resolvedSource.image.ref`, ingests exactly
//! that digest (the reconciler's pull + parse + store path) unless it is already
//! stored; content of catalogs that are deleted or no longer published is removed. It
//! writes nothing to the API server (no status, finalizers or events). What it stored
//! is recorded in the [`CatalogContext`] the reconciler shares, so the reconciler,
//! started when this replica becomes the leader, does not pull it again.
//!
//! The decision is the pure [`plan`]; [`run`] is the watch loop around it.

use super::executor::{pull_content, remove_content, store_content};
use super::{CatalogContext, Record};
use crate::api::ClusterCatalog;
use crate::api::conditions::{self, TYPE_SERVING};
use crate::fbc;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;
use tracing::Instrument;

/// One thing the follower does to the local store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Remove the stored content of `name`.
    Remove { name: String },
    /// Store the content of the digest-pinned `resolved_ref` as `name`.
    Ingest { name: String, resolved_ref: String },
}

/// The digest-pinned reference the leader serves `catalog` at: its
/// `status.resolvedSource.image.ref` when the catalog is not being deleted, its
/// `Serving` condition is True and the reference is pinned by digest.
pub fn published_ref(catalog: &ClusterCatalog) -> Option<&str> {
    if catalog.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = catalog.status.as_ref()?;
    let serving = conditions::find(&status.conditions, TYPE_SERVING)?;
    if serving.status != "True" {
        return None;
    }
    let reference = status.resolved_source.as_ref()?.image.ref_.as_str();
    reference.contains('@').then_some(reference)
}

/// What to do, given the published catalogs (name → digest-pinned reference) and what is
/// stored locally (name → the reference stored, `None` when content is present but its
/// source is unknown, e.g. left by an earlier process). Removals come first, then
/// ingests, each in name order; a catalog stored at its published reference needs
/// nothing.
pub fn plan(
    published: &BTreeMap<String, String>,
    stored: &BTreeMap<String, Option<String>>,
) -> Vec<Step> {
    let removals = stored
        .keys()
        .filter(|name| !published.contains_key(*name))
        .map(|name| Step::Remove { name: name.clone() });
    let ingests = published
        .iter()
        .filter(|(name, reference)| stored.get(*name) != Some(&Some((*reference).clone())))
        .map(|(name, reference)| Step::Ingest {
            name: name.clone(),
            resolved_ref: reference.clone(),
        });
    removals.chain(ingests).collect()
}

/// Follows the leader's catalogs until `until` resolves, then stops (an ingest already
/// storing finishes first, so that the store is never written by two parties) and
/// returns `until`'s output.
pub async fn run<T>(ctx: Arc<CatalogContext>, until: impl Future<Output = T>) -> T {
    let (stop_tx, stop_rx) = watch::channel(false);
    let follow = follow(ctx, stop_rx).instrument(tracing::info_span!("follow"));
    tokio::pin!(until);
    tokio::pin!(follow);
    tokio::select! {
        out = &mut until => {
            let _ = stop_tx.send(true);
            follow.await;
            tracing::info!("catalog follower stopped");
            out
        }
        () = &mut follow => until.await,
    }
}

/// A failed ingest of `resolved_ref`, retried at `at`.
struct Retry {
    resolved_ref: String,
    failures: u32,
    at: Instant,
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn follow(ctx: Arc<CatalogContext>, mut stop: watch::Receiver<bool>) {
    tracing::info!("following the catalogs the leader publishes");
    let api: Api<ClusterCatalog> = Api::all(ctx.client.clone());
    let (reader, writer) = reflector::store();
    let events = watcher(api, crate::controller::common::watch_config())
        .default_backoff()
        .reflect(writer);
    tokio::pin!(events);
    let mut ready = false;
    let mut retries: HashMap<String, Retry> = HashMap::new();
    loop {
        let next_retry = retries.values().map(|r| r.at).min();
        let retry_due = async {
            match next_retry {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stopped(&mut stop) => return,
            event = events.next() => match event {
                None => {
                    tracing::warn!("the ClusterCatalog watch ended; not following any more");
                    return;
                }
                // Until the first listing is complete, absent catalogs are unknown.
                Some(Ok(watcher::Event::InitDone)) => ready = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "watching ClusterCatalogs");
                    continue;
                }
            },
            () = retry_due => {}
        }
        if ready {
            sync(&ctx, &reader, &mut retries, &mut stop).await;
            // One complete pass (failed ingests are retried, not waited for).
            if !*stop.borrow() {
                ctx.readiness.set_catalogs_synced();
            }
        }
    }
}

/// Brings the store in line with the published catalogs once.
async fn sync(
    ctx: &CatalogContext,
    reader: &Store<ClusterCatalog>,
    retries: &mut HashMap<String, Retry>,
    stop: &mut watch::Receiver<bool>,
) {
    let catalogs: BTreeMap<String, Arc<ClusterCatalog>> = reader
        .state()
        .into_iter()
        .map(|c| (c.name_any(), c))
        .collect();
    let published: BTreeMap<String, String> = catalogs
        .iter()
        .filter_map(|(name, c)| Some((name.clone(), published_ref(c)?.to_string())))
        .collect();
    let names = match fbc::store::stored_names(&ctx.settings.storage_dir) {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!(error = %e, "listing the stored catalogs");
            return;
        }
    };
    let stored: BTreeMap<String, Option<String>> = names
        .into_iter()
        .map(|name| {
            let reference = ctx.record(&name).map(|r| r.resolved_ref);
            (name, reference)
        })
        .collect();
    let steps = plan(&published, &stored);
    retries.retain(|name, retry| {
        steps.iter().any(|s| {
            matches!(s, Step::Ingest { name: n, resolved_ref } if n == name && *resolved_ref == retry.resolved_ref)
        })
    });
    for step in steps {
        if *stop.borrow() {
            return;
        }
        match step {
            Step::Remove { name } => {
                remove_content(ctx, &name);
                ctx.metrics.forget_catalog(&name);
                tracing::info!(catalog = %name, "removed the content of a catalog the leader no longer serves");
            }
            Step::Ingest { name, resolved_ref } => {
                if retries
                    .get(&name)
                    .is_some_and(|r| r.resolved_ref == resolved_ref && r.at > Instant::now())
                {
                    continue;
                }
                let Some(catalog) = catalogs.get(&name) else {
                    continue;
                };
                match ingest(ctx, catalog, &resolved_ref, stop).await {
                    Ok(true) => {
                        retries.remove(&name);
                    }
                    Ok(false) => return,
                    Err(message) => {
                        let failures = retries
                            .get(&name)
                            .filter(|r| r.resolved_ref == resolved_ref)
                            .map_or(1, |r| r.failures.saturating_add(1));
                        let delay = crate::controller::common::backoff(failures);
                        tracing::warn!(catalog = %name, image = %resolved_ref, error = %message, retry_in = ?delay, "could not store the catalog the leader serves");
                        retries.insert(
                            name,
                            Retry {
                                resolved_ref,
                                failures,
                                at: Instant::now() + delay,
                            },
                        );
                    }
                }
            }
        }
    }
}

/// Pulls and stores `resolved_ref` as `catalog`'s content and records it as the
/// reconciler would have. `Ok(false)`: stopped before storing.
async fn ingest(
    ctx: &CatalogContext,
    catalog: &ClusterCatalog,
    resolved_ref: &str,
    stop: &mut watch::Receiver<bool>,
) -> Result<bool, String> {
    let name = catalog.name_any();
    let started = Instant::now();
    let pulled = tokio::select! {
        pulled = pull_content(ctx, resolved_ref) => {
            pulled.map_err(|e| format!("source catalog content: {e}"))?
        }
        () = stopped(stop) => return Ok(false),
    };
    let (stored_at, _warnings) = store_content(ctx, &name, &pulled, started)
        .await
        .map_err(|e| format!("error storing fbc: {e}"))?;
    let status = catalog.status.as_ref();
    let generation = status
        .and_then(|s| conditions::find(&s.conditions, TYPE_SERVING))
        .and_then(|c| c.observed_generation);
    ctx.set_record(
        &name,
        Some(Record {
            generation,
            spec_ref: catalog
                .spec
                .source
                .image
                .as_ref()
                .map(|i| i.ref_.clone())
                .unwrap_or_default(),
            resolved_ref: resolved_ref.to_string(),
            // The leader's value, so that a new leader's status stays as it is.
            last_unpacked: status
                .and_then(|s| s.last_unpacked.clone())
                .unwrap_or(stored_at),
            last_poll: None,
        }),
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn map<V: Clone>(entries: &[(&str, V)]) -> BTreeMap<String, V> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    const A1: &str = "r.io/a@sha256:1111";
    const A2: &str = "r.io/a@sha256:2222";
    const B1: &str = "r.io/b@sha256:1111";

    fn ingest(name: &str, reference: &str) -> Step {
        Step::Ingest {
            name: name.into(),
            resolved_ref: reference.into(),
        }
    }

    fn remove(name: &str) -> Step {
        Step::Remove { name: name.into() }
    }

    #[test]
    fn ingests_what_is_published_and_not_stored() {
        let published = map(&[("a", A1.to_string()), ("b", B1.to_string())]);
        assert_eq!(
            plan(&published, &BTreeMap::new()),
            vec![ingest("a", A1), ingest("b", B1)]
        );
    }

    #[test]
    fn skips_a_digest_already_stored() {
        let published = map(&[("a", A1.to_string()), ("b", B1.to_string())]);
        let stored = map(&[("a", Some(A1.to_string())), ("b", Some(B1.to_string()))]);
        assert_eq!(plan(&published, &stored), vec![]);
    }

    #[test]
    fn reingests_a_new_digest_or_unknown_content() {
        let published = map(&[("a", A2.to_string()), ("b", B1.to_string())]);
        let stored = map(&[("a", Some(A1.to_string())), ("b", None)]);
        assert_eq!(
            plan(&published, &stored),
            vec![ingest("a", A2), ingest("b", B1)]
        );
    }

    #[test]
    fn removes_what_is_no_longer_published_first() {
        let published = map(&[("b", B1.to_string())]);
        let stored = map(&[
            ("a", Some(A1.to_string())),
            ("b", None),
            ("c", Some("r.io/c@sha256:3".to_string())),
        ]);
        assert_eq!(
            plan(&published, &stored),
            vec![remove("a"), remove("c"), ingest("b", B1)]
        );
        assert_eq!(plan(&BTreeMap::new(), &stored).len(), 3);
    }

    fn catalog(status: serde_json::Value, deleting: bool) -> ClusterCatalog {
        let mut metadata = json!({"name": "c", "generation": 2});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            metadata["finalizers"] = json!(["olm.operatorframework.io/delete-server-cache"]);
        }
        serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": metadata,
            "spec": {"source": {"type": "Image", "image": {"ref": "r.io/c:latest"}}},
            "status": status,
        }))
        .expect("catalog")
    }

    fn status(serving: &str, reference: &str) -> serde_json::Value {
        json!({
            "conditions": [{
                "type": "Serving", "status": serving, "reason": "Available", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2,
            }],
            "resolvedSource": {"type": "Image", "image": {"ref": reference}},
            "lastUnpacked": "2026-01-01T00:00:00Z",
        })
    }

    #[test]
    fn published_only_when_serving_pinned_and_not_deleting() {
        let pinned = "r.io/c@sha256:abcd";
        assert_eq!(
            published_ref(&catalog(status("True", pinned), false)),
            Some(pinned)
        );
        assert_eq!(
            published_ref(&catalog(status("False", pinned), false)),
            None
        );
        assert_eq!(
            published_ref(&catalog(status("True", "r.io/c:latest"), false)),
            None
        );
        assert_eq!(published_ref(&catalog(status("True", pinned), true)), None);
        assert_eq!(published_ref(&catalog(json!({}), false)), None);
        let mut no_source = status("True", pinned);
        no_source
            .as_object_mut()
            .expect("object")
            .remove("resolvedSource");
        assert_eq!(published_ref(&catalog(no_source, false)), None);
    }
}
