//! The record encryption of the servers' TLS 1.3 AES-GCM suites. Everything else of TLS
//! (key exchange, signatures, hashes, HKDF, TLS 1.2 and ChaCha20 records) stays with
//! aws-lc, the one rustls provider of the project (rustls' `ring` feature stays off:
//! with two providers compiled in, rustls panics wherever no provider was installed
//! first). Only the AEAD of `TLS_AES_128_GCM_SHA256` and `TLS_AES_256_GCM_SHA384` is
//! ring's: ring carries the
//! VAES/AVX2 AES-GCM (used where the CPU has it), which aws-lc has only for AVX-512
//! CPUs. On CPUs with VAES but no AVX-512 (AMD Zen 3/4) that is 2.3x less CPU per
//! encrypted byte, and the catalog server encrypts whole catalogs (a 59 MB `/all`;
//! docs/design/benchmarks.md, `examples/bench_serve.rs`). Elsewhere both use the same
//! AES-NI code. The records are those rustls' own ring provider makes (RFC 8446 §5.2:
//! the content type after the plaintext, the record header as additional data, the
//! nonce the IV XOR the sequence number).

use std::sync::LazyLock;
use tokio_rustls::rustls;
use tokio_rustls::rustls::crypto::cipher::{
    AeadKey, InboundOpaqueMessage, InboundPlainMessage, Iv, MessageDecrypter, MessageEncrypter,
    Nonce, OutboundOpaqueMessage, OutboundPlainMessage, PrefixedPayload, Tls13AeadAlgorithm,
    UnsupportedOperationError, make_tls13_aad,
};
use tokio_rustls::rustls::{
    CipherSuite, ConnectionTrafficSecrets, ContentType, Error, ProtocolVersion,
    SupportedCipherSuite, Tls13CipherSuite,
};

/// ring's AES-GCM as the AEAD of a TLS 1.3 suite.
struct RingGcm(&'static ring::aead::Algorithm);

static AES_128_GCM: RingGcm = RingGcm(&ring::aead::AES_128_GCM);
static AES_256_GCM: RingGcm = RingGcm(&ring::aead::AES_256_GCM);

/// aws-lc's suite with ring's AEAD: the same suite, hash, HKDF and limits.
fn with_ring_aead(base: &'static Tls13CipherSuite, aead: &'static RingGcm) -> Tls13CipherSuite {
    Tls13CipherSuite {
        common: rustls::CipherSuiteCommon {
            suite: base.common.suite,
            hash_provider: base.common.hash_provider,
            confidentiality_limit: base.common.confidentiality_limit,
        },
        hkdf_provider: base.hkdf_provider,
        aead_alg: aead,
        quic: None,
    }
}

fn aws_lc_tls13(suite: SupportedCipherSuite) -> Option<&'static Tls13CipherSuite> {
    match suite {
        SupportedCipherSuite::Tls13(s) => Some(s),
        SupportedCipherSuite::Tls12(_) => None,
    }
}

static TLS13_AES_128_GCM_SHA256: LazyLock<Option<Tls13CipherSuite>> = LazyLock::new(|| {
    aws_lc_tls13(rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256)
        .map(|base| with_ring_aead(base, &AES_128_GCM))
});
static TLS13_AES_256_GCM_SHA384: LazyLock<Option<Tls13CipherSuite>> = LazyLock::new(|| {
    aws_lc_tls13(rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384)
        .map(|base| with_ring_aead(base, &AES_256_GCM))
});

/// `suite`, with ring's AES-GCM records when it is a TLS 1.3 AES-GCM suite; any other
/// suite as it is.
pub(super) fn records_by_ring(suite: SupportedCipherSuite) -> SupportedCipherSuite {
    let fast = match suite.suite() {
        CipherSuite::TLS13_AES_128_GCM_SHA256 => TLS13_AES_128_GCM_SHA256.as_ref(),
        CipherSuite::TLS13_AES_256_GCM_SHA384 => TLS13_AES_256_GCM_SHA384.as_ref(),
        _ => None,
    };
    fast.map_or(suite, SupportedCipherSuite::Tls13)
}

impl RingGcm {
    fn key(&self, key: &AeadKey) -> ring::aead::LessSafeKey {
        // rustls derives `key_len()` bytes of key for the suite, which ring accepts.
        let unbound = ring::aead::UnboundKey::new(self.0, key.as_ref())
            .expect("rustls derives a key of the AEAD's key length");
        ring::aead::LessSafeKey::new(unbound)
    }
}

impl Tls13AeadAlgorithm for RingGcm {
    fn encrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageEncrypter> {
        Box::new(Encrypter {
            key: self.key(&key),
            iv,
        })
    }

    fn decrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageDecrypter> {
        Box::new(Decrypter {
            key: self.key(&key),
            iv,
        })
    }

    fn key_len(&self) -> usize {
        self.0.key_len()
    }

    fn extract_keys(
        &self,
        key: AeadKey,
        iv: Iv,
    ) -> Result<ConnectionTrafficSecrets, UnsupportedOperationError> {
        Ok(if self.0.key_len() == 16 {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv }
        } else {
            ConnectionTrafficSecrets::Aes256Gcm { key, iv }
        })
    }

    fn fips(&self) -> bool {
        false
    }
}

struct Encrypter {
    key: ring::aead::LessSafeKey,
    iv: Iv,
}

struct Decrypter {
    key: ring::aead::LessSafeKey,
    iv: Iv,
}

impl MessageEncrypter for Encrypter {
    fn encrypt(
        &mut self,
        msg: OutboundPlainMessage<'_>,
        seq: u64,
    ) -> Result<OutboundOpaqueMessage, Error> {
        let total_len = self.encrypted_payload_len(msg.payload.len());
        let mut payload = PrefixedPayload::with_capacity(total_len);
        let nonce = ring::aead::Nonce::assume_unique_for_key(Nonce::new(&self.iv, seq).0);
        let aad = ring::aead::Aad::from(make_tls13_aad(total_len));
        payload.extend_from_chunks(&msg.payload);
        payload.extend_from_slice(&msg.typ.to_array());
        self.key
            .seal_in_place_append_tag(nonce, aad, &mut payload)
            .map_err(|_| Error::EncryptError)?;
        // Every TLS 1.3 record carries TLS 1.2 as its legacy version (RFC 8446 §5.1).
        Ok(OutboundOpaqueMessage::new(
            ContentType::ApplicationData,
            ProtocolVersion::TLSv1_2,
            payload,
        ))
    }

    fn encrypted_payload_len(&self, payload_len: usize) -> usize {
        payload_len + 1 + self.key.algorithm().tag_len()
    }
}

impl MessageDecrypter for Decrypter {
    fn decrypt<'a>(
        &mut self,
        mut msg: InboundOpaqueMessage<'a>,
        seq: u64,
    ) -> Result<InboundPlainMessage<'a>, Error> {
        let payload = &mut msg.payload;
        if payload.len() < self.key.algorithm().tag_len() {
            return Err(Error::DecryptError);
        }
        let nonce = ring::aead::Nonce::assume_unique_for_key(Nonce::new(&self.iv, seq).0);
        let aad = ring::aead::Aad::from(make_tls13_aad(payload.len()));
        let plain_len = self
            .key
            .open_in_place(nonce, aad, payload)
            .map_err(|_| Error::DecryptError)?
            .len();
        payload.truncate(plain_len);
        msg.into_tls13_unpadded_message()
    }
}

#[cfg(test)]
mod tests;
