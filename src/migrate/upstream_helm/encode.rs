//! Writing releases as upstream stores them — Helm's classic Secret ([`encode_secret`])
//! and helm-operator-plugins' chunked Secrets ([`encode_chunked`]) — for the tests and
//! the test tooling that lay down upstream installations to take over.

use super::{CHUNK_SECRET_TYPE, CHUNKED_OWNER, INDEX_SECRET_TYPE, RELEASE_SECRET_TYPE};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A release Secret in Helm's storage format (tests and the test tooling that lays down
/// upstream installations): `release` is the release JSON (release labels in its
/// `labels`), `labels` the Secret's.
pub fn encode_secret(
    secret_name: &str,
    namespace: &str,
    release: &Value,
    labels: &BTreeMap<String, String>,
) -> Value {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(release.to_string().as_bytes());
    let compressed = gz.finish().unwrap_or_default();
    let text = data_encoding::BASE64.encode(&compressed);
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": RELEASE_SECRET_TYPE,
        "metadata": {"name": secret_name, "namespace": namespace, "labels": labels},
        "data": {"release": data_encoding::BASE64.encode(text.as_bytes())},
    })
}

/// A release in the chunked storage, as helm-operator-plugins v0.8.0 writes it.
#[derive(Clone, Debug)]
pub struct ChunkedSecrets {
    /// The index Secret (create it first; set its ownerReference to the
    /// ClusterExtension, as operator-controller does, before creating it).
    pub index: Value,
    /// The other chunks, in order; each needs [`chunk_owner_reference`] to the created
    /// index before being created.
    pub chunks: Vec<Value>,
}

/// A release in helm-operator-plugins' chunked storage (tests and the test tooling that
/// lays down upstream installations), written as `storage.chunkedSecrets.Create` does:
/// gzip (best compression) of the JSON release with its `labels`, followed by a newline
/// (Go's `json.Encoder`), split every `chunk_size` bytes; chunk Secrets are named
/// `<key>-<base32(fnv64a(chunk))>` (alphabet `a-z1-6`, no padding). `release` must hold
/// `name`, `version` and `info.status` (they become the index labels).
pub fn encode_chunked(
    key: &str,
    namespace: &str,
    release: &Value,
    chunk_size: usize,
    created_at: i64,
) -> ChunkedSecrets {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(release.to_string().as_bytes());
    let _ = gz.write_all(b"\n");
    let data = gz.finish().unwrap_or_default();
    let pieces: Vec<&[u8]> = data.chunks(chunk_size.max(1)).collect();
    let names: Vec<String> = pieces
        .iter()
        .skip(1)
        .map(|p| format!("{key}-{}", chunk_hash(p)))
        .collect();
    let b64 = |b: &[u8]| data_encoding::BASE64.encode(b);
    let version = release["version"].as_u64().unwrap_or_default().to_string();
    let index = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": INDEX_SECRET_TYPE,
        "immutable": false,
        "metadata": {"name": key, "namespace": namespace, "labels": {
            "name": release["name"].as_str().unwrap_or_default(),
            "owner": CHUNKED_OWNER,
            "status": release["info"]["status"].as_str().unwrap_or_default(),
            "version": version,
            "key": key,
            "type": "index",
            "createdAt": created_at.to_string(),
        }},
        "data": {
            "extraChunks": b64(serde_json::to_string(&names).unwrap_or_default().as_bytes()),
            "chunk": b64(pieces.first().copied().unwrap_or_default()),
        },
    });
    let chunks = pieces
        .iter()
        .skip(1)
        .zip(&names)
        .map(|(p, name)| {
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "type": CHUNK_SECRET_TYPE,
                "immutable": true,
                "metadata": {"name": name, "namespace": namespace, "labels": {
                    "owner": CHUNKED_OWNER,
                    "key": key,
                    "type": "chunk",
                    "createdAt": created_at.to_string(),
                }},
                "data": {"chunk": b64(p)},
            })
        })
        .collect();
    ChunkedSecrets { index, chunks }
}

/// The ownerReference a chunk Secret carries to its index Secret.
pub fn chunk_owner_reference(index_name: &str, index_uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "name": index_name, "uid": index_uid,
           "controller": true, "blockOwnerDeletion": false})
}

/// helm-operator-plugins' chunk name suffix: FNV-1a 64 of the chunk, big-endian, in
/// base32 with the alphabet `abcdefghijklmnopqrstuvwxyz123456`, unpadded.
pub fn chunk_hash(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz123456";
    let bytes = h.to_be_bytes();
    let mut out = String::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}
