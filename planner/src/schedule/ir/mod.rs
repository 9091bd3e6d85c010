//! The schedule IR: the one format the planner emits and both the simulator and the runtime execute.
//! Specified in `docs/schedule-ir.md`; keep the two in step.
//!
//! A schedule is size-independent geometry plus, per rank and channel, an ordered list of [`Op`]s.
//!
//! **Buffers and chunks.** Each rank has an input, an output and (optionally) a scratch buffer.
//! A buffer is a sequence of *blocks* of `count` elements each (`count` = the per-rank element
//! count the caller passes; see [`Collective::blocks`] for how many blocks each buffer has), and
//! each block is cut into `chunks_per_block` chunks by [`chunk_range`]. Chunk `c` of a buffer is
//! chunk `c % chunks_per_block` of block `c / chunks_per_block`. Uneven counts are handled by
//! the even split (chunks differ by at most one element; a chunk may be empty).
//!
//! **Pipelining.** When `loop_elems` is set, the program runs once per *loop iteration* on the
//! slice `[k*loop_elems, min((k+1)*loop_elems, count))` of every block, and chunk geometry applies
//! to that slice. Connections and their slots persist across iterations.
//!
//! **Transfers.** A sending op (`Send`, `*Send`) on rank `a` to peer `b` is matched with the
//! receiving op (`Recv*`) on rank `b` from peer `a` on the *same channel*, in program order: the
//! i-th message `a → b` on channel `c` is the i-th receive of `b` from `a` on `c`. The connection
//! has `slots` buffer slots (NCCL's steps); message i uses slot `i % slots`, and a sender blocks
//! while its slot still holds an unread message. A matched pair moves `chunks.count` chunks.
//!
//! **Order.** Ops of one (rank, channel) run in order. `deps` add edges to ops of other channels of
//! the same rank (the op may not start before they complete). `repeat` expands an op into
//! `repeat` consecutive copies, copy k shifting every chunk index by `k * chunk_stride` modulo the
//! buffer's chunk count; it keeps ring programs linear in ranks × channels. Two more per-copy
//! shifts keep the other patterns linear too:
//! - `peer_stride`: copy k talks to `(peer + k * peer_stride) mod nranks` (both `send_to` and
//!   `recv_from`); direct patterns (one-shot, all-to-all) are one repeated op per direction.
//! - `walk`: copy k's chunk range on buffer `walk.buffer` lies in block
//!   `orders[walk.order][(walk.start + k * walk.step) mod len]` (same chunk offset inside the
//!   block). Ring all-gather and reduce-scatter visit blocks in ring order, which is any
//!   permutation of the ranks; `Schedule::orders` holds those permutations once per schedule.
//! - `window {start, len}`: `chunk_stride` shifts wrap inside chunks `start .. start+len` instead
//!   of the whole buffer (hierarchical schedules rotate one host's or one channel's pieces).
//!
//! **Dependencies and loops.** A dependency names an op of another channel of the same rank *in
//! the same loop iteration*; on a repeated op it binds the first copy. Program order and deps must
//! form no cycle (`validate` checks); send/recv waits are the simulator's deadlock check.
//!
//! **Consumers** should read programs through [`Schedule::expanded_ops`], which applies
//! `repeat`, `chunk_stride`, `peer_stride` and `walk`, so every expanded op is a plain op.//!
//! The parts: this file holds the schedule itself and the chunk split; `collective` what is
//! computed (collective, algorithm and protocol names); `op` the ops and what they address.

mod collective;
mod op;

pub use collective::*;
pub use op::*;
use serde::{Deserialize, Serialize};

/// Version of the IR's JSON form. Bump on any incompatible change.
pub const SCHEDULE_IR_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelProgram {
    pub ops: Vec<Op>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankProgram {
    pub rank: u32,
    /// Indexed by channel; every rank has `Schedule::channels` entries (possibly empty).
    pub channels: Vec<ChannelProgram>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub version: u32,
    pub collective: Collective,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub nranks: u32,
    pub channels: u32,
    pub chunks_per_block: u32,
    /// Scratch buffer size in blocks (0: no scratch).
    #[serde(default)]
    pub scratch_blocks: u32,
    /// Buffer slots per connection (NCCL_STEPS is 8).
    pub slots: u32,
    /// Elements per block per loop iteration; `None`: one iteration over the whole buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_elems: Option<u64>,
    /// Rank permutations referenced by ops' `walk` (e.g. one ring order per channel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<Vec<u32>>,
    pub ranks: Vec<RankProgram>,
}

/// Element range of chunk `i` when `total` elements are cut into `n` chunks: an even split whose
/// chunk sizes differ by at most one element.
pub fn chunk_range(total: u64, n: u32, i: u32) -> std::ops::Range<u64> {
    debug_assert!(n > 0 && i < n);
    let n = n as u64;
    let i = i as u64;
    (i * total / n)..((i + 1) * total / n)
}
