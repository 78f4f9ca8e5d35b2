//! ring's records against aws-lc's: each side opens what the other seals (AES-256-GCM;
//! a key of another length cannot be made outside rustls, so AES-128-GCM is checked
//! through whole connections in `server::conn` tests), and a changed byte or a wrong
//! sequence number is refused.

use super::records_by_ring;
use tokio_rustls::rustls::crypto::aws_lc_rs::cipher_suite;
use tokio_rustls::rustls::crypto::cipher::{
    AeadKey, InboundOpaqueMessage, Iv, MessageDecrypter, MessageEncrypter, OutboundChunks,
    OutboundPlainMessage,
};
use tokio_rustls::rustls::{ContentType, ProtocolVersion, SupportedCipherSuite, Tls13CipherSuite};

fn tls13(s: SupportedCipherSuite) -> &'static Tls13CipherSuite {
    match s {
        SupportedCipherSuite::Tls13(s) => s,
        SupportedCipherSuite::Tls12(_) => panic!("a TLS 1.3 suite"),
    }
}

fn key() -> AeadKey {
    let mut k = [0u8; 32];
    for (i, b) in k.iter_mut().enumerate() {
        *b = i as u8 * 7 + 1;
    }
    AeadKey::from(k)
}

fn iv() -> Iv {
    Iv::new([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12])
}

fn seal(enc: &mut dyn MessageEncrypter, plain: &[u8], seq: u64) -> Vec<u8> {
    let msg = OutboundPlainMessage {
        typ: ContentType::ApplicationData,
        version: ProtocolVersion::TLSv1_2,
        payload: OutboundChunks::Single(plain),
    };
    enc.encrypt(msg, seq)
        .expect("sealed")
        .payload
        .as_ref()
        .to_vec()
}

fn open(dec: &mut dyn MessageDecrypter, mut sealed: Vec<u8>, seq: u64) -> Option<Vec<u8>> {
    let msg = InboundOpaqueMessage::new(
        ContentType::ApplicationData,
        ProtocolVersion::TLSv1_2,
        &mut sealed,
    );
    dec.decrypt(msg, seq).ok().map(|m| m.payload.to_vec())
}

#[test]
fn ring_and_aws_lc_records_are_the_same() {
    let plain: Vec<u8> = (0..16_000u32).map(|i| (i % 251) as u8).collect();
    for aws in [
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
    ] {
        let fast = records_by_ring(aws);
        assert_eq!(fast.suite(), aws.suite());
        let (aws, fast) = (tls13(aws), tls13(fast));
        assert!(
            !std::ptr::eq(aws, fast),
            "{:?}: ring's records",
            aws.common.suite
        );
        assert_eq!(fast.aead_alg.key_len(), aws.aead_alg.key_len());
    }
    let aws = tls13(cipher_suite::TLS13_AES_256_GCM_SHA384);
    let fast = tls13(records_by_ring(cipher_suite::TLS13_AES_256_GCM_SHA384));
    for seq in [0u64, 1, 70_000] {
        let sealed = seal(&mut *fast.aead_alg.encrypter(key(), iv()), &plain, seq);
        assert_eq!(
            sealed,
            seal(&mut *aws.aead_alg.encrypter(key(), iv()), &plain, seq)
        );
        let opened = open(
            &mut *aws.aead_alg.decrypter(key(), iv()),
            sealed.clone(),
            seq,
        );
        assert_eq!(opened.as_deref(), Some(&plain[..]));
        let opened = open(
            &mut *fast.aead_alg.decrypter(key(), iv()),
            sealed.clone(),
            seq,
        );
        assert_eq!(opened.as_deref(), Some(&plain[..]));
        assert_eq!(
            open(
                &mut *fast.aead_alg.decrypter(key(), iv()),
                sealed.clone(),
                seq + 1
            ),
            None
        );
        let mut changed = sealed;
        changed[100] ^= 1;
        assert_eq!(
            open(&mut *fast.aead_alg.decrypter(key(), iv()), changed, seq),
            None
        );
    }
}

#[test]
fn other_suites_stay_as_they_are() {
    for s in [
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ] {
        let same = records_by_ring(s);
        assert_eq!(same.suite(), s.suite());
        match (s, same) {
            (SupportedCipherSuite::Tls13(a), SupportedCipherSuite::Tls13(b)) => {
                assert!(std::ptr::eq(a, b))
            }
            (SupportedCipherSuite::Tls12(a), SupportedCipherSuite::Tls12(b)) => {
                assert!(std::ptr::eq(a, b))
            }
            _ => panic!("{:?} changed its version", s.suite()),
        }
    }
}
