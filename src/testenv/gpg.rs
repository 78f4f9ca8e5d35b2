//! OpenPGP "simple signing" signatures for tests, as `skopeo copy --sign-by` and
//! `podman image sign` write them (containers-signature(5)): an Ed25519 key made with
//! rpgp ([`GpgSigner`], public keyring binary or armored for a policy's `signedBy`),
//! the payload ([`payload`]), the signed (ZLIB-compressed, as gpg writes it) message,
//! and the lookaside layout `<dir>/<repo>@sha256=<hex>/signature-<n>`
//! ([`write_lookaside`]).

use std::path::Path;

use anyhow::Context as _;
use pgp::composed::{
    ArmorOptions, KeyType, MessageBuilder, SecretKeyParamsBuilder, SignedPublicKey, SignedSecretKey,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::ser::Serialize as _;
use pgp::types::{CompressionAlgorithm, Password};

use crate::image::signature::gpg::PAYLOAD_TYPE;

/// An OpenPGP key that signs with its primary key (what `gpg --quick-gen-key` makes
/// by default: a certify-and-sign primary key).
pub struct GpgSigner {
    key: SignedSecretKey,
}

impl GpgSigner {
    pub fn generate(user_id: &str) -> anyhow::Result<Self> {
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .primary_user_id(user_id.into());
        let params = params
            .build()
            .map_err(|e| anyhow::anyhow!("OpenPGP key parameters: {e}"))?;
        let key = params
            .generate(rand08::thread_rng())
            .context("generating an OpenPGP key")?;
        Ok(GpgSigner { key })
    }

    /// The public key (transferable public key, binary: `gpg --export`).
    pub fn public_binary(&self) -> anyhow::Result<Vec<u8>> {
        Ok(SignedPublicKey::from(self.key.clone()).to_bytes()?)
    }

    /// The public key ASCII-armored (`gpg --export --armor`).
    pub fn public_armored(&self) -> anyhow::Result<String> {
        Ok(SignedPublicKey::from(self.key.clone()).to_armored_string(ArmorOptions::default())?)
    }

    /// The signature file of `payload`: a compressed, one-pass signed message.
    pub fn sign(&self, payload: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut builder = MessageBuilder::from_bytes("", payload.to_vec());
        builder.compression(CompressionAlgorithm::ZLIB).sign(
            &self.key.primary_key,
            Password::empty(),
            HashAlgorithm::Sha256,
        );
        builder
            .to_vec(rand08::thread_rng())
            .context("signing the payload")
    }
}

/// The simple-signing payload `skopeo copy --sign-by` signs: the reference signed
/// (`docker_reference`, with a tag or digest) and the manifest `digest`.
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": {"creator": "olmv1 tests", "timestamp": 1_700_000_000},
    }))
    .unwrap_or_default()
}

/// Writes `signatures` as `signature-1`, `signature-2`, … of `repo`'s (the path
/// without the registry) manifest `digest` under the lookaside directory `dir`.
pub fn write_lookaside(
    dir: &Path,
    repo: &str,
    digest: &str,
    signatures: &[Vec<u8>],
) -> anyhow::Result<()> {
    let at = dir.join(format!("{repo}@{}", digest.replacen(':', "=", 1)));
    std::fs::create_dir_all(&at)?;
    for (i, s) in signatures.iter().enumerate() {
        std::fs::write(at.join(format!("signature-{}", i + 1)), s)?;
    }
    Ok(())
}
