//! `signedBy` without a registry: registries.d parsing and scope choice, the lookaside
//! URL layout, the policy entry, and the verdict on OpenPGP signatures made with keys
//! generated here.

use serde_json::json;

use super::*;
use crate::testenv::gpg::{GpgSigner, payload};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn r(s: &str) -> DockerRef {
    DockerRef::from_reference(&crate::image::reference::parse(s).expect("reference"))
}

fn conf(files: &[(&str, &str)]) -> Result<RegistriesD, String> {
    let mut c = RegistriesD::default();
    for (name, text) in files {
        c.add(name, text)?;
    }
    Ok(c)
}

#[test]
fn registries_d_chooses_the_most_specific_scope_with_a_lookaside() {
    let c = conf(&[
        (
            "/d/a.yaml",
            "default-docker:\n  lookaside: https://sigs.example.com/default\n  lookaside-staging: file:///staging\n",
        ),
        (
            "/d/b.yaml",
            "docker:\n  reg.example.com:5000/ns:\n    sigstore: file:///var/lib/sigs\n  reg.example.com:5000/ns/app:\n    use-sigstore-attachments: true\n  reg.example.com:5000/ns/app:v1:\n    lookaside: http://exact/\n  '*.example.org':\n    lookaside: https://wild\n",
        ),
        ("/d/empty.yaml", "\n"),
    ])
    .expect("valid");
    let cases = [
        ("reg.example.com:5000/ns/app:v1", "http://exact/"),
        // The repository's entry has no lookaside: its namespace's applies.
        ("reg.example.com:5000/ns/app:v2", "file:///var/lib/sigs"),
        ("a.example.org/x:v1", "https://wild"),
        ("quay.io/x:v1", "https://sigs.example.com/default"),
    ];
    for (image, want) in cases {
        assert_eq!(
            c.lookaside_for(&r(image)).map(|(_, u)| u).as_deref(),
            Some(want),
            "{image}"
        );
    }
    assert_eq!(
        c.lookaside_for(&r("reg.example.com:5000/ns/app:v2"))
            .map(|(s, _)| s),
        Some("docker \"reg.example.com:5000/ns\"".to_string())
    );
    let none = conf(&[(
        "/d/a.yaml",
        "docker:\n  quay.io:\n    lookaside: file:///s\n",
    )])
    .expect("valid");
    assert_eq!(none.lookaside_for(&r("docker.io/busybox:1")), None);
}

#[test]
fn registries_d_refuses_duplicates_and_bad_urls() {
    let dup = conf(&[
        (
            "/d/a.yaml",
            "docker:\n  quay.io/x:\n    lookaside: file:///a\n",
        ),
        (
            "/d/b.yaml",
            "docker:\n  quay.io/x:\n    lookaside: file:///b\n",
        ),
    ])
    .expect_err("duplicate");
    assert_eq!(
        dup,
        "docker \"quay.io/x\" is defined both in /d/a.yaml and /d/b.yaml"
    );
    let dup = conf(&[
        ("/d/a.yaml", "default-docker:\n  lookaside: file:///a\n"),
        ("/d/b.yaml", "default-docker:\n  lookaside: file:///b\n"),
    ])
    .expect_err("duplicate default");
    assert!(dup.contains("/d/a.yaml and /d/b.yaml"), "{dup}");
    let bad = conf(&[(
        "/d/a.yaml",
        "docker:\n  quay.io/x:\n    lookaside: ftp://x\n",
    )])
    .expect_err("scheme");
    assert!(
        bad.contains("/d/a.yaml: docker \"quay.io/x\": lookaside \"ftp://x\""),
        "{bad}"
    );
    let bad = conf(&[(
        "/d/a.yaml",
        "docker:\n  quay.io/x:\n    lookaside: file://rel\n",
    )])
    .expect_err("relative");
    assert!(bad.contains("not a file:///"), "{bad}");
    let bad = conf(&[("/d/a.yaml", "docker: [\n")]).expect_err("syntax");
    assert!(bad.starts_with("/d/a.yaml: "), "{bad}");
}

