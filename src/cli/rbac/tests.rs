use super::lookup::MAX_LISTED_VERSIONS;
use super::*;
use serde_json::json;

fn base(source: &str) -> RbacArgs {
    RbacArgs {
        source: source.to_string(),
        namespace: "inst".into(),
        extension: "ext".into(),
        bundled_rbac: BundledRbac::Include,
        diff: None,
        watch_namespace: None,
        operator_condition: false,
        catalog: None,
        cache_dir: None,
        fetch: FetchArgs::default(),
    }
}

fn args(source: &Path, diff: Option<&Path>) -> RbacArgs {
    RbacArgs {
        diff: diff.map(|d| d.display().to_string()),
        ..base(&source.display().to_string())
    }
}

#[test]
fn prints_rbac_and_upgrade_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    let new = dir.path().join("new.yaml");
    std::fs::write(
        &old,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n",
    )
    .unwrap();
    std::fs::write(
        &new,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: n}\n",
    )
    .unwrap();
    let full = execute(&args(&new, None)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&full).unwrap();
    assert_eq!(docs[1]["rules"][2]["resourceNames"], json!(["a", "b"]));
    let diff = execute(&args(&new, Some(&old))).unwrap();
    let doc: Value = serde_saphyr::from_str(&diff).unwrap();
    assert_eq!(
        doc["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"],
            "verbs": ["get", "update", "patch", "delete"], "resourceNames": ["b"]}])
    );
    assert_eq!(
        execute(&args(&old, Some(&old))).unwrap(),
        "# the upgrade needs no additional permissions\n"
    );
    std::fs::write(&old, "kind: ConfigMap\nmetadata: {name: x}\n").unwrap();
    assert!(
        execute(&args(&old, None))
            .unwrap_err()
            .contains("apiVersion")
    );
    let missing = execute(&args(&dir.path().join("nope"), None)).unwrap_err();
    assert!(missing.contains("nope: No such file"), "{missing}");
}

#[test]
fn bundle_directories_are_rendered_first() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bundle/testdata/bundles/all-namespaces");
    let args = RbacArgs {
        namespace: "team-a".into(),
        extension: "demo".into(),
        ..base(&dir.display().to_string())
    };
    let yaml = execute(&args).expect("rbac for a bundle directory");
    assert!(yaml.contains("kind: ClusterRole"), "{yaml}");
    assert!(yaml.contains("clusterextensions/finalizers"), "{yaml}");
    assert!(yaml.contains("deployments"), "{yaml}");
    let same = RbacArgs {
        diff: Some(args.source.clone()),
        ..args
    };
    assert_eq!(
        execute(&same).expect("diff"),
        "# the upgrade needs no additional permissions\n"
    );
}

#[test]
fn sources_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let image = |s: &str| Ok(Input::Image(s.to_string()));
    let cat = |p: &str, v: Option<&str>| {
        Ok(Input::Catalog {
            package: p.to_string(),
            version: v.map(str::to_string),
        })
    };
    // without --catalog: paths, else images; package@version needs --catalog
    assert_eq!(
        classify_source(&path, false),
        Ok(Input::Path(dir.path().to_path_buf()))
    );
    for r in [
        "localhost:5000/bundles/foo:v1.0.0",
        "localhost:5000/bundles/foo@sha256:0123456789abcdef",
        "quay.io/org/foo@sha256:0123",
        "busybox",
        "foo@sha256:abcd",
    ] {
        assert_eq!(classify_source(r, false), image(r), "{r}");
    }
    assert_eq!(
        classify_source("ecr-secret-operator@0.4.0", false),
        Err(InputError::NeedsCatalog {
            arg: "ecr-secret-operator@0.4.0".into()
        })
    );
    // with --catalog: package@version or a package name; paths and images refused
    assert_eq!(
        classify_source("ecr-secret-operator@0.4.0", true),
        cat("ecr-secret-operator", Some("0.4.0"))
    );
    assert_eq!(
        classify_source("foo@v1.2.3-rc.1", true),
        cat("foo", Some("v1.2.3-rc.1"))
    );
    assert_eq!(classify_source("foo", true), cat("foo", None));
    assert_eq!(
        classify_source(&path, true),
        Err(InputError::CatalogWithPath { arg: path.clone() })
    );
    for r in [
        "localhost:5000/bundles/foo:v1.0.0",
        "r.io/foo@sha256:0123",
        "foo@1.0",
        "r.io/foo@1.0.0",
    ] {
        assert_eq!(
            classify_source(r, true),
            Err(InputError::CatalogWithImage { arg: r.into() }),
            "{r}"
        );
    }
    assert_eq!(classify_source("", false), Err(InputError::Empty));
    // a missing path is still a path (fails as a missing file, not as a pull)
    assert_eq!(
        classify_source("./no/such/bundle", false),
        Ok(Input::Path("./no/such/bundle".into()))
    );
    assert_eq!(
        classify_diff("/no/such/manifests.yaml", Some("p")),
        Ok(Input::Path("/no/such/manifests.yaml".into()))
    );
    // an existing path wins over the package@version form
    let odd = dir.path().join("pkg@1.0.0");
    std::fs::write(&odd, "").unwrap();
    let odd = odd.display().to_string();
    assert_eq!(
        classify_source(&odd, false),
        Ok(Input::Path(PathBuf::from(&odd)))
    );
}

