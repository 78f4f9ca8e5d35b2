//! The gzip copy of a stored catalog (`catalog.jsonl.gz`, [`super::store::CATALOG_GZIP_FILE`]),
//! written once while the catalog is stored so that the catalog server answers
//! `GET /all` with `Accept-Encoding: gzip` from disk instead of compressing the whole
//! catalog on every request. The compression runs on a second thread fed in batches
//! (bounded channel), so on two cores an ingest takes hardly longer and memory stays
//! at a few batches.

use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Bytes collected before a batch goes to the compressing thread.
const BATCH: usize = 256 << 10;
/// Batches in flight between the writer and the compressing thread.
const IN_FLIGHT: usize = 2;

/// A writer of `<path>`: gzip of everything passed to [`GzipTee::write`].
pub struct GzipTee {
    path: PathBuf,
    buf: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl GzipTee {
    /// Creates `path` and starts the compressing thread.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(path)?;
        let (tx, rx) = sync_channel::<Vec<u8>>(IN_FLIGHT);
        let thread = std::thread::Builder::new()
            .name("catalog-gzip".into())
            .spawn(move || {
                let out = std::io::BufWriter::with_capacity(256 << 10, file);
                let mut enc = GzEncoder::new(out, Compression::default());
                for batch in rx {
                    enc.write_all(&batch)?;
                }
                let mut out = enc.finish()?;
                out.flush()?;
                let file = out.into_inner().map_err(|e| e.into_error())?;
                Ok(file.metadata()?.len())
            })?;
        Ok(GzipTee {
            path: path.to_path_buf(),
            buf: Vec::with_capacity(BATCH),
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Adds `data` to the compressed copy.
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= BATCH {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> std::io::Result<()> {
        let batch = std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH));
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(batch).is_ok());
        if sent {
            return Ok(());
        }
        // The thread ended early: its error says why.
        self.tx = None;
        match self.join() {
            Err(e) => Err(e),
            Ok(_) => Err(std::io::Error::other("gzip writer ended early")),
        }
    }

    fn join(&mut self) -> std::io::Result<u64> {
        let path = self.path.display().to_string();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other(format!("compressing {path} failed"))),
            None => Err(std::io::Error::other(format!("{path}: already finished"))),
        }
    }

    /// Writes the rest and waits for the compressed file; returns its size.
    pub fn finish(mut self) -> std::io::Result<u64> {
        if !self.buf.is_empty() {
            self.send()?;
        }
        self.tx = None;
        self.join()
    }
}

impl Drop for GzipTee {
    fn drop(&mut self) {
        // Unfinished (the ingest failed): let the thread end, the caller removes the files.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn compressed_copy_decompresses_to_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.gz");
        let mut tee = GzipTee::create(&path).unwrap();
        let mut all = Vec::new();
        for i in 0..20_000u32 {
            let line = format!("{{\"schema\":\"olm.bundle\",\"name\":\"b{i}\"}}\n");
            tee.write(line.as_bytes()).unwrap();
            all.extend_from_slice(line.as_bytes());
        }
        let size = tee.finish().unwrap();
        assert_eq!(size, std::fs::metadata(&path).unwrap().len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, all);
    }
}
