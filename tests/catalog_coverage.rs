//! `olmv1 catalog coverage` run as the real binary: over a directory of synthetic bundles
//! reproducing what Go's reader accepts (docs/how-to/catalog-coverage.md) and over the
//! shared real-world fixture bundles (conformance layer).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn coverage(catalog: &Path, json: bool) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_olmv1"));
    cmd.args(["catalog", "coverage", "--catalog"]).arg(catalog);
    if json {
        cmd.args(["-o", "json"]);
    }
    let out = cmd.output().expect("run olmv1");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Copies the synthetic all-namespaces bundle to `dest`.
fn copy_bundle(dest: &Path) {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bundle/testdata/bundles/all-namespaces");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dest.join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dest.join(sub).join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn bundles_go_reads_install_and_dependencies_anywhere_in_metadata_are_found() {
    let root = tempfile::tempdir().unwrap();
    // Package "quoted": an old version that does not load, and the head, with a quoted
    // scalar indented as Go accepts, a duplicate key and an undecodable metadata file.
    let old = root.path().join("quoted/0.9.0");
    std::fs::create_dir_all(old.join("manifests")).unwrap();
    let head = root.path().join("quoted/1.10.0");
    copy_bundle(&head);
    std::fs::write(
        head.join("manifests/extra.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  annotations:\n    d: \"a\nb\"\n  annotations:\n    d: last\n",
    )
    .unwrap();
    std::fs::write(
        head.join("metadata/dependencies.yaml"),
        "dependencies: [a: b: c]\n",
    )
    .unwrap();
    // Package "deps": dependencies in metadata/dependency.yaml.
    let deps = root.path().join("deps/2.0.0");
    copy_bundle(&deps);
    std::fs::write(
        deps.join("metadata/dependency.yaml"),
        "dependencies:\n- type: olm.package\n  value: {packageName: etcd, version: '>=0.9.0'}\n",
    )
    .unwrap();

    let (ok, table) = coverage(root.path(), false);
    assert!(ok, "{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("deps\t"), "{table}");
    assert!(lines[0].contains("\trefused (dependencies): bundle \"widget-operator.v1.0.0\" has a dependency declared via property \"olm.package.required\""), "{table}");
    assert!(
        lines[1].starts_with("quoted\t") && lines[1].ends_with("1.10.0\tinstalls"),
        "{table}"
    );
    assert_eq!(lines[2], "summary: 2 bundles, 1 install, 1 refused");
    assert_eq!(lines[3], "  dependencies: 1");

    let (ok, json) = coverage(root.path(), true);
    assert!(ok, "{json}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["total"], 2);
    assert_eq!(v["installs"], 1);
    assert_eq!(v["refused"], serde_json::json!({"dependencies": 1}));
    assert_eq!(v["bundles"][1]["installs"], true);
    assert_eq!(v["bundles"][0]["reason"], "dependencies");
}

#[test]
fn fixture_bundles_coverage() {
    let Some(root) = olmv1::testenv::shared_dir("fixtures/bundles") else {
        return;
    };
    let (ok, table) = coverage(&root, false);
    assert!(ok, "{table}");
    let summary = table.lines().find(|l| l.starts_with("summary: ")).unwrap();
    assert_eq!(
        summary, "summary: 13 bundles, 11 install, 2 refused",
        "{table}"
    );
    let refused: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("\trefused ("))
        .collect();
    assert_eq!(refused.len(), 2, "{table}");
    assert!(
        refused[0].starts_with("cockroachdb\t") && refused[0].contains("refused (crd-version)")
    );
    assert!(
        refused[1].starts_with("dbaas-operator\t") && refused[1].contains("refused (dependencies)")
    );
    // ecr-secret-operator has six versions: the head is 0.6.0.
    assert!(
        table.contains("ecr-secret-operator/0.6.0\tinstalls"),
        "{table}"
    );
}
