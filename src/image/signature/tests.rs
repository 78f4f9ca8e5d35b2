//! The policy's decisions without a registry: parsing and refusals at load, scope
//! choice, signedIdentity, and the verdict on signatures made with a real key.

use serde_json::json;

use super::*;
use crate::testenv::signing::{TestSigner, payload};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn policy(v: serde_json::Value) -> SignaturePolicy {
    SignaturePolicy::parse("/etc/containers/policy.json", &v.to_string()).expect("valid policy")
}

fn refused(v: serde_json::Value) -> String {
    SignaturePolicy::parse("/p.json", &v.to_string())
        .expect_err("refused")
        .to_string()
}

fn r(s: &str) -> DockerRef {
    DockerRef::from_reference(&crate::image::reference::parse(s).expect("reference"))
}

fn scope_of(p: &SignaturePolicy, image: &str) -> String {
    p.requirements_for(&r(image)).0.to_string()
}

#[test]
fn the_most_specific_scope_wins() {
    let accept = json!([{"type": "insecureAcceptAnything"}]);
    let p = policy(json!({
        "default": [{"type": "reject"}],
        "transports": {
            "docker": {
                "": accept,
                "reg.example.com:5000": accept,
                "reg.example.com:5000/ns": accept,
                "reg.example.com:5000/ns/app": accept,
                "reg.example.com:5000/ns/app:v1": accept,
                "*.example.com": accept,
                "*.org": accept,
            },
            "docker-daemon": {"": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/x"}]},
        }
    }));
    let cases = [
        (
            "reg.example.com:5000/ns/app:v1",
            "\"reg.example.com:5000/ns/app:v1\"",
        ),
        (
            "reg.example.com:5000/ns/app:v2",
            "\"reg.example.com:5000/ns/app\"",
        ),
        (
            "reg.example.com:5000/ns/other:v1",
            "\"reg.example.com:5000/ns\"",
        ),
        ("reg.example.com:5000/top:v1", "\"reg.example.com:5000\""),
        ("reg.example.com/ns/app:v1", "\"*.example.com\""),
        ("a.b.example.org/x:v1", "\"*.org\""),
        ("quay.io/x:v1", "\"\""),
    ];
    for (image, scope) in cases {
        assert_eq!(
            scope_of(&p, image),
            format!("transports.docker {scope}"),
            "{image}"
        );
    }
    // `*.example.com` does not cover example.com itself; nothing else matches.
    let p = policy(json!({"default": [{"type": "reject"}],
        "transports": {"docker": {"*.example.com": accept}}}));
    assert_eq!(scope_of(&p, "example.com/x:v1"), "default");
    assert_eq!(
        identity::policy_namespaces(&r("docker.io/busybox")),
        [
            "docker.io/library/busybox",
            "docker.io/library",
            "docker.io",
            "*.io"
        ]
    );
}

#[test]
fn policies_that_do_not_parse_or_are_not_supported_are_refused_naming_the_entry() {
    let cases = [
        (
            json!({"transports": {}}),
            "the \"default\" policy is missing",
        ),
        (
            json!({"default": []}),
            "default: the requirements list is empty",
        ),
        (
            json!({"default": [{"type": "nope"}]}),
            "default[0]: unknown requirement type \"nope\"",
        ),
        (
            json!({"default": [{"type": "reject", "x": 1}]}),
            "default[0]: unknown key \"x\" in reject",
        ),
        (
            json!({"default": [{"type": "reject"}], "extra": 1}),
            "unknown key \"extra\"",
        ),
        (
            json!({"default": [{"type": "reject"}], "transports": {"docker": {"quay.io/x":
                [{"type": "insecureAcceptAnything"}, {"type": "signedBy", "keyType": "X509Certificates", "keyPath": "/k.pem"}]}}}),
            "transports.docker \"quay.io/x\"[1]: signedBy: keyType \"X509Certificates\" is not supported; only \"GPGKeys\" is",
        ),
        (
            json!({"default": [{"type": "sigstoreSigned", "fulcio": {}, "rekorPublicKeyPath": "/r"}]}),
            "default[0]: sigstoreSigned: \"fulcio\" (Fulcio certificates, Rekor, PKI) is not supported",
        ),
        (
            json!({"default": [{"type": "sigstoreSigned"}]}),
            "exactly one of keyPath, keyPaths, keyData, keyDatas must be set (found none)",
        ),
        (
            json!({"default": [{"type": "sigstoreSigned", "keyPath": "/nonexistent/cosign.pub"}]}),
            "sigstoreSigned: keyPath /nonexistent/cosign.pub: No such file",
        ),
        (
            json!({"default": [{"type": "sigstoreSigned", "keyData": "bm90IGEga2V5"}]}),
            "keyData[0]: no PEM \"PUBLIC KEY\" block",
        ),
        (
            json!({"default": [{"type": "reject"}], "transports": {"docker": {"https://quay.io": [{"type": "reject"}]}}}),
            "transports.docker \"https://quay.io\": not a registry",
        ),
    ];
    for (v, expected) in cases {
        let e = refused(v.clone());
        assert!(e.starts_with("signature policy /p.json: "), "{e}");
        assert!(e.contains(expected), "{v}: {e}");
    }
    let e = SignaturePolicy::parse("/p.json", "{\"default\": [").expect_err("json");
    assert!(e.to_string().contains("invalid JSON"), "{e}");
}

#[test]
fn a_missing_file_accepts_everything() {
    let p = SignaturePolicy::load(std::path::Path::new("/nonexistent/policy.json")).expect("ok");
    assert!(!p.found);
    assert_eq!(p.default, vec![Requirement::InsecureAcceptAnything]);
}

#[test]
fn signed_identity_rules_follow_containers_image() {
    use SignedIdentity as S;
    let tagged = r("reg.io/ns/app:v1");
    let by_digest = r(&format!("reg.io/ns/app@{DIGEST}"));
    let exact = |s: &str| DockerRef::parse(s).expect("ref");
    let cases: Vec<(S, &DockerRef, &str, bool)> = vec![
        (S::MatchRepoDigestOrExact, &tagged, "reg.io/ns/app:v1", true),
        (
            S::MatchRepoDigestOrExact,
            &tagged,
            "reg.io/ns/app:v2",
            false,
        ),
        // cosign writes the repository without a tag: not enough for a tag.
        (S::MatchRepoDigestOrExact, &tagged, "reg.io/ns/app", false),
        (
            S::MatchRepoDigestOrExact,
            &by_digest,
            "reg.io/ns/app:any",
            true,
        ),
        (
            S::MatchRepoDigestOrExact,
            &by_digest,
            "reg.io/ns/app",
            false,
        ),
        (
            S::MatchRepoDigestOrExact,
            &by_digest,
            "reg.io/ns/other:v1",
            false,
        ),
        (S::MatchRepository, &tagged, "reg.io/ns/app", true),
        (S::MatchRepository, &tagged, "reg.io/ns/other", false),
        (S::MatchExact, &tagged, "reg.io/ns/app:v1", true),
        (S::MatchExact, &by_digest, "reg.io/ns/app:v1", false),
        (
            S::ExactReference(exact("other.io/x:1")),
            &tagged,
            "other.io/x:1",
            true,
        ),
        (
            S::ExactReference(exact("other.io/x:1")),
            &tagged,
            "reg.io/ns/app:v1",
            false,
        ),
        (
            S::ExactRepository(exact("other.io/x")),
            &tagged,
            "other.io/x:9",
            true,
        ),
        (
            S::ExactRepository(exact("other.io/x")),
            &tagged,
            "other.io/y",
            false,
        ),
        (
            S::RemapIdentity {
                prefix: "reg.io/ns".into(),
                signed_prefix: "upstream.io/team".into(),
            },
            &tagged,
            "upstream.io/team/app:v1",
            true,
        ),
        (
            S::RemapIdentity {
                prefix: "reg.io/n".into(),
                signed_prefix: "upstream.io/team".into(),
            },
            &tagged,
            "reg.io/ns/app:v1",
            true,
        ),
        (
            S::RemapIdentity {
                prefix: "reg.io/ns".into(),
                signed_prefix: "upstream.io/team".into(),
            },
            &tagged,
            "reg.io/ns/app:v1",
            false,
        ),
        (S::MatchRepository, &tagged, "not a reference", false),
    ];
    for (rule, image, signed, expected) in cases {
        assert_eq!(
            rule.matches(image, signed),
            expected,
            "{rule:?} {image} {signed}"
        );
    }
    let p = policy(
        json!({"default": [{"type": "sigstoreSigned", "keyData": key_data(),
        "signedIdentity": {"type": "remapIdentity", "prefix": "a.io", "signedPrefix": "b.io"}}]}),
    );
    let Requirement::SigstoreSigned { identity, .. } = &p.default[0] else {
        panic!("sigstoreSigned")
    };
    assert_eq!(identity.kind(), "remapIdentity");
    let e = refused(
        json!({"default": [{"type": "sigstoreSigned", "keyData": key_data(),
        "signedIdentity": {"type": "exactReference", "dockerReference": "a.io/x"}}]}),
    );
    assert!(e.contains("is not a reference with a tag or digest"), "{e}");
}

fn key_data() -> String {
    TestSigner::generate()
        .expect("key")
        .key_data()
        .expect("pem")
}

fn sigstore(signer: &TestSigner, identity: serde_json::Value) -> Vec<Requirement> {
    policy(json!({"default": [{"type": "sigstoreSigned", "keyDatas": [key_data(), signer.key_data().expect("pem")],
        "signedIdentity": identity}]}))
    .default
}

fn signed(signer: &TestSigner, docker_ref: &str, digest: &str) -> Signature {
    let payload = payload(docker_ref, digest);
    Signature {
        signature: Some(signer.sign(&payload).expect("sign")),
        payload,
    }
}

#[test]
fn sigstore_signatures_are_verified_against_key_digest_and_identity() {
    let signer = TestSigner::generate().expect("key");
    let stranger = TestSigner::generate().expect("key");
    let reqs = sigstore(&signer, json!({"type": "matchRepository"}));
    let image = r("reg.io/ns/app:v1");
    let eval = |sigs: &[Signature]| evaluate(&reqs, &image, DIGEST, sigs, "ns/app:sha256-1.sig");
    assert_eq!(eval(&[signed(&signer, "reg.io/ns/app", DIGEST)]), Ok(()));
    // One good signature among bad ones is enough.
    assert_eq!(
        eval(&[
            signed(&stranger, "reg.io/ns/app", DIGEST),
            signed(&signer, "reg.io/ns/app", DIGEST)
        ]),
        Ok(())
    );
    let detail = |sigs: &[Signature]| eval(sigs).expect_err("refused").detail;
    assert_eq!(
        detail(&[]),
        "a signature is required, but none was found (no sigstore attachment ns/app:sha256-1.sig)"
    );
    assert_eq!(
        detail(&[signed(&stranger, "reg.io/ns/app", DIGEST)]),
        "no signature verifies with the policy's keys"
    );
    assert_eq!(
        detail(&[signed(&signer, "reg.io/ns/app", OTHER)]),
        format!("the signature is for manifest digest {OTHER}, not {DIGEST}")
    );
    assert!(
        detail(&[signed(&signer, "reg.io/elsewhere", DIGEST)])
            .contains("does not match reg.io/ns/app:v1 (signedIdentity matchRepository)")
    );
    let mut tampered = signed(&signer, "reg.io/ns/app", OTHER);
    tampered.payload = payload("reg.io/ns/app", DIGEST);
    assert_eq!(
        detail(&[tampered]),
        "no signature verifies with the policy's keys"
    );
    let unsigned = Signature {
        payload: payload("reg.io/ns/app", DIGEST),
        signature: None,
    };
    assert!(
        detail(&[unsigned.clone(), unsigned])
            .starts_with("none of the 2 signatures was accepted: a signature layer has no")
    );
    // The default identity rule needs the exact tag for a tagged image.
    let strict = sigstore(&signer, json!({"type": "matchRepoDigestOrExact"}));
    let e = evaluate(
        &strict,
        &image,
        DIGEST,
        &[signed(&signer, "reg.io/ns/app", DIGEST)],
        "t",
    )
    .expect_err("tag needed");
    assert_eq!((e.index, e.requirement), (0, "sigstoreSigned"));
    assert_eq!(
        evaluate(
            &strict,
            &image,
            DIGEST,
            &[signed(&signer, "reg.io/ns/app:v1", DIGEST)],
            "t"
        ),
        Ok(())
    );
}

#[test]
fn reject_and_accept_need_no_signatures() {
    let signer = TestSigner::generate().expect("key");
    let mut reqs = sigstore(&signer, json!({"type": "matchRepository"}));
    assert!(needs_signatures(&reqs));
    reqs.insert(0, Requirement::Reject);
    assert!(!needs_signatures(&reqs));
    let e = evaluate(&reqs, &r("a.io/x:1"), DIGEST, &[], "t").expect_err("reject");
    assert_eq!((e.index, e.requirement), (0, "reject"));
    assert!(!needs_signatures(&[Requirement::InsecureAcceptAnything]));
    assert_eq!(
        evaluate(
            &[Requirement::InsecureAcceptAnything],
            &r("a.io/x:1"),
            DIGEST,
            &[],
            "t"
        ),
        Ok(())
    );
}

#[test]
fn key_files_are_read_at_load() {
    let signer = TestSigner::generate().expect("key");
    let dir = tempfile::tempdir().expect("tmp");
    let key = dir.path().join("cosign.pub");
    std::fs::write(&key, signer.public_pem().expect("pem")).expect("write");
    let p = policy(json!({"default": [{"type": "sigstoreSigned", "keyPaths": [key]}]}));
    let Requirement::SigstoreSigned { keys, identity } = &p.default[0] else {
        panic!("sigstoreSigned")
    };
    assert_eq!(*identity, SignedIdentity::MatchRepoDigestOrExact);
    assert_eq!(keys[0].source, key.display().to_string());
    let s = signed(&signer, "a.io/x", DIGEST);
    let raw = data_encoding::BASE64
        .decode(s.signature.as_deref().unwrap_or_default().as_bytes())
        .expect("b64");
    assert!(keys[0].verifies(&s.payload, &raw));
}
