//! Grouped point-to-point on the direct path (`cuda/kernels/direct_p2p.cuh`): the sends and
//! receives of one NCCL group (`batch_isend_irecv`, gather, scatter, all-to-all-v), any sizes,
//! any peer pattern, to itself included.
//!
//! [`plan`] cuts a group into what the kernel runs: copies for the messages to this rank itself
//! (the k-th send to itself fills the k-th receive from itself, as NCCL matches them), and
//! rounds of at most one message to and one from each peer (the k-th send to a peer is in round
//! k, and so is the peer's k-th receive from this rank: NCCL's per-pair order). Each round is one
//! launch; within it no CTA blocks on a single peer, so no peer pattern deadlocks. Pure and
//! tested without a GPU; [`launch_round`] enqueues one round.

use super::{knobs, launch, simple_slot_bytes, DirectPeers, BLOCK};
use crate::abort::TpAbort;
use crate::device::ExecModule;
use crate::layout::{DIRECT_MAX_CTAS, MAX_RANKS};
use crate::CudaError;
use cudarc::driver::{sys, CudaContext};
use std::sync::Arc;

/// One message of a group: to or from `peer`, `bytes` bytes at device address `ptr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub peer: u32,
    pub ptr: u64,
    pub bytes: u64,
}

/// One launch: at most one message (address, bytes) to and one from each peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Round {
    pub sends: [Option<(u64, u64)>; MAX_RANKS],
    pub recvs: [Option<(u64, u64)>; MAX_RANKS],
}

/// A local device copy: (destination, source, bytes).
pub type LocalCopy = (u64, u64, u64);

/// A group cut for the kernel: the copies to this rank itself, then the rounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct P2pPlan {
    pub copies: Vec<LocalCopy>,
    pub rounds: Vec<Round>,
}

/// Cuts `rank`'s sends and receives of one group (in the order they were issued) into copies
/// and rounds. Empty messages move nothing and are dropped at both ends alike.
pub fn plan(
    rank: u32,
    nranks: u32,
    sends: &[Transfer],
    recvs: &[Transfer],
) -> Result<P2pPlan, CudaError> {
    if nranks as usize > MAX_RANKS || rank >= nranks {
        return Err(CudaError::Input(format!(
            "rank {rank} of {nranks}: point-to-point on the direct path runs up to {MAX_RANKS} ranks"
        )));
    }
    for t in sends.iter().chain(recvs) {
        if t.peer >= nranks {
            return Err(CudaError::Input(format!(
                "peer {} of a {nranks}-rank communicator",
                t.peer
            )));
        }
    }
    let mut p = P2pPlan {
        copies: self_copies(rank, sends, recvs)?,
        rounds: Vec::new(),
    };
    let mut nth = [[0usize; MAX_RANKS]; 2];
    for (dir, list) in [sends, recvs].into_iter().enumerate() {
        for t in list.iter().filter(|t| t.peer != rank && t.bytes > 0) {
            let k = &mut nth[dir][t.peer as usize];
            if p.rounds.len() <= *k {
                p.rounds.push(Round::default());
            }
            let r = &mut p.rounds[*k];
            let slot = if dir == 0 { &mut r.sends } else { &mut r.recvs };
            slot[t.peer as usize] = Some((t.ptr, t.bytes));
            *k += 1;
        }
    }
    Ok(p)
}

/// The k-th send to `rank` itself paired with its k-th receive from itself.
fn self_copies(
    rank: u32,
    sends: &[Transfer],
    recvs: &[Transfer],
) -> Result<Vec<LocalCopy>, CudaError> {
    let own = |l: &[Transfer]| -> Vec<Transfer> {
        l.iter().filter(|t| t.peer == rank).copied().collect()
    };
    let (s, r) = (own(sends), own(recvs));
    if s.len() != r.len() {
        return Err(CudaError::Input(format!(
            "{} sends and {} receives to and from rank {rank} itself in one group",
            s.len(),
            r.len()
        )));
    }
    s.iter()
        .zip(&r)
        .map(|(s, r)| {
            if s.bytes != r.bytes {
                return Err(CudaError::Input(format!(
                    "a {}-byte send to rank {rank} itself meets a {}-byte receive",
                    s.bytes, r.bytes
                )));
            }
            Ok((r.ptr, s.ptr, s.bytes))
        })
        .collect()
}

/// CTAs of every point-to-point launch: the same on every rank (the share cut depends on it),
/// a quarter of the smallest GPU's SMs up to 16.
pub fn ctas(min_sm: u32) -> u32 {
    (min_sm / 4).clamp(1, 16).min(DIRECT_MAX_CTAS)
}

/// `TpP2pArgs` of direct_p2p.cuh, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TpP2pArgs {
    scratch: [u64; MAX_RANKS],
    flags: [u64; MAX_RANKS],
    send: [u64; MAX_RANKS],
    send_n: [u64; MAX_RANKS],
    recv: [u64; MAX_RANKS],
    recv_n: [u64; MAX_RANKS],
    seg: u64,
    slot_bytes: u64,
    rank: u32,
    nranks: u32,
    send_mask: u32,
    recv_mask: u32,
    nslots: u32,
    pad: u32,
    ab: TpAbort,
}

