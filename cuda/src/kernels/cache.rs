//! The compiled kernel units on disk (`TOPOPLAN_KERNEL_CACHE`), so a process whose unit another
//! process of the machine compiled before reads its PTX instead of spending seconds in NVRTC
//! (every rank of a job, every run of a test binary would otherwise compile again).
//!
//! An entry is one file named by its unit and a 64-bit FNV-1a hash of its [`Key`]. The file
//! holds the whole key text (sources, headers, options, architecture, NVRTC version) and the
//! PTX with its length and checksum; a read returns the PTX only when the stored key is the
//! asked one byte for byte, so a hash collision, another build's file or a damaged file is a
//! miss, compiled and written again, never the wrong code. Writes go to a temp file of the same
//! folder renamed into place, so ranks writing one entry at once each leave a whole file.
//! Nothing here fails a call: any cache error means "compile".

use std::fs;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The first line of every entry; a different one (another format) is a miss.
const MAGIC: &[u8] = b"topoplan kernel cache 1\n";
/// Entries larger than this are not read (a unit's PTX is a few MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Why an entry was not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{0}: no entry")]
    Missing(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: larger than {MAX_FILE_BYTES} bytes")]
    TooLarge(PathBuf),
    #[error("{path}: not a cache entry ({what})")]
    Malformed { path: PathBuf, what: &'static str },
    #[error("{0}: holds another build's PTX")]
    OtherKey(PathBuf),
}

/// Everything that determines a unit's PTX, as one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    stem: String,
    text: String,
}

impl Key {
    /// The key of `unit` (file name, source) compiled for `arch` with `options` by NVRTC
    /// `nvrtc` (its version), `headers` (name, text) available to its `#include`s.
    pub fn new(
        unit: (&str, &str),
        headers: &[(&str, &str)],
        arch: &str,
        options: &[String],
        nvrtc: &str,
    ) -> Key {
        let mut text = String::new();
        field(&mut text, "nvrtc", nvrtc);
        field(&mut text, "arch", arch);
        for o in options {
            field(&mut text, "option", o);
        }
        field(&mut text, unit.0, unit.1);
        for (name, source) in headers {
            field(&mut text, name, source);
        }
        let stem = unit.0.split('.').next().unwrap_or_default();
        Key {
            stem: stem.chars().filter(char::is_ascii_alphanumeric).collect(),
            text,
        }
    }

    /// The entry's file name: the unit, then the key's hash.
    pub fn file_name(&self) -> String {
        format!("{}-{:016x}.ptx", self.stem, fnv1a(self.text.as_bytes()))
    }
}

/// Appends `name len\nvalue\n`: lengths keep distinct field lists distinct texts.
fn field(out: &mut String, name: &str, value: &str) {
    out.push_str(&format!("{name} {}\n{value}\n", value.len()));
}

/// 64-bit FNV-1a: names files and checks their PTX against damage (not against tampering).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A folder of entries, or none (caching off).
#[derive(Debug)]
pub struct DiskCache {
    dir: Option<PathBuf>,
    /// Whether a failed write was reported (once per cache).
    told: AtomicBool,
}

impl DiskCache {
    /// Entries in `dir` (created at the first write).
    pub fn at(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache::new(Some(dir.into()))
    }

    /// No caching: every lookup compiles.
    pub fn off() -> DiskCache {
        DiskCache::new(None)
    }

    /// The folder `TOPOPLAN_KERNEL_CACHE` names (see [`dir_from`]).
    pub fn from_env() -> DiskCache {
        DiskCache::new(dir_from(&|k| std::env::var(k).ok()))
    }

