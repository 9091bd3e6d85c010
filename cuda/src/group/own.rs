//! One rank's own call in a [`CudaGroup`] whose ranks are driven independently: the NCCL
//! library's ranks of one process (`ncclCommInitAll`, nccl-tests `-g N`, a thread per rank),
//! each of which knows only its own buffers of a call. They run the direct path's push mode,
//! whose kernels read no peer's buffer of the call, only the peers' slots and flag words fixed
//! when the group was made: so a rank enqueues its part without its peers' pointers and without
//! waiting for them on the host, and the kernels order the ranks on the GPUs (sequence words),
//! exactly as across processes (`crate::ipc`), where the same kernels reach the peers through
//! CUDA IPC instead. Pull mode, the hybrid and the generic lowering read or address every
//! rank's buffers of the call, which one rank does not know, and do not run here.

use super::CudaGroup;
use crate::device::drv;
use crate::direct::{self, p2p, DirectCall, DirectPeers};
use crate::request::RankCall;
use crate::residency::Path;
use crate::CudaError;
use cudarc::driver::sys;
use planner::schedule::Protocol;
use runtime::types::DataType;

impl CudaGroup {
    /// Enqueues rank `rank`'s part of `call` on `stream` (a stream of that rank's context),
    /// knowing no other rank's buffers. Every rank must enqueue the same sequence of calls
    /// ([`Self::enqueue_own_p2p`] included); they may do so from any threads, in any order.
    pub fn enqueue_own(
        &self,
        rank: usize,
        call: &RankCall,
        stream: sys::CUstream,
    ) -> Result<(), CudaError> {
        let s = call.schedule;
        self.check_own(rank, s.nranks)?;
        if !direct::applies(s) {
            return Err(CudaError::Input(format!(
                "a rank's own call runs the direct schedules only (one-shot, direct all-to-all, \
                 2 to 8 ranks, TOPOPLAN_DIRECT not 0); algorithm `{}` for {} on {} ranks is not one",
                s.algorithm.name(),
                s.collective.kind.name(),
                s.nranks
            )));
        }
        if call.count == 0 {
            return Ok(());
        }
        let ab = self.next_call(rank)?;
        let module = self.module(rank, call.dtype)?;
        self.check_resident(if s.protocol == Protocol::LL {
            Path::DirectLl
        } else {
            Path::DirectSimple
        })?;
        self.order(rank, stream)?;
        let block = call.count * call.dtype.size() as u64;
        let in_place = direct::is_in_place(
            s.collective.kind,
            rank as u32,
            block,
            call.input,
            call.output,
        );
        let dc = DirectCall {
            ab,
            ..DirectCall::of(
                s,
                call.count,
                call.dtype,
                call.op,
                call.input,
                call.output,
                in_place,
            )
        };
        // No programmatic dependent launch on a shared GPU (`residency`).
        direct::launch_call_pdl(
            &self.ranks[rank].ctx,
            &module,
            &self.own_peers(),
            rank as u32,
            &dc,
            stream,
            !self.shares_devices(),
        )
    }

