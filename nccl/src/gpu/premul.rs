//! PreMulSum on the CUDA path: each rank's input times the op's scalar (`cuda::scale`), then a
//! sum of the scaled inputs, which is NCCL's definition. All-reduce scales into its output and
//! sums in place there; reduce-scatter and reduce scale into a per-communicator scratch buffer.

use crate::abi::NcclOp;
use crate::comm::Comm;
use crate::error::{usage, ApiError};
use crate::op::{Kind, Op};
use cuda::device::DevBuf;
use cuda::ipc::CudaProcComm;
use runtime::DataType;

/// The scaled inputs' buffer, grown on demand, and the stream that last wrote it.
#[derive(Debug, Default)]
pub struct Scratch {
    buf: Option<DevBuf>,
    stream: usize,
}

impl Scratch {
    /// A device buffer of at least `bytes`, ordered after its last use on another stream.
    fn take(&mut self, proc: &CudaProcComm, bytes: u64, stream: usize) -> Result<u64, ApiError> {
        let small = self.buf.as_ref().is_none_or(|b| (b.bytes as u64) < bytes);
        if small {
            if cuda::query::capturing(stream) {
                return Err(usage(format!(
                    "a PreMulSum call needs {bytes} bytes of scratch, which a CUDA graph capture \
                     cannot allocate: run a call of this size once before capturing"
                )));
            }
            // Dropping the old buffer frees it after the work that uses it (cuMemFree waits).
            self.buf = None;
            let b = DevBuf::new(proc.context(), bytes as usize)
                .map_err(|e| ApiError::Cuda(format!("PreMulSum scratch: {e}")))?;
            self.buf = Some(b);
        } else if self.stream != stream {
            cuda::query::stream_waits_for(stream, self.stream).map_err(ApiError::Cuda)?;
        }
        self.stream = stream;
        Ok(self.buf.as_ref().map_or(0, |b| b.ptr))
    }
}

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
