//! Taking over installations that another manager made
//! (docs/how-to/switch-from-upstream.md): reading what that manager recorded about an
//! installation — bounded, since its records are input olmv1 does not control —, deciding whether olmv1 may continue
//! it in place (same bundle, same objects), and the mark left on the other manager's
//! record once olmv1's own revision record continues it. Pure: the controller lists and
//! fetches the records, the plan decides from what is read here, and the apply step
//! takes the objects over.
//!
//! One module per manager taken over from: [`olm_v0`], OLM v0's Subscriptions (the plan
//! `olmv1 migrate check` prints); [`upstream_helm`], upstream OLM v1's Helm
//! releases (classic and chunked Secrets).

pub mod olm_v0;
pub mod upstream_helm;
