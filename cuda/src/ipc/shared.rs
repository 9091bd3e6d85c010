//! What the multi-process mode's setup steps share: the all-gather they run through
//! ([`Exchange`]), errors that name the rank, the all-or-none agreement, and the IPC export
//! and mapping of a buffer. A leaf of `ipc`.

use crate::device::drv;
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use std::sync::Arc;

/// The all-gather the setup needs: this rank's bytes in, every rank's bytes (rank order) out.
pub type Exchange<'a> = dyn FnMut(&[u8]) -> Result<Vec<Vec<u8>>, CudaError> + 'a;

pub(super) fn rank_err(rank: u32, what: impl Into<String>) -> CudaError {
    CudaError::Rank {
        rank,
        what: what.into(),
    }
}

/// Adds "rank r: doing" to an error (the ones that say it all themselves stay as they are).
pub(super) fn at(rank: u32, doing: &str) -> impl FnOnce(CudaError) -> CudaError + '_ {
    move |e| match e {
        e @ (CudaError::NoDriver | CudaError::NoNvrtc | CudaError::Rank { .. }) => e,
        e => rank_err(rank, format!("{doing}: {e}")),
    }
}

/// All ranks go on or all fail: all-gathers whether this rank's step (`mine`) worked, and
/// returns this rank's error, or else the first other rank's ("rank r could not `what`").
pub(super) fn agree(
    rank: u32,
    exchange: &mut Exchange<'_>,
    mine: Result<(), CudaError>,
    what: &str,
) -> Result<(), CudaError> {
    let word = match &mine {
        Ok(()) => Vec::new(),
        // Bounded: the bootstrap carries at most `MAX_GATHER_BYTES` per rank.
        Err(e) => e.to_string().into_bytes().into_iter().take(4096).collect(),
    };
    let ready = exchange(&word).map_err(at(
        rank,
        &format!("exchanging whether every rank could {what}"),
    ))?;
    mine?;
    match ready.iter().enumerate().find(|(_, w)| !w.is_empty()) {
        Some((r, why)) => Err(rank_err(
            rank,
            format!(
                "rank {r} could not {what}: {}",
                String::from_utf8_lossy(why)
            ),
        )),
        None => Ok(()),
    }
}

/// A peer's buffer mapped into this process; unmapped on drop.
#[derive(Debug)]
pub(super) struct IpcMapping {
    ctx: Arc<CudaContext>,
    pub(super) ptr: u64,
}

impl IpcMapping {
    pub(super) fn open(ctx: &Arc<CudaContext>, handle: &[u8; 64]) -> Result<Self, CudaError> {
        ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: CUipcMemHandle is a plain 64-byte array; any bytes form a valid value (the
        // driver rejects bad ones).
        let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        for (d, s) in h.reserved.iter_mut().zip(handle) {
            *d = *s as std::ffi::c_char;
        }
        let mut ptr: sys::CUdeviceptr = 0;
        // Lazy peer access: the driver enables access to the owner's GPU when it maps.
        let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: out-pointer valid; the handle is passed by value.
        let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) };
        if r == sys::CUresult::CUDA_ERROR_ALREADY_MAPPED {
            // The driver maps an allocation once per process.
            return Err(CudaError::Input(
                "that allocation is already mapped here by an earlier registration that is \
                 still live: deregister it first (`CudaProcComm::deregister`, before the buffer \
                 is freed), or register each allocation once"
                    .into(),
            ));
        }
        r.result().map_err(drv)?;
        Ok(Self {
            ctx: ctx.clone(),
            ptr,
        })
    }
}

impl Drop for IpcMapping {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: opened by cuIpcOpenMemHandle in this context; closed once.
            let _ = unsafe { sys::cuIpcCloseMemHandle(self.ptr) };
        }
    }
}

pub(super) fn export(ctx: &Arc<CudaContext>, ptr: u64) -> Result<[u8; 64], CudaError> {
    ctx.bind_to_thread().map_err(drv)?;
    // SAFETY: as in `IpcMapping::open`.
    let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
    // SAFETY: out-pointer valid; `ptr` is the base of a cuMemAlloc allocation.
    unsafe { sys::cuIpcGetMemHandle(&mut h, ptr) }
        .result()
        .map_err(drv)?;
    let mut out = [0u8; 64];
    for (d, s) in out.iter_mut().zip(h.reserved) {
        *d = s as u8;
    }
    Ok(out)
}
