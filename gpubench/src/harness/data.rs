//! The bench's buffers and data: every rank's buffers, the pointers a call passes (NCCL's
//! aliasing conventions), the reference's random inputs uploaded, and the outputs checked.

// Unsafe: device uploads and downloads through the driver's raw API; each block states why it is sound.
#![allow(unsafe_code)]

use super::{coll_of, BenchConfig};
use cuda::device::{drv, DevBuf};
use cuda::CudaError;
use cudarc::driver::sys;
use planner::schedule::CollectiveKind;
use runtime::reference::{buffer_lens, count_wrong, random_inputs_bytes};

/// Every rank's input and output buffer, sized for the largest size of the run.
pub(super) struct Bufs {
    pub(super) inp: Vec<DevBuf>,
    pub(super) out: Vec<DevBuf>,
}

impl Bufs {
    /// (inputs, outputs) pointers for a call, in place or not (NCCL's aliasing conventions).
    pub(super) fn ptrs(
        &self,
        kind: CollectiveKind,
        count: u64,
        elem: u64,
        in_place: bool,
    ) -> (Vec<u64>, Vec<u64>) {
        (0..self.inp.len())
            .map(|r| {
                let (ip, op) = (self.inp[r].ptr, self.out[r].ptr);
                cuda::direct::rank_ptrs(kind, r as u32, count, elem, in_place, ip, op)
            })
            .unzip()
    }
}

/// Every rank's input of this size: the reference's random data (made once, used by both
/// libraries and by the check).
pub(super) fn host_inputs(cfg: &BenchConfig, n: usize, count: u64, seed: u64) -> Vec<Vec<u8>> {
    let (il, _) = buffer_lens(&coll_of(cfg.kind, cfg.root), n as u32, count as usize);
    random_inputs_bytes(cfg.dtype, seed, n as u32, il, cfg.op, |_| true)
}

/// Copies `inputs` into the ranks' input buffers and poisons their outputs.
pub(super) fn upload(
    bufs: &Bufs,
    cfg: &BenchConfig,
    count: u64,
    in_place: bool,
    inputs: &[Vec<u8>],
) -> Result<(), CudaError> {
    let elem = cfg.dtype.size() as u64;
    let (iptrs, _) = bufs.ptrs(cfg.kind, count, elem, in_place);
    for (r, data) in inputs.iter().enumerate() {
        bufs.out[r].fill(0xFF)?; // NaN in every float type: an unwritten element cannot pass
        let ctx = bufs.inp[r].context();
        ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: destination lies in this rank's buffers (sized for the largest size).
        unsafe { sys::cuMemcpyHtoD_v2(iptrs[r], data.as_ptr() as *const _, data.len()) }
            .result()
            .map_err(drv)?;
    }
    Ok(())
}

/// Wrong elements of the ranks' outputs against `want` (the reference's outputs).
pub(super) fn check(
    bufs: &Bufs,
    cfg: &BenchConfig,
    count: u64,
    in_place: bool,
    want: &[Option<Vec<u8>>],
) -> Result<i64, CudaError> {
    let n = bufs.inp.len();
    let elem = cfg.dtype.size() as u64;
    let (_, optrs) = bufs.ptrs(cfg.kind, count, elem, in_place);
    let mut wrong = 0i64;
    for r in 0..n {
        let Some(w) = &want[r] else { continue };
        let mut got = vec![0u8; w.len()];
        let ctx = bufs.out[r].context();
        ctx.bind_to_thread().map_err(drv)?;
        // SAFETY: source lies in this rank's buffers.
        unsafe { sys::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut _, optrs[r], got.len()) }
            .result()
            .map_err(drv)?;
        wrong += count_wrong(cfg.dtype, &got, w, 0.0) as i64;
    }
    Ok(wrong)
}
