//! NCCL, loaded at run time through cudarc, as the baseline `topoplan bench --vs-nccl` measures
//! on the same buffers in the same run. In one process ([`NcclGroup`]): one communicator per GPU
//! (`ncclCommInitAll`), each rank's calls from that rank's host thread, like nccl-tests with one
//! thread per GPU. With one process per GPU ([`NcclRank`], `--procs`): rank 0's unique id goes
//! to the others through the bootstrap, then `ncclCommInitRank`, like nccl-tests under MPI.
//!
//! cudarc looks for `libnccl.so` (not `libnccl.so.2`); the device scripts add that link.

// Unsafe: NCCL's C API through cudarc's raw bindings; each block states why it is sound.
#![allow(unsafe_code)]

use cuda::CudaError;
use cudarc::driver::sys as dsys;
use cudarc::nccl::{result, sys};
use planner::schedule::CollectiveKind;
use runtime::types::{DataType, ReduceOp};
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

/// One communicator per GPU of this process (`ncclCommInitAll`).
pub struct NcclGroup {
    ranks: Vec<NcclRank>,
}

impl std::fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclGroup({} ranks)", self.ranks.len())
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
        DataType::F8E4M3 => ncclFloat8e4m3,
        DataType::F8E5M2 => ncclFloat8e5m2,
        DataType::U32 => ncclUint32,
        DataType::U64 => ncclUint64,
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
        Ok(Self {
            ranks: comms.into_iter().map(|comm| NcclRank { comm }).collect(),
        })
    }

    /// Rank `rank`'s communicator (its calls come from that rank's thread).
    pub fn rank(&self, rank: usize) -> &NcclRank {
        &self.ranks[rank]
    }
}

/// Bytes of NCCL's unique id (`ncclUniqueId`), which rank 0 sends to the others.
pub const UNIQUE_ID_BYTES: usize = 128;

/// One rank's NCCL communicator in a job of one process per GPU (`topoplan bench --procs
/// --vs-nccl`).
pub struct NcclRank {
    comm: sys::ncclComm_t,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; each rank's
// calls come from one thread (in `NcclGroup`, that rank's thread).
unsafe impl Send for NcclRank {}
unsafe impl Sync for NcclRank {}

impl std::fmt::Debug for NcclRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclRank")
    }
}

impl NcclRank {
    /// Joins the communicator of `nranks` ranks as `rank`; the device of the context current on
    /// this thread is the rank's GPU. `all_gather` carries rank 0's unique id to every rank (the
    /// others send nothing). Every rank must call this at the same point: NCCL's init blocks
    /// until all ranks have joined.
    pub fn new(
        rank: u32,
        nranks: u32,
        all_gather: impl FnOnce(&[u8]) -> Result<Vec<Vec<u8>>, CudaError>,
    ) -> Result<Self, CudaError> {
        version()?;
        let mine = if rank == 0 {
            let id = result::get_uniqueid().map_err(err)?;
            id.internal.iter().map(|&c| c as u8).collect()
        } else {
            Vec::new()
        };
        let table = all_gather(&mine)?;
        let id = unique_id_from(table.first().map(Vec::as_slice).unwrap_or_default())?;
        let mut comm = std::ptr::null_mut();
        // SAFETY: out-pointer valid; the id came from rank 0's ncclGetUniqueId.
        unsafe { result::comm_init_rank(&mut comm, nranks as i32, id, rank as i32) }
            .map_err(err)?;
        Ok(Self { comm })
    }

    /// Enqueues this rank's NCCL call for `kind` on `stream`.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue(
        &self,
        kind: CollectiveKind,
        root: u32,
        send: u64,
        recv: u64,
        count: u64,
        dt: DataType,
        op: ReduceOp,
        stream: dsys::CUstream,
    ) -> Result<(), CudaError> {
        let c = self.comm;
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

/// NCCL's unique id from the bytes rank 0 sent.
fn unique_id_from(b: &[u8]) -> Result<sys::ncclUniqueId, CudaError> {
    if b.len() != UNIQUE_ID_BYTES {
        return Err(CudaError::Nccl(format!(
            "rank 0 sent an NCCL unique id of {} bytes, expected {UNIQUE_ID_BYTES}",
            b.len()
        )));
    }
    let mut id = sys::ncclUniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    for (d, &s) in id.internal.iter_mut().zip(b) {
        *d = s as _;
    }
    Ok(id)
}

impl Drop for NcclRank {
    fn drop(&mut self) {
        // SAFETY: created by comm_init_rank, destroyed once.
        let _ = unsafe { result::comm_destroy(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_id_must_be_whole() {
        let b: Vec<u8> = (0..UNIQUE_ID_BYTES as u32).map(|i| (i * 7) as u8).collect();
        let id = unique_id_from(&b).unwrap();
        assert!(id.internal.iter().zip(&b).all(|(&c, &x)| c as u8 == x));
        let e = unique_id_from(&b[..100]).unwrap_err().to_string();
        assert!(e.contains("100 bytes, expected 128"), "{e}");
        assert!(unique_id_from(&[]).is_err());
    }
}