#[test]
fn registries_d_loads_the_yaml_files_of_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("a.yaml"),
        "docker:\n  quay.io:\n    lookaside: file:///a\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("b.yml"), "not: [yaml").expect("write");
    std::fs::write(dir.path().join("c.conf"), "not: [yaml").expect("write");
    let c = RegistriesD::load(dir.path()).expect("loads");
    assert!(c.lookaside_for(&r("quay.io/x:1")).is_some());
    let missing = RegistriesD::load(&dir.path().join("none")).expect("missing is empty");
    assert_eq!(missing.lookaside_for(&r("quay.io/x:1")), None);
    std::fs::write(dir.path().join("d.yaml"), "docker: [").expect("write");
    let e = RegistriesD::load(dir.path()).expect_err("broken");
    assert!(e.to_string().contains("d.yaml"), "{e}");
}

#[test]
fn the_lookaside_layout_is_repository_at_digest_slash_signature_n() {
    assert_eq!(
        lookaside::signature_url(
            "file:///var/lib/containers/sigstore/",
            &r(&format!("busybox@{DIGEST}")),
            DIGEST,
            1
        ),
        format!(
            "file:///var/lib/containers/sigstore/library/busybox@sha256={}/signature-1",
            &DIGEST[7..]
        )
    );
    assert_eq!(
        lookaside::signature_url(
            "https://s.example.com/sigs",
            &r("reg:5000/a/b/c:v1"),
            DIGEST,
            3
        ),
        format!(
            "https://s.example.com/sigs/a/b/c@sha256={}/signature-3",
            &DIGEST[7..]
        )
    );
}

fn signed_by_policy(keys: serde_json::Value) -> Result<SignaturePolicy, PolicyError> {
    let mut req = json!({"type": "signedBy", "keyType": "GPGKeys"});
    if let (Some(m), serde_json::Value::Object(k)) = (req.as_object_mut(), keys) {
        m.extend(k);
    }
    SignaturePolicy::parse("/p.json", &json!({"default": [req]}).to_string())
}

