//! The signature policy (docs/concepts/signature-policy.md) through the real pull path:
//! a real registry, an ECDSA P-256 key pair made here, sigstore attachments
//! `sha256-<hex>.sig` written as `cosign sign --key` writes them. The puller accepts
//! what the right key signed and refuses the unsigned, the wrongly signed, a payload
//! for another digest and a `reject` scope (a more specific `insecureAcceptAnything`
//! wins over a `reject` default); the signature is checked against the reference as
//! written when a mirror serves the image. The controller (real API server) reports
//! a refused bundle and catalog as terminal `Blocked` with the policy's message, and
//! `olmv1 render --signature-policy` refuses too. `signedBy` (OpenPGP keys made here
//! with rpgp, simple-signing signatures in a registries.d lookaside directory, and a
//! lookaside served over HTTP) is held to the same rules.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::image::{DockerConfig, Extract, ImageError, ImagePuller};
use olmv1::testenv::gpg::{self, GpgSigner, write_lookaside};
use olmv1::testenv::registry::{ImageSpec, PushedImage, push_image};
use olmv1::testenv::signing::{TestSigner, payload, push_signatures};
use serde_json::json;
use support::bundles::{self, BundleSpec};
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};

/// The key of the policy, and one it does not trust.
fn signer() -> &'static TestSigner {
    static S: OnceLock<TestSigner> = OnceLock::new();
    S.get_or_init(|| TestSigner::generate().expect("key"))
}

fn stranger() -> &'static TestSigner {
    static S: OnceLock<TestSigner> = OnceLock::new();
    S.get_or_init(|| TestSigner::generate().expect("key"))
}

fn host() -> &'static str {
    support::registry().host()
}

/// The OpenPGP key of the policy's `signedBy` scopes, and one it does not trust.
fn gpg_signer() -> &'static GpgSigner {
    static S: OnceLock<GpgSigner> = OnceLock::new();
    S.get_or_init(|| GpgSigner::generate("policy <policy@example.com>").expect("key"))
}

fn gpg_stranger() -> &'static GpgSigner {
    static S: OnceLock<GpgSigner> = OnceLock::new();
    S.get_or_init(|| GpgSigner::generate("stranger <s@example.com>").expect("key"))
}

/// The registries.d directory (`lookaside.yaml`) and the `file://` lookaside
/// directory it names for `gpg/`; `gpg-none/` has no lookaside.
fn registries_d() -> &'static (PathBuf, PathBuf, tempfile::TempDir) {
    static D: OnceLock<(PathBuf, PathBuf, tempfile::TempDir)> = OnceLock::new();
    D.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp");
        let conf = dir.path().join("registries.d");
        let lookaside = dir.path().join("lookaside");
        std::fs::create_dir_all(&conf).expect("mkdir");
        std::fs::create_dir_all(&lookaside).expect("mkdir");
        let yaml = format!(
            "docker:\n  {}/gpg:\n    lookaside: file://{}\n    lookaside-staging: file:///nowhere\n",
            host(),
            lookaside.display()
        );
        std::fs::write(conf.join("lookaside.yaml"), yaml).expect("write");
        (conf, lookaside, dir)
    })
}

/// The policy file (and the key file it names), written once: `signed/` and
/// `bundles/` need the key, `rejected/` is refused, `rejected/open` is accepted (more
/// specific), `gpg/` and `gpg-none/` need the OpenPGP key (`signedBy`), everything
/// else is accepted by default.
fn policy_file() -> &'static Path {
    static P: OnceLock<(PathBuf, tempfile::TempDir)> = OnceLock::new();
    let (path, _) = P.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp");
        let key = dir.path().join("cosign.pub");
        std::fs::write(&key, signer().public_pem().expect("pem")).expect("key");
        let signed = json!([{"type": "sigstoreSigned", "keyPath": key,
            "signedIdentity": {"type": "matchRepository"}}]);
        let gpg_key = dir.path().join("pubring.gpg");
        std::fs::write(&gpg_key, gpg_signer().public_binary().expect("key")).expect("key");
        let gpg = json!([{"type": "signedBy", "keyType": "GPGKeys", "keyPath": gpg_key}]);
        let policy = json!({
            "default": [{"type": "insecureAcceptAnything"}],
            "transports": {"docker": {
                format!("{}/gpg", host()): gpg,
                format!("{}/gpg-none", host()): gpg,
                format!("{}/signed", host()): signed,
                format!("{}/bundles", host()): signed,
                format!("{}/rejected", host()): [{"type": "reject"}],
                format!("{}/rejected/open", host()): [{"type": "insecureAcceptAnything"}],
            }}
        });
        let path = dir.path().join("policy.json");
        std::fs::write(&path, policy.to_string()).expect("policy");
        (path, dir)
    });
    path
}

