//! The JSON-stream half of the catalog reader: splits a file of concatenated JSON objects
//! into blobs by scanning bytes (strings, escapes, nesting), without parsing twice. The
//! scanner counts nesting and refuses blobs deeper than Go's decoder reads
//! ([`super::MAX_JSON_DEPTH`]); it never recurses.

use super::{BlobFn, FbcError, Walker, io};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Where the scan of one JSON file stands.
struct Cursor {
    sc: Scan,
    /// Current line (1-based).
    line: u64,
    /// Blobs completed so far.
    index: u64,
}

impl Walker<'_> {
    pub(super) fn read_json(
        &mut self,
        path: &Path,
        mut reader: BufReader<File>,
        line: u64,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let mut cur = Cursor {
            sc: Scan::default(),
            line,
            index: 0,
        };
        loop {
            let data = reader.fill_buf().map_err(io(path))?;
            if data.is_empty() {
                break;
            }
            let n = data.len();
            self.scan_chunk(path, data, &mut cur, f)?;
            reader.consume(n);
            self.add_bytes(path, n as u64)?;
        }
        if cur.sc.in_blob {
            return Err(FbcError::Parse {
                path: path.to_path_buf(),
                message: format!(
                    "blob {} starting at line {}: unexpected end of file (unterminated object)",
                    cur.index + 1,
                    cur.sc.start_line
                ),
            });
        }
        Ok(())
    }

    /// One byte outside any blob: blank, a newline, or the `{` that starts the next one.
    #[inline]
    fn between_blobs(&mut self, path: &Path, byte: u8, cur: &mut Cursor) -> Result<(), FbcError> {
        match byte {
            b'\n' => cur.line += 1,
            b' ' | b'\t' | b'\r' => {}
            b'{' => {
                cur.sc = Scan {
                    in_blob: true,
                    depth: 1,
                    start_line: cur.line,
                    ..Scan::default()
                };
                self.buf.clear();
                self.buf.push(b'{');
            }
            other => {
                return Err(FbcError::Parse {
                    path: path.to_path_buf(),
                    message: format!(
                        "line {}: expected a JSON object (\"{{\"), found {:?}",
                        cur.line,
                        char::from(other)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Scans one buffer of the file, emitting every blob that ends in it.
    fn scan_chunk(
        &mut self,
        path: &Path,
        data: &[u8],
        cur: &mut Cursor,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let max = self.limits.max_blob_bytes as usize;
        let n = data.len();
        let mut i = 0;
        while i < n {
            if !cur.sc.in_blob {
                self.between_blobs(path, data[i], cur)?;
                i += 1;
                continue;
            }
            if cur.sc.escape {
                cur.sc.escape = false;
                if data[i] == b'\n' {
                    cur.line += 1;
                }
                self.buf.push(data[i]);
                i += 1;
                continue;
            }
            if cur.sc.in_str {
                match memchr::memchr3(b'"', b'\\', b'\n', &data[i..]) {
                    None => {
                        self.buf.extend_from_slice(&data[i..]);
                        i = n;
                    }
                    Some(k) => {
                        self.buf.extend_from_slice(&data[i..=i + k]);
                        match data[i + k] {
                            b'"' => cur.sc.in_str = false,
                            b'\\' => cur.sc.escape = true,
                            _ => cur.line += 1,
                        }
                        i += k + 1;
                    }
                }
                if self.buf.len() > max {
                    return Err(self.blob_too_large(path, cur.sc.start_line));
                }
                continue;
            }
            let b = data[i];
            i += 1;
            self.buf.push(b);
            match b {
                b'"' => cur.sc.in_str = true,
                b'{' | b'[' => {
                    cur.sc.depth += 1;
                    if cur.sc.depth > self.limits.max_json_depth {
                        return Err(self.json_too_deep(path, cur.line));
                    }
                }
                b'}' | b']' => {
                    cur.sc.depth -= 1;
                    if cur.sc.depth == 0 {
                        cur.sc.in_blob = false;
                        cur.index += 1;
                        self.emit(path, cur.sc.start_line, cur.index, cur.sc.has_space, f)?;
                    }
                }
                b'\n' => {
                    cur.line += 1;
                    cur.sc.has_space = true;
                }
                b' ' | b'\t' | b'\r' => cur.sc.has_space = true,
                _ => {}
            }
            if self.buf.len() > max {
                return Err(self.blob_too_large(path, cur.sc.start_line));
            }
        }
        Ok(())
    }
}

impl Walker<'_> {
    /// Go's `encoding/json` stops at the same depth: `maxNestingDepth` in its
    /// `scanner.go`, error "exceeded max depth".
    fn json_too_deep(&self, path: &Path, line: u64) -> FbcError {
        FbcError::Limit {
            message: format!(
                "{}:{line}: JSON nested deeper than {} levels (limit max_json_depth; Go's encoding/json refuses it with \"exceeded max depth\", so catalogd and opm cannot read it): flatten the blob",
                path.display(),
                self.limits.max_json_depth
            ),
        }
    }
}

#[derive(Default)]
struct Scan {
    in_blob: bool,
    in_str: bool,
    escape: bool,
    has_space: bool,
    depth: u32,
    start_line: u64,
}

/// Removes whitespace outside strings (input is known-valid JSON).
pub(super) fn compact_json(input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &input[i..]) {
                        Some(k) if input[i + k] == b'\\' => i += k + 2,
                        Some(k) => {
                            i += k + 1;
                            break;
                        }
                        None => {
                            i = input.len();
                            break;
                        }
                    }
                }
                out.extend_from_slice(&input[start..i.min(input.len())]);
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
}
