//! PreMulSum on the CUDA path: each rank's input times the op's scalar (`cuda::scale`), then a
//! sum of the scaled inputs, which is NCCL's definition. All-reduce scales into its output and
//! sums in place there; reduce-scatter and reduce scale into a per-communicator scratch buffer.
//! NCCL 2.28 runs `ncclAvg` on FP8 the same way, by 1/nranks rounded to FP8
//! (`runtime::fp8`), so FP8 averages take this path too.

use super::rank::Scratch;
use crate::abi::NcclOp;
use crate::comm::Comm;
use crate::error::{usage, ApiError};
use crate::op::{Kind, Op};
use cuda::ipc::CudaProcComm;
use cuda::scale::Scaling;
use cuda::{CudaError, CudaGroup};
use cudarc::driver::CudaContext;
use runtime::DataType;
use runtime::ReduceOp;
use std::sync::Arc;

/// What scales a rank's input on its GPU: the communicator of ranks in separate processes, or
/// one rank of the group of ranks in this process (`super::local`).
pub enum Scaler<'a> {
    Proc(&'a CudaProcComm),
    Own(&'a CudaGroup, usize),
}

impl Scaler<'_> {
    fn context(&self) -> &Arc<CudaContext> {
        match self {
            Scaler::Proc(p) => p.context(),
            Scaler::Own(g, rank) => g.context(*rank),
        }
    }

    fn scale(
        &self,
        s: &Scaling,
        dtype: DataType,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<(), CudaError> {
        match self {
            Scaler::Proc(p) => p.scale(s, dtype, stream),
            Scaler::Own(g, rank) => g.scale_own(*rank, s, dtype, stream),
        }
    }
}

/// For a PreMulSum `op`, or an FP8 average (`count` elements of `dtype` per rank block):
/// enqueues the scaling and returns the (input, output) the sum runs on; any other op's own
/// buffers.
pub fn prepare(
    comm: &Comm,
    on: Scaler,
    scratch: &mut Scratch,
    op: &Op,
    dtype: DataType,
    count: usize,
) -> Result<(u64, u64), ApiError> {
    let scalar = match (crate::premul::factor(comm, op), op.op) {
        (Some(s), _) => s,
        (None, NcclOp::PreMulSum(v)) => {
            return Err(usage(format!(
                "PreMulSum op {v} is not live on this communicator for {}",
                op.dtype.name()
            )))
        }
        (None, NcclOp::Builtin(_)) => return Ok((op.send as u64, op.recv as u64)),
    };
    let elems = match op.kind {
        Kind::ReduceScatter => count as u64 * comm.nranks as u64,
        _ => count as u64,
    };
    let stream = op.stream as cudarc::driver::sys::CUstream;
    let scale = |dst: u64| {
        let s = Scaling {
            dst,
            src: op.send as u64,
            n: elems,
            scalar,
        };
        on.scale(&s, dtype, stream)
            .map_err(|e| ApiError::Cuda(format!("{}: {e}", op.call)))
    };
    if op.kind == Kind::AllReduce {
        // The output is the input's size: scale into it, then sum in place there.
        scale(op.recv as u64)?;
        return Ok((op.recv as u64, op.recv as u64));
    }
    let buf = scratch.take(on.context(), elems * dtype.size() as u64, op.stream)?;
    scale(buf)?;
    Ok((buf, op.recv as u64))
}

/// Why topoplan cannot run PreMulSum op `v` for `op` (`None`: it can, as a sum of scaled
/// inputs, on the GPU or through host copies): an op it does not know, or made for another
/// type, or a type it sums in no way NCCL does.
pub fn unsupported(comm: &Comm, op: &Op, v: std::ffi::c_int) -> Option<String> {
    let made_for = crate::premul::scalar(comm, v).map(|(_, t)| t);
    let sums = op.dtype.reducible_as(ReduceOp::Sum).is_some();
    (made_for != Some(op.dtype) || !sums).then(|| {
        format!(
            "PreMulSum of {} runs on NCCL (topoplan sums no such type, or the op was made for another)",
            op.dtype.name()
        )
    })
}
