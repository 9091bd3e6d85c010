//! NCCL, loaded at run time through cudarc, as the baseline `topoplan bench --vs-nccl` measures
//! on the same buffers in the same process. One communicator per GPU (`ncclCommInitAll`); each
//! rank's calls come from that rank's host thread, like nccl-tests with one thread per GPU.
//!
//! cudarc looks for `libnccl.so` (not `libnccl.so.2`); the device scripts add that link.

use super::CudaError;
use crate::types::{DataType, ReduceOp};
use cudarc::driver::sys as dsys;
use cudarc::nccl::{result, sys};
use planner::schedule::CollectiveKind;
use std::ffi::c_void;

pub fn present() -> bool {
    // SAFETY: only probes dlopen.
    unsafe { sys::is_culib_present() }
}

fn err(e: result::NcclError) -> CudaError {
    CudaError::Nccl(format!("{:?}", e.0))
}

/// NCCL's version code (22803 for 2.28.3).
pub fn version() -> Result<i32, CudaError> {
    if !present() {
        return Err(CudaError::Nccl(
            "libnccl.so not found (add a libnccl.so link to libnccl.so.2 on LD_LIBRARY_PATH)"
                .into(),
        ));
    }
    result::get_nccl_version().map_err(err)
}

pub struct NcclGroup {
    comms: Vec<sys::ncclComm_t>,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time per comm; every
// rank's calls come from that rank's thread.
unsafe impl Send for NcclGroup {}
unsafe impl Sync for NcclGroup {}

impl std::fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclGroup({} ranks)", self.comms.len())
    }
}

fn dtype(d: DataType) -> sys::ncclDataType_t {
    use sys::ncclDataType_t::*;
    match d {
        DataType::F32 => ncclFloat32,
        DataType::F64 => ncclFloat64,
        DataType::F16 => ncclFloat16,
        DataType::Bf16 => ncclBfloat16,
        DataType::I32 => ncclInt32,
        DataType::I64 => ncclInt64,
        DataType::U8 => ncclUint8,
        DataType::I8 => ncclInt8,
    }
}

fn redop(o: ReduceOp) -> sys::ncclRedOp_t {
    use sys::ncclRedOp_t::*;
    match o {
        ReduceOp::Sum => ncclSum,
        ReduceOp::Prod => ncclProd,
        ReduceOp::Min => ncclMin,
        ReduceOp::Max => ncclMax,
        ReduceOp::Avg => ncclAvg,
    }
}

impl NcclGroup {
    /// Communicators on GPUs `ordinals` (their primary contexts must exist: open the
    /// `CudaGroup` first).
    pub fn new(ordinals: &[usize]) -> Result<Self, CudaError> {
        version()?;
        let devs: Vec<i32> = ordinals.iter().map(|&o| o as i32).collect();
        let mut comms = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: output array sized to the device count.
        unsafe { result::comm_init_all(comms.as_mut_ptr(), devs.len() as i32, devs.as_ptr()) }
            .map_err(err)?;
        Ok(Self { comms })
    }

    /// Enqueues rank `rank`'s NCCL call for `kind` on `stream` (raw pointers, as nccl-tests).
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue(
        &self,
        rank: usize,
        kind: CollectiveKind,
        root: u32,
        send: u64,
        recv: u64,
        count: u64,
        dt: DataType,
        op: ReduceOp,
        stream: dsys::CUstream,
    ) -> Result<(), CudaError> {
        let c = self.comms[rank];
        let (s, r, n) = (send as *const c_void, recv as *mut c_void, count as usize);
        let st = stream as _;
        // SAFETY: pointers are device buffers of the sizes the collective needs on this rank.
        unsafe {
            match kind {
                CollectiveKind::AllReduce => {
                    result::all_reduce(s, r, n, dtype(dt), redop(op), c, st)
                }
                CollectiveKind::AllGather => result::all_gather(s, r, n, dtype(dt), c, st),
                CollectiveKind::ReduceScatter => {
                    result::reduce_scatter(s, r, n, dtype(dt), redop(op), c, st)
                }
                CollectiveKind::Broadcast => {
                    result::broadcast(s, r, n, dtype(dt), root as i32, c, st)
                }
                CollectiveKind::Reduce => {
                    result::reduce(s, r, n, dtype(dt), redop(op), root as i32, c, st)
                }
                other => {
                    return Err(CudaError::Input(format!(
                        "NCCL baseline: {} not supported",
                        other.name()
                    )))
                }
            }
        }
        .map_err(err)?;
        Ok(())
    }
}

impl Drop for NcclGroup {
    fn drop(&mut self) {
        for c in self.comms.drain(..) {
            // SAFETY: created by comm_init_all, destroyed once.
            let _ = unsafe { result::comm_destroy(c) };
        }
    }
}
