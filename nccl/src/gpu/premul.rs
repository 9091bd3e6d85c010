//! PreMulSum on the CUDA path: each rank's input times the op's scalar (`cuda::scale`), then a
//! sum of the scaled inputs, which is NCCL's definition. All-reduce scales into its output and
//! sums in place there; reduce-scatter and reduce scale into a per-communicator scratch buffer.
//! NCCL 2.28 runs `ncclAvg` on FP8 the same way, by 1/nranks rounded to FP8
//! (`runtime::fp8`), so FP8 averages take this path too.

use super::rank::Scratch;
use crate::abi::NcclOp;
use crate::comm::Comm;
use crate::error::{usage, ApiError};
use crate::op::{Kind, Op, Route};
use cuda::ipc::CudaProcComm;
use cuda::scale::Scalar;
use runtime::DataType;
use runtime::ReduceOp;

/// For a PreMulSum `op`, or an FP8 average (`count` elements of `dtype` per rank block):
/// enqueues the scaling and returns the (input, output) the sum runs on; any other op's own
/// buffers.
pub fn prepare(
    comm: &Comm,
    proc: &CudaProcComm,
    scratch: &mut Scratch,
    op: &Op,
    dtype: DataType,
    count: usize,
) -> Result<(u64, u64), ApiError> {
    let scalar = match op.op {
        NcclOp::PreMulSum(v) => {
            crate::premul::scalar(comm, v)
                .ok_or_else(|| usage(format!("PreMulSum op {v} is not live on this communicator")))?
                .0
        }
        NcclOp::Builtin(ReduceOp::Avg) => match op.dtype.fp8_avg_scalar(comm.nranks) {
            Some(bits) => Scalar::Host(u64::from(bits)),
            None => return Ok((op.send as u64, op.recv as u64)),
        },
        NcclOp::Builtin(_) => return Ok((op.send as u64, op.recv as u64)),
    };
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

/// An FP8 `ncclAvg` on device buffers: NCCL's PreMulSum by 1/nranks, on topoplan's CUDA path
/// where it takes the call ([`prepare`] scales, then a sum); NCCL otherwise (the runtime's
/// average divides the sum instead).
pub fn route_fp8_avg(op: &Op, refusal: Option<String>) -> Route {
    match (op.dtype.reducible_as(ReduceOp::Sum), refusal) {
        (Some(dtype), None) => Route::Gpu {
            dtype,
            op: ReduceOp::Sum,
            count: op.count,
        },
        (_, why) => Route::Nccl(format!(
            "{} avg is NCCL's PreMulSum by 1/nranks, run on the CUDA path only: {}",
            op.dtype.name(),
            why.unwrap_or_else(|| "no FP8 sum".into())
        )),
    }
}
