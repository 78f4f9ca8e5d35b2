//! From the resolution to the install (docs/reference/api-and-status.md §3 steps 4–8): the target
//! bundle (or the installed one, maintained when no catalog provides its package any
//! more), the takeover of upstream OLM v1's installation (checked through facts: the
//! release against the target, then its objects against the rendered ones), and the
//! install steps — skipped when the same install was made before and nothing drifted
//! since ([`fingerprint`]), then only readiness is read again; otherwise pull and render,
//! the preflights (skipped for the installed revision again), apply. The takeover of an
//! OLM v0 installation is decided in [`super::migration`]. A rollback
//! ([`super::rollback`]) names the target first, and takes over when the apply of an
//! upgrade under `upgrade-remediation: Rollback` fails.

use super::control::{Held, held};
use super::migration::V0Takeover;
use super::notice::REASON_APPROVAL_REQUIRED;
use super::{
    Facts, Install, InstallFailure, Next, Plan, Report, adoption_refused, after_install,
    deprecation, end, failed_report, observe, warning,
};
use crate::api::{BundleIdentity, ClusterExtensionSpec, CrdUpgradeSafetyEnforcement};
use crate::controller::extension::installer::InstallerAccount;
use crate::controller::extension::rollout::Readiness;
use crate::controller::extension::status::Outcome;
use crate::migrate::upstream_helm::UpstreamRelease;
use crate::preflight::crd_safety::Enforcement;
use crate::resolve::{Resolution, ResolveError};
use serde_json::Value;

/// A pulled and rendered bundle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rendered {
    /// The digest-pinned bundle image.
    pub image: String,
    /// The rendered objects (custom resources pruned to what their CRDs declare).
    pub objects: Vec<Value>,
    /// What the bundle suggests for its namespace (created only on opt-in,
    /// [`crate::controller::extension::namespace`]).
    pub suggested_namespace: crate::controller::extension::namespace::Suggestion,
    /// What the pulled image holds, from its own metadata (`None`: not read), checked
    /// against the revision a rollback returns to ([`super::rollback::verify`]).
    pub pulled: Option<crate::apply::record::PulledBundle>,
}

/// How the rendered bundle is applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Apply {
    /// The bundle as resolved (what a failure names).
    pub target: BundleIdentity,
    /// The bundle, its image digest-pinned.
    pub bundle: BundleIdentity,
    pub account: InstallerAccount,
    /// Whether the preflights run: not for the installed revision again (a reconcile
    /// after drift, a catalog change that resolves to the same bundle), whose CRDs and
    /// permissions were checked when it was installed.
    pub preflight: bool,
    /// `spec.install.preflight.crdUpgradeSafety.enforcement` (Strict when absent).
    pub enforcement: Enforcement,
    /// A first install refuses objects upstream's Helm applier installed unless their
    /// release is the one being adopted.
    pub refuse_helm_managed: bool,
    /// Upstream OLM v1's release being adopted (marked as adopted once applied).
    pub adopt: Option<UpstreamRelease>,
    /// The OLM v0 installation taken over: existing objects no ClusterExtension owns are
    /// applied over in place.
    pub adopt_v0: Option<V0Takeover>,
    /// What the install is made of, kept with its result while nothing drifts.
    pub fingerprint: Option<String>,
}

/// The install `resolution` leads to, and its next step.
pub(super) fn decide(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    resolution: &Result<Resolution, ResolveError>,
) -> Plan {
    if facts.controls.paused {
        return super::paused::decide(spec, facts);
    }
    let installed = facts.installed();
    let resolved = resolution.as_ref().ok().map(|r| r.bundle.identity());
    match super::rollback::target(facts, resolved.as_ref()) {
        Some(Ok(install)) => return steps(spec, facts, install),
        Some(Err(refused)) => return end(spec, facts, *refused),
        None => {}
    }
    let install = match resolution {
        Ok(resolution) => {
            let resolved = resolution.bundle.identity();
            let held = match held(&facts.controls, installed, &resolved) {
                Some(approval) => Some(approval),
                None => match super::operator::hold(spec, facts, installed, &resolved) {
                    Ok(operator) => operator,
                    Err(lookup) => return *lookup,
                },
            };
            let target = match (&held, installed) {
                (None, _) => resolved,
                (Some(_), Some(installed)) => installed.clone(),
                (Some(h), None) => return awaiting_install(spec, facts, h),
            };
            if let Some(release) = facts.adopting() {
                match &facts.upstream_bundle {
                    None => return Plan::CheckUpstream(target),
                    Some(Err(why)) => return refused(spec, facts, release, why),
                    Some(Ok(())) => {}
                }
            }
            let adopt_v0 = match super::migration::takeover(spec, facts, &target) {
                Ok(v0) => v0,
                Err(plan) => return *plan,
            };
            Install {
                target,
                maintained: None,
                adopt: facts.adopting().cloned(),
                adopt_v0,
                held,
                rollback: None,
            }
        }
        Err(e) => match maintained(spec, installed, e) {
            Some(mut install) => {
                install.adopt = facts.adopting().cloned();
                install
            }
            None => {
                let message = e.to_string();
                let mut report = failed_report(
                    facts,
                    installed.cloned(),
                    Outcome::Retrying(message.clone()),
                    Some(deprecation(spec, facts, installed)),
                    "ResolutionFailed",
                );
                report
                    .events
                    .push(warning("ResolutionFailed", "Resolve", message));
                report.next = Next::Failed;
                return end(spec, facts, report);
            }
        },
    };
    steps(spec, facts, install)
}

