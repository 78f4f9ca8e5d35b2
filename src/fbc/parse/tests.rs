use super::*;
use std::io::Write;

fn collect(dir: &Path, limits: &Limits) -> Result<Vec<(String, u64, String)>, FbcError> {
    let mut out = Vec::new();
    walk_catalog(dir, limits, &mut |b| {
        let name = b.path.file_name().unwrap().to_string_lossy().to_string();
        out.push((name, b.line, String::from_utf8(b.json.to_vec()).unwrap()));
        Ok(())
    })?;
    Ok(out)
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::File::create(p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

#[test]
fn json_stream_concatenated_pretty_and_compact() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "a.json",
        "{\"schema\":\"olm.package\",\"name\":\"p\"}{\"schema\":\"x\"}\n\n{\n  \"schema\": \"olm.channel\",\n  \"name\": \"s p\\\"}\"\n}\n",
    );
    let blobs = collect(d.path(), &Limits::default()).unwrap();
    assert_eq!(blobs.len(), 3);
    assert_eq!(blobs[0].2, r#"{"schema":"olm.package","name":"p"}"#);
    assert_eq!(blobs[1].2, r#"{"schema":"x"}"#);
    assert_eq!(blobs[2].1, 3);
    assert_eq!(blobs[2].2, r#"{"schema":"olm.channel","name":"s p\"}"}"#);
}

#[test]
fn yaml_multi_document_and_any_extension_and_order() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "b/catalog.yaml",
        "---\nschema: olm.package\nname: p\n---\n# only a comment\n---\nschema: olm.bundle\nname: b\npackage: p\n",
    );
    write(d.path(), "a/z.txt", "{\"schema\":\"first\"}");
    let blobs = collect(d.path(), &Limits::default()).unwrap();
    let names: Vec<_> = blobs.iter().map(|b| b.2.as_str()).collect();
    assert_eq!(
        names,
        [
            r#"{"schema":"first"}"#,
            r#"{"schema":"olm.package","name":"p"}"#,
            r#"{"schema":"olm.bundle","name":"b","package":"p"}"#
        ]
    );
    assert_eq!(blobs[2].1, 7);
}

#[test]
fn indexignore_excludes_files_and_directories() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), ".indexignore", "README.md\n/docs/\n");
    write(d.path(), "README.md", "# not fbc\n");
    write(d.path(), "docs/x.json", "not json");
    write(d.path(), "pkg/.indexignore", "*.bak\n");
    write(d.path(), "pkg/c.json.bak", "broken {");
    write(
        d.path(),
        "pkg/c.json",
        "{\"schema\":\"olm.package\",\"name\":\"p\"}",
    );
    let blobs = collect(d.path(), &Limits::default()).unwrap();
    assert_eq!(blobs.len(), 1);
}

#[test]
fn invalid_json_names_file_blob_and_line() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "c.json",
        "{\"schema\":\"a\"}\n{\n \"schema\": \"b\",\n \"name\": \"x\" \"y\"\n}\n",
    );
    let err = collect(d.path(), &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("c.json"), "{err}");
    assert!(err.contains("blob 2 starting at line 2"), "{err}");
    assert!(err.contains("line 4,"), "{err}");
}

#[test]
fn whitespace_between_scalars_is_not_glued() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "c.json", "{\"schema\":\"a\",\"n\": 1 2}");
    assert!(collect(d.path(), &Limits::default()).is_err());
}

#[test]
fn invalid_yaml_names_file_and_absolute_line() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "c.yaml",
        "schema: olm.package\nname: p\n---\nschema: olm.channel\nname: [unclosed\npackage: p\n",
    );
    let err = collect(d.path(), &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("c.yaml"), "{err}");
    assert!(err.contains("document 2 starting at line 4"), "{err}");
    assert!(err.contains("line 5") || err.contains("line 6"), "{err}");
}

#[test]
fn unknown_schema_with_odd_fields_is_kept_but_missing_schema_is_not() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "a.json",
        "{\"schema\":\"my.thing\",\"entries\":\"text\",\"properties\":7}",
    );
    assert_eq!(collect(d.path(), &Limits::default()).unwrap().len(), 1);
    write(d.path(), "b.json", "{\"name\":\"x\"}");
    let err = collect(d.path(), &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("b.json") && err.contains("schema"), "{err}");
}

#[test]
fn limits_are_enforced() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "a.json",
        &format!("{{\"schema\":\"x\",\"v\":\"{}\"}}", "a".repeat(5000)),
    );
    let small = Limits {
        max_blob_bytes: 1000,
        ..Limits::default()
    };
    let err = collect(d.path(), &small).unwrap_err().to_string();
    assert!(
        err.contains("max_blob_bytes") && err.contains("a.json:1"),
        "{err}"
    );
    let total = Limits {
        max_total_bytes: 100,
        ..Limits::default()
    };
    assert!(
        collect(d.path(), &total)
            .unwrap_err()
            .to_string()
            .contains("max_total_bytes")
    );
    for i in 0..5 {
        write(d.path(), &format!("f{i}.json"), "{\"schema\":\"x\"}");
    }
    let files = Limits {
        max_files: 3,
        ..Limits::default()
    };
    assert!(
        collect(d.path(), &files)
            .unwrap_err()
            .to_string()
            .contains("max_files")
    );
}

