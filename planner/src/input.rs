//! Reading input files with bounds: every file topoplan reads (topologies, profiles, plans,
//! schedules, logs, measurements) goes through [`read_bytes`] or [`read_text`].
//!
//! Only regular files are read (and `/dev/null`, as empty), and only up to [`MAX_INPUT_BYTES`]:
//! a FIFO would block forever (opening one waits for a writer) and `/dev/zero` never ends, so
//! neither is opened at all.
//! Standard input, where a command accepts `-`, is read through [`read_stdin`] under the same cap.

use std::io::Read;
use std::path::Path;

/// The largest input file read, in bytes. Topology dumps are kilobytes, NCCL logs of large jobs
/// tens of megabytes; anything larger is not one of our inputs.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// Why a file could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a regular file ({kind}); topoplan reads regular files only (copy it to a file first)")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path}: {size} bytes is larger than the {cap}-byte limit on input files")]
    TooLarge { path: String, size: u64, cap: u64 },
    #[error("{path}:{line}:{col}: the file is not valid UTF-8 text")]
    NotUtf8 { path: String, line: u32, col: u32 },
}

impl ReadError {
    /// The file the error is about, as it was named.
    pub fn path(&self) -> &str {
        match self {
            ReadError::Io { path, .. }
            | ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
            | ReadError::NotUtf8 { path, .. } => path,
        }
    }

    /// The message without the file's name, for errors that name the file themselves.
    pub fn reason(&self) -> String {
        let full = self.to_string();
        match full.strip_prefix(self.path()) {
            Some(rest) => rest.trim_start_matches(':').trim_start().to_string(),
            None => full,
        }
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Reads a regular file of at most [`MAX_INPUT_BYTES`] bytes.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, ReadError> {
    read_bytes_capped(path, MAX_INPUT_BYTES)
}

/// [`read_bytes`] with another cap.
pub fn read_bytes_capped(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let name = path.display().to_string();
    let io = |source| ReadError::Io {
        path: name.clone(),
        source,
    };
    // The type is checked before opening: opening a FIFO blocks until a writer comes.
    let meta = std::fs::metadata(path).map_err(io)?;
    if is_null_device(&meta) {
        return Ok(Vec::new());
    }
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular {
            path: name,
            kind: kind_of(meta.file_type()),
        });
    }
    if meta.len() > cap {
        return Err(ReadError::TooLarge {
            path: name,
            size: meta.len(),
            cap,
        });
    }
    let f = std::fs::File::open(path).map_err(io)?;
    // The file may have been swapped or grown since; the cap holds whatever is read.
    read_capped(f, &name, cap)
}

/// `/dev/null` (any name for it) reads as an empty file, as scripts expect; no other device does.
fn is_null_device(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        if meta.file_type().is_char_device() {
            return std::fs::metadata("/dev/null").is_ok_and(|n| n.rdev() == meta.rdev());
        }
    }
    let _ = meta;
    false
}

/// Reads standard input up to [`MAX_INPUT_BYTES`]; `name` stands for it in errors.
pub fn read_stdin(name: &str) -> Result<Vec<u8>, ReadError> {
    read_capped(std::io::stdin().lock(), name, MAX_INPUT_BYTES)
}

fn read_capped(r: impl Read, name: &str, cap: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    r.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            path: name.to_string(),
            source,
        })?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge {
            path: name.to_string(),
            size: bytes.len() as u64,
            cap,
        });
    }
    Ok(bytes)
}

/// Reads a regular file as UTF-8 text (see [`read_bytes`]).
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let bytes = read_bytes(path)?;
    utf8(&path.display().to_string(), bytes)
}

/// Checks that `bytes` are UTF-8; the error gives the line and column of the first bad byte.
pub fn utf8(name: &str, bytes: Vec<u8>) -> Result<String, ReadError> {
    String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|b| **b == b'\n').count() as u32 + 1;
        let col = upto.iter().rev().take_while(|b| **b != b'\n').count() as u32 + 1;
        ReadError::NotUtf8 {
            path: name.to_string(),
            line,
            col,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_regular_file_and_what_is_too_large() {
        let dir = std::env::temp_dir().join(format!("topoplan-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = read_bytes(&dir).unwrap_err();
        assert!(matches!(e, ReadError::NotRegular { .. }), "{e}");
        #[cfg(unix)]
        {
            let e = read_bytes(Path::new("/dev/zero")).unwrap_err();
            assert!(e.to_string().contains("character device"), "{e}");
            assert_eq!(read_text(Path::new("/dev/null")).unwrap(), "");
        }
        let f = dir.join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_bytes_capped(&f, 10).unwrap().len(), 10);
        let e = read_bytes_capped(&f, 9).unwrap_err();
        assert!(
            e.to_string().contains("10 bytes is larger than the 9-byte"),
            "{e}"
        );
        std::fs::write(&f, b"ok\n\xff").unwrap();
        let e = read_text(&f).unwrap_err();
        assert!(
            e.to_string()
                .ends_with(":2:1: the file is not valid UTF-8 text"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
