//! Upstream's `--feature-gates` (k8s component-base syntax `A=true,B=false`), mapped
//! to this controller: a gate for a behaviour it always has is accepted whatever its
//! value; a gate for something it does not do is accepted only when `false`, and
//! refused at start (naming the gate and what to do) when `true`, except the alpha
//! gates upstream's own experimental values turn on, which are accepted and logged as
//! not done; an unknown gate is refused, as upstream's parser refuses it
//! (docs/how-to/switch-from-upstream.md).

/// What this controller does with one upstream gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The behaviour is always on here; the gate's value changes nothing.
    Always(&'static str),
    /// Not done here: `true` is refused with this advice.
    Refused(&'static str),
    /// Not done here, but turned on by upstream's experimental values (helm/experimental.yaml):
    /// `true` is accepted, and the log says that this controller behaves as with the gate
    /// off, and how.
    Ignored(&'static str),
}

/// The gates of upstream's operator-controller (current and past releases).
pub const OPERATOR_CONTROLLER: &[(&str, Support)] = &[
    (
        "PreflightPermissions",
        Support::Always("the installer's permissions are always checked before an install"),
    ),
    (
        "SingleOwnNamespaceInstallSupport",
        Support::Always("Single/OwnNamespace bundles install with spec.config watchNamespace"),
    ),
    (
        "WebhookProviderCertManager",
        Support::Always(
            "bundle webhooks get cert-manager certificates when the cluster serves cert-manager",
        ),
    ),
    (
        "WebhookProviderOpenshiftServiceCA",
        Support::Always(
            "bundle webhooks get OpenShift service-ca certificates when the cluster serves service-ca and not cert-manager",
        ),
    ),
    (
        "SyntheticPermissions",
        Support::Refused(
            "synthetic user/group installers are not supported; remove the gate and name a ServiceAccount (spec.serviceAccount)",
        ),
    ),
    (
        "HelmChartSupport",
        Support::Refused(
            "only registry+v1 bundles are installed; remove the gate (Helm-chart bundles are not supported)",
        ),
    ),
    (
        "BoxcutterRuntime",
        Support::Ignored(
            "objects are applied by this controller's own applier (no ClusterObjectSet or ClusterExtensionRevision objects are created)",
        ),
    ),
    (
        "DeploymentConfig",
        Support::Always("spec.config.inline.deploymentConfig is always applied"),
    ),
    (
        "BundleReleaseSupport",
        Support::Always("the explicit release of a bundle's olm.package property is always read"),
    ),
];

/// The gates of upstream's catalogd.
pub const CATALOGD: &[(&str, Support)] = &[
    (
        "APIV1MetasHandler",
        Support::Always("the catalog server always serves /api/v1/metas"),
    ),
    (
        "GraphQLCatalogQueries",
        Support::Ignored(
            "the catalog server answers no GraphQL queries (it serves /api/v1/all and /api/v1/metas)",
        ),
    ),
];

/// Parses `--feature-gates` values (each `A=true,B=false`; later ones win) and checks
/// them against `known`: the accepted gates with their values, or the first refusal.
pub fn check(values: &[String], known: &[(&str, Support)]) -> Result<Vec<(String, bool)>, String> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for part in values.iter().flat_map(|v| v.split(',')) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("--feature-gates: missing bool value for {part}"))?;
        let (name, value) = (name.trim(), value.trim());
        let on = super::parse_go_bool(value).map_err(|_| {
            format!("--feature-gates: invalid value of {name}={value}, err: strconv.ParseBool")
        })?;
        if matches!(name, "AllAlpha" | "AllBeta") {
            if on {
                return Err(format!(
                    "--feature-gates {name}=true is refused: it would turn on gates this controller does not implement; name the gates one by one"
                ));
            }
        } else {
            match known.iter().find(|(n, _)| *n == name) {
                None => {
                    let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                    return Err(format!(
                        "--feature-gates: unrecognized feature gate: {name} (known: {})",
                        names.join(", ")
                    ));
                }
                Some((_, Support::Refused(advice))) if on => {
                    return Err(format!(
                        "--feature-gates {name}=true is not supported: {advice}"
                    ));
                }
                Some(_) => {}
            }
        }
        out.retain(|(n, _)| n != name);
        out.push((name.to_string(), on));
    }
    Ok(out)
}

/// The log line of each accepted gate (what it means here).
pub fn describe(gates: &[(String, bool)], known: &[(&str, Support)]) -> Vec<String> {
    gates
        .iter()
        .map(|(name, on)| match known.iter().find(|(n, _)| n == name) {
            Some((_, Support::Always(what))) => format!("{name}={on}: {what}"),
            Some((_, Support::Ignored(how))) if *on => {
                format!("{name}=true is not implemented here and has no effect: {how}")
            }
            _ => format!("{name}={on}: off, as here"),
        })
        .collect()
}
