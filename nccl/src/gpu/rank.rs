//! A communicator's CUDA state: a leaf, so the communicator can hold it without importing the
//! CUDA path that fills it.

use crate::error::{usage, ApiError};
use cuda::device::DevBuf;
use cuda::ipc::CudaProcComm;
use planner::schedule::{CollectiveKind, Schedule};
use std::collections::HashMap;
use std::sync::Arc;

/// A communicator's CUDA side.
pub enum GpuRank {
    /// Its ranks are in separate processes; the direct path opens at its first call.
    Separate,
    /// One rank: every collective is a copy on the caller's stream (a PreMulSum a scaling, with
    /// the kernels of `ModuleCache`).
    Alone(Arc<cudarc::driver::CudaContext>, cuda::device::ModuleCache),
    /// The IPC-mapped direct path, and the schedules it has run.
    Procs {
        proc: Box<CudaProcComm>,
        schedules: HashMap<(CollectiveKind, u32, u64), Arc<Schedule>>,
        /// Marks the last batch's work for the hang report (`None`: the driver refused one).
        mark: Option<Arc<cuda::query::StreamMark>>,
        /// PreMulSum's scaled inputs (`super::premul`).
        scratch: Scratch,
    },
    /// No direct path for these ranks (why): their device calls run through host copies.
    Unavailable(String),
}

/// The scaled inputs' buffer, grown on demand, and the stream that last wrote it.
#[derive(Debug, Default)]
pub struct Scratch {
    buf: Option<DevBuf>,
    stream: usize,
}

impl Scratch {
    /// A device buffer of at least `bytes`, ordered after its last use on another stream.
    pub(super) fn take(
        &mut self,
        proc: &CudaProcComm,
        bytes: u64,
        stream: usize,
    ) -> Result<u64, ApiError> {
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
