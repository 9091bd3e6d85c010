//! Aborting a communicator's GPU waits. Every device-side wait on a peer (the direct path's
//! slots, credits and handshakes, the executor's barriers, the copy-engine path's wait kernel)
//! polls the rank's abort word and its own deadline: when either fires, the CTA leaves the call
//! and the first wait to stop records why in the rank's status word. The host reads that word
//! after the stream completes ([`RankAbort::read`]) and reports the wait: reason, what it waited
//! for, from which peer, in which call of this rank.
//!
//! The abort word lives in pinned host memory mapped into the GPUs' address space, so the host
//! sets it with a plain store while kernels spin. The status word lives in device memory: the
//! kernels claim it with a compare-and-swap, which host memory across PCIe does not promise.
//! Copy-engine waits (`cuStreamWaitValue64`) cannot poll; the paths that use them release them
//! on abort by writing [`RELEASE`] into the counters they wait on.

use crate::device::{drv, DevBuf};
use crate::layout;
use crate::CudaError;
use cudarc::driver::{sys, CudaContext, DeviceRepr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// A counter value above any a wait can ask for: written into the copy-engine counters on
/// abort, it releases every `>=` wait on them.
pub const RELEASE: u64 = 1 << 62;

/// `TpAbort` of `cuda/kernels/common.cuh`: where a kernel polls for an abort and records a stop.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TpAbort {
    /// The abort word as the GPU addresses it (0: none to poll).
    pub(crate) abort: u64,
    /// This rank's status word (device memory; 0: none, the stop is not recorded).
    pub(crate) status: u64,
    /// A wait longer than this stops the call (0: never).
    pub(crate) timeout_ns: u64,
    /// This call's sequence number on the rank.
    pub(crate) seq: u32,
    pub(crate) pad: u32,
}
// SAFETY: plain-old-data with the C layout the kernels declare.
unsafe impl DeviceRepr for TpAbort {}

/// Why a wait stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The communicator was aborted (`abort()`).
    Aborted,
    /// The wait lasted longer than `TOPOPLAN_TIMEOUT`.
    TimedOut,
}

/// A wait that stopped, as its status word records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitStop {
    pub reason: StopReason,
    /// What the wait was for (`layout::WAITS`).
    pub what: &'static str,
    /// The rank it waited on.
    pub peer: u32,
    /// The call's sequence number on the rank that waited (1 for its first call).
    pub seq: u32,
}

impl WaitStop {
    /// The error a rank reports for this stop.
    pub fn error(&self, rank: u32) -> CudaError {
        CudaError::Stopped {
            rank,
            reason: match self.reason {
                StopReason::Aborted => "aborted",
                StopReason::TimedOut => "timed out (TOPOPLAN_TIMEOUT)",
            },
            what: self.what,
            peer: self.peer,
            seq: self.seq,
        }
    }
}

/// The status word a kernel writes for a stop (the packing of `tp_stop` in common.cuh).
pub fn encode(code: u64, what: u64, peer: u64, seq: u32) -> u64 {
    code | (what << 8) | (peer << 16) | (u64::from(seq) << 32)
}

/// Reads a status word: `None` while no wait stopped, an error for a word no kernel writes.
pub fn decode(word: u64) -> Result<Option<WaitStop>, CudaError> {
    if word == 0 {
        return Ok(None);
    }
    let bad = || CudaError::Driver(format!("unreadable wait status word {word:#x}"));
    let reason = match word & 0xff {
        c if c == layout::STOP_ABORTED => StopReason::Aborted,
        c if c == layout::STOP_TIMEOUT => StopReason::TimedOut,
        _ => return Err(bad()),
    };
    let what = layout::WAITS
        .iter()
        .find(|w| w.0 == (word >> 8) & 0xff)
        .map(|w| w.2)
        .ok_or_else(bad)?;
    Ok(Some(WaitStop {
        reason,
        what,
        peer: ((word >> 16) & 0xff) as u32,
        seq: (word >> 32) as u32,
    }))
}

