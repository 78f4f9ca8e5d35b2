//! Text output of `olmv1 status`: the one-line-per-extension table (no NAME) and the
//! detailed view of one extension (with `--explain`, the resolver's reasons for every
//! newer bundle). Plain aligned columns, no colors or terminal control codes, so the
//! output reads the same in a terminal, a pipe or a CI log. Pure: strings in, string out.

use super::report::{ConditionView, ExtensionReport, Verdict};
use crate::cli::format_table;

/// `True/Succeeded`, or `-` when the condition is missing.
fn short(c: Option<&ConditionView>) -> String {
    c.map(|c| format!("{}/{}", c.status, c.reason))
        .unwrap_or_else(|| "-".into())
}

/// The table of all extensions.
pub fn table(reports: &[ExtensionReport]) -> String {
    if reports.is_empty() {
        return "No ClusterExtensions found.\n".to_string();
    }
    let header = [
        "NAME",
        "PACKAGE",
        "INSTALLED",
        "TARGET",
        "PROGRESSING",
        "UPGRADES",
        "INSTALLER",
    ]
    .map(String::from)
    .to_vec();
    let rows = reports.iter().map(|r| {
        vec![
            r.name.clone(),
            r.package.clone(),
            r.installed
                .as_ref()
                .map(|b| b.version.clone())
                .unwrap_or_else(|| "-".into()),
            r.target
                .as_ref()
                .map(|b| b.version.clone())
                .unwrap_or_else(|| "-".into()),
            short(r.progressing.as_ref()),
            upgrades_cell(r),
            r.installer.clone(),
        ]
    });
    let all: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
    format_table(&all, "   ")
}

/// `1 (1.1.0)`, `0`, or `0 (+2 not taken)`.
fn upgrades_cell(r: &ExtensionReport) -> String {
    let available: Vec<&str> = r
        .upgrades
        .iter()
        .filter(|u| u.verdict == Verdict::Available)
        .map(|u| u.version.as_str())
        .collect();
    let others = r.upgrades.len() - available.len();
    let mut cell = available.len().to_string();
    if !available.is_empty() {
        cell.push_str(&format!(" ({})", available.join(",")));
    }
    if others > 0 {
        cell.push_str(&format!(" (+{others} not taken)"));
    }
    cell
}

/// The upgrades of the detailed view, one indented row per candidate with its verdict
/// (and, with `explain`, the reasons).
fn upgrades_table(r: &ExtensionReport, explain: bool) -> String {
    let header = ["VERSION", "BUNDLE", "CATALOG", "VERDICT"]
        .map(String::from)
        .to_vec();
    let rows = r.upgrades.iter().map(|u| {
        let mut verdict = u.verdict.as_str().to_string();
        if u.deprecated {
            verdict.push_str(" (deprecated)");
        }
        if explain && !u.reasons.is_empty() {
            verdict.push_str(": ");
            verdict.push_str(&u.reasons.join("; "));
        }
        vec![
            u.version.clone(),
            u.bundle.clone(),
            u.catalog.clone(),
            verdict,
        ]
    });
    let all: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
    format_table(&all, "  ")
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}