#[test]
fn diff_values_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let cat = |p: &str, v: &str| {
        Ok(Input::Catalog {
            package: p.to_string(),
            version: Some(v.to_string()),
        })
    };
    assert_eq!(classify_diff("0.3.2", Some("ecr")), cat("ecr", "0.3.2"));
    assert_eq!(classify_diff("v0.3.2", Some("ecr")), cat("ecr", "v0.3.2"));
    assert_eq!(
        classify_diff("other@1.0.0", Some("ecr")),
        cat("other", "1.0.0")
    );
    assert_eq!(
        classify_diff(&path, Some("ecr")),
        Ok(Input::Path(dir.path().to_path_buf()))
    );
    assert_eq!(
        classify_diff("r.io/b/ecr:v0.3.2", Some("ecr")),
        Ok(Input::Image("r.io/b/ecr:v0.3.2".into()))
    );
    assert_eq!(
        classify_diff("r.io/b/ecr:v0.3.2", None),
        Ok(Input::Image("r.io/b/ecr:v0.3.2".into()))
    );
    for v in ["0.3.2", "ecr@0.3.2"] {
        assert_eq!(
            classify_diff(v, None),
            Err(InputError::DiffNeedsCatalogSource { arg: v.into() }),
            "{v}"
        );
    }
}

fn bundle(package: &str, version: &str, image: &str) -> Value {
    json!({"schema": "olm.bundle", "name": format!("{package}.v{version}"),
        "package": package, "image": image,
        "properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}}]})
}

/// An FBC with package `p`: channel `stable` (1.0.0, 1.1.0), channel `fast` (1.2.0),
/// a bundle without image (0.9.0, in no channel), `extra_versions` more bundles
/// 0.0.x, and a package `q` without bundles.
fn write_fbc(dir: &Path, extra_versions: usize) {
    let mut docs = vec![
        json!({"schema": "olm.package", "name": "p", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": "p",
            "entries": [{"name": "p.v1.0.0"}, {"name": "p.v1.1.0", "replaces": "p.v1.0.0"}]}),
        json!({"schema": "olm.channel", "name": "fast", "package": "p",
            "entries": [{"name": "p.v1.2.0"}]}),
        bundle("p", "1.0.0", "r.io/b/p:v1.0.0"),
        bundle("p", "1.1.0", "r.io/b/p:v1.1.0"),
        bundle("p", "1.2.0", "r.io/b/p:v1.2.0"),
        bundle("p", "0.9.0", ""),
        json!({"schema": "olm.package", "name": "q"}),
    ];
    for i in 0..extra_versions {
        docs.push(bundle("p", &format!("0.0.{i}"), "r.io/b/p:old"));
    }
    let text: String = docs.iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(dir.join("catalog.json"), text).unwrap();
}

fn load(dir: &Path, package: &str) -> PackageContent {
    CatalogSource::parse(&dir.display().to_string())
        .load_package_blocking(package, &FetchArgs::default())
        .unwrap()
        .content
}

#[test]
fn catalog_lookup() {
    let dir = tempfile::tempdir().unwrap();
    write_fbc(dir.path(), 0);
    let p = load(dir.path(), "p");
    let found = find_bundle(&p, "cat", "p", Some("1.1.0")).unwrap();
    assert_eq!(
        found,
        CatalogBundle {
            name: "p.v1.1.0".into(),
            version: "1.1.0".into(),
            image: "r.io/b/p:v1.1.0".into()
        }
    );
    assert_eq!(
        find_bundle(&p, "cat", "p", Some("v1.0.0")).unwrap().image,
        "r.io/b/p:v1.0.0"
    );
    // package alone: what resolution picks (highest in any channel)
    assert_eq!(find_bundle(&p, "cat", "p", None).unwrap().name, "p.v1.2.0");
    assert_eq!(
        find_bundle(&p, "cat", "p", Some("2.0.0"))
            .unwrap_err()
            .to_string(),
        "package \"p\" in catalog cat has no version 2.0.0; available: 1.2.0, 1.1.0, 1.0.0, 0.9.0"
    );
    assert_eq!(
        find_bundle(&p, "cat", "p", Some("0.9.0")).unwrap_err(),
        LookupError::NoImage {
            package: "p".into(),
            catalog: "cat".into(),
            bundle: "p.v0.9.0".into()
        }
    );
    assert!(matches!(
        find_bundle(&p, "cat", "p", Some("x")),
        Err(LookupError::InvalidVersion { .. })
    ));
    let missing = load(dir.path(), "nope");
    assert_eq!(
        find_bundle(&missing, "cat", "nope", Some("1.0.0"))
            .unwrap_err()
            .to_string(),
        "package \"nope\" is not in catalog cat"
    );
    // a package without bundles: nothing to list, nothing to resolve
    let q = load(dir.path(), "q");
    assert_eq!(
        find_bundle(&q, "cat", "q", Some("1.0.0"))
            .unwrap_err()
            .to_string(),
        "package \"q\" in catalog cat has no version 1.0.0; available: none"
    );
    assert!(matches!(
        find_bundle(&q, "cat", "q", None),
        Err(LookupError::Resolve { .. })
    ));
}

#[test]
fn listed_versions_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    write_fbc(dir.path(), 30);
    let p = load(dir.path(), "p");
    let err = find_bundle(&p, "cat", "p", Some("9.9.9"))
        .unwrap_err()
        .to_string();
    let listed = err.split("available: ").nth(1).unwrap();
    assert!(
        listed.starts_with("1.2.0, 1.1.0, 1.0.0, 0.9.0, 0.0.29,"),
        "{err}"
    );
    assert!(listed.ends_with(" and 14 more"), "{err}");
    assert_eq!(
        listed.matches(", ").count(),
        MAX_LISTED_VERSIONS - 1,
        "{err}"
    );
}

#[test]
fn catalog_lookup_in_the_real_catalogs() {
    let Some(root) = crate::testenv::shared_dir("fixtures/catalogs") else {
        return;
    };
    for release in ["v4.16", "v4.20"] {
        let dir = root.join(release).join("ecr-secret-operator");
        let content = load(&dir, "ecr-secret-operator");
        let found = find_bundle(&content, "c", "ecr-secret-operator", Some("0.4.0")).unwrap();
        assert_eq!(found.name, "ecr-secret-operator.v0.4.0");
        assert_eq!(
            found.image,
            "quay.io/openshift-community-operators/ecr-secret-operator@sha256:90342c48af588010e82e1ae427b929e55b3be45d6a0e5f5029373a5188bf093a"
        );
        let newest = find_bundle(&content, "c", "ecr-secret-operator", None).unwrap();
        assert_eq!(newest.version, "0.5.0", "{release}");
        let err = find_bundle(&content, "c", "ecr-secret-operator", Some("0.6.0"))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("has no version 0.6.0; available: 0.5.0, 0.4.1, 0.4.0, 0.3.2"),
            "{err}"
        );
    }
}

