//! A communicator's CUDA state and the schedules it has run: a leaf, so the communicator can
//! hold it without importing the CUDA path that fills it.

use crate::abi::NcclOp;
use crate::error::{usage, ApiError};
use crate::op::{Kind, Op};
use cuda::device::DevBuf;
use cuda::ipc::calls::Calls;
use cuda::ipc::{check_direct, CudaProcComm};
use cuda::query::StreamMark;
use cuda::{schedules, CudaGroup};
use planner::schedule::{Collective, CollectiveKind, Schedule};
use planner::tuner::Profile;
use runtime::ReduceOp;
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
        schedules: Schedules,
        /// Marks the last batch's work for the hang report (`None`: the driver refused one).
        mark: Option<Arc<StreamMark>>,
        /// PreMulSum's scaled inputs (`super::premul`).
        scratch: Scratch,
    },
    /// Every rank in this process: the direct path's kernels through the `CudaGroup` the ranks
    /// share (`super::local`), this rank enqueuing its own part; and the schedules it has run.
    Local {
        group: Arc<CudaGroup>,
        schedules: Schedules,
        mark: Option<Arc<StreamMark>>,
        /// The comparison of this rank's calls with its peers' (`cuda::ipc::calls`; `None`
        /// without a shared-memory directory).
        calls: Option<Calls>,
    },
    /// No direct path for these ranks (why): their device calls run through host copies.
    Unavailable(String),
}

impl GpuRank {
    /// Why this rank's CUDA state refuses `op` (`None`: it does not).
    pub fn refuses(&self, op: &Op) -> Option<String> {
        match self {
            GpuRank::Unavailable(why) => Some(why.clone()),
            // Its scaled inputs would need a scratch buffer per rank, allocated (and freed)
            // while peers' kernels wait on the same GPU.
            GpuRank::Local { .. } if scales_first(op) => Some(
                "PreMulSum (and float8 average, a PreMulSum in NCCL) on ranks that share a process"
                    .into(),
            ),
            _ => None,
        }
    }

    /// The mark of the last batch's work, for the hang report.
    pub fn mark(&self) -> Option<&Arc<StreamMark>> {
        match self {
            GpuRank::Procs { mark, .. } | GpuRank::Local { mark, .. } => mark.as_ref(),
            _ => None,
        }
    }

    /// `ncclCommAbort`: stops every kernel of this rank that waits on a peer (they poll an
    /// abort word) and releases the copy engines' waits. Ranks of one process share one abort
    /// word: their kernels wait on each other, so they stop together.
    pub fn abort(&self) -> Result<(), cuda::CudaError> {
        match self {
            GpuRank::Procs { proc, .. } => proc.abort(),
            GpuRank::Local { group, .. } => group.abort(),
            _ => Ok(()),
        }
    }
}

/// Whether `op` scales its inputs before it sums (`super::premul`): a PreMulSum, or a float8
/// average, which NCCL runs as a PreMulSum by 1/nranks.
pub fn scales_first(op: &Op) -> bool {
    match op.op {
        NcclOp::PreMulSum(_) => true,
        NcclOp::Builtin(r) => r == ReduceOp::Avg && op.dtype.fp8_avg_scalar(1).is_some(),
    }
}

/// The collective the direct path runs for `k`; `None` for messages between pairs (the
/// point-to-point kernel).
pub fn collective_kind(k: Kind) -> Option<CollectiveKind> {
    Some(match k {
        Kind::AllReduce => CollectiveKind::AllReduce,
        Kind::AllGather => CollectiveKind::AllGather,
        Kind::ReduceScatter => CollectiveKind::ReduceScatter,
        Kind::Broadcast => CollectiveKind::Broadcast,
        Kind::Reduce => CollectiveKind::Reduce,
        Kind::AllToAll => CollectiveKind::AllToAll,
        Kind::Gather | Kind::Scatter | Kind::Send | Kind::Recv => return None,
    })
}

/// The schedules a rank has run, by (collective, root, bytes per rank): `cuda::schedules`
/// picks each shape once.
#[derive(Debug, Default)]
pub struct Schedules(HashMap<(CollectiveKind, u32, u64), Arc<Schedule>>);

impl Schedules {
    /// The schedule of collective `k` (root `root`) for `bytes` per rank on `nranks` ranks.
    pub fn get(
        &mut self,
        nranks: u32,
        k: CollectiveKind,
        root: u32,
        bytes: u64,
    ) -> Result<Arc<Schedule>, ApiError> {
        if let Some(s) = self.0.get(&(k, root, bytes)) {
            return Ok(s.clone());
        }
        let coll = match k {
            CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(k, root),
            _ => Collective::new(k),
        };
        // Priced with the bundled profile: the library takes no profile file.
        let algo = schedules::auto_direct_algo(Profile::bundled(), k, bytes, false);
        let (_, s) = schedules::pick(&coll, nranks, bytes, algo, Profile::bundled())
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        check_direct(&s).map_err(|e| ApiError::Internal(e.to_string()))?;
        let s = Arc::new(s);
        self.0.insert((k, root, bytes), s.clone());
        Ok(s)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::NcclType;

    fn op(kind: Kind, dtype: NcclType, op: NcclOp) -> Op {
        Op::sample(kind, dtype, op)
    }

    /// The calls ranks of one process refuse (they have no scratch for scaled inputs): PreMulSum
    /// and float8 averages; every other reduction sums, averages or compares in the kernels.
    #[test]
    fn premulsum_and_float8_averages_scale_first() {
        let ar = |t, o| op(Kind::AllReduce, t, o);
        assert!(scales_first(&ar(NcclType::F32, NcclOp::PreMulSum(3))));
        assert!(scales_first(&ar(
            NcclType::F8E4M3,
            NcclOp::Builtin(ReduceOp::Avg)
        )));
        assert!(scales_first(&ar(
            NcclType::F8E5M2,
            NcclOp::Builtin(ReduceOp::Avg)
        )));
        assert!(!scales_first(&ar(
            NcclType::Bf16,
            NcclOp::Builtin(ReduceOp::Avg)
        )));
        assert!(!scales_first(&ar(
            NcclType::F8E4M3,
            NcclOp::Builtin(ReduceOp::Sum)
        )));
        let gone = GpuRank::Unavailable("why".into());
        assert_eq!(
            gone.refuses(&ar(NcclType::F32, NcclOp::Builtin(ReduceOp::Sum)))
                .as_deref(),
            Some("why")
        );
        assert!(GpuRank::Separate
            .refuses(&ar(NcclType::F32, NcclOp::PreMulSum(3)))
            .is_none());
        assert_eq!(collective_kind(Kind::Reduce), Some(CollectiveKind::Reduce));
        for k in [Kind::Gather, Kind::Scatter, Kind::Send, Kind::Recv] {
            assert_eq!(collective_kind(k), None);
        }
    }
}