/// The detailed view of one extension.
pub fn detail(r: &ExtensionReport, explain: bool) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<13}{v}\n"));
    line("Name:", r.name.clone());
    line("Package:", r.package.clone());
    line("Namespace:", r.namespace.clone());
    line("Installer:", r.installer.clone());
    line(
        "Spec:",
        format!(
            "version {}, channels {}, upgradeConstraintPolicy {}",
            if r.spec.version.is_empty() {
                "(any)".to_string()
            } else {
                format!("{:?}", r.spec.version)
            },
            if r.spec.channels.is_empty() {
                "(all)".to_string()
            } else {
                format!("[{}]", r.spec.channels.join(" "))
            },
            r.spec.upgrade_constraint_policy
        ),
    );
    line(
        "Installed:",
        match &r.installed {
            Some(b) => format!(
                "{} ({}), {}",
                b.bundle,
                b.version,
                short(r.installed_condition.as_ref())
            ),
            None => format!("nothing yet, {}", short(r.installed_condition.as_ref())),
        },
    );
    line(
        "Target:",
        match (&r.target, &r.resolution_error) {
            (Some(t), _) => format!("{} ({}) from catalog {}", t.bundle, t.version, t.catalog),
            (None, Some(e)) => format!("none: {e}"),
            (None, None) => "none".to_string(),
        },
    );
    line("Progressing:", short(r.progressing.as_ref()));
    if let Some(p) = r.progressing.as_ref().filter(|p| !p.message.is_empty()) {
        for l in p.message.lines() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    if let Some(p) = &r.paused {
        out.push_str(&format!("Paused:      since {}\n", p.since));
    }
    if let Some(c) = &r.rolled_back {
        out.push_str(&format!("RolledBack:  {}/{}\n", c.status, c.reason));
        out.push_str(&format!("  {}\n", c.message));
    }
    if let Some(u) = &r.upgrade_available {
        out.push_str(&format!(
            "Notice:      UpgradeAvailable {}/{}\n",
            u.status, u.reason
        ));
        for l in u.message.split(". ") {
            out.push_str(&format!("  - {l}\n"));
        }
    }
    let taken = r.upgrades.len() - r.available_upgrades;
    out.push_str(&format!(
        "Upgrades:    {} available, {} not taken\n",
        r.available_upgrades, taken
    ));
    if !r.upgrades.is_empty() {
        out.push_str(&upgrades_table(r, explain));
    }
    if r.events.is_empty() {
        out.push_str("Events:      none\n");
    } else {
        out.push_str("Events:\n");
        let header = ["LAST SEEN", "TYPE", "REASON", "MESSAGE"]
            .map(String::from)
            .to_vec();
        let rows = r.events.iter().map(|e| {
            let mut msg = e.message.lines().next().unwrap_or_default().to_string();
            if e.count > 1 {
                msg.push_str(&format!(" (x{})", e.count));
            }
            vec![e.last_seen.clone(), e.type_.clone(), e.reason.clone(), msg]
        });
        let all: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
        for l in format_table(&all, "  ").lines() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.push_str(&format!("Next:        {}\n", r.next));
    out
}

#[cfg(test)]
mod tests {
    use super::super::report::{BundleView, Upgrade};
    use super::*;

    fn report() -> ExtensionReport {
        ExtensionReport {
            name: "demo".into(),
            package: "demo-operator".into(),
            namespace: "demo".into(),
            installer: "controller policy".into(),
            installed: Some(BundleView {
                bundle: "demo-operator.v1.0.0".into(),
                version: "1.0.0".into(),
                catalog: String::new(),
            }),
            progressing: Some(ConditionView {
                status: "True".into(),
                reason: "Succeeded".into(),
                message: "Desired state reached".into(),
            }),
            upgrades: vec![Upgrade {
                version: "1.1.0".into(),
                bundle: "demo-operator.v1.1.0".into(),
                catalog: "demo".into(),
                channels: vec!["stable".into()],
                deprecated: false,
                verdict: Verdict::Excluded,
                reasons: vec!["outside version range \"1.0.0\"".into()],
            }],
            next: "widen it".into(),
            ..Default::default()
        }
    }

    #[test]
    fn table_has_one_aligned_row_per_extension() {
        let t = table(&[report()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("NAME   PACKAGE"), "{t}");
        assert!(
            lines[1].contains("0 (+1 not taken)") && lines[1].contains("True/Succeeded"),
            "{t}"
        );
        assert!(!t.contains('\u{1b}'), "no control codes");
    }

    #[test]
    fn explain_adds_the_reasons() {
        let plain = detail(&report(), false);
        let explained = detail(&report(), true);
        assert!(
            plain.contains("1.1.0    demo-operator.v1.1.0  demo     excluded\n"),
            "{plain}"
        );
        assert!(
            explained.contains("excluded: outside version range \"1.0.0\""),
            "{explained}"
        );
        assert!(
            explained.ends_with("Next:        widen it\n"),
            "{explained}"
        );
    }
}
