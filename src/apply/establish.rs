//! Waiting for a bundle's CRDs to be Established (docs/concepts/rendering.md A5). The
//! wait starts as soon as the CRDs' stage is applied and goes on alongside the stages
//! that do not need the CRDs ([`overlaps_establishment`]: RBAC, Services, workloads);
//! it is finished before a stage that does, and before the apply returns. Each CRD is
//! read until its `Established` condition is True, within `ApplyOptions::crd_timeout`.

use super::applier::{
    ApplyError, ApplyOptions, Resolver, get_absent_ok, kube_err, observes, poll_delay,
};
use super::order::PhaseKind;
use super::types::ObjectRef;
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject};
use serde_json::Value;
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
        crds: Vec<usize>,
        opts: &'a ApplyOptions,
    ) {
        if crds.is_empty() {
            return;
        }
        let next = wait_all_established(resolver, refs, crds, opts);
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

/// Waits, all at once, until each CRD of `pending` (indices into `refs`) is Established.
/// Returns the CRDs [`ApplyOptions::observe`] keeps, as last read (by index).
async fn wait_all_established(
    resolver: &Resolver,
    refs: &[ObjectRef],
    pending: Vec<usize>,
    opts: &ApplyOptions,
) -> Waited {
    let waits = pending.into_iter().map(|i| async move {
        let crd = wait_established(resolver, &refs[i], opts).await?;
        Ok::<_, ApplyError>(observes(opts, &refs[i]).then_some((i, crd)))
    });
    let kept = futures::future::try_join_all(waits).await?;
    Ok(kept.into_iter().flatten().collect())
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

/// Reads the CRD `r` until it is Established (within `opts.crd_timeout`); returns it as
/// last read.
async fn wait_established(
    resolver: &Resolver,
    r: &ObjectRef,
    opts: &ApplyOptions,
) -> Result<Value, ApplyError> {
    let (ar, _) = resolver
        .resolve_waiting(r, opts.crd_timeout, opts.poll)
        .await?;
    let api: Api<DynamicObject> = Api::all_with(resolver.client.clone(), &ar);
    let deadline = Instant::now() + opts.crd_timeout;
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
