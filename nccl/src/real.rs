//! The real NCCL, loaded by absolute path beside this library, for the calls topoplan does not
//! run. Where it is searched: `TOPOPLAN_NCCL_LIB`; the `nvidia/nccl/lib` folder beside a loaded
//! PyTorch; any other `libnccl.so*` already mapped; the system library folders. This library
//! itself is never loaded (a name without `/` would find it: it already holds the soname).
//! Symbols are looked up on the handle, never globally (a global lookup finds ours).
//!
//! The real NCCL always runs as this library's private instance, opened `RTLD_DEEPBIND`, so its
//! own calls of public NCCL names (its collectives call `ncclCommGetAsyncError`, `ncclGroupStart`
//! and others by name) bind to itself, never to this library's symbols of the same names. Where
//! the process already holds that file (`import torch` loads PyTorch's NCCL globally, without
//! `RTLD_DEEPBIND`), opening it again would return that copy, whose calls do bind to ours: then
//! a copy of the file in anonymous memory (`memfd_create`) is opened instead, a new object to
//! the loader. `dlmopen(LM_ID_NEWLM)` is not used: a new link-map namespace loads its own libc
//! and its own CUDA driver library, whose contexts and streams are not the caller's, so the
//! streams PyTorch passes would mean nothing there.

use crate::abi::*;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Names this library's own shared object, so the search can skip it.
fn own_object() -> Option<PathBuf> {
    object_of(own_object as *const () as usize)
}

/// The file mapped at `addr`.
fn object_of(addr: usize) -> Option<PathBuf> {
    mapped_objects()
        .into_iter()
        .find(|(lo, hi, _)| (*lo..*hi).contains(&addr))
        .map(|(_, _, p)| p)
}

/// `(start, end, path)` of every file-backed mapping of this process.
fn mapped_objects() -> Vec<(usize, usize, PathBuf)> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let path = f.nth(4)?;
            let (a, b) = range.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
                PathBuf::from(path),
            ))
        })
        .filter(|(_, _, p)| p.is_absolute())
        .collect()
}

/// Where the real NCCL may be, in the order tried.
pub fn candidates(explicit: Option<&str>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = explicit.filter(|p| !p.is_empty()) {
        v.push(PathBuf::from(p));
        return v;
    }
    let mapped = mapped_objects();
    for (_, _, p) in &mapped {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("libtorch_cuda.so") {
            if let Some(torch_lib) = p.parent() {
                // site-packages/torch/lib -> site-packages/nvidia/nccl/lib
                v.push(torch_lib.join("../../nvidia/nccl/lib/libnccl.so.2"));
            }
        }
    }
    for (_, _, p) in &mapped {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("libnccl.so") {
            v.push(p.clone());
        }
    }
    for dir in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/local/nccl/lib",
        "/usr/local/cuda/lib64",
        "/usr/lib",
    ] {
        v.push(Path::new(dir).join("libnccl.so.2"));
    }
    v
}

/// The real NCCL's entry points this library forwards to.
#[allow(non_snake_case)]
pub struct RealNccl {
    pub path: PathBuf,
    pub version: c_int,
    pub GetUniqueId: unsafe extern "C" fn(*mut RawUniqueId) -> NcclResult,
    pub CommInitRank:
        unsafe extern "C" fn(*mut *mut c_void, c_int, RawUniqueId, c_int) -> NcclResult,
    pub CommDestroy: unsafe extern "C" fn(*mut c_void) -> NcclResult,
    pub CommAbort: unsafe extern "C" fn(*mut c_void) -> NcclResult,
    pub GroupStart: unsafe extern "C" fn() -> NcclResult,
    pub GroupEnd: unsafe extern "C" fn() -> NcclResult,
    pub GetLastError: unsafe extern "C" fn(*mut c_void) -> *const c_char,
    pub AllReduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub AllGather: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub ReduceScatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub Broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub Reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub AlltoAll: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub Send: unsafe extern "C" fn(
        *const c_void,
        usize,
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub Recv: unsafe extern "C" fn(
        *mut c_void,
        usize,
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    /// NCCL 2.28's; absent before, where forwarding issues the sends and receives instead.
    pub Gather: Option<
        unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            *mut c_void,
            *mut c_void,
        ) -> NcclResult,
    >,
    pub Scatter: Option<
        unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            *mut c_void,
            *mut c_void,
        ) -> NcclResult,
    >,
    pub RedOpCreatePreMulSum:
        unsafe extern "C" fn(*mut c_int, *mut c_void, c_int, c_int, *mut c_void) -> NcclResult,
    pub RedOpDestroy: unsafe extern "C" fn(c_int, *mut c_void) -> NcclResult,
    pub MemAlloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> NcclResult,
    pub MemFree: unsafe extern "C" fn(*mut c_void) -> NcclResult,
    pub CommWindowRegister: Option<
        unsafe extern "C" fn(
            *mut c_void,
            *mut c_void,
            usize,
            *mut *mut c_void,
            c_int,
        ) -> NcclResult,
    >,
    pub CommWindowDeregister: Option<unsafe extern "C" fn(*mut c_void, *mut c_void) -> NcclResult>,
    pub DevCommCreate:
        Option<unsafe extern "C" fn(*mut c_void, *const c_void, *mut c_void) -> NcclResult>,
    pub DevCommDestroy: Option<unsafe extern "C" fn(*mut c_void, *const c_void) -> NcclResult>,
}