/// `TOPOPLAN_TIMEOUT` in nanoseconds, read once: how long one device wait may last.
pub(crate) fn timeout_ns() -> u64 {
    static T: OnceLock<u64> = OnceLock::new();
    *T.get_or_init(|| {
        let t = params::TIMEOUT.duration().unwrap_or_else(|e| {
            params::TIMEOUT.warn(&e, "the default");
            params::TIMEOUT.duration_from(&|_| None).ok().flatten()
        });
        t.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
    })
}

/// The abort word: one `u32` of pinned host memory mapped into every context's address space:
/// allocated for it, or a word of a shared-memory page registered with CUDA, which other
/// processes can set (`crate::ipc::calls`).
#[derive(Debug)]
pub(crate) struct AbortWord {
    host: *mut u32,
    ctx: Arc<CudaContext>,
    /// The registered page holding the word (`None`: `host` is our own allocation).
    page: Option<*mut u8>,
}

// SAFETY: the word is only read and written through volatile accesses of a pointer that stays
// valid until drop; the context handle is shared.
unsafe impl Send for AbortWord {}
// SAFETY: as above.
unsafe impl Sync for AbortWord {}

impl AbortWord {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        ctx.bind_to_thread().map_err(drv)?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // PORTABLE: every context of the process may map it; DEVICEMAP: the GPUs address it.
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: out-pointer valid; 64 bytes, a cache line of its own.
        unsafe { sys::cuMemHostAlloc(&mut p, 64, flags) }
            .result()
            .map_err(drv)?;
        let host = p as *mut u32;
        // SAFETY: the allocation is 64 bytes, aligned for u32.
        unsafe { host.write_volatile(0) };
        Ok(Self {
            host,
            ctx: ctx.clone(),
            page: None,
        })
    }

    /// The word at byte `offset` of `page` (page-aligned, `bytes` long, mapped until this word
    /// is dropped), which is registered with CUDA so the GPU reads it as it reads an allocated
    /// word. Whoever maps the page can then stop this rank's kernels.
    pub(crate) fn on_page(
        ctx: &Arc<CudaContext>,
        page: *mut u8,
        bytes: usize,
        offset: usize,
    ) -> Result<Self, CudaError> {
        if offset + 4 > bytes || !offset.is_multiple_of(4) {
            return Err(CudaError::Input(format!(
                "abort word at byte {offset} of a {bytes}-byte page"
            )));
        }
        ctx.bind_to_thread().map_err(drv)?;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: the caller's page is page-aligned, `bytes` long and stays mapped until drop,
        // where it is unregistered.
        unsafe { sys::cuMemHostRegister_v2(page.cast(), bytes, flags) }
            .result()
            .map_err(drv)?;
        Ok(Self {
            // SAFETY: within the page (checked above), aligned for u32.
            host: unsafe { page.add(offset) }.cast(),
            ctx: ctx.clone(),
            page: Some(page),
        })
    }

    /// The word as the GPU of `ctx` addresses it.
    pub(crate) fn device_ptr(&self, ctx: &Arc<CudaContext>) -> Result<u64, CudaError> {
        ctx.bind_to_thread().map_err(drv)?;
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: out-pointer valid; `host` is a live cuMemHostAlloc allocation made portable.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, self.host.cast(), 0) }
            .result()
            .map_err(drv)?;
        Ok(d)
    }

    /// Sets the word: every kernel polling it leaves its call.
    pub(crate) fn set(&self) {
        // SAFETY: live allocation (see `new`); a volatile store reaches memory now.
        unsafe { self.host.write_volatile(1) };
    }

    pub(crate) fn is_set(&self) -> bool {
        // SAFETY: as in `set`.
        unsafe { self.host.read_volatile() != 0 }
    }
}

impl Drop for AbortWord {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            match self.page {
                // SAFETY: registered in `on_page`, unregistered once, while still mapped.
                Some(p) => {
                    let _ = unsafe { sys::cuMemHostUnregister(p.cast()) };
                }
                // SAFETY: allocated by cuMemHostAlloc in `new`, freed once.
                None => {
                    let _ = unsafe { sys::cuMemFreeHost(self.host.cast()) };
                }
            }
        }
    }
}