fn puller(cache: &Path) -> ImagePuller {
    let config = support::registry()
        .puller_config(cache)
        .with_signature_policy(policy_file())
        .expect("policy")
        .with_registries_d(&registries_d().0)
        .expect("registries.d");
    ImagePuller::new(config).expect("puller")
}

async fn push(repo_tag: &str) -> PushedImage {
    let spec = ImageSpec {
        files: BTreeMap::from([("hello.txt".to_string(), support::unique("c").into_bytes())]),
        ..Default::default()
    };
    push_image(support::registry(), repo_tag, &spec)
        .await
        .expect("push")
}

/// Signs `digest` in `repo` with `by`, naming `docker_ref` and `signed_digest`.
async fn sign(repo: &str, digest: &str, by: &TestSigner, docker_ref: &str, signed_digest: &str) {
    let p = payload(docker_ref, signed_digest);
    let sig = by.sign(&p).expect("sign");
    push_signatures(support::registry(), repo, digest, &[(p, sig)])
        .await
        .expect("push signature");
}

async fn pull(cache: &Path, image: &str) -> Result<(), ImageError> {
    puller(cache)
        .pull(image, &Extract::Whole, &DockerConfig::default())
        .await
        .map(|_| ())
}

fn refused_message(image: &str, scope: &str, requirement: &str, detail: &str) -> String {
    format!(
        "image \"{image}\" refused by signature policy {} (transports.docker \"{}/{scope}\": {requirement}): {detail}",
        policy_file().display(),
        host()
    )
}

#[tokio::test]
async fn pulls_follow_the_signature_policy() {
    let cache = tempfile::tempdir().expect("tmp");
    let repo = format!("signed/{}", support::unique("app"));
    let good = push(&format!("{repo}:good")).await;
    let name = format!("{}/{repo}", host());
    sign(&repo, &good.digest, signer(), &name, &good.digest).await;
    pull(cache.path(), &good.reference)
        .await
        .expect("signed with the policy's key");
    pull(cache.path(), &format!("{name}:good"))
        .await
        .expect("by tag too (matchRepository)");

    let unsigned = push(&format!("{repo}:unsigned")).await;
    let e = pull(cache.path(), &unsigned.reference)
        .await
        .expect_err("unsigned");
    assert!(e.is_blocked() && !e.is_retryable(), "{e:?}");
    let tag = format!(
        "{repo}:{}",
        olmv1::image::signature::signature_tag(&unsigned.digest)
    );
    let detail =
        format!("a signature is required, but none was found (no sigstore attachment {tag})");
    assert_eq!(
        e.to_string(),
        refused_message(&unsigned.reference, "signed", "sigstoreSigned", &detail)
    );

    let wrong_key = push(&format!("{repo}:wrong-key")).await;
    sign(
        &repo,
        &wrong_key.digest,
        stranger(),
        &name,
        &wrong_key.digest,
    )
    .await;
    let e = pull(cache.path(), &wrong_key.reference)
        .await
        .expect_err("wrong key");
    assert!(
        e.to_string()
            .ends_with(": no signature verifies with the policy's keys"),
        "{e}"
    );

    // A valid signature of another image copied onto this one.
    let other_digest = push(&format!("{repo}:other-digest")).await;
    sign(&repo, &other_digest.digest, signer(), &name, &good.digest).await;
    let e = pull(cache.path(), &other_digest.reference)
        .await
        .expect_err("other digest");
    let detail = format!(
        "the signature is for manifest digest {}, not {}",
        good.digest, other_digest.digest
    );
    assert!(e.to_string().ends_with(&detail), "{e}");

    // Signed for another repository.
    let elsewhere = push(&format!("{repo}:elsewhere")).await;
    sign(
        &repo,
        &elsewhere.digest,
        signer(),
        &format!("{}/other/app", host()),
        &elsewhere.digest,
    )
    .await;
    let e = pull(cache.path(), &elsewhere.reference)
        .await
        .expect_err("identity");
    assert!(e.to_string().contains("does not match"), "{e}");
}

