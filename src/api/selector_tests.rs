//! Tests of the label selector.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
    }
}

fn sel(ml: &[(&str, &str)], me: Vec<LabelSelectorRequirement>) -> LabelSelector {
    LabelSelector {
        match_labels: (!ml.is_empty()).then(|| labels(ml)),
        match_expressions: (!me.is_empty()).then_some(me),
    }
}

#[test]
fn matching() {
    let cat = labels(&[
        ("olm.operatorframework.io/metadata.name", "prod"),
        ("tier", "gold"),
    ]);
    let other = labels(&[("olm.operatorframework.io/metadata.name", "dev")]);
    let cases: Vec<(LabelSelector, bool, bool)> = vec![
        (LabelSelector::default(), true, true),
        (
            sel(
                &[("olm.operatorframework.io/metadata.name", "prod")],
                vec![],
            ),
            true,
            false,
        ),
        (
            sel(&[], vec![expr("tier", "In", Some(&["gold", "silver"]))]),
            true,
            false,
        ),
        (
            sel(&[], vec![expr("tier", "NotIn", Some(&["gold"]))]),
            false,
            true,
        ),
        (sel(&[], vec![expr("tier", "Exists", None)]), true, false),
        (
            sel(&[], vec![expr("tier", "DoesNotExist", None)]),
            false,
            true,
        ),
        (
            sel(
                &[("tier", "gold")],
                vec![expr(
                    "olm.operatorframework.io/metadata.name",
                    "In",
                    Some(&["dev"]),
                )],
            ),
            false,
            false,
        ),
    ];
    for (s, want_cat, want_other) in cases {
        let parsed = Selector::parse(Some(&s)).unwrap();
        assert_eq!(parsed.matches(&cat), want_cat, "{s:?} on cat");
        assert_eq!(parsed.matches(&other), want_other, "{s:?} on other");
    }
    assert!(Selector::parse(None).unwrap().matches(&cat));
}

#[test]
fn errors_match_apimachinery() {
    let cases: Vec<(LabelSelector, String)> = vec![
            (
                sel(&[], vec![expr("tier", "Gt", Some(&["1"]))]),
                "\"Gt\" is not a valid label selector operator".into(),
            ),
            (
                sel(&[], vec![expr("tier", "In", None)]),
                "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty".into(),
            ),
            (
                sel(&[], vec![expr("tier", "Exists", Some(&["a"]))]),
                "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist".into(),
            ),
            (
                sel(&[("bad key", "v")], vec![]),
                format!(
                    "key: Invalid value: \"bad key\": name part {}",
                    regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
                ),
            ),
            (
                sel(&[("k", "-bad")], vec![]),
                "values[0][k]: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into(),
            ),
            (
                sel(&[], vec![expr("/x", "NotIn", Some(&[]))]),
                "[key: Invalid value: \"/x\": prefix part must be non-empty, values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty]".into(),
            ),
        ];
    for (s, want) in cases {
        assert_eq!(Selector::parse(Some(&s)).unwrap_err(), want);
    }
}
