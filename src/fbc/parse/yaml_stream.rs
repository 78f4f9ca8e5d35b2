//! The YAML half of the catalog reader: splits a file into documents line by line
//! (bounded line and document sizes) and parses each with the bounded YAML reader
//! ([`crate::yaml`]: alias expansion refused before anything is materialised).

use super::{BlobFn, FbcError, Walker, io};
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

impl Walker<'_> {
    pub(super) fn read_yaml(
        &mut self,
        path: &Path,
        reader: BufReader<File>,
        first_line: u64,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let max = self.limits.max_blob_bytes as usize;
        let mut reader = reader.take(u64::MAX);
        let mut doc = String::new();
        let mut doc_line = first_line;
        let mut line_no = first_line - 1;
        let mut index = 0u64;
        let mut raw = Vec::new();
        loop {
            raw.clear();
            // Bound the line length too: a single giant line must not be buffered whole.
            reader.set_limit(max as u64 + 2);
            let n = reader.read_until(b'\n', &mut raw).map_err(io(path))?;
            self.add_bytes(path, n as u64)?;
            let eof = n == 0;
            if !eof {
                line_no += 1;
                if raw.last() != Some(&b'\n') && n > max {
                    return Err(self.blob_too_large(path, doc_line));
                }
            }
            let text = if eof {
                ""
            } else {
                std::str::from_utf8(&raw).map_err(|e| FbcError::Parse {
                    path: path.to_path_buf(),
                    message: format!("line {line_no}: invalid UTF-8: {e}"),
                })?
            };
            let trimmed = text.trim_end_matches(['\n', '\r']);
            let separator =
                trimmed == "---" || trimmed.starts_with("--- ") || trimmed.starts_with("---\t");
            let end_marker = trimmed == "...";
            if eof || separator || end_marker {
                if !doc.trim().is_empty() {
                    self.emit_yaml(path, &doc, doc_line, &mut index, f)?;
                }
                doc.clear();
                if eof {
                    return Ok(());
                }
                let rest = if separator { trimmed[3..].trim() } else { "" };
                if !rest.is_empty() {
                    // Keep the rest of the separator line (`--- {...}`), on the same line number.
                    doc_line = line_no;
                    doc.push_str(rest);
                    doc.push('\n');
                }
                continue;
            }
            if doc.is_empty() {
                if trimmed.trim().is_empty() {
                    continue;
                }
                doc_line = line_no;
            }
            doc.push_str(text);
            if doc.len() > max {
                return Err(self.blob_too_large(path, doc_line));
            }
        }
    }

    fn emit_yaml(
        &mut self,
        path: &Path,
        doc: &str,
        doc_line: u64,
        index: &mut u64,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let values = crate::yaml::from_multiple::<Value>(doc, Default::default()).map_err(|e| {
            let at = e.line().map(|l| doc_line + l.saturating_sub(1));
            FbcError::Parse {
                path: path.to_path_buf(),
                message: match at {
                    Some(at) => format!(
                        "document {} starting at line {doc_line}: line {at}: {e}",
                        *index + 1
                    ),
                    None => format!("document {} starting at line {doc_line}: {e}", *index + 1),
                },
            }
        })?;
        for value in values.into_iter().filter(|v| !v.is_null()) {
            *index += 1;
            if !value.is_object() {
                return Err(FbcError::Parse {
                    path: path.to_path_buf(),
                    message: format!(
                        "document {} starting at line {doc_line}: not a mapping",
                        *index
                    ),
                });
            }
            self.buf.clear();
            serde_json::to_writer(&mut self.buf, &value).map_err(|e| FbcError::Parse {
                path: path.to_path_buf(),
                message: format!("document {} starting at line {doc_line}: {e}", *index),
            })?;
            drop(value);
            self.emit(path, doc_line, *index, false, f)?;
        }
        Ok(())
    }
}