    /// Enqueues rank `rank`'s sends and receives of one group (in issue order) on `stream`:
    /// the copies to itself, then one point-to-point launch per round (`direct::p2p`).
    pub fn enqueue_own_p2p(
        &self,
        rank: usize,
        sends: &[p2p::Transfer],
        recvs: &[p2p::Transfer],
        stream: sys::CUstream,
    ) -> Result<(), CudaError> {
        let n = self.nranks() as u32;
        self.check_own(rank, n)?;
        if self.aborted() {
            return Err(CudaError::Aborted);
        }
        let plan = p2p::plan(rank as u32, n, sends, recvs)?;
        let module = self.module(rank, DataType::U8)?;
        let ctx = &self.ranks[rank].ctx;
        ctx.bind_to_thread().map_err(drv)?;
        self.order(rank, stream)?;
        for &(dst, src, bytes) in &plan.copies {
            if dst == src || bytes == 0 {
                continue;
            }
            // SAFETY: device ranges of the caller's group, on the caller's stream.
            let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes as usize, stream) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(CudaError::Driver(format!(
                    "rank {rank}: copying a {bytes}-byte send to itself: {r:?}"
                )));
            }
        }
        let peers = self.own_peers();
        for round in &plan.rounds {
            let ab = self.next_call(rank)?;
            let pdl = !self.shares_devices();
            p2p::launch_round_pdl(ctx, &module, &peers, rank as u32, round, ab, stream, pdl)?;
        }
        Ok(())
    }

    /// Enqueues scaling `s` (elements of `dtype`) on rank `rank`'s `stream`: a PreMulSum's
    /// first step (`crate::scale`).
    pub fn scale_own(
        &self,
        rank: usize,
        s: &crate::scale::Scaling,
        dtype: DataType,
        stream: sys::CUstream,
    ) -> Result<(), CudaError> {
        self.check_own(rank, self.nranks() as u32)?;
        let module = self.module(rank, dtype)?;
        crate::scale::enqueue(&self.ranks[rank].ctx, &module, s, stream)
    }

    fn check_own(&self, rank: usize, nranks: u32) -> Result<(), CudaError> {
        if rank >= self.ranks.len() {
            return Err(CudaError::Input(format!("rank {rank} out of range")));
        }
        if nranks as usize != self.ranks.len() {
            return Err(CudaError::Input(format!(
                "a schedule for {nranks} ranks on a group of {}",
                self.ranks.len()
            )));
        }
        Ok(())
    }

    /// Every rank's slots and flags, and the SMs each rank's grid may fill: its share of its
    /// GPU (`residency`), the least over the ranks, so that grids agree.
    fn own_peers(&self) -> DirectPeers {
        let mut peers = DirectPeers {
            nranks: self.nranks() as u32,
            min_sm: self.ranks.iter().map(|r| r.sm_count).min().unwrap_or(1),
            simple: [0; 8],
            ll: [0; 8],
            flags: [0; 8],
        };
        for (r, st) in self.ranks.iter().enumerate() {
            (peers.simple[r], peers.ll[r], peers.flags[r]) = st.direct.ptrs();
        }
        peers
    }

    /// Orders a call of `rank` on `stream` after the rank's previous call ([`join_before`]).
    fn order(&self, rank: usize, stream: sys::CUstream) -> Result<(), CudaError> {
        let s = stream as usize;
        let st = &self.ranks[rank];
        let mut last = st.last_stream.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prev) = join_before(*last, s, || crate::query::capturing(s)) {
            crate::query::stream_waits_for(s, prev).map_err(|e| {
                CudaError::Driver(format!("rank {rank}: ordering after its last call: {e}"))
            })?;
        }
        *last = Some(s);
        Ok(())
    }
}

/// The stream a rank's call on `stream` must first wait for: its previous call's, when that
/// was another stream (two kernels of one rank at once would race on its sequence words), and
/// not while `stream` is captured into a CUDA graph, where the graph's own order holds.
fn join_before(
    last: Option<usize>,
    stream: usize,
    capturing: impl FnOnce() -> bool,
) -> Option<usize> {
    last.filter(|&p| p != stream).filter(|_| !capturing())
}

#[cfg(test)]
mod tests {
    use super::join_before;

    #[test]
    fn a_call_on_another_stream_waits_for_the_last_one_unless_captured() {
        assert_eq!(join_before(None, 7, || false), None);
        assert_eq!(join_before(Some(7), 7, || false), None);
        assert_eq!(join_before(Some(5), 7, || false), Some(5));
        assert_eq!(join_before(Some(5), 7, || true), None);
        // Capture is asked only when another stream is involved (the query costs a call).
        assert_eq!(
            join_before(Some(7), 7, || panic!("asked without need")),
            None
        );
    }
}
