//! Tests of the bundle configuration.

use super::*;

fn modes(all: bool, own: bool, single: bool) -> InstallModeSet {
    InstallModeSet {
        all,
        own,
        single,
        multi: false,
    }
}

fn msg(r: Result<BundleConfig, ConfigError>) -> String {
    r.err().map(|e| e.to_string()).unwrap_or_default()
}

#[test]
fn all_only_rejects_watch_namespace() {
    let c = json!({"watchNamespace": "x"});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(true, false, false),
            "ns"
        )),
        "invalid configuration: unknown field \"watchNamespace\""
    );
    assert!(BundleConfig::parse(None, modes(true, false, false), "ns").is_ok());
}

#[test]
fn own_or_single_requires_watch_namespace() {
    assert_eq!(
        msg(BundleConfig::parse(None, modes(false, true, false), "ns")),
        "invalid configuration: required field \"watchNamespace\" is missing"
    );
    assert_eq!(
        msg(BundleConfig::parse(None, modes(false, false, true), "ns")),
        "invalid configuration: required field \"watchNamespace\" is missing"
    );
    // with AllNamespaces too it is optional and nullable
    assert!(BundleConfig::parse(None, modes(true, true, true), "ns").is_ok());
    let c = json!({"watchNamespace": null});
    assert_eq!(
        BundleConfig::parse(Some(&c), modes(true, true, true), "ns").map(|c| c.watch_namespace),
        Ok(None)
    );
}

#[test]
fn own_only_and_single_only_messages() {
    let c = json!({"watchNamespace": "other"});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(false, true, false),
            "ns"
        )),
        "invalid configuration: invalid format for field \"watchNamespace\": invalid value \"other\": must be \"ns\" (the namespace where the operator is installed) because this operator only supports OwnNamespace install mode"
    );
    let c = json!({"watchNamespace": "ns"});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(false, false, true),
            "ns"
        )),
        "invalid configuration: invalid format for field \"watchNamespace\": invalid value \"ns\": must be different from \"ns\" (the install namespace) because this operator uses SingleNamespace install mode to watch a different namespace"
    );
}

#[test]
fn pattern_length_type_and_multiple_errors() {
    let c = json!({"watchNamespace": "Bad_NS"});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(false, true, true),
            "ns"
        )),
        format!(
            "invalid configuration: field \"watchNamespace\" must match pattern \"{NAMESPACE_PATTERN}\""
        )
    );
    let long = "a".repeat(64);
    let c = json!({"watchNamespace": long});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(false, true, true),
            "ns"
        )),
        "invalid configuration: field \"watchNamespace\" must have maximum length of 63 (len=64)"
    );
    let c = json!({"watchNamespace": 5});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(false, true, true),
            "ns"
        )),
        "invalid configuration: invalid type for field \"watchNamespace\": got integer, want string"
    );
    let c = json!({"foo": 1, "deploymentConfig": {"bar": 2}});
    let m = msg(BundleConfig::parse(
        Some(&c),
        modes(false, true, true),
        "ns",
    ));
    assert!(
        m.starts_with("invalid configuration: multiple errors found:\n  - "),
        "{m}"
    );
    assert!(
        m.contains("\n  - required field \"watchNamespace\" is missing"),
        "{m}"
    );
    assert!(m.contains("\n  - unknown field \"foo\""), "{m}");
    assert!(
        m.contains("\n  - unknown field \"deploymentConfig.bar\""),
        "{m}"
    );
}

#[test]
fn deployment_config_is_typed() {
    let c = json!({"deploymentConfig": {"env": [{"name": "A", "value": "b"}], "nodeSelector": {"k": "v"}}});
    let parsed = BundleConfig::parse(Some(&c), modes(true, false, false), "ns").unwrap_or_default();
    let dc = parsed.deployment_config.unwrap_or_default();
    assert_eq!(dc.env.unwrap_or_default()[0].name, "A");
    let c = json!({"deploymentConfig": {"env": [{"value": "b"}]}});
    assert_eq!(
        msg(BundleConfig::parse(
            Some(&c),
            modes(true, false, false),
            "ns"
        )),
        "invalid configuration: required field \"deploymentConfig.env[0].name\" is missing"
    );
}

#[test]
fn target_namespace_rules() {
    assert_eq!(
        target_namespaces(modes(true, false, false), None, "ns"),
        Ok(vec![String::new()])
    );
    assert_eq!(
        target_namespaces(modes(false, true, false), Some("ns"), "ns"),
        Ok(vec!["ns".to_string()])
    );
    assert_eq!(
            target_namespaces(modes(true, false, true), Some("ns"), "ns").map_err(|e| e.to_string()),
            Err("invalid option(s): invalid target namespaces [ns]: supported install modes [AllNamespaces SingleNamespace] do not support targeting own namespace".to_string())
        );
    assert_eq!(
            target_namespaces(modes(false, true, false), Some("x"), "ns").map_err(|e| e.to_string()),
            Err("invalid option(s): invalid target namespaces [x]: supported install modes [OwnNamespace] do not support target namespaces [x]".to_string())
        );
    assert_eq!(
            target_namespaces(modes(false, true, false), None, "ns").map_err(|e| e.to_string()),
            Err("invalid option(s): invalid target namespaces []: exactly one target namespace must be specified".to_string())
        );
}
