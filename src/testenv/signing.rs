//! Sigstore signatures for tests, as `cosign sign --key` writes them: an ECDSA P-256
//! key pair ([`TestSigner`], public key as PEM for a policy's `keyPath`/`keyData`),
//! the simple-signing payload ([`payload`]) and the attachment manifest
//! `sha256-<hex>.sig` pushed into a real registry ([`push_signatures`]).

use anyhow::Context as _;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};
use oci_client::Reference;

use super::registry::{TestRegistry, push_manifest, sha256_digest};
use crate::image::signature::verify::PAYLOAD_TYPE;

/// An ECDSA P-256 key pair (what `cosign generate-key-pair` makes).
pub struct TestSigner {
    key: EcdsaKeyPair,
}

impl TestSigner {
    pub fn generate() -> anyhow::Result<Self> {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING)
            .map_err(|e| anyhow::anyhow!("generating a P-256 key: {e}"))?;
        Ok(TestSigner { key })
    }

    /// The public key as a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) block.
    pub fn public_pem(&self) -> anyhow::Result<String> {
        let der = self
            .key
            .public_key()
            .as_der()
            .map_err(|e| anyhow::anyhow!("encoding the public key: {e}"))?;
        let b64 = data_encoding::BASE64.encode(der.as_ref());
        let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
        for chunk in b64.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(chunk));
            pem.push('\n');
        }
        pem.push_str("-----END PUBLIC KEY-----\n");
        Ok(pem)
    }

    /// The base64 of the public key PEM (a policy's `keyData`).
    pub fn key_data(&self) -> anyhow::Result<String> {
        Ok(data_encoding::BASE64.encode(self.public_pem()?.as_bytes()))
    }

    /// The base64 signature of `payload` (the layer annotation's value).
    pub fn sign(&self, payload: &[u8]) -> anyhow::Result<String> {
        let sig = self
            .key
            .sign(&SystemRandom::new(), payload)
            .map_err(|e| anyhow::anyhow!("signing: {e}"))?;
        Ok(data_encoding::BASE64.encode(sig.as_ref()))
    }
}

/// The simple-signing payload cosign signs: `docker_reference` (cosign writes the
/// repository without a tag) and the manifest `digest`.
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    }))
    .unwrap_or_default()
}

/// Pushes the attachment `<repo>:sha256-<hex>.sig` for the manifest `digest`: one
/// simple-signing layer per `(payload, base64 signature)`.
pub async fn push_signatures(
    registry: &TestRegistry,
    repo: &str,
    digest: &str,
    signatures: &[(Vec<u8>, String)],
) -> anyhow::Result<()> {
    let tag = format!("{}.sig", digest.replace(':', "-"));
    let reference: Reference = format!("{}/{repo}:{tag}", registry.host()).parse()?;
    let (client, auth) = registry.client();
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    let config = b"{}".to_vec();
    let config_digest = sha256_digest(&config);
    client
        .push_blob(&reference, config.clone(), &config_digest)
        .await
        .context("pushing the signature config")?;
    let mut layers = Vec::new();
    for (payload, signature) in signatures {
        let d = sha256_digest(payload);
        client
            .push_blob(&reference, payload.clone(), &d)
            .await
            .context("pushing a signature payload")?;
        layers.push(serde_json::json!({
            "mediaType": crate::image::signature::SIGNATURE_MEDIA_TYPE,
            "digest": d, "size": payload.len(),
            "annotations": {crate::image::signature::SIGNATURE_ANNOTATION: signature},
        }));
    }
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config.len()},
        "layers": layers,
    });
    push_manifest(
        &client,
        &reference,
        &manifest,
        "application/vnd.oci.image.manifest.v1+json",
    )
    .await?;
    Ok(())
}
