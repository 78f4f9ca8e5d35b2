//! Waiting for a bundle's CRDs to be Established (docs/concepts/rendering.md A5). The
//! wait starts as soon as the CRDs' stage is applied and goes on alongside the stages
//! that do not need the CRDs ([`overlaps_establishment`]: RBAC, Services, workloads);
//! it is finished before a stage that does, and before the apply returns. The
//! extension's CRDs are watched (one watch by its owner labels, as the installer: the
//! permission preflight asks for `watch` on CRDs) until each `Established` condition
//! is True, within `ApplyOptions::crd_timeout`: the condition is seen the moment the
//! API server sets it (reads 10, 20, 40 ms apart saw it up to 40 ms late, see
//! docs/design/benchmarks.md). CRDs the watch did not show so (refused, or ended) are
//! read instead, at those growing intervals.

use super::applier::{
    ApplyError, ApplyOptions, Resolver, get_absent_ok, kube_err, observes, poll_delay,
};
use super::order::PhaseKind;
use super::ownership::Owner;
use super::types::ObjectRef;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Instant;

/// The CRDs [`ApplyOptions::observe`] keeps, as last read (by index), once every CRD
/// waited for is Established.
type Waited = Result<Vec<(usize, Value)>, ApplyError>;

/// The wait for the CRDs applied so far and not yet seen Established, if any.
#[derive(Default)]
pub(super) struct Establishing<'a> {
    wait: Option<BoxFuture<'a, Waited>>,
}

impl<'a> Establishing<'a> {
    /// Starts waiting for `crds` (indices into `refs`) too.
    pub(super) fn start(
        &mut self,
        resolver: &'a Resolver,
        refs: &'a [ObjectRef],
        owner: &'a Owner,
        crds: Vec<usize>,
        opts: &'a ApplyOptions,
    ) {
        if crds.is_empty() {
            return;
        }
        let next = wait_all_established(resolver, refs, owner, crds, opts);
        self.wait = Some(match self.wait.take() {
            // Both at once, not one after the other.
            Some(earlier) => async move {
                let (mut kept, more) = futures::future::try_join(earlier, next).await?;
                kept.extend(more);
                Ok(kept)
            }
            .boxed(),
            None => next.boxed(),
        });
    }

    /// Waits until every CRD started is Established.
    pub(super) async fn finish(&mut self) -> Waited {
        match self.wait.take() {
            Some(wait) => wait.await,
            None => Ok(Vec::new()),
        }
    }

    /// Runs `work` while the wait goes on. Returns what `work` returned, and the wait's
    /// outcome if it finished meanwhile (nothing otherwise: it goes on at the next call).
    pub(super) async fn alongside<T>(&mut self, work: impl Future<Output = T>) -> (T, Waited) {
        let mut work = std::pin::pin!(work);
        let Some(wait) = self.wait.as_mut() else {
            return (work.await, Ok(Vec::new()));
        };
        let waited = tokio::select! {
            done = &mut work => return (done, Ok(Vec::new())),
            waited = wait => waited,
        };
        self.wait = None;
        (work.await, waited)
    }
}

/// Whether objects of `phase` may be applied while the bundle's CRDs are still being
/// established: none of them is a custom resource (docs/concepts/rendering.md A5).
pub(super) fn overlaps_establishment(phase: PhaseKind) -> bool {
    matches!(
        phase,
        PhaseKind::Roles | PhaseKind::Bindings | PhaseKind::Services | PhaseKind::Workloads
    )
}

