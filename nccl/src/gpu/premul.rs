//! PreMulSum on the CUDA path: each rank's input times the op's scalar (`cuda::scale`), then a
//! sum of the scaled inputs, which is NCCL's definition. All-reduce scales into its output and
//! sums in place there; reduce-scatter and reduce scale into a per-communicator scratch buffer.

use super::rank::Scratch;
use crate::abi::NcclOp;
use crate::comm::Comm;
use crate::error::{usage, ApiError};
use crate::op::{Kind, Op, Route};
use cuda::ipc::CudaProcComm;
use runtime::DataType;
use runtime::ReduceOp;

/// For a PreMulSum `op` (`count` elements of `dtype` per rank block): enqueues the scaling and
/// returns the (input, output) the sum runs on; any other op's own buffers.
pub fn prepare(
    comm: &Comm,
    proc: &CudaProcComm,
    scratch: &mut Scratch,
    op: &Op,
    dtype: DataType,
    count: usize,
) -> Result<(u64, u64), ApiError> {
    let NcclOp::PreMulSum(v) = op.op else {
        return Ok((op.send as u64, op.recv as u64));
    };
    let (scalar, _) = crate::premul::scalar(comm, v)
        .ok_or_else(|| usage(format!("PreMulSum op {v} is not live on this communicator")))?;
    let elems = match op.kind {
        Kind::ReduceScatter => count as u64 * comm.nranks as u64,
        _ => count as u64,
    };
    let stream = op.stream as cudarc::driver::sys::CUstream;
    let scale = |dst: u64| {
        proc.scale(dst, op.send as u64, elems, dtype, scalar, stream)
            .map_err(|e| ApiError::Cuda(format!("{}: {e}", op.call)))
    };
    if op.kind == Kind::AllReduce {
        // The output is the input's size: scale into it, then sum in place there.
        scale(op.recv as u64)?;
        return Ok((op.recv as u64, op.recv as u64));
    }
    let buf = scratch.take(proc, elems * dtype.size() as u64, op.stream)?;
    scale(buf)?;
    Ok((buf, op.recv as u64))
}

/// A PreMulSum reduction on device buffers: topoplan's CUDA path scales each input and sums
/// (`gpu::run`), where it takes the call (`refusal`: why it does not, from `gpu::refusal`);
/// NCCL otherwise.
pub fn route(comm: &Comm, op: &Op, v: std::ffi::c_int, refusal: Option<String>) -> Route {
    let made_for = crate::premul::scalar(comm, v).map(|(_, t)| t);
    let sum = op.dtype.reducible_as(ReduceOp::Sum);
    match (made_for == Some(op.dtype), sum, refusal) {
        (true, Some(dtype), None) => Route::Gpu {
            dtype,
            op: ReduceOp::Sum,
            count: op.count,
        },
        (_, _, Some(why)) => Route::Nccl(format!("PreMulSum reductions run on NCCL here: {why}")),
        _ => Route::Nccl(format!(
            "PreMulSum of {} runs on NCCL (topoplan sums no such type, or the op was made for another)",
            op.dtype.name()
        )),
    }
}