#[test]
fn compact_keeps_strings() {
    let mut out = Vec::new();
    compact_json(b"{ \"a b\" : [ 1 , \"x\\\" y\" ] }", &mut out);
    assert_eq!(out, br#"{"a b":[1,"x\" y"]}"#);
}

/// Every blob of a one-file catalog: (compact JSON, what was normalized).
fn go_blobs(text: &str) -> Result<Vec<(String, Option<String>)>, FbcError> {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "c.json", text);
    let mut out = Vec::new();
    walk_catalog(d.path(), &Limits::default(), &mut |b| {
        out.push((
            String::from_utf8(b.json.to_vec()).unwrap(),
            b.view.normalized.clone(),
        ));
        Ok(())
    })?;
    Ok(out)
}

#[test]
fn keys_match_case_insensitively_as_catalogd_reads_them() {
    let blobs = go_blobs(
        r#"{"Schema":"olm.package","Name":"x","DefaultChannel":"stable"}
{"schema":"olm.channel","Package":"x","name":"stable","Entries":[{"Name":"x.v1","SkipRange":"<1.0.0"}]}
{"schema":"olm.bundle","package":"x","name":"x.v1","Image":"r/x:1","properties":[{"Type":"olm.package","Value":{"PackageName":"x","Version":"1.0.0"}}]}"#,
    )
    .unwrap();
    assert_eq!(
        blobs[0].0,
        r#"{"schema":"olm.package","name":"x","defaultChannel":"stable"}"#
    );
    let what = blobs[0].1.as_deref().unwrap();
    assert!(
        what.contains("DefaultChannel→defaultChannel, Name→name, Schema→schema"),
        "{what}"
    );
    assert_eq!(
        blobs[1].0,
        r#"{"schema":"olm.channel","package":"x","name":"stable","entries":[{"name":"x.v1","skipRange":"<1.0.0"}]}"#
    );
    assert_eq!(
        blobs[2].0,
        r#"{"schema":"olm.bundle","package":"x","name":"x.v1","image":"r/x:1","properties":[{"type":"olm.package","value":{"packageName":"x","version":"1.0.0"}}]}"#
    );
}

#[test]
fn a_key_written_twice_keeps_its_last_value() {
    let blobs = go_blobs(r#"{"schema":"olm.package","name":"a","name":"b"}"#).unwrap();
    assert_eq!(blobs[0].0, r#"{"schema":"olm.package","name":"b"}"#);
    assert!(
        blobs[0]
            .1
            .as_deref()
            .unwrap()
            .contains("a key written twice")
    );
}

#[test]
fn keys_folding_to_the_same_name_are_refused_as_catalogd_refuses_them() {
    let e = go_blobs(r#"{"schema":"olm.package","Schema":"olm.package","name":"x"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"duplicate keys for key "schema": [Schema schema]"#),
        "{e}"
    );
    let e = go_blobs(r#"{"Schema":5,"name":"x"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"the value of "Schema" must be a string"#),
        "{e}"
    );
}

#[test]
fn ordinary_blobs_and_look_alike_keys_of_other_schemas_are_served_verbatim() {
    let text = r#"{"schema":"olm.package","name":"p"}
{"schema":"my.schema","Entries":[{"Name":1}],"Properties":"free-form"}"#;
    let blobs = go_blobs(text).unwrap();
    assert_eq!(
        blobs[0],
        (r#"{"schema":"olm.package","name":"p"}"#.to_string(), None)
    );
    assert_eq!(
        blobs[1],
        (
            r#"{"schema":"my.schema","Entries":[{"Name":1}],"Properties":"free-form"}"#.to_string(),
            None
        )
    );
}

#[test]
fn normalized_blobs_are_warnings_and_strict_refuses_them() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "c.json",
        r#"{"Schema":"olm.package","Name":"x","defaultChannel":"s"}
{"schema":"olm.channel","package":"x","name":"s","entries":[{"name":"x.v1"}]}
{"schema":"olm.bundle","package":"x","name":"x.v1","image":"r/x:1","properties":[{"type":"olm.package","value":{"packageName":"x","version":"1.0.0"}}]}"#,
    );
    let lenient =
        crate::fbc::validate_catalog(d.path(), &crate::fbc::StoreOptions::default()).unwrap();
    assert_eq!(lenient.summary.packages, 1);
    assert_eq!(lenient.warnings.len(), 1, "{:?}", lenient.warnings);
    assert!(
        lenient.warnings[0]
            .starts_with("c.json:1: olm.package blob \"x\": keys matched case-insensitively"),
        "{:?}",
        lenient.warnings
    );
    let strict = crate::fbc::validate_catalog(
        d.path(),
        &crate::fbc::StoreOptions {
            strict: true,
            ..Default::default()
        },
    );
    assert!(matches!(strict, Err(FbcError::Invalid { .. })));
}

#[test]
fn served_blobs_are_read_as_go_reads_them() {
    assert_eq!(
        go_normalized(br#"{"schema":"olm.package","name":"p"}"#),
        None
    );
    assert_eq!(
        go_normalized(br#"{"Schema":"olm.package","Name":"p"}"#).as_deref(),
        Some(br#"{"schema":"olm.package","name":"p"}"#.as_slice())
    );
    let mut content = crate::fbc::model::PackageContent::default();
    crate::content::compact::push_line(
        &mut content,
        br#"{"Schema":"olm.package","Name":"p","DefaultChannel":"s"}"#,
        "p",
        false,
    )
    .unwrap();
    assert_eq!(
        content.package.map(|p| p.default_channel),
        Some("s".to_string())
    );
}
