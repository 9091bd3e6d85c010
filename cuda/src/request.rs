//! The call types every path of a [`crate::CudaGroup`] shares: a collective call
//! ([`Request`]), one rank's part of it ([`RankCall`]), the executor's by-value context ([`TpCtx`]) and the key of a lowered plan
//! ([`PlanKey`]). A leaf, so the paths and the group can all name them without importing each
//! other.

use crate::abort::TpAbort;
use crate::layout::MAX_RANKS;
use cudarc::driver::DeviceRepr;
use planner::schedule::Schedule;
use runtime::types::{DataType, ReduceOp};
use std::sync::Arc;

/// One collective call: the schedule and every rank's buffers (device pointers).
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub schedule: &'a Arc<Schedule>,
    /// Per-rank element count (nccl-tests' `count`; see `Collective::blocks`).
    pub count: u64,
    pub dtype: DataType,
    pub op: ReduceOp,
    pub inputs: &'a [u64],
    pub outputs: &'a [u64],
}

/// One rank's part of a collective call, with that rank's buffers only: what a rank driven on
/// its own enqueues, across processes (`crate::ipc::ProcRequest`) or in a group of this
/// process (`CudaGroup::enqueue_own`).
#[derive(Clone, Copy, Debug)]
pub struct RankCall<'a> {
    /// A schedule the direct path runs (`crate::direct::applies`): a one-shot, or the direct
    /// all-to-all.
    pub schedule: &'a Schedule,
    /// Per-rank element count (nccl-tests' `count`).
    pub count: u64,
    pub dtype: DataType,
    pub op: ReduceOp,
    pub input: u64,
    pub output: u64,
}

/// `TpCtx` of `cuda/kernels/exec.cu`: every rank's buffer bases and flag regions.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct TpCtx {
    pub(crate) base: [u64; 4 * MAX_RANKS],
    pub(crate) flags: [u64; MAX_RANKS],
    pub(crate) rank: u32,
    pub(crate) nranks: u32,
    pub(crate) ll: u32,
    pub(crate) pad: u32,
    pub(crate) ab: TpAbort,
}
// SAFETY: plain-old-data with the C layout the kernel declares.
unsafe impl DeviceRepr for TpCtx {}

impl TpCtx {
    pub(crate) fn base_of(&self, rank: usize, buf: usize) -> u64 {
        self.base[rank * 4 + buf]
    }
}

/// What a lowered plan depends on besides the schedule's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PlanKey {
    pub(crate) sched: usize,
    pub(crate) count: u64,
    pub(crate) in_place: bool,
    pub(crate) average: bool,
    pub(crate) elem: usize,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_executor_context_has_the_c_layout() {
        // 32 + 8 pointers, 4 u32, then the 32-byte TpAbort (exec.cu's TpCtx).
        assert_eq!(std::mem::size_of::<super::TpCtx>(), 40 * 8 + 4 * 4 + 32);
        assert_eq!(std::mem::offset_of!(super::TpCtx, ab), 40 * 8 + 4 * 4);
    }
}