fn args(peers: &DirectPeers, rank: u32, round: &Round, ab: TpAbort) -> TpP2pArgs {
    let k = knobs();
    let slot_bytes = simple_slot_bytes(peers.nranks.saturating_sub(1).max(1) as u64, k.slot_bytes);
    let mut a = TpP2pArgs {
        scratch: peers.simple,
        flags: peers.flags,
        send: [0; MAX_RANKS],
        send_n: [0; MAX_RANKS],
        recv: [0; MAX_RANKS],
        recv_n: [0; MAX_RANKS],
        // Byte messages: one segment fills one slot.
        seg: slot_bytes,
        slot_bytes,
        rank,
        nranks: peers.nranks,
        send_mask: 0,
        recv_mask: 0,
        nslots: k.nslots,
        pad: 0,
        ab,
    };
    for p in 0..MAX_RANKS {
        if let Some((ptr, bytes)) = round.sends[p] {
            (a.send[p], a.send_n[p], a.send_mask) = (ptr, bytes, a.send_mask | 1 << p);
        }
        if let Some((ptr, bytes)) = round.recvs[p] {
            (a.recv[p], a.recv_n[p], a.recv_mask) = (ptr, bytes, a.recv_mask | 1 << p);
        }
    }
    a
}

/// Enqueues one round of `rank`'s group on `stream` (the byte kernel of `module`).
pub(crate) fn launch_round(
    ctx: &Arc<CudaContext>,
    module: &ExecModule,
    peers: &DirectPeers,
    rank: u32,
    round: &Round,
    ab: TpAbort,
    stream: sys::CUstream,
) -> Result<(), CudaError> {
    launch_round_pdl(ctx, module, peers, rank, round, ab, stream, true)
}

/// [`launch_round`], with programmatic dependent launch only where `pdl` allows it: not on a
/// GPU that ranks share (`crate::residency`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_round_pdl(
    ctx: &Arc<CudaContext>,
    module: &ExecModule,
    peers: &DirectPeers,
    rank: u32,
    round: &Round,
    ab: TpAbort,
    stream: sys::CUstream,
    pdl: bool,
) -> Result<(), CudaError> {
    let a = args(peers, rank, round, ab);
    launch::launch(
        ctx,
        &module.p2p,
        ctas(peers.min_sm),
        BLOCK,
        &a,
        stream,
        knobs().pdl && pdl,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(peer: u32, ptr: u64, bytes: u64) -> Transfer {
        Transfer { peer, ptr, bytes }
    }

    /// Every rank's plan of a random group, matched across ranks: the k-th message from a to b
    /// is in a's round k as a send and in b's round k as a receive, with the same size.
    #[test]
    fn rounds_pair_the_kth_message_of_every_pair() {
        let n = 5u32;
        // (from, to, bytes) in issue order, the same list on every rank (NCCL's matching).
        let msgs: Vec<(u32, u32, u64)> = (0..40u64)
            .map(|i| ((i * 7 % 5) as u32, (i * 3 % 5) as u32, i * 13 % 97))
            .collect();
        let plans: Vec<P2pPlan> = (0..n)
            .map(|r| {
                let sends: Vec<_> = msgs
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.0 == r)
                    .map(|(i, m)| t(m.1, i as u64, m.2))
                    .collect();
                let recvs: Vec<_> = msgs
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.1 == r)
                    .map(|(i, m)| t(m.0, 1000 + i as u64, m.2))
                    .collect();
                plan(r, n, &sends, &recvs).unwrap()
            })
            .collect();
        for (i, &(a, b, bytes)) in msgs.iter().enumerate() {
            if a == b || bytes == 0 {
                continue;
            }
            let k = msgs[..i]
                .iter()
                .filter(|m| (m.0, m.1) == (a, b) && m.2 > 0)
                .count();
            let sent = plans[a as usize].rounds[k].sends[b as usize];
            let got = plans[b as usize].rounds[k].recvs[a as usize];
            assert_eq!(sent, Some((i as u64, bytes)), "message {i}: {a} -> {b}");
            assert_eq!(
                got,
                Some((1000 + i as u64, bytes)),
                "message {i}: {a} -> {b}"
            );
        }
        let self_msgs = msgs.iter().filter(|m| m.0 == m.1).count();
        let copies: usize = plans.iter().map(|p| p.copies.len()).sum();
        assert_eq!(copies, self_msgs);
    }

    #[test]
    fn unmatched_or_out_of_range_groups_are_refused() {
        assert!(plan(0, 2, &[t(0, 1, 8)], &[]).is_err());
        assert!(plan(0, 2, &[t(0, 1, 8)], &[t(0, 2, 4)]).is_err());
        assert!(plan(0, 2, &[t(2, 1, 8)], &[]).is_err());
        assert!(plan(3, 2, &[], &[]).is_err());
        assert!(plan(0, 9, &[], &[]).is_err());
        let p = plan(1, 2, &[t(1, 10, 8), t(0, 11, 0)], &[t(1, 20, 8)]).unwrap();
        assert_eq!(p.copies, vec![(20, 10, 8)]);
        assert!(p.rounds.is_empty(), "an empty message moves nothing");
    }

    #[test]
    fn kernel_arguments_have_the_c_layout() {
        // 6 × 8 pointers or counts, 2 u64, 6 u32, then the 32-byte TpAbort (direct_p2p.cuh).
        assert_eq!(
            std::mem::size_of::<TpP2pArgs>(),
            6 * 64 + 2 * 8 + 6 * 4 + 32
        );
        assert_eq!(ctas(132), 16);
        assert_eq!(ctas(2), 1);
    }
}