#[tokio::test]
async fn reject_scopes_and_more_specific_scopes() {
    let cache = tempfile::tempdir().expect("tmp");
    let rejected = push(&format!("rejected/{}:v1", support::unique("x"))).await;
    // Unpacked into the cache by a puller without a policy first: the policy is
    // applied before the cache is looked at.
    let open_puller =
        ImagePuller::new(support::registry().puller_config(cache.path())).expect("puller");
    open_puller
        .pull(
            &rejected.reference,
            &Extract::Whole,
            &DockerConfig::default(),
        )
        .await
        .expect("no policy");
    let e = pull(cache.path(), &rejected.reference)
        .await
        .expect_err("reject");
    assert_eq!(
        e.to_string(),
        refused_message(
            &rejected.reference,
            "rejected",
            "reject",
            "the policy rejects every image in this scope"
        )
    );
    let open = push("rejected/open:v1").await;
    pull(cache.path(), &open.reference)
        .await
        .expect("the more specific scope accepts");
    let other = push(&format!("anything/{}:v1", support::unique("y"))).await;
    pull(cache.path(), &other.reference)
        .await
        .expect("default accepts");
}

/// A policy whose default is `reject`: only the scope that accepts lets an image in.
#[tokio::test]
async fn an_accepting_scope_wins_over_a_reject_default() {
    let dir = tempfile::tempdir().expect("tmp");
    let image = push(&format!("open/{}:v1", support::unique("z"))).await;
    let path = dir.path().join("policy.json");
    let policy = json!({"default": [{"type": "reject"}],
        "transports": {"docker": {format!("{}/open", host()): [{"type": "insecureAcceptAnything"}]}}});
    std::fs::write(&path, policy.to_string()).expect("write");
    let config = support::registry()
        .puller_config(&dir.path().join("cache"))
        .with_signature_policy(&path)
        .expect("policy");
    let puller = ImagePuller::new(config).expect("puller");
    puller
        .pull(&image.reference, &Extract::Whole, &DockerConfig::default())
        .await
        .expect("accepted by the scope");
    let other = push(&format!("closed/{}:v1", support::unique("z"))).await;
    let e = puller
        .pull(&other.reference, &Extract::Whole, &DockerConfig::default())
        .await
        .expect_err("default rejects");
    assert!(
        e.to_string()
            .contains("(default: reject): the policy rejects"),
        "{e}"
    );
}

/// The controller of this binary: the policy and the registries.d directory above.
fn controller() {
    let policy = policy_file().to_path_buf();
    let dir = registries_d().0.clone();
    support::controller_with(move |a| {
        a.signature_policy = Some(policy);
        a.registries_d = Some(dir);
    });
}

fn condition(
    conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    conditions::find(conds, t).cloned()
}

