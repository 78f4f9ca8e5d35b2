//! The gzip copy of a stored catalog (`catalog.jsonl.gz`, [`super::store::CATALOG_GZIP_FILE`]),
//! so that the catalog server answers `GET /all` with `Accept-Encoding: gzip` from disk
//! instead of compressing the whole catalog on every request. It only speeds up answers,
//! so it is written *after* the catalog is stored and Serving (docs/concepts/catalogs.md
//! §9.2, "Serving first, extras after"), by [`write_gzip_copy`]: streamed from
//! `catalog.jsonl` into a temporary file renamed into place when complete, so the server
//! sees no copy or a whole one; until then `/all` answers uncompressed. A cancelled
//! copy (newer content was stored) leaves nothing behind.

use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::{Read, Write};
use std::path::Path;

/// Bytes read between two looks at the cancellation.
const CHUNK: usize = 256 << 10;

/// Writes `<dir>/catalog.jsonl.gz` from `<dir>/catalog.jsonl`; `cancelled` is asked
/// between chunks. Returns the copy's size, or `None` when cancelled (or `dir` is gone:
/// the version was replaced and removed).
pub fn write_gzip_copy(dir: &Path, cancelled: &dyn Fn() -> bool) -> std::io::Result<Option<u64>> {
    let source = dir.join(super::store::CATALOG_FILE);
    let target = dir.join(super::store::CATALOG_GZIP_FILE);
    let partial = dir.join(format!("{}.partial", super::store::CATALOG_GZIP_FILE));
    let mut input = match std::fs::File::open(&source) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let written: std::io::Result<Option<u64>> = (|| {
        let out = std::io::BufWriter::with_capacity(CHUNK, std::fs::File::create(&partial)?);
        let mut enc = GzEncoder::new(out, Compression::default());
        let mut buf = vec![0u8; CHUNK];
        loop {
            if cancelled() {
                return Ok(None);
            }
            let n = input.read(&mut buf)?;
            if n == 0 {
                break;
            }
            enc.write_all(&buf[..n])?;
        }
        let mut out = enc.finish()?;
        out.flush()?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        let size = file.metadata()?.len();
        std::fs::rename(&partial, &target)?;
        Ok(Some(size))
    })();
    if !matches!(written, Ok(Some(_))) {
        let _ = std::fs::remove_file(&partial);
    }
    match written {
        // Removed while being written: that version is no longer served.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::store::{CATALOG_FILE, CATALOG_GZIP_FILE};

    fn catalog(dir: &Path) -> Vec<u8> {
        let mut all = Vec::new();
        for i in 0..20_000u32 {
            let line = format!("{{\"schema\":\"olm.bundle\",\"name\":\"b{i}\"}}\n");
            all.extend_from_slice(line.as_bytes());
        }
        std::fs::write(dir.join(CATALOG_FILE), &all).unwrap();
        all
    }

    #[test]
    fn compressed_copy_decompresses_to_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let all = catalog(dir.path());
        let size = write_gzip_copy(dir.path(), &|| false).unwrap();
        let path = dir.path().join(CATALOG_GZIP_FILE);
        assert_eq!(size, Some(std::fs::metadata(&path).unwrap().len()));
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, all);
    }

    #[test]
    fn a_cancelled_or_orphaned_copy_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        catalog(dir.path());
        assert_eq!(write_gzip_copy(dir.path(), &|| true).unwrap(), None);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [CATALOG_FILE], "no copy, no partial file");
        let gone = dir.path().join("gone");
        assert_eq!(write_gzip_copy(&gone, &|| false).unwrap(), None);
    }
}