/// Writes [`RELEASE`] into the counter words `words` of `ctx`'s GPU on a stream of its own that
/// no other stream waits for, so it runs while the rank's streams are blocked on them; returns
/// without waiting for it.
pub(crate) fn release(
    ctx: &Arc<CudaContext>,
    words: impl IntoIterator<Item = u64>,
) -> Result<(), CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    let mut s: sys::CUstream = std::ptr::null_mut();
    let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    // SAFETY: out-pointer valid; the context is bound.
    unsafe { sys::cuStreamCreate(&mut s, flags) }
        .result()
        .map_err(drv)?;
    let mut out = Ok(());
    for w in words {
        // SAFETY: `w` is a counter word in this context's device memory; the stream is ours.
        let r = unsafe { sys::cuStreamWriteValue64_v2(s, w, RELEASE, 0) };
        if let Err(e) = r.result() {
            out = Err(drv(e));
            break;
        }
    }
    // SAFETY: created above; the driver frees it once its writes are done.
    let _ = unsafe { sys::cuStreamDestroy_v2(s) };
    out
}

/// One rank's side of aborts: its status word, the abort word's address on its GPU, and its
/// call count.
#[derive(Debug)]
pub(crate) struct RankAbort {
    status: DevBuf,
    abort_ptr: u64,
    calls: AtomicU32,
}

impl RankAbort {
    pub(crate) fn new(ctx: &Arc<CudaContext>, word: &AbortWord) -> Result<Self, CudaError> {
        let status = DevBuf::new(ctx, 8)?;
        status.fill(0)?;
        Ok(Self {
            status,
            abort_ptr: word.device_ptr(ctx)?,
            calls: AtomicU32::new(0),
        })
    }

    /// The kernel argument of this rank's next call (its sequence number counts up).
    pub(crate) fn next_call(&self) -> TpAbort {
        TpAbort {
            abort: self.abort_ptr,
            status: self.status.ptr,
            timeout_ns: timeout_ns(),
            seq: self.calls.fetch_add(1, Ordering::Relaxed).wrapping_add(1),
            pad: 0,
        }
    }

    /// The wait that stopped on this rank, if any. Read it after the stream completed (a
    /// synchronous copy: it waits for the legacy stream's work).
    pub(crate) fn read(&self) -> Result<Option<WaitStop>, CudaError> {
        let mut b = [0u8; 8];
        self.status.download(&mut b)?;
        decode(u64::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_round_trip_and_name_the_wait() {
        for &(code, _, name) in layout::WAITS {
            let w = encode(layout::STOP_TIMEOUT, code, 3, 77);
            let s = decode(w).unwrap().unwrap();
            assert_eq!(s.reason, StopReason::TimedOut);
            assert_eq!((s.what, s.peer, s.seq), (name, 3, 77));
        }
        let s = decode(encode(
            layout::STOP_ABORTED,
            layout::WAITS[0].0,
            1,
            u32::MAX,
        ))
        .unwrap()
        .unwrap();
        assert_eq!((s.reason, s.seq), (StopReason::Aborted, u32::MAX));
        let msg = s.error(0).to_string();
        assert!(msg.contains("rank 0") && msg.contains("rank 1"), "{msg}");
        assert!(msg.contains(s.what) && msg.contains("aborted"), "{msg}");
        assert!(msg.contains(&u32::MAX.to_string()), "{msg}");
    }

    #[test]
    fn no_stop_and_bad_words() {
        assert_eq!(decode(0).unwrap(), None);
        assert!(decode(9).is_err(), "unknown reason");
        assert!(
            decode(encode(layout::STOP_ABORTED, 250, 0, 1)).is_err(),
            "unknown wait"
        );
    }

    #[test]
    fn the_argument_has_the_c_layout() {
        // Three u64 and two u32 (common.cuh's TpAbort).
        assert_eq!(std::mem::size_of::<TpAbort>(), 32);
        assert_eq!(std::mem::offset_of!(TpAbort, seq), 24);
    }
}