/// Through the controller: a signed bundle installs, an unsigned one is `Blocked` with
/// the policy's message, a catalog in a `reject` scope is `Blocked` too.
#[tokio::test]
async fn controller_reports_refused_images_as_blocked() {
    controller();
    let admin = support::cluster().admin().await;

    let rejected_catalog = support::unique("rejected-cat");
    let image = format!("{}/rejected/{rejected_catalog}:latest", host());
    olmv1::testenv::registry::push_catalog_image(
        support::registry(),
        &format!("rejected/{rejected_catalog}:latest"),
        &BTreeMap::from([("p/catalog.json".to_string(), b"{}".to_vec())]),
    )
    .await
    .expect("push catalog");
    create_catalog(&rejected_catalog, &image).await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let p = support::eventually(60, "rejected catalog blocked", || async {
        let c = catalogs.get(&rejected_catalog).await.ok()?;
        let p = condition(&c.status?.conditions, "Progressing")?;
        (p.reason == "Blocked").then_some(p)
    })
    .await;
    assert_eq!(p.status, "False");
    assert!(
        p.message.contains(&format!(
            "refused by signature policy {}",
            policy_file().display()
        )),
        "{}",
        p.message
    );
    assert!(
        p.message
            .contains(": reject): the policy rejects every image in this scope"),
        "{}",
        p.message
    );

    // Two bundles in `bundles/` (signature required): one signed, one not.
    let package = support::unique("sigpkg");
    let ns = support::namespace(&admin, "sig").await;
    let signed_spec = BundleSpec::new(&package, "1.0.0");
    let unsigned_spec = BundleSpec::new(&package, "2.0.0");
    let mut entries = Vec::new();
    for spec in [&signed_spec, &unsigned_spec] {
        let pushed = olmv1::testenv::demo::push_bundle(support::registry(), spec)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        entries.push((spec.clone(), pushed));
    }
    let signed_ref = &entries[0].1;
    let (name_part, digest) = signed_ref.split_once('@').expect("digest reference");
    let repo = name_part
        .strip_prefix(&format!("{}/", host()))
        .expect("repo");
    sign(repo, digest, signer(), name_part, digest).await;
    let catalog_name = support::unique("sigcat");
    let repo_tag = format!("catalogs/{catalog_name}:latest");
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(&package, &entries),
    )]);
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    create_catalog(&catalog_name, &format!("{}/{repo_tag}", host())).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let selector = json!({"selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog_name}}});
    let installed = support::unique("signed");
    grant_installer(&ns, &installed, &[bundles::render(&signed_spec, &ns)]).await;
    let mut catalog = selector.clone();
    catalog["version"] = json!("1.0.0");
    let ext = extension(&installed, &ns, &package, catalog);
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    wait_installed(&api, &installed, "1.0.0").await;

    let blocked = support::unique("unsigned");
    grant_installer(&ns, &blocked, &[bundles::render(&unsigned_spec, &ns)]).await;
    let mut catalog = selector;
    catalog["version"] = json!("2.0.0");
    let ext = extension(&blocked, &ns, &package, catalog);
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    let p = support::eventually(120, "unsigned bundle blocked", || async {
        let e = api.get(&blocked).await.ok()?;
        let p = support::extensions::condition(&e, "Progressing")?;
        (p.reason == "Blocked").then_some(p)
    })
    .await;
    assert_eq!(p.status, "False");
    let expected = refused_message(
        &entries[1].1,
        "bundles",
        "sigstoreSigned",
        "a signature is required, but none was found",
    );
    assert!(
        p.message.contains(&expected),
        "{}\nexpected: {expected}",
        p.message
    );
}

/// `olmv1 render <image> --signature-policy …` refuses an unsigned bundle image; a
/// policy that does not parse is named with its problem.
#[tokio::test]
async fn cli_applies_the_signature_policy() {
    let unsigned = push(&format!("signed/{}:v1", support::unique("cli"))).await;
    let cache = tempfile::tempdir().expect("tmp");
    let run = |policy: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
            .args([
                "render",
                &unsigned.reference,
                "-n",
                "default",
                "--insecure-registry",
                host(),
            ])
            .arg("--cache-dir")
            .arg(cache.path())
            .arg("--signature-policy")
            .arg(policy)
            .output()
            .expect("olmv1")
    };
    let out = run(policy_file());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&refused_message(
            &unsigned.reference,
            "signed",
            "sigstoreSigned",
            "a signature is required"
        )),
        "{stderr}"
    );
    let bad = cache.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"default": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k"}]}"#,
    )
    .expect("write");
    let out = run(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "signature policy {}: default[0]: signedBy",
            bad.display()
        )),
        "{stderr}"
    );
}

