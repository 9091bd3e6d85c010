//! A group's point-to-point calls on the direct path's point-to-point kernel
//! (`cuda::direct::p2p`): sends and receives as issued, gather and scatter as the messages they
//! are made of (the root's own block a copy), all in one [`CudaProcComm::enqueue_p2p`] per group.

use crate::error::ApiError;
use crate::op::{Kind, Op};
use cuda::direct::p2p::Transfer;
use cuda::ipc::CudaProcComm;
use cuda::CudaError;
use cudarc::driver::sys::CUstream;

/// The point-to-point part of one group, in issue order, and the streams it was issued on.
#[derive(Debug, Default)]
pub struct Group {
    sends: Vec<Transfer>,
    recvs: Vec<Transfer>,
    streams: Vec<usize>,
}

impl Group {
    /// Adds `op` (send, receive, gather or scatter of `bytes` per block) of `rank` of `nranks`.
    pub fn add(&mut self, op: &Op, rank: u32, nranks: u32, bytes: u64) {
        let t = |peer: u32, ptr: usize| Transfer {
            peer,
            ptr: ptr as u64,
            bytes,
        };
        let block = |base: usize, i: u32| base + (i as u64 * bytes) as usize;
        let root = op.peer;
        match op.kind {
            Kind::Send => self.sends.push(t(op.peer, op.send)),
            Kind::Recv => self.recvs.push(t(op.peer, op.recv)),
            // Every rank's block goes to block `rank` of the root's output.
            Kind::Gather if rank != root => self.sends.push(t(root, op.send)),
            Kind::Gather => {
                for s in 0..nranks {
                    if s == rank {
                        self.sends.push(t(rank, op.send));
                    }
                    self.recvs.push(t(s, block(op.recv, s)));
                }
            }
            // Block p of the root's input goes to rank p.
            Kind::Scatter if rank != root => self.recvs.push(t(root, op.recv)),
            Kind::Scatter => {
                for p in 0..nranks {
                    self.sends.push(t(p, block(op.send, p)));
                    if p == rank {
                        self.recvs.push(t(rank, op.recv));
                    }
                }
            }
            _ => return,
        }
        if !self.streams.contains(&op.stream) {
            self.streams.push(op.stream);
        }
    }

    /// Enqueues the group on its first stream, joined to the others before and after (on the
    /// GPU: capturable).
    pub fn run(self, proc: &CudaProcComm) -> Result<(), ApiError> {
        self.run_with(|sends, recvs, stream| proc.enqueue_p2p(sends, recvs, stream))
    }

    /// [`Self::run`], enqueuing this rank's sends and receives on a stream with `enqueue`.
    pub fn run_with(
        self,
        enqueue: impl FnOnce(&[Transfer], &[Transfer], CUstream) -> Result<(), CudaError>,
    ) -> Result<(), ApiError> {
        let Some(&first) = self.streams.first() else {
            return Ok(());
        };
        let join = |waiter: usize, on: usize| {
            cuda::query::stream_waits_for(waiter, on).map_err(ApiError::Cuda)
        };
        for &s in &self.streams[1..] {
            join(first, s)?;
        }
        enqueue(&self.sends, &self.recvs, first as CUstream)
            .map_err(|e| cuda_error("point-to-point", e))?;
        for &s in &self.streams[1..] {
            join(s, first)?;
        }
        Ok(())
    }
}

/// A CUDA-path error of `call`: ranks that call different things are the caller's error
/// (`ncclInvalidUsage`, as the host-buffer path's agreement); the rest are CUDA's.
pub(super) fn cuda_error(call: &str, e: CudaError) -> ApiError {
    match e {
        CudaError::Mismatch(m) => crate::error::usage(format!("{call}: {m}")),
        e => ApiError::Cuda(format!("{call}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{NcclOp, NcclType};
    use runtime::ReduceOp;

    fn op(kind: Kind, send: usize, recv: usize, peer: u32) -> Op {
        Op {
            call: "t",
            kind,
            send,
            recv,
            count: 4,
            dtype: NcclType::U8,
            op: NcclOp::Builtin(ReduceOp::Sum),
            peer,
            stream: 7,
        }
    }

    /// Gather and scatter of 3 ranks planned on every rank: each message leaves its sender and
    /// reaches its receiver in the same round, the root's own block is a copy.
    #[test]
    fn gather_and_scatter_become_matched_messages() {
        let n = 3;
        for kind in [Kind::Gather, Kind::Scatter] {
            let plans: Vec<_> = (0..n)
                .map(|r| {
                    let mut g = Group::default();
                    g.add(&op(kind, 1000 * (r as usize + 1), 100, 1), r, n, 4);
                    cuda::direct::p2p::plan(r, n, &g.sends, &g.recvs).unwrap()
                })
                .collect();
            for (r, p) in plans.iter().enumerate() {
                let own = if r == 1 { 1 } else { 0 };
                assert_eq!(p.copies.len(), own, "{kind:?} rank {r}");
            }
            let root = &plans[1].rounds[0];
            for other in [0usize, 2] {
                let leaf = &plans[other].rounds[0];
                if kind == Kind::Gather {
                    assert_eq!(leaf.sends[1], Some((1000 * (other as u64 + 1), 4)));
                    assert_eq!(root.recvs[other], Some((100 + 4 * other as u64, 4)));
                } else {
                    assert_eq!(root.sends[other], Some((2000 + 4 * other as u64, 4)));
                    assert_eq!(leaf.recvs[1], Some((100, 4)));
                }
            }
        }
    }
}