/// Upstream's installation is of another bundle than the target: reported, untouched.
fn refused(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    release: &UpstreamRelease,
    why: &str,
) -> Plan {
    let installed = facts.installed();
    let message = adoption_refused(release, why);
    let mut refused = failed_report(
        facts,
        installed.cloned(),
        Outcome::Retrying(message.clone()),
        Some(deprecation(spec, facts, installed)),
        "AdoptionRefused",
    );
    refused
        .events
        .push(warning("AdoptionRefused", "Adopt", message));
    refused.next = Next::Failed;
    end(spec, facts, refused)
}

/// The next install step of `install`, or the ending once its result is known.
fn steps(spec: &ClusterExtensionSpec, facts: &Facts, install: Install) -> Plan {
    let finish = |install, result| end(spec, facts, after_install(spec, facts, install, result));
    let account = match &facts.installer {
        Ok(account) => account,
        Err(message) => return finish(install, Err(InstallFailure::Blocked(message.clone()))),
    };
    let history = facts.history();
    let installed = history.and_then(|h| h.installed());
    // The same install again while nothing drifted (a catalog update or a resync
    // resolving to the installed bundle): nothing to pull, render or apply.
    if install.adopt.is_none()
        && let Some(fingerprint) = fingerprint(
            facts,
            account,
            &install.target,
            installed.map(|r| &r.bundle),
        )
    {
        match &facts.unchanged {
            None => return Plan::LookUpUnchanged(fingerprint),
            Some(Some(last)) => {
                let mut last = last.clone();
                // A rollout in progress: only its readiness is read again.
                if last.readiness != Readiness::Ready {
                    match &facts.readiness {
                        None => {
                            let objects = installed.map(|r| r.objects.clone());
                            return Plan::ReadReadiness(objects.unwrap_or_default());
                        }
                        Some(Some(readiness)) => last.readiness = readiness.clone(),
                        Some(None) => {}
                    }
                }
                return finish(install, Ok(last));
            }
            Some(None) => {}
        }
    }
    let rendered = match &facts.rendered {
        None => return Plan::Render(install.target),
        Some(Err(failure)) => return finish(install, Err(failure.clone())),
        Some(Ok(rendered)) => rendered,
    };
    if let Some(refused) = super::rollback::verify(facts, &install, rendered) {
        return end(spec, facts, *refused);
    }
    if let Some(release) = &install.adopt {
        match &facts.upstream_objects {
            None => return Plan::CompareUpstream,
            Some(Err(differ)) => {
                let refused = InstallFailure::AdoptionRefused(adoption_refused(release, differ));
                return finish(install, Err(refused));
            }
            Some(Ok(())) => {}
        }
    }
    if let Some(result) = &facts.applied {
        if let Err(failure) = result
            && let Some(plan) = super::rollback::remediate(spec, facts, &install, failure)
        {
            return plan;
        }
        return finish(install, result.clone());
    }
    let bundle = install.target.pulled(&rendered.image);
    Plan::Apply(Box::new(Apply {
        preflight: !history.is_some_and(|h| h.is_current(&bundle, &rendered.objects)),
        enforcement: enforcement(spec),
        refuse_helm_managed: history.is_none() && install.adopt.is_none(),
        fingerprint: fingerprint(facts, account, &install.target, Some(&install.target)),
        bundle,
        account: account.clone(),
        target: install.target,
        adopt: install.adopt,
        adopt_v0: install.adopt_v0,
    }))
}