/// Why no real NCCL is available (kept for the messages of every call that needed it).
#[derive(Debug, Clone)]
pub struct NotFound(pub String);

/// The real NCCL, loaded on first need.
pub fn get() -> Result<&'static RealNccl, NotFound> {
    static REAL: OnceLock<Result<RealNccl, NotFound>> = OnceLock::new();
    REAL.get_or_init(|| load(crate::knobs::nccl_lib().as_deref()))
        .as_ref()
        .map_err(|e| e.clone())
}

fn load(explicit: Option<&str>) -> Result<RealNccl, NotFound> {
    let me = own_object().and_then(|p| p.canonicalize().ok());
    let mut tried = Vec::new();
    for path in candidates(explicit) {
        let Ok(canon) = path.canonicalize() else {
            tried.push(format!("{} (absent)", path.display()));
            continue;
        };
        if Some(&canon) == me.as_ref() {
            tried.push(format!("{} (this library)", path.display()));
            continue;
        }
        match open(&canon) {
            Ok(r) => return Ok(r),
            Err(e) => tried.push(format!("{} ({e})", canon.display())),
        }
    }
    Err(NotFound(format!(
        "no real NCCL found (set TOPOPLAN_NCCL_LIB to its absolute path); tried {}",
        tried.join(", ")
    )))
}

/// Whether a file-backed mapping of this process is `path`'s file (same device and inode).
fn already_mapped(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    maps.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(dev), Some(ino)) = (f.get(3), f.get(4)) else {
            return false;
        };
        let Some((maj, min)) = dev.split_once(':') else {
            return false;
        };
        let (Ok(maj), Ok(min), Ok(ino)) = (
            u32::from_str_radix(maj, 16),
            u32::from_str_radix(min, 16),
            ino.parse::<u64>(),
        ) else {
            return false;
        };
        ino == meta.ino() && libc::makedev(maj, min) == meta.dev()
    })
}