    fn new(dir: Option<PathBuf>) -> DiskCache {
        DiskCache {
            dir,
            told: AtomicBool::new(false),
        }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The PTX of `key`: the stored entry if there is a valid one, else `compile`'s, stored for
    /// the next process. Only `compile`'s error is returned; the cache's are reported at
    /// `TOPOPLAN_DEBUG=INFO` and otherwise ignored.
    pub fn get_or_compile<E>(
        &self,
        key: &Key,
        compile: impl FnOnce() -> Result<String, E>,
    ) -> Result<String, E> {
        let Some(dir) = &self.dir else {
            return compile();
        };
        match read(dir, key) {
            Ok(ptx) => return Ok(ptx),
            Err(CacheError::Missing(_)) => {}
            Err(e) => info(&format!("{e}; compiling again")),
        }
        let ptx = compile()?;
        if let Err(e) = write(dir, key, &ptx) {
            if !self.told.swap(true, Ordering::Relaxed) {
                info(&format!("{e}; compiled kernels are not kept"));
            }
        }
        Ok(ptx)
    }
}

/// The cache folder for the variables `get` returns: `TOPOPLAN_KERNEL_CACHE` (`off` or `0`:
/// none), else `$XDG_CACHE_HOME/topoplan/kernels` (an absolute one), else
/// `$HOME/.cache/topoplan/kernels`, else none.
pub fn dir_from(get: params::Lookup) -> Option<PathBuf> {
    let set = params::KERNEL_CACHE.string_from(get).ok().flatten();
    match set.as_deref().map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("off") || v == "0" => return None,
        Some(v) if !v.is_empty() => return Some(PathBuf::from(v)),
        _ => {}
    }
    let xdg = get("XDG_CACHE_HOME").map(PathBuf::from);
    if let Some(x) = xdg.filter(|x| x.is_absolute()) {
        return Some(x.join("topoplan/kernels"));
    }
    let home = get("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".cache/topoplan/kernels"))
}

/// The stored PTX of `key` in `dir`, if its file is whole and holds that key.
pub fn read(dir: &Path, key: &Key) -> Result<String, CacheError> {
    let path = dir.join(key.file_name());
    let bytes = read_bounded(&path)?;
    let malformed = |what| CacheError::Malformed {
        path: path.clone(),
        what,
    };
    let (stored, ptx) = decode(&bytes).map_err(malformed)?;
    if stored != key.text.as_bytes() {
        return Err(CacheError::OtherKey(path));
    }
    String::from_utf8(ptx.to_vec()).map_err(|_| malformed("PTX is not UTF-8"))
}

/// The file's bytes, unless it is missing or larger than [`MAX_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, CacheError> {
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => CacheError::Missing(path.to_path_buf()),
        _ => CacheError::Io {
            path: path.to_path_buf(),
            source,
        },
    };
    let file = fs::File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() > MAX_FILE_BYTES {
        return Err(CacheError::TooLarge(path.to_path_buf()));
    }
    let mut bytes = Vec::new();
    // The bound again while reading: the file may grow after the check.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(CacheError::TooLarge(path.to_path_buf()));
    }
    Ok(bytes)
}

/// Writes `ptx` as the entry of `key` in `dir`: a temp file of the same folder, renamed.
pub fn write(dir: &Path, key: &Key, ptx: &str) -> Result<(), CacheError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let name = key.file_name();
    // Unique across processes (pid) and threads (the counter): writers never share a temp file.
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let path = dir.join(name);
    let done = write_new(&tmp, key, ptx).and_then(|()| fs::rename(&tmp, &path));
    if done.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    done.map_err(io(&path))
}

/// Creates `path` (which must not exist) holding the entry.
fn write_new(path: &Path, key: &Key, ptx: &str) -> std::io::Result<()> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    let mut w = BufWriter::new(file);
    w.write_all(&encode_head(key, ptx))?;
    w.write_all(ptx.as_bytes())?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// Everything before the PTX: the magic line, the key, the PTX's length and checksum.
fn encode_head(key: &Key, ptx: &str) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(format!("key {}\n", key.text.len()).as_bytes());
    out.extend_from_slice(key.text.as_bytes());
    let sum = fnv1a(ptx.as_bytes());
    out.extend_from_slice(format!("\nptx {} {sum:016x}\n", ptx.len()).as_bytes());
    out
}

/// The stored key and PTX of an entry's bytes, checked against their lengths and checksum.
fn decode(bytes: &[u8]) -> Result<(&[u8], &[u8]), &'static str> {
    let rest = bytes.strip_prefix(MAGIC).ok_or("another format")?;
    let (head, rest) = split_line(rest)?;
    let klen = number(head.strip_prefix(b"key ").ok_or("no key")?)?;
    if rest.len() < klen + 1 || rest[klen] != b'\n' {
        return Err("truncated key");
    }
    let (stored, rest) = (&rest[..klen], &rest[klen + 1..]);
    let (head, ptx) = split_line(rest)?;
    let head = head.strip_prefix(b"ptx ").ok_or("no PTX")?;
    let (len, sum) = head.split_at(head.iter().position(|&b| b == b' ').ok_or("no checksum")?);
    if number(len)? != ptx.len() {
        return Err("PTX of another length");
    }
    let sum = std::str::from_utf8(&sum[1..]).map_err(|_| "bad checksum")?;
    if u64::from_str_radix(sum, 16).map_err(|_| "bad checksum")? != fnv1a(ptx) {
        return Err("PTX checksum differs");
    }
    Ok((stored, ptx))
}

/// The text before the first newline and what follows it.
fn split_line(bytes: &[u8]) -> Result<(&[u8], &[u8]), &'static str> {
    let at = bytes.iter().position(|&b| b == b'\n').ok_or("truncated")?;
    Ok((&bytes[..at], &bytes[at + 1..]))
}

fn number(bytes: &[u8]) -> Result<usize, &'static str> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("bad length")
}

/// One line on stderr at `TOPOPLAN_DEBUG=INFO`.
fn info(msg: &str) {
    if params::DEBUG.choice_or_warn() == Some("INFO") {
        let line = format!(
            "{}:{} [topoplan] INFO kernel cache: {msg}\n",
            runtime::bootstrap::hostname(),
            std::process::id()
        );
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests;
