//! Streamed response bodies: sections of a stored file read on a blocking thread in
//! chunks of [`CHUNK`] bytes, [`READ_AHEAD`] chunks ahead of the connection. The chunk
//! buffers are recycled: each chunk goes to hyper as a [`Bytes`] that owns its buffer
//! and hands it back to the reading thread once hyper has written it (and dropped it),
//! so streaming a 60 MB catalog takes a handful of allocations and no zeroing per
//! chunk; a buffer that cannot be handed back (the body is gone) is simply freed.

use crate::fbc::store::Section;
use axum::body::Body;
use bytes::Bytes;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Size of a streamed chunk.
pub const CHUNK: usize = 256 << 10;
/// Chunks read ahead of the connection (queued between the reader and hyper).
const READ_AHEAD: usize = 2;
/// Spare buffers kept for one body; more are freed.
const SPARE: usize = 8;

/// A chunk of the body: the first `len` bytes of `buf`, which goes back to the reader
/// when hyper drops the chunk.
struct Chunk {
    buf: Vec<u8>,
    len: usize,
    back: SyncSender<Vec<u8>>,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        let _ = self.back.try_send(std::mem::take(&mut self.buf));
    }
}

/// A body with `sections` of `file`, read on a blocking thread while it is sent.
pub fn body(file: Arc<File>, sections: Vec<Section>) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(READ_AHEAD);
    let (back, spare) = sync_channel::<Vec<u8>>(SPARE);
    tokio::task::spawn_blocking(move || read(&file, &sections, &tx, &back, &spare));
    let stream = futures::StreamExt::fuse(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    Body::from_stream(stream)
}

/// Reads `sections` of `file` into chunks and sends them to `tx` until done, the body
/// is dropped (the client went away) or a read fails (the error is sent).
fn read(
    file: &File,
    sections: &[Section],
    tx: &tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    back: &SyncSender<Vec<u8>>,
    spare: &Receiver<Vec<u8>>,
) {
    for &[mut off, len] in sections {
        let end = off + len;
        while off < end {
            let n = usize::try_from(end - off).map_or(CHUNK, |left| left.min(CHUNK));
            let mut buf = spare.try_recv().unwrap_or_default();
            if buf.len() < n {
                buf = vec![0u8; CHUNK];
            }
            let chunk = file.read_exact_at(&mut buf[..n], off).map(|()| {
                Bytes::from_owner(Chunk {
                    buf,
                    len: n,
                    back: back.clone(),
                })
            });
            let failed = chunk.is_err();
            if tx.blocking_send(chunk).is_err() || failed {
                return; // client went away, or read error already sent
            }
            off += n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sections_are_streamed_in_order_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3 * CHUNK + 1000).map(|i| (i % 251) as u8).collect();
        let path = dir.path().join("f");
        std::fs::write(&path, &data).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let len = |n: usize| n as u64;
        let sections = vec![
            [len(5), len(CHUNK + 3)],
            [len(2 * CHUNK), len(CHUNK + 1000)],
            [len(7), len(1)],
        ];
        let body = axum::body::to_bytes(body(file, sections), usize::MAX)
            .await
            .unwrap();
        let mut want = data[5..CHUNK + 8].to_vec();
        want.extend_from_slice(&data[2 * CHUNK..]);
        want.push(data[7]);
        assert_eq!(body.len(), want.len());
        assert!(body == want);
    }

    #[tokio::test]
    async fn read_errors_end_the_body_with_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"short").unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        assert!(
            axum::body::to_bytes(body(file, vec![[0, 1 << 20]]), usize::MAX)
                .await
                .is_err()
        );
    }

    #[test]
    fn written_chunks_hand_their_buffer_back() {
        let (back, spare) = sync_channel::<Vec<u8>>(1);
        let chunk = Bytes::from_owner(Chunk {
            buf: vec![7u8; 16],
            len: 4,
            back: back.clone(),
        });
        assert_eq!(&chunk[..], &[7u8; 4]);
        let copy = chunk.slice(1..);
        drop(chunk);
        assert!(spare.try_recv().is_err(), "still referenced");
        drop(copy);
        assert_eq!(spare.try_recv().unwrap().len(), 16);
        // The spare queue is full: a further buffer is freed, not blocked on.
        drop(Bytes::from_owner(Chunk {
            buf: vec![0u8; 16],
            len: 16,
            back: back.clone(),
        }));
        drop(Bytes::from_owner(Chunk {
            buf: vec![0u8; 16],
            len: 16,
            back,
        }));
        assert!(spare.try_recv().is_ok());
        assert!(spare.try_recv().is_err());
    }
}