/// When no catalog provides the package any more (it was deleted), the installed
/// bundle stays the target — unless the spec asks for another version.
fn maintained(
    spec: &ClusterExtensionSpec,
    installed: Option<&BundleIdentity>,
    error: &ResolveError,
) -> Option<Install> {
    let installed = installed?;
    let version = spec
        .source
        .catalog
        .as_ref()
        .and_then(|c| c.version.as_deref());
    let keep = error.no_catalog_had_package()
        && version.is_none_or(|v| v.is_empty() || installed.version == v);
    keep.then(|| Install {
        target: installed.clone(),
        maintained: Some(format!(
            "no ClusterCatalog provides package {:?} any more: maintaining the installed bundle {:?} (version {})",
            installed.package, installed.name, installed.version
        )),
        adopt: None,
        adopt_v0: None,
        held: None,
        rollback: None,
    })
}

/// Nothing installed and the first install waits for approval
/// (`ManualIncludingInstall`).
fn awaiting_install(spec: &ClusterExtensionSpec, facts: &Facts, held: &Held) -> Plan {
    let outcome = Outcome::Held {
        reason: REASON_APPROVAL_REQUIRED,
        message: held.message(&facts.name, None),
    };
    let report = Report {
        observation: observe(facts, None, outcome, Some(deprecation(spec, facts, None))),
        events: Vec::new(),
        error: None,
        next: Next::AwaitChange,
    };
    end(spec, facts, report)
}

/// What an install of `target` for the extension of `facts` (uid, generation: any spec
/// change installs again) as `installer` is made of, for telling whether a reconcile
/// would make the same install again (the drift watches keep the last install's result
/// while nothing drifts). `None` when the install must run whatever was installed
/// before: `installed` (the installed revision's bundle) is another bundle or none, or
/// the image is referenced by tag (it may name other content now).
pub fn fingerprint(
    facts: &Facts,
    installer: &InstallerAccount,
    target: &BundleIdentity,
    installed: Option<&BundleIdentity>,
) -> Option<String> {
    let installed = installed?;
    let same = installed.package == target.package
        && installed.name == target.name
        && installed.version == target.version;
    if !same || !target.image.contains("@sha256:") {
        return None;
    }
    Some(format!(
        "{}|{}|{}/{}|{}|{}|{}|{}",
        facts.uid.as_deref().unwrap_or_default(),
        facts.generation.unwrap_or_default(),
        installer.namespace,
        installer.name,
        target.package,
        target.name,
        target.version,
        target.image,
    ))
}

/// `spec.install.preflight.crdUpgradeSafety.enforcement` (Strict when absent).
pub(super) fn enforcement(spec: &ClusterExtensionSpec) -> Enforcement {
    let configured = spec
        .install
        .as_ref()
        .and_then(|i| i.preflight.as_ref())
        .and_then(|p| p.crd_upgrade_safety.as_ref())
        .map(|c| c.enforcement);
    match configured {
        Some(CrdUpgradeSafetyEnforcement::None) => Enforcement::None,
        _ => Enforcement::Strict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::InstallerSource;

    fn bundle(version: &str, image: &str) -> BundleIdentity {
        BundleIdentity {
            package: "p".into(),
            name: format!("p.v{version}"),
            version: version.into(),
            release: None,
            image: image.into(),
        }
    }

    #[test]
    fn the_same_install_again_has_the_same_fingerprint_and_anything_else_another() {
        let installer = InstallerAccount {
            namespace: "ns".into(),
            name: "sa".into(),
            source: InstallerSource::ServiceAccount,
        };
        let mut facts = Facts::new(Some(1), false, true, Ok(installer.clone()));
        facts.uid = Some("u1".into());
        let digest = "r/p@sha256:aa";
        let target = bundle("1.0.0", digest);
        let installed = bundle("1.0.0", "r/p@sha256:aa");
        let first = fingerprint(&facts, &installer, &target, Some(&installed));
        assert!(first.is_some());
        assert_eq!(
            first,
            fingerprint(&facts, &installer, &target, Some(&target)),
            "after the install, as before the next one"
        );
        assert_eq!(
            fingerprint(&facts, &installer, &target, None),
            None,
            "nothing installed"
        );
        let older = bundle("0.9.0", "r/p@sha256:bb");
        assert_eq!(
            fingerprint(&facts, &installer, &target, Some(&older)),
            None,
            "an upgrade"
        );
        let tagged = bundle("1.0.0", "r/p:v1.0.0");
        assert_eq!(
            fingerprint(&facts, &installer, &tagged, Some(&tagged)),
            None,
            "a tag may name other content now"
        );
        let other_account = InstallerAccount {
            name: "other".into(),
            ..installer.clone()
        };
        assert_ne!(
            fingerprint(&facts, &other_account, &target, Some(&installed)),
            first
        );
        facts.generation = Some(2);
        assert_ne!(
            fingerprint(&facts, &installer, &target, Some(&installed)),
            first
        );
    }
}