#[test]
fn catalog_sources_end_in_the_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_fbc(dir.path(), 0);
    let catalog = dir.path().display().to_string();
    let with_catalog = |source: &str| RbacArgs {
        catalog: Some(catalog.clone()),
        ..base(source)
    };
    assert_eq!(
        execute(&with_catalog("nope@1.0.0")).unwrap_err(),
        format!("package \"nope\" is not in catalog {catalog}")
    );
    assert!(
        execute(&with_catalog("p@3.0.0"))
            .unwrap_err()
            .ends_with("has no version 3.0.0; available: 1.2.0, 1.1.0, 1.0.0, 0.9.0")
    );
    assert!(
        execute(&with_catalog(&catalog))
            .unwrap_err()
            .starts_with("--catalog was given, but")
    );
    assert!(
        execute(&base("p@1.0.0"))
            .unwrap_err()
            .contains("give the catalog with --catalog")
    );
    let mut a = with_catalog("p@1.0.0");
    a.diff = Some("0.9.0".into());
    // the source's image cannot be pulled: the error names the package and the image
    let cache = tempfile::tempdir().unwrap();
    let unreachable = dir.path().join("unreachable");
    std::fs::create_dir(&unreachable).unwrap();
    std::fs::write(
        unreachable.join("c.json"),
        format!("{}\n", bundle("p", "1.0.0", "127.0.0.1:1/b/p:v1.0.0")),
    )
    .unwrap();
    a.catalog = Some(unreachable.display().to_string());
    a.cache_dir = Some(cache.path().to_path_buf());
    a.fetch.insecure_registries = vec!["127.0.0.1:1".into()];
    let err = execute(&a).unwrap_err();
    assert!(
        err.starts_with("package \"p\" version 1.0.0 (bundle p.v1.0.0, catalog "),
        "{err}"
    );
    assert!(err.contains("127.0.0.1:1/b/p:v1.0.0"), "{err}");
    // --diff classification errors are reported before any pull
    let mut a = base("127.0.0.1:1/b/p:v1.0.0");
    a.diff = Some("1.0.0".into());
    assert!(
        execute(&a)
            .unwrap_err()
            .starts_with("--diff: \"1.0.0\" names a version of a catalog package, which needs a package@version SOURCE"),
    );
}

#[test]
fn manifests_are_read_from_files_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: n}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.json"),
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"b","namespace":"n"}}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
    let objs = read_manifests(dir.path()).unwrap();
    let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["ConfigMap", "Secret", "Service"]);
    assert!(read_manifests(&dir.path().join("missing")).is_err());
}

/// `/dev/zero` has length 0 in its metadata and never ends: it used to be read until
/// memory ran out.
#[test]
fn devices_are_refused_as_sources() {
    let err = execute(&base("/dev/zero")).unwrap_err();
    assert!(err.contains("/dev/zero is not a regular file"), "{err}");
}
