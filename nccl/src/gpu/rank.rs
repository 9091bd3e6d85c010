//! A communicator's CUDA state: a leaf, so the communicator can hold it without importing the
//! CUDA path that fills it.

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
        scratch: super::premul::Scratch,
    },
    /// No direct path for these ranks (why): their device calls run through host copies.
    Unavailable(String),
}