/// Starts `olmv1 controller` with `flag path` (no cluster behind its kubeconfig, a
/// cache under `dir`); it must stop at start: its stderr.
fn controller_start_refused(flag: &str, path: &std::path::Path, dir: &std::path::Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(["controller", "--kubeconfig", "/nonexistent/kubeconfig"])
        .arg(flag)
        .arg(path)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .output()
        .expect("olmv1");
    assert!(
        !out.status.success(),
        "started with {flag} {}",
        path.display()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A policy that does not parse stops `olmv1 controller` at start, naming the file.
#[test]
fn controller_refuses_to_start_with_a_broken_policy() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("policy.json");
    std::fs::write(
        &bad,
        r#"{"default": [{"type": "sigstoreSigned", "fulcio": {}}]}"#,
    )
    .expect("write");
    let stderr = controller_start_refused("--signature-policy", &bad, dir.path());
    assert!(
        stderr.contains(&format!(
            "signature policy {}: default[0]: sigstoreSigned: \"fulcio\"",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("kubeconfig"),
        "checked before connecting: {stderr}"
    );
}

/// Through a mirror (registries.conf): the image and its signature come from the
/// mirror, the identity checked is the reference as written (the origin's).
#[tokio::test]
async fn signatures_name_the_reference_as_written_when_a_mirror_serves_it() {
    const ORIGIN: &str = "origin.olmv1-signature-test.invalid";
    let dir = tempfile::tempdir().expect("tmp");
    let repo = format!("signed/{}", support::unique("mirrored"));
    let image = push(&format!("{repo}:v1")).await;
    let path = dir.path().join("policy.json");
    let key = dir.path().join("cosign.pub");
    std::fs::write(&key, signer().public_pem().expect("pem")).expect("key");
    let policy = json!({"default": [{"type": "reject"}],
        "transports": {"docker": {format!("{ORIGIN}/signed"): [{"type": "sigstoreSigned",
            "keyPath": key, "signedIdentity": {"type": "matchRepository"}}]}}});
    std::fs::write(&path, policy.to_string()).expect("write");
    let mut config = support::registry()
        .puller_config(&dir.path().join("cache"))
        .with_signature_policy(&path)
        .expect("policy");
    let conf = format!(
        "[[registry]]\nlocation = \"{ORIGIN}\"\n[[registry.mirror]]\nlocation = \"{}\"\ninsecure = true\n",
        host()
    );
    config.registries =
        olmv1::image::registries::RegistriesConf::parse("registries.conf", &conf).expect("conf");
    let puller = ImagePuller::new(config).expect("puller");
    let written = format!("{ORIGIN}/{repo}@{}", image.digest);
    let secrets = DockerConfig::default();
    let pull = || puller.pull(&written, &Extract::Whole, &secrets);

    // Signed naming the mirror's repository: not the image asked for.
    sign(
        &repo,
        &image.digest,
        signer(),
        &format!("{}/{repo}", host()),
        &image.digest,
    )
    .await;
    let e = pull().await.expect_err("identity of the mirror");
    assert!(
        e.to_string().contains(&format!("does not match {written}")),
        "{e}"
    );
    // Signed naming the origin: accepted, fetched from the mirror.
    sign(
        &repo,
        &image.digest,
        signer(),
        &format!("{ORIGIN}/{repo}"),
        &image.digest,
    )
    .await;
    let pulled = pull().await.expect("signed for the origin");
    assert_eq!(pulled.reference, written);
}

/// An accepted image pulled again by digest costs no registry request: the image cache
/// and the accepted (reference, digest) pairs answer.
#[tokio::test]
async fn an_accepted_image_is_not_verified_again() {
    let cache = tempfile::tempdir().expect("tmp");
    let repo = format!("signed/{}", support::unique("cached"));
    let image = push(&format!("{repo}:v1")).await;
    sign(
        &repo,
        &image.digest,
        signer(),
        &format!("{}/{repo}", host()),
        &image.digest,
    )
    .await;
    let puller = puller(cache.path());
    let secrets = DockerConfig::default();
    puller
        .pull(&image.reference, &Extract::Whole, &secrets)
        .await
        .expect("first pull");
    let first = puller.stats();
    // The image manifest and the signature manifest (then blobs).
    assert_eq!(first.manifest_requests, 2, "{first:?}");
    let again = puller
        .pull(&image.reference, &Extract::Whole, &secrets)
        .await
        .expect("second pull");
    assert!(again.from_cache);
    let second = puller.stats();
    assert_eq!(
        second.manifest_requests, first.manifest_requests,
        "{second:?}"
    );
    assert_eq!(
        second.blobs_downloaded, first.blobs_downloaded,
        "{second:?}"
    );
}

/// Signs `digest` (files `signature-1`, … under the lookaside of `repo`) with each
/// `(key, docker_reference, signed_digest)`.
fn gpg_sign(lookaside: &Path, repo: &str, digest: &str, sigs: &[(&GpgSigner, &str, &str)]) {
    let blobs: Vec<Vec<u8>> = sigs
        .iter()
        .map(|(by, docker_ref, d)| by.sign(&gpg::payload(docker_ref, d)).expect("sign"))
        .collect();
    write_lookaside(lookaside, repo, digest, &blobs).expect("lookaside");
}

/// `signedBy`: the right key passes (by digest and by tag), a second signature that
/// verifies after one that does not passes; unsigned, wrong key, another digest,
/// another identity and a scope without a lookaside are refused.
#[tokio::test]
async fn pulls_follow_signed_by_with_lookaside_signatures() {
    let cache = tempfile::tempdir().expect("tmp");
    let lookaside = &registries_d().1;
    let repo = format!("gpg/{}", support::unique("app"));
    let name = format!("{}/{repo}", host());
    let good = push(&format!("{repo}:good")).await;
    let tagged = format!("{name}:good");
    gpg_sign(
        lookaside,
        &repo,
        &good.digest,
        &[(gpg_signer(), &tagged, &good.digest)],
    );
    pull(cache.path(), &good.reference)
        .await
        .expect("by digest: the repository matches");
    pull(cache.path(), &tagged).await.expect("by tag: exact");

    let refused = |image: &str, detail: &str| refused_message(image, "gpg", "signedBy", detail);
    let url = |digest: &str| {
        format!(
            "file://{}/{repo}@{}",
            lookaside.display(),
            digest.replacen(':', "=", 1)
        )
    };
    let unsigned = push(&format!("{repo}:unsigned")).await;
    let e = pull(cache.path(), &unsigned.reference)
        .await
        .expect_err("unsigned");
    assert!(e.is_blocked() && !e.is_retryable(), "{e:?}");
    let detail = format!(
        "a signature is required, but none was found (no {}/signature-1)",
        url(&unsigned.digest)
    );
    assert_eq!(e.to_string(), refused(&unsigned.reference, &detail));

    let wrong = push(&format!("{repo}:wrong")).await;
    let wrong_tag = format!("{name}:wrong");
    gpg_sign(
        lookaside,
        &repo,
        &wrong.digest,
        &[(gpg_stranger(), &wrong_tag, &wrong.digest)],
    );
    let e = pull(cache.path(), &wrong.reference)
        .await
        .expect_err("wrong key");
    let detail = format!(
        "no signature in lookaside {} verifies with the policy's keys",
        url(&wrong.digest)
    );
    assert_eq!(e.to_string(), refused(&wrong.reference, &detail));

    let other = push(&format!("{repo}:other")).await;
    gpg_sign(
        lookaside,
        &repo,
        &other.digest,
        &[(gpg_signer(), &tagged, &good.digest)],
    );
    let e = pull(cache.path(), &other.reference)
        .await
        .expect_err("another digest");
    let detail = format!(
        "the signature is for manifest digest {}, not {}",
        good.digest, other.digest
    );
    assert_eq!(e.to_string(), refused(&other.reference, &detail));

    let mismatch = push(&format!("{repo}:mismatch")).await;
    let elsewhere = format!("{}/gpg/elsewhere:v1", host());
    gpg_sign(
        lookaside,
        &repo,
        &mismatch.digest,
        &[(gpg_signer(), &elsewhere, &mismatch.digest)],
    );
    let e = pull(cache.path(), &mismatch.reference)
        .await
        .expect_err("identity");
    assert!(
        e.to_string().contains(&format!(
            "signedBy): the signature's identity \"{elsewhere}\" does not match"
        )),
        "{e}"
    );

    let second = push(&format!("{repo}:second")).await;
    let second_tag = format!("{name}:second");
    gpg_sign(
        lookaside,
        &repo,
        &second.digest,
        &[
            (gpg_stranger(), &second_tag, &second.digest),
            (gpg_signer(), &second_tag, &second.digest),
        ],
    );
    pull(cache.path(), &second.reference)
        .await
        .expect("the second signature verifies");

    let none = push(&format!("gpg-none/{}:v1", support::unique("x"))).await;
    let e = pull(cache.path(), &none.reference)
        .await
        .expect_err("no lookaside");
    let name = none.reference.split('@').next().unwrap_or_default();
    assert!(
        e.to_string().ends_with(&format!(
            "signedBy): no lookaside configured in registries.d ({}) for {name}",
            registries_d().0.display()
        )),
        "{e}"
    );
}

/// A lookaside served over HTTP (`http://`): found signatures verify, a 404 ends the
/// list (an unsigned image is refused).
#[tokio::test]
async fn signed_by_reads_an_http_lookaside() {
    let served = tempfile::tempdir().expect("tmp");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let app = axum::Router::new()
        .nest_service("/sigs", tower_http::services::ServeDir::new(served.path()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let conf = tempfile::tempdir().expect("tmp");
    std::fs::write(
        conf.path().join("default.yaml"),
        format!("default-docker:\n  sigstore: http://127.0.0.1:{port}/sigs/\n"),
    )
    .expect("write");
    let cache = tempfile::tempdir().expect("tmp");
    let config = support::registry()
        .puller_config(cache.path())
        .with_signature_policy(policy_file())
        .expect("policy")
        .with_registries_d(conf.path())
        .expect("registries.d");
    let puller = ImagePuller::new(config).expect("puller");
    let repo = format!("gpg/{}", support::unique("http"));
    let good = push(&format!("{repo}:v1")).await;
    let tagged = format!("{}/{repo}:v1", host());
    gpg_sign(
        served.path(),
        &repo,
        &good.digest,
        &[(gpg_signer(), &tagged, &good.digest)],
    );
    puller
        .pull(&tagged, &Extract::Whole, &DockerConfig::default())
        .await
        .expect("signed over HTTP");
    let unsigned = push(&format!("{repo}:v2")).await;
    let e = puller
        .pull(
            &unsigned.reference,
            &Extract::Whole,
            &DockerConfig::default(),
        )
        .await
        .expect_err("unsigned");
    assert!(
        e.to_string().ends_with(&format!(
            "signedBy): a signature is required, but none was found (no http://127.0.0.1:{port}/sigs/{repo}@{}/signature-1)",
            unsigned.digest.replacen(':', "=", 1)
        )),
        "{e}"
    );
}

/// Through the controller: a catalog signed into the lookaside serves, an unsigned
/// one is `Blocked` with the `signedBy` message.
#[tokio::test]
async fn controller_reports_unsigned_gpg_images_as_blocked() {
    controller();
    let admin = support::cluster().admin().await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin);
    let fbc = json!({"schema": "olm.package", "name": "p"}).to_string();
    let files = BTreeMap::from([("p/catalog.json".to_string(), fbc.into_bytes())]);
    let signed = support::unique("gpg-signed");
    let repo = format!("gpg/{signed}");
    let pushed = olmv1::testenv::registry::push_catalog_image(
        support::registry(),
        &format!("{repo}:latest"),
        &files,
    )
    .await
    .expect("push catalog");
    let image = format!("{}/{repo}:latest", host());
    gpg_sign(
        &registries_d().1,
        &repo,
        &pushed.digest,
        &[(gpg_signer(), &image, &pushed.digest)],
    );
    create_catalog(&signed, &image).await;

    let unsigned = support::unique("gpg-unsigned");
    let unsigned_image = format!("{}/gpg/{unsigned}:latest", host());
    olmv1::testenv::registry::push_catalog_image(
        support::registry(),
        &format!("gpg/{unsigned}:latest"),
        &files,
    )
    .await
    .expect("push catalog");
    create_catalog(&unsigned, &unsigned_image).await;
    let p = support::eventually(60, "unsigned catalog blocked", || async {
        let c = catalogs.get(&unsigned).await.ok()?;
        let p = condition(&c.status?.conditions, "Progressing")?;
        (p.reason == "Blocked").then_some(p)
    })
    .await;
    assert_eq!(p.status, "False");
    assert!(
        p.message.contains(&format!(
            "(transports.docker \"{}/gpg\": signedBy): a signature is required, but none was found",
            host()
        )),
        "{}",
        p.message
    );
    let c = support::eventually(60, "signed catalog progressed", || async {
        let c = catalogs.get(&signed).await.ok()?;
        let p = condition(&c.status.clone()?.conditions, "Progressing")?;
        (p.reason != "Retrying").then_some(c)
    })
    .await;
    let conds = c.status.map(|s| s.conditions).unwrap_or_default();
    let serving = condition(&conds, "Serving");
    assert_eq!(
        serving.as_ref().map(|s| s.status.as_str()),
        Some("True"),
        "{conds:?}"
    );
}

/// A registries.d scope defined in two files stops `olmv1 controller` at start, naming
/// both files.
#[test]
fn controller_refuses_to_start_with_a_broken_registries_d() {
    let dir = tempfile::tempdir().expect("tmp");
    let conf = dir.path().join("registries.d");
    std::fs::create_dir_all(&conf).expect("mkdir");
    for f in ["a.yaml", "b.yaml"] {
        std::fs::write(
            conf.join(f),
            "docker:\n  quay.io/acme:\n    lookaside: https://sigs.example.com\n",
        )
        .expect("write");
    }
    let stderr = controller_start_refused("--registries-d", &conf, dir.path());
    assert!(
        stderr.contains(&format!(
            "registries.d {}: docker \"quay.io/acme\" is defined both in {} and {}",
            conf.display(),
            conf.join("a.yaml").display(),
            conf.join("b.yaml").display()
        )),
        "{stderr}"
    );
}

/// `olmv1 render --signature-policy … --registries-d …` reads the lookaside named there:
/// an unsigned image in a `signedBy` scope is refused with the lookaside's location.
#[tokio::test]
async fn cli_reads_the_registries_d_it_is_given() {
    let repo = format!("gpg/{}", support::unique("cli"));
    let unsigned = push(&format!("{repo}:v1")).await;
    let cache = tempfile::tempdir().expect("tmp");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args([
            "render",
            &unsigned.reference,
            "-n",
            "default",
            "--insecure-registry",
            host(),
        ])
        .arg("--cache-dir")
        .arg(cache.path())
        .arg("--signature-policy")
        .arg(policy_file())
        .arg("--registries-d")
        .arg(&registries_d().0)
        .output()
        .expect("olmv1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let detail = format!(
        "a signature is required, but none was found (no file://{}/{repo}@{}/signature-1)",
        registries_d().1.display(),
        unsigned.digest.replacen(':', "=", 1)
    );
    assert!(
        stderr.contains(&refused_message(
            &unsigned.reference,
            "gpg",
            "signedBy",
            &detail
        )),
        "{stderr}"
    );
}