/// Waits until each CRD of `pending` (indices into `refs`) is Established: one watch of
/// `owner`'s CRDs (by its owner labels) sees each the moment it is; the CRDs it did not
/// see so (watch refused, or ended) are read, all at once, within the same deadline.
/// Returns the CRDs [`ApplyOptions::observe`] keeps, as last seen (by index).
async fn wait_all_established(
    resolver: &Resolver,
    refs: &[ObjectRef],
    owner: &Owner,
    pending: Vec<usize>,
    opts: &ApplyOptions,
) -> Waited {
    let deadline = Instant::now() + opts.crd_timeout;
    let watched = watch_established(&resolver.client, refs, owner, &pending, deadline).await;
    let mut seen = watched.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "cannot watch the CRDs; reading them");
        BTreeMap::new()
    });
    let unseen = pending.into_iter().filter(|i| !seen.contains_key(i));
    let reads = unseen.map(|i| async move {
        let crd = read_until_established(resolver, &refs[i], deadline, opts).await?;
        Ok::<_, ApplyError>((i, crd))
    });
    seen.extend(futures::future::try_join_all(reads).await?);
    Ok(seen
        .into_iter()
        .filter(|(i, _)| observes(opts, &refs[*i]))
        .collect())
}

/// Follows `owner`'s CRDs through one watch (their current state first) until each of
/// `pending` is Established or `deadline` passes; returns those seen Established.
async fn watch_established(
    client: &kube::Client,
    refs: &[ObjectRef],
    owner: &Owner,
    pending: &[usize],
    deadline: Instant,
) -> Result<BTreeMap<usize, Value>, kube::Error> {
    let mut seen = BTreeMap::new();
    let left = deadline.saturating_duration_since(Instant::now());
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    // The API server ends the watch by then too (kube-rs refuses 295 s or more).
    let params = WatchParams::default()
        .labels(&owner.label_selector())
        .timeout((left.as_secs() + 1).min(290) as u32);
    let events = api.watch(&params, "0").await?;
    let mut events = std::pin::pin!(events);
    while seen.len() < pending.len() {
        let Ok(next) = tokio::time::timeout_at(deadline.into(), events.try_next()).await else {
            break;
        };
        let crd = match next? {
            Some(WatchEvent::Added(crd) | WatchEvent::Modified(crd)) => crd,
            Some(WatchEvent::Error(e)) => return Err(kube::Error::Api(e)),
            Some(WatchEvent::Deleted(_) | WatchEvent::Bookmark(_)) => continue,
            None => break,
        };
        let name = crd.metadata.name.as_deref();
        let Some(&i) = pending
            .iter()
            .find(|&&i| Some(refs[i].name.as_str()) == name)
        else {
            continue;
        };
        let crd = serde_json::to_value(&crd).unwrap_or(Value::Null);
        if established(&crd).0 {
            seen.insert(i, crd);
        }
    }
    Ok(seen)
}

/// Reads the CRD `r` until it is Established (until `deadline`), 10, 20, 40 ms apart
/// and so on; returns it as last read.
async fn read_until_established(
    resolver: &Resolver,
    r: &ObjectRef,
    deadline: Instant,
    opts: &ApplyOptions,
) -> Result<Value, ApplyError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let (ar, _) = resolver.resolve_waiting(r, left, opts.poll).await?;
    let api: Api<DynamicObject> = Api::all_with(resolver.client.clone(), &ar);
    let mut last = None;
    for attempt in 0.. {
        if let Some(o) = get_absent_ok(&api, &r.name)
            .await
            .map_err(kube_err("reading", r))?
        {
            let v = serde_json::to_value(&o).unwrap_or(Value::Null);
            let (ok, msg) = established(&v);
            if ok {
                return Ok(v);
            }
            last = msg;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(poll_delay(attempt, opts.poll)).await;
    }
    Err(ApplyError::CrdNotEstablished {
        name: r.name.clone(),
        timeout: opts.crd_timeout,
        last,
    })
}

/// The `Established` condition of a CRD: (status, message).
pub fn established(crd: &Value) -> (bool, Option<String>) {
    let conds = crd["status"]["conditions"].as_array();
    let c = conds.and_then(|cs| cs.iter().find(|c| c["type"] == "Established"));
    match c {
        Some(c) => (
            c["status"] == "True",
            c["message"].as_str().map(str::to_owned),
        ),
        None => (false, None),
    }
}