/// A copy of `path` in anonymous memory, as a path the loader can open (`/proc/self/fd/N`).
/// The descriptor stays open for the life of the process: the loader maps through it.
fn private_copy(path: &Path) -> Result<CString, String> {
    use std::os::fd::FromRawFd;
    let name = CString::new("topoplan-real-nccl").expect("no NUL");
    // SAFETY: memfd_create with a valid name; a negative result is an error, checked below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let mut copy = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut src = std::fs::File::open(path).map_err(|e| e.to_string())?;
    std::io::copy(&mut src, &mut copy).map_err(|e| format!("copying it: {e}"))?;
    let fd = std::os::fd::IntoRawFd::into_raw_fd(copy);
    Ok(CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL"))
}

fn open(path: &Path) -> Result<RealNccl, String> {
    let c = if already_mapped(path) {
        private_copy(path).map_err(|e| format!("a private copy of the loaded library: {e}"))?
    } else {
        CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?
    };
    // SAFETY: dlopen of a path; RTLD_DEEPBIND makes the real library's own calls bind to itself,
    // never to this library's symbols of the same names (see the module comment).
    let h = unsafe {
        libc::dlopen(
            c.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND,
        )
    };
    if h.is_null() {
        // SAFETY: dlerror returns a thread-local message or null.
        let e = unsafe { libc::dlerror() };
        let msg = if e.is_null() {
            "dlopen failed".to_string()
        } else {
            unsafe { std::ffi::CStr::from_ptr(e) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(msg);
    }
    let sym = |name: &str| -> *mut c_void {
        let n = CString::new(name).expect("no NUL");
        // SAFETY: a lookup on the handle just opened.
        unsafe { libc::dlsym(h, n.as_ptr()) }
    };
    macro_rules! need {
        ($n:literal) => {{
            let p = sym($n);
            if p.is_null() {
                return Err(format!("{} has no {}", path.display(), $n));
            }
            // SAFETY: NCCL's documented signature for this symbol.
            unsafe { std::mem::transmute::<*mut c_void, _>(p) }
        }};
    }
    macro_rules! opt {
        ($n:literal) => {{
            let p = sym($n);
            // SAFETY: as above; absent in older NCCLs.
            (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, _>(p) })
        }};
    }
    let get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult = need!("ncclGetVersion");
    if object_of(get_version as *const () as usize) == own_object() {
        return Err("resolves to this library".into());
    }
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { get_version(&mut version) };
    Ok(RealNccl {
        path: path.to_path_buf(),
        version,
        GetUniqueId: need!("ncclGetUniqueId"),
        CommInitRank: need!("ncclCommInitRank"),
        CommDestroy: need!("ncclCommDestroy"),
        CommAbort: need!("ncclCommAbort"),
        GroupStart: need!("ncclGroupStart"),
        GroupEnd: need!("ncclGroupEnd"),
        GetLastError: need!("ncclGetLastError"),
        AllReduce: need!("ncclAllReduce"),
        AllGather: need!("ncclAllGather"),
        ReduceScatter: need!("ncclReduceScatter"),
        Broadcast: need!("ncclBroadcast"),
        Reduce: need!("ncclReduce"),
        AlltoAll: need!("ncclAlltoAll"),
        Send: need!("ncclSend"),
        Recv: need!("ncclRecv"),
        Gather: opt!("ncclGather"),
        Scatter: opt!("ncclScatter"),
        RedOpCreatePreMulSum: need!("ncclRedOpCreatePreMulSum"),
        RedOpDestroy: need!("ncclRedOpDestroy"),
        MemAlloc: need!("ncclMemAlloc"),
        MemFree: need!("ncclMemFree"),
        CommWindowRegister: opt!("ncclCommWindowRegister"),
        CommWindowDeregister: opt!("ncclCommWindowDeregister"),
        DevCommCreate: opt!("ncclDevCommCreate"),
        DevCommDestroy: opt!("ncclDevCommDestroy"),
    })
}

/// The real library's message after one of its calls failed.
pub fn last_error(real: &RealNccl, comm: *mut c_void) -> String {
    // SAFETY: NCCL returns a static or per-communicator string.
    let p = unsafe { (real.GetLastError)(comm) };
    if p.is_null() {
        return String::new();
    }
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// A real NCCL communicator for the same ranks as one of ours.
pub struct RealComm {
    pub ptr: *mut c_void,
}

// SAFETY: an NCCL communicator may be used from any thread (one at a time: the owning `Comm`
// keeps it behind a mutex).
unsafe impl Send for RealComm {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_path_is_the_only_candidate() {
        assert_eq!(
            candidates(Some("/opt/nccl/libnccl.so.2")),
            vec![PathBuf::from("/opt/nccl/libnccl.so.2")]
        );
        let v = candidates(None);
        assert!(v.iter().all(|p| p.is_absolute()), "{v:?}");
        assert!(v
            .iter()
            .any(|p| p.ends_with("x86_64-linux-gnu/libnccl.so.2")));
    }

    #[test]
    fn a_loaded_library_is_told_from_one_that_is_not() {
        let libc_path = mapped_objects()
            .into_iter()
            .map(|(_, _, p)| p)
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-"))
            })
            .expect("libc is mapped");
        assert!(already_mapped(&libc_path), "{}", libc_path.display());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        assert!(!already_mapped(&manifest));
        assert!(!already_mapped(Path::new("/nonexistent/libnccl.so.2")));
    }

    #[test]
    fn a_private_copy_holds_the_same_bytes() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let p = private_copy(&manifest).expect("memfd copy");
        let copied = std::fs::read(p.to_str().unwrap()).unwrap();
        assert_eq!(copied, std::fs::read(&manifest).unwrap());
    }

    #[test]
    fn a_missing_library_is_reported_with_what_was_tried() {
        let e = load(Some("/nonexistent/libnccl.so.2"))
            .err()
            .expect("absent");
        assert!(
            e.0.contains("/nonexistent/libnccl.so.2 (absent)"),
            "{}",
            e.0
        );
        assert!(e.0.contains("TOPOPLAN_NCCL_LIB"));
    }
}