#[test]
fn signed_by_entries_are_parsed_or_refused_naming_the_entry() {
    let signer = GpgSigner::generate("a <a@example.com>").expect("key");
    let armored = signer.public_armored().expect("armored");
    let binary = signer.public_binary().expect("binary");
    for ring in [armored.as_bytes(), &binary[..]] {
        let data = data_encoding::BASE64.encode(ring);
        let p = signed_by_policy(json!({"keyData": data})).expect("keyData");
        assert!(matches!(
            &p.default[0],
            Requirement::SignedBy {
                identity: SignedIdentity::MatchRepoDigestOrExact,
                ..
            }
        ));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key.gpg");
    std::fs::write(&path, &binary).expect("write");
    let p = signed_by_policy(
        json!({"keyPaths": [path], "signedIdentity": {"type": "matchRepository"}}),
    )
    .expect("keyPaths");
    assert_eq!(p.default[0].kind(), "signedBy");
    let refused = |keys| signed_by_policy(keys).expect_err("refused").to_string();
    let e = refused(json!({"keyType": "X509Certificates", "keyPath": path}));
    assert_eq!(
        e,
        "signature policy /p.json: default[0]: signedBy: keyType \"X509Certificates\" is not supported; only \"GPGKeys\" is"
    );
    assert!(
        refused(json!({"keyType": "signedByGPGKeys", "keyPath": path}))
            .contains("\"signedByGPGKeys\" is not supported")
    );
    assert!(refused(json!({})).contains("exactly one of keyPath, keyPaths, keyData"));
    assert!(
        refused(json!({"keyPath": path, "keyData": "eA=="})).contains("found keyPath, keyData")
    );
    assert!(
        refused(json!({"keyData": "bm90IGEga2V5"})).contains("keyData: not an OpenPGP keyring")
    );
    assert!(refused(json!({"keyPath": "/nonexistent/k"})).contains("keyPath /nonexistent/k"));
    assert!(refused(json!({"keyPath": path, "keyDatas": []})).contains("unknown key \"keyDatas\""));
}

struct Fixture {
    reqs: Vec<Requirement>,
    right: GpgSigner,
    wrong: GpgSigner,
}

fn fixture(identity: serde_json::Value) -> Fixture {
    let right = GpgSigner::generate("right <r@example.com>").expect("key");
    let wrong = GpgSigner::generate("wrong <w@example.com>").expect("key");
    let data = data_encoding::BASE64.encode(right.public_armored().expect("armored").as_bytes());
    let p = signed_by_policy(json!({"keyData": data, "signedIdentity": identity})).expect("policy");
    Fixture {
        reqs: p.default,
        right,
        wrong,
    }
}

fn verdict(f: &Fixture, image: &str, blobs: Vec<Vec<u8>>) -> Result<(), String> {
    let lookaside = Lookaside::Found {
        url: "file:///l/ns/app@sha256=1".to_string(),
        blobs,
    };
    let found = Found {
        sigstore: &[],
        sig_tag: "t",
        lookaside: &lookaside,
    };
    evaluate_found(&f.reqs, &r(image), DIGEST, &found).map_err(|e| {
        assert_eq!(e.requirement, "signedBy");
        e.detail
    })
}

#[test]
fn a_signature_by_the_policy_key_for_the_image_passes_and_others_are_refused() {
    let f = fixture(json!({"type": "matchRepoDigestOrExact"}));
    let image = "reg:5000/ns/app:v1";
    let good = f.right.sign(&payload(image, DIGEST)).expect("sign");
    assert_eq!(verdict(&f, image, vec![good.clone()]), Ok(()));
    let by_wrong = f.wrong.sign(&payload(image, DIGEST)).expect("sign");
    assert_eq!(
        verdict(&f, image, vec![by_wrong.clone()]),
        Err(
            "no signature in lookaside file:///l/ns/app@sha256=1 verifies with the policy's keys"
                .to_string()
        )
    );
    // A verifying signature after one that does not.
    assert_eq!(verdict(&f, image, vec![by_wrong, good]), Ok(()));
    let other = f.right.sign(&payload(image, OTHER)).expect("sign");
    assert_eq!(
        verdict(&f, image, vec![other]),
        Err(format!(
            "the signature is for manifest digest {OTHER}, not {DIGEST}"
        ))
    );
    let elsewhere = f
        .right
        .sign(&payload("reg:5000/ns/other:v1", DIGEST))
        .expect("sign");
    let e = verdict(&f, image, vec![elsewhere]).expect_err("identity");
    assert!(e.starts_with("the signature's identity \"reg:5000/ns/other:v1\" does not match reg:5000/ns/app:v1 (signedIdentity matchRepoDigestOrExact)"), "{e}");
    let cosign = f
        .right
        .sign(&crate::testenv::signing::payload(image, DIGEST))
        .expect("sign");
    let e = verdict(&f, image, vec![cosign]).expect_err("type");
    assert!(
        e.contains("critical.type is \"cosign container image signature\""),
        "{e}"
    );
    let e = verdict(&f, image, vec![b"garbage".to_vec(), b"more".to_vec()]).expect_err("garbage");
    assert!(
        e.starts_with(
            "none of the 2 signatures in lookaside file:///l/ns/app@sha256=1 was accepted: "
        ),
        "{e}"
    );
    assert_eq!(
        verdict(&f, image, vec![]),
        Err("a signature is required, but none was found (no file:///l/ns/app@sha256=1/signature-1)".to_string())
    );
}

#[test]
fn signed_identity_applies_to_gpg_signatures() {
    let f = fixture(json!({"type": "matchRepository"}));
    let tagged = f
        .right
        .sign(&payload("reg:5000/ns/app:v9", DIGEST))
        .expect("sign");
    assert_eq!(verdict(&f, "reg:5000/ns/app:v1", vec![tagged]), Ok(()));
}

#[test]
fn without_a_lookaside_signed_by_refuses_and_reject_needs_nothing() {
    let f = fixture(json!({"type": "matchRepoDigestOrExact"}));
    let lookaside = Lookaside::Unconfigured(
        "no lookaside configured in registries.d for reg:5000/ns/app".to_string(),
    );
    let found = Found {
        sigstore: &[],
        sig_tag: "t",
        lookaside: &lookaside,
    };
    let e = evaluate_found(&f.reqs, &r("reg:5000/ns/app:v1"), DIGEST, &found).expect_err("refused");
    assert_eq!(
        e.detail,
        "no lookaside configured in registries.d for reg:5000/ns/app"
    );
    assert_eq!(
        needed(&f.reqs),
        Needed {
            sigstore: false,
            lookaside: true
        }
    );
    let mut reqs = f.reqs.clone();
    reqs.insert(0, Requirement::Reject);
    assert_eq!(needed(&reqs), Needed::default());
}

#[test]
fn an_unsigned_or_oversized_message_is_refused() {
    let signer = GpgSigner::generate("a <a@example.com>").expect("key");
    let keys = GpgKeys::parse("k", &signer.public_binary().expect("binary")).expect("keys");
    let big = vec![b' '; (MAX_PAYLOAD_BYTES + 1) as usize];
    let e = gpg::open(&keys, &signer.sign(&big).expect("sign")).expect_err("too big");
    assert!(e.contains("exceeds the limit of 65536 bytes"), "{e}");
    let literal = pgp::composed::MessageBuilder::from_bytes("", b"{}".to_vec())
        .to_vec(rand08::thread_rng())
        .expect("literal");
    assert_eq!(
        gpg::open(&keys, &literal),
        Err("the signature is not a signed OpenPGP message".to_string())
    );
    assert_eq!(
        gpg::open(&keys, &signer.sign(b"{}").expect("sign")),
        Ok(b"{}".to_vec())
    );
}

/// Signatures made by GnuPG 2.2 (`gpg --sign`, compressed, as containers/image's gpgme
/// signing writes them; tests/data/gpg): an RSA-3072 key (binary export), an Ed25519
/// key (armored export) and an Ed25519 signing subkey of a certify-only primary key.
#[test]
fn signatures_made_by_gnupg_verify() {
    let file = |name: &str| {
        let path = format!("{}/tests/data/gpg/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).expect("fixture")
    };
    let ring = |name: &str| GpgKeys::parse(name, &file(name)).expect("keyring");
    let (rsa, ed, sub) = (
        ring("rsa-pubring.gpg"),
        ring("ed25519-pubkey.asc"),
        ring("subkey-pubring.gpg"),
    );
    let rsa_sig = file("rsa-signature");
    let ed_sig = file("ed25519-signature");
    let sub_sig = file("subkey-signature");
    let image = r("quay.io/acme/app:v1");
    for (keys, sig) in [(&rsa, &rsa_sig), (&ed, &ed_sig), (&sub, &sub_sig)] {
        let payload = gpg::open(keys, sig).expect("verifies");
        check_payload_for_tests(&payload, &image).expect("payload");
    }
    assert_eq!(
        gpg::open(&ed, &rsa_sig),
        Err("no signature verifies with the policy's keys".to_string())
    );
    assert!(gpg::open(&rsa, &sub_sig).is_err());
}

fn check_payload_for_tests(payload: &[u8], image: &DockerRef) -> Result<(), String> {
    verify::check_payload(
        payload,
        gpg::PAYLOAD_TYPE,
        &SignedIdentity::MatchRepoDigestOrExact,
        image,
        DIGEST,
    )
}
