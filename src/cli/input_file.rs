//! Reading a file named on the command line (`render --config`, `rbac SOURCE`, the
//! registry credentials file): only regular files are read — a device or a FIFO reports
//! a length of 0 and may never end (`--config /dev/zero` used to read until memory ran
//! out) — and never more than the limit plus one byte, whatever the file's metadata
//! says (it can grow while it is read).

use std::io::Read;
use std::path::Path;

/// Why an input file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a regular file (devices, FIFOs and sockets are not read as input): give a file"
    )]
    NotRegularFile { path: String },
    #[error("{path} is larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("{path} is not valid UTF-8")]
    NotUtf8 { path: String },
}

/// Reads `path` (a regular file, symbolic links followed) of at most `limit` bytes.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, InputFileError> {
    let shown = || path.display().to_string();
    let io = |source| InputFileError::Io {
        path: shown(),
        source,
    };
    // Checked before opening (opening a FIFO blocks until a writer comes) and again on
    // the opened file (what is read is what was checked).
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(InputFileError::NotRegularFile { path: shown() });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(InputFileError::NotRegularFile { path: shown() });
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(InputFileError::TooLarge {
            path: shown(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_bytes`] as UTF-8 text.
pub fn read_string(path: &Path, limit: u64) -> Result<String, InputFileError> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|_| InputFileError::NotUtf8 {
        path: path.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_refused_without_reading() {
        let err = read_bytes(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(
            matches!(err, InputFileError::NotRegularFile { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("/dev/zero is not a regular file"));
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !status.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: /dev/zero above covers special files
        }
        // No writer: opening it would block forever.
        let err = read_bytes(&fifo, 10).unwrap_err();
        assert!(
            matches!(err, InputFileError::NotRegularFile { .. }),
            "{err}"
        );
    }

    #[test]
    fn files_are_read_up_to_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "12345").unwrap();
        assert_eq!(read_string(&p, 5).unwrap(), "12345");
        let err = read_string(&p, 4).unwrap_err().to_string();
        assert!(err.ends_with("is larger than 4 bytes"), "{err}");
        std::fs::write(&p, [0xff]).unwrap();
        assert!(matches!(
            read_string(&p, 4),
            Err(InputFileError::NotUtf8 { .. })
        ));
    }
}
