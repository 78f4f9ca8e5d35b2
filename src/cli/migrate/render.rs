//! The text form of `migrate check`: a summary table (one row per Subscription), then
//! per Subscription its blockers with what to do, the ClusterExtension and
//! ClusterCatalog it would get (YAML), the installer account and the v0 objects; and
//! the JSON or YAML form of any plan ([`structured`]).

use crate::migrate::olm_v0::{Check, V0ObjectAction};

/// `plan` as `-o json` or `-o yaml` print it; `None` for the table (text) form.
pub fn structured(
    plan: &impl serde::Serialize,
    output: super::Output,
) -> Option<Result<String, String>> {
    match output {
        super::Output::Json => Some(
            serde_json::to_string_pretty(plan)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string()),
        ),
        super::Output::Yaml => Some(serde_saphyr::to_string(plan).map_err(|e| e.to_string())),
        super::Output::Table => None,
    }
}

/// The whole text output.
pub fn text(checks: &[Check]) -> String {
    let mut rows = vec![vec![
        "SUBSCRIPTION".to_string(),
        "PACKAGE".to_string(),
        "INSTALLED".to_string(),
        "RESULT".to_string(),
    ]];
    for c in checks {
        rows.push(vec![
            c.subscription.clone(),
            c.package.clone(),
            c.installed_csv.clone().unwrap_or_else(|| "-".into()),
            if c.eligible {
                "eligible".to_string()
            } else {
                format!("{} blocker(s)", c.blockers.len())
            },
        ]);
    }
    let mut out = super::super::format_table(&rows, "  ");
    for c in checks {
        out.push('\n');
        out.push_str(&detail(c));
    }
    out
}

fn yaml(v: &impl serde::Serialize) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# error: {e}\n"))
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}

/// One Subscription in detail.
pub fn detail(c: &Check) -> String {
    let mut out = format!(
        "Subscription {}: {}\n",
        c.subscription,
        if c.eligible {
            "eligible"
        } else {
            "NOT eligible"
        }
    );
    for b in &c.blockers {
        out.push_str(&format!(
            "  blocker: {}\n    what to do: {}\n",
            b.message, b.action
        ));
    }
    out.push_str("  ClusterExtension it would create:\n");
    out.push_str(&indent(&yaml(&c.cluster_extension)));
    match &c.cluster_catalog {
        Some(p) if p.reused => out.push_str(&format!(
            "  ClusterCatalog: {} (existing, same image: reused)\n",
            p.name
        )),
        Some(p) => {
            out.push_str("  ClusterCatalog it would create:\n");
            out.push_str(&indent(&yaml(&p.manifest)));
        }
        None => {
            let held_by = c
                .cluster_extension
                .pointer("/spec/source/catalog/selector/matchLabels/olm.operatorframework.io~1metadata.name")
                .and_then(serde_json::Value::as_str);
            out.push_str(&match held_by {
                Some(name) => format!(
                    "  ClusterCatalog: {name} (holds the installed bundle; none made from the CatalogSource, which is not image-based)\n"
                ),
                None => "  ClusterCatalog: none (the CatalogSource is not image-based)\n".into(),
            });
        }
    }
    out.push_str(&format!(
        "  installer ServiceAccount: {}/{}\n",
        c.installer.namespace, c.installer.service_account
    ));
    if let Some(cmd) = &c.installer.rbac_command {
        out.push_str(&format!("    (from: {cmd})\n"));
    }
    if let Some(rbac) = &c.installer.rbac {
        out.push_str(&indent(rbac));
    }
    out.push_str("  OLM v0 objects:\n");
    for o in &c.v0_objects {
        let action = match o.action {
            V0ObjectAction::Remove => "remove",
            V0ObjectAction::Replace => "replace",
            V0ObjectAction::Keep => "keep",
        };
        let name = if o.namespace.is_empty() {
            o.name.clone()
        } else {
            format!("{}/{}", o.namespace, o.name)
        };
        out.push_str(&format!("    {action:<8}{} {name}: {}\n", o.kind, o.why));
    }
    out
}
