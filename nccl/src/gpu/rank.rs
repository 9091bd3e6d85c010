//! A communicator's CUDA state and the schedules it has run: a leaf, so the communicator can
//! hold it without importing the CUDA path that fills it.

use crate::error::ApiError;
use crate::op::Kind;
use cuda::ipc::calls::Calls;
use cuda::ipc::{check_direct, CudaProcComm};
use cuda::query::StreamMark;
use cuda::{schedules, CudaGroup};
use planner::schedule::{Collective, CollectiveKind, Schedule};
use planner::tuner::Profile;
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
        /// PreMulSum's scaled inputs (`super::premul`).
        scratch: Scratch,
    },
    /// No direct path for these ranks (why): their device calls run through host copies.
    Unavailable(String),
}

impl GpuRank {
    /// Why this rank's CUDA state refuses device calls (`None`: it does not).
    pub fn refuses(&self) -> Option<String> {
        match self {
            GpuRank::Unavailable(why) => Some(why.clone()),
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

/// The scaled inputs' buffer, grown on demand, and the stream that last used it. Allocated
/// from the stream-ordered pool (`cuda::query::mem_alloc_now`): growing it never waits for the
/// device, as `cuMemAlloc`/`cuMemFree` may, which would deadlock ranks of one process whose
/// kernels wait on the GPU for a peer this thread has yet to enqueue; and it may grow while the
/// call is being captured into a CUDA graph.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Address, bytes, and the context it was allocated in.
    buf: Option<(u64, u64, Arc<cudarc::driver::CudaContext>)>,
    stream: usize,
    /// Whether a CUDA graph captured a call on `buf`: its replays read it, so growing keeps the
    /// old buffer (in `kept`) until the communicator goes.
    captured: bool,
    kept: Vec<u64>,
}

impl Scratch {
    /// A device buffer of at least `bytes` in `ctx`, for work on `stream`, ordered after its
    /// last use on another stream (unless `stream` is being captured).
    pub(super) fn take(
        &mut self,
        ctx: &Arc<cudarc::driver::CudaContext>,
        bytes: u64,
        stream: usize,
    ) -> Result<u64, ApiError> {
        let capturing = cuda::query::capturing(stream);
        // A captured stream waits for nothing outside its graph, whose own order holds.
        if self.buf.is_some() && self.stream != stream && !capturing {
            cuda::query::stream_waits_for(stream, self.stream).map_err(ApiError::Cuda)?;
        }
        self.stream = stream;
        let captured = std::mem::replace(&mut self.captured, false) || capturing;
        match &self.buf {
            Some(b) if b.1 >= bytes => {
                self.captured = captured;
                return Ok(b.0);
            }
            _ => {}
        }
        let grow = |e: String| ApiError::Cuda(format!("PreMulSum scratch of {bytes} bytes: {e}"));
        ctx.bind_to_thread().map_err(|e| grow(e.to_string()))?;
        let p = cuda::query::mem_alloc_now(bytes as usize).map_err(grow)? as u64;
        // The old buffer goes in `stream`'s order, which now follows its last use; one a graph
        // captured stays (a captured stream takes no free of memory the graph did not allocate).
        match self.buf.replace((p, bytes, ctx.clone())) {
            Some((old, ..)) if captured => self.kept.push(old),
            // A buffer the driver would not free now is kept: the call itself is sound.
            Some((old, ..)) if cuda::query::mem_free_async(old as usize, stream).is_err() => {
                self.kept.push(old)
            }
            _ => {}
        }
        self.captured = capturing;
        Ok(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some((p, _, ctx)) = self.buf.take() else {
            return;
        };
        // In the order of its last use; where that stream is gone, its work was done before
        // it was destroyed, and a plain free waits for whatever else runs.
        let _ = ctx.bind_to_thread();
        for p in std::iter::once(p).chain(self.kept.drain(..)) {
            if cuda::query::mem_free_async(p as usize, self.stream).is_err() {
                let _ = cuda::query::mem_free(p as usize);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a communicator without a direct path refuses device calls: PreMulSum and float8
    /// averages scale first on every path that has one (`super::premul`).
    #[test]
    fn only_ranks_without_a_direct_path_refuse_device_calls() {
        let gone = GpuRank::Unavailable("why".into());
        assert_eq!(gone.refuses().as_deref(), Some("why"));
        assert!(GpuRank::Separate.refuses().is_none());
        assert_eq!(collective_kind(Kind::Reduce), Some(CollectiveKind::Reduce));
        for k in [Kind::Gather, Kind::Scatter, Kind::Send, Kind::Recv] {
            assert_eq!(collective_kind(k), None);
        }
    }
}
