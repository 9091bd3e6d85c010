//! Topology-free schedule builders: given rank orders (rings), trees or just a rank count, they
//! emit a [`Schedule`] for any of the seven collectives. The planner feeds them the channels its
//! search found; the runtime's CPU backend and the simulator's tests call them directly.
//!
//! Every builder returns a schedule that passes [`Schedule::validate`] and whose programs are
//! linear in ranks × channels (long runs of steps are one op with `repeat`), so 8192-rank
//! schedules stay small. Transports default to [`Transport::P2pStore`]; the planner rewrites them
//! from the topology (`planner::plan`).
//!
//! Chunk geometry follows NCCL: each channel owns its own chunks, and `loop_elems` is set so that
//! one message is about one protocol step (Simple 512 KiB, LL128 480 KiB, LL 32 KiB of payload),
//! counted in 4-byte elements. Layouts (C channels, n ranks):
//! - ring all-reduce: `chunks_per_block = n*C`, chunk `j*C + c` is ring position j's chunk on
//!   channel c (chunks are indexed by ring position, so a step is a constant stride of `-C`);
//! - ring all-gather / reduce-scatter / broadcast / reduce, trees, one-shot: `chunks_per_block = C`,
//!   chunk `b*C + c` is channel c's part of block b;
//! - two-shot all-reduce: `chunks_per_block = n*C`, chunk `q*C + c` is owned (reduced) by rank q.

use super::ir::*;
use super::validate::ScheduleError;
use serde::{Deserialize, Serialize};

mod direct;
mod hier;
mod packed;

pub use direct::*;
pub use hier::hierarchical;
pub use packed::{lanes, packed};

/// NCCL's connection FIFO depth (`NCCL_STEPS`).
pub const DEFAULT_SLOTS: u32 = 8;

/// Elements (4-byte) per message for a protocol: roughly one NCCL step's payload.
pub fn step_elems(proto: Protocol) -> u64 {
    match proto {
        Protocol::Simple => 128 * 1024, // 512 KiB
        Protocol::LL128 => 120 * 1024,  // 480 KiB (a multiple of LL128's 1920-byte grain)
        Protocol::LL => 8 * 1024,       // 32 KiB: half of the 64 KiB LL step carries data
    }
}

/// One tree channel: each rank's parent (`None` for the root) and children.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeChannel {
    pub parent: Vec<Option<u32>>,
    pub children: Vec<Vec<u32>>,
}

impl TreeChannel {
    /// Builds the children lists from a parent array (children in rank order).
    pub fn from_parents(parent: Vec<Option<u32>>) -> Result<Self, ScheduleError> {
        let n = parent.len();
        let mut children = vec![Vec::new(); n];
        for (r, p) in parent.iter().enumerate() {
            if let Some(p) = *p {
                if p as usize >= n {
                    return Err(shape(format!(
                        "tree: rank {r}'s parent {p} is not below {n}"
                    )));
                }
                children[p as usize].push(r as u32);
            }
        }
        let t = TreeChannel { parent, children };
        t.check(n as u32)?;
        Ok(t)
    }

    /// Checks the tree spans ranks `0..n` with one root and consistent links; returns the root.
    pub fn check(&self, n: u32) -> Result<u32, ScheduleError> {
        let n_us = n as usize;
        if self.parent.len() != n_us || self.children.len() != n_us {
            return Err(shape(format!(
                "tree: {} parents and {} children lists for {n} ranks",
                self.parent.len(),
                self.children.len()
            )));
        }
        let roots: Vec<u32> = (0..n)
            .filter(|r| self.parent[*r as usize].is_none())
            .collect();
        if roots.len() != 1 {
            return Err(shape(format!(
                "tree: needs exactly one root, found {roots:?}"
            )));
        }
        let mut nkids = 0usize;
        for (r, kids) in self.children.iter().enumerate() {
            for &k in kids {
                if k >= n || self.parent[k as usize] != Some(r as u32) {
                    return Err(shape(format!(
                        "tree: rank {r} lists child {k} whose parent is not {r}"
                    )));
                }
            }
            nkids += kids.len();
        }
        if nkids != n_us - 1 {
            return Err(shape(format!(
                "tree: children lists hold {nkids} entries, expected {}",
                n_us - 1
            )));
        }
        // Every rank reachable from the root, so no cycles.
        let mut seen = vec![false; n_us];
        let mut stack = vec![roots[0]];
        let mut count = 0;
        while let Some(v) = stack.pop() {
            if std::mem::replace(&mut seen[v as usize], true) {
                return Err(shape(format!("tree: rank {v} is reached twice")));
            }
            count += 1;
            stack.extend(self.children[v as usize].iter().copied());
        }
        if count != n_us {
            return Err(shape(format!(
                "tree: only {count} of {n} ranks hang below root {}",
                roots[0]
            )));
        }
        Ok(roots[0])
    }
}

pub(super) fn shape(s: String) -> ScheduleError {
    ScheduleError::Shape(s)
}
pub(super) fn unsupported(s: String) -> ScheduleError {
    ScheduleError::Unsupported(s)
}

pub(super) fn in_ref(chunk: u32) -> ChunkRef {
    ChunkRef::new(BufferKind::Input, chunk, 1)
}
pub(super) fn out_ref(chunk: u32) -> ChunkRef {
    ChunkRef::new(BufferKind::Output, chunk, 1)
}

/// The same schedule for another protocol: what every protocol-taking builder would have built
/// (only `protocol` and the per-step pipelining `loop_elems` depend on it). Saves rebuilding and
/// revalidating large schedules per protocol.
pub fn with_protocol(s: &Schedule, proto: Protocol) -> Schedule {
    let mut out = s.clone();
    out.protocol = proto;
    if out.loop_elems.is_some() {
        out.loop_elems = Some(out.chunks_per_block as u64 * step_elems(proto));
    }
    out
}

/// An empty schedule (every rank has `channels` empty programs).
pub fn empty(
    coll: &Collective,
    algorithm: Algorithm,
    proto: Protocol,
    nranks: u32,
    channels: u32,
    chunks_per_block: u32,
) -> Schedule {
    Schedule {
        version: SCHEDULE_IR_VERSION,
        collective: coll.clone(),
        algorithm,
        protocol: proto,
        nranks,
        channels,
        chunks_per_block,
        scratch_blocks: 0,
        slots: DEFAULT_SLOTS,
        loop_elems: Some(chunks_per_block as u64 * step_elems(proto)),
        orders: Vec::new(),
        ranks: (0..nranks)
            .map(|rank| RankProgram {
                rank,
                channels: vec![ChannelProgram { ops: Vec::new() }; channels as usize],
            })
            .collect(),
    }
}

pub(super) fn push(s: &mut Schedule, rank: u32, channel: u32, op: Op) {
    s.ranks[rank as usize].channels[channel as usize]
        .ops
        .push(op);
}

pub(super) fn check_collective(coll: &Collective, n: u32) -> Result<(), ScheduleError> {
    if n == 0 {
        return Err(shape("a schedule needs at least one rank".into()));
    }
    match coll.kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => match coll.root {
            Some(r) if r < n => Ok(()),
            _ => Err(shape(format!(
                "{} needs a root rank below {n}",
                coll.kind.name()
            ))),
        },
        CollectiveKind::SendRecv => {
            if coll.send_peers.len() != n as usize {
                return Err(shape(format!(
                    "sendrecv needs one send peer entry per rank: {} given for {n} ranks",
                    coll.send_peers.len()
                )));
            }
            let mut from = vec![None; n as usize];
            for (i, p) in coll.send_peers.iter().enumerate() {
                if let Some(p) = *p {
                    if p >= n {
                        return Err(shape(format!(
                            "sendrecv: rank {i} sends to {p}, not below {n}"
                        )));
                    }
                    if let Some(j) = from[p as usize].replace(i) {
                        return Err(shape(format!(
                            "sendrecv: rank {p} would receive from both {j} and {i} into one buffer"
                        )));
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Ring schedules: one rank order per channel (each a permutation of `0..n`). All-reduce is
/// NCCL's ring (reduce-scatter then all-gather, 2(n−1) steps); all-gather and reduce-scatter take
/// n−1 steps; broadcast and reduce pipeline along the ring from / towards the root.
pub fn ring(
    coll: &Collective,
    rings: &[Vec<u32>],
    proto: Protocol,
) -> Result<Schedule, ScheduleError> {
    let Some(first) = rings.first() else {
        return Err(shape("ring: at least one ring is needed".into()));
    };
    let n = first.len() as u32;
    check_collective(coll, n)?;
    let pos_of = ring_positions(rings, n)?;
    let nc = rings.len() as u32;
    let kind = coll.kind;
    let cpb = match kind {
        CollectiveKind::AllReduce => n * nc,
        CollectiveKind::AllToAll | CollectiveKind::SendRecv => {
            return Err(unsupported(format!(
                "ring: {} is built by `direct`, not by rings",
                kind.name()
            )))
        }
        _ => nc,
    };
    let mut s = empty(coll, Algorithm::Ring, proto, n, nc, cpb);
    if matches!(
        kind,
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter
    ) {
        s.orders = rings.to_vec();
    }
    let root = coll.root.unwrap_or(0);
    for (c, order) in rings.iter().enumerate() {
        let seat = RingSeat {
            order,
            pos: &pos_of[c],
            nc,
            c: c as u32,
        };
        for p in 0..n as i64 {
            for op in seat.program(kind, p, root) {
                push(&mut s, seat.at(p), seat.c, op);
            }
        }
    }
    s.validate()?;
    Ok(s)
}

/// Every ring's position of each rank; refuses rings that are not permutations of `0..n`.
fn ring_positions(rings: &[Vec<u32>], n: u32) -> Result<Vec<Vec<u32>>, ScheduleError> {
    let mut pos_of = Vec::with_capacity(rings.len());
    for (c, r) in rings.iter().enumerate() {
        if r.len() != n as usize {
            return Err(shape(format!(
                "ring {c} has {} ranks, ring 0 has {n}",
                r.len()
            )));
        }
        let mut pos = vec![u32::MAX; n as usize];
        for (p, &rank) in r.iter().enumerate() {
            if rank >= n || pos[rank as usize] != u32::MAX {
                return Err(shape(format!(
                    "ring {c} is not a permutation of 0..{n} (rank {rank} at position {p})"
                )));
            }
            pos[rank as usize] = p as u32;
        }
        pos_of.push(pos);
    }
    Ok(pos_of)
}

/// Ring `order` as channel `c` of `nc`.
struct RingSeat<'a> {
    order: &'a [u32],
    /// Each rank's position in `order`.
    pos: &'a [u32],
    nc: u32,
    c: u32,
}

impl RingSeat<'_> {
    /// The rank at ring position `p` (taken mod n).
    fn at(&self, p: i64) -> u32 {
        self.order[p.rem_euclid(self.order.len() as i64) as usize]
    }

    /// The program of the rank at position `p`; `root` matters to broadcast and reduce.
    fn program(&self, kind: CollectiveKind, p: i64, root: u32) -> Vec<Op> {
        let n = self.order.len() as u32;
        let (nc, c) = (self.nc, self.c);
        let (next, prev) = (self.at(p + 1), self.at(p - 1));
        if n == 1 {
            return vec![Op::copy(in_ref(c), out_ref(c))];
        }
        match kind {
            CollectiveKind::AllReduce => ring_all_reduce(p, n, nc, c, next, prev),
            CollectiveKind::AllGather => self.all_gather(p),
            CollectiveKind::ReduceScatter => self.reduce_scatter(p),
            // Position 0 is the root.
            CollectiveKind::Broadcast => {
                let i = (p - self.pos[root as usize] as i64).rem_euclid(n as i64);
                ring_broadcast(i, n, c, next, prev)
            }
            // Position 0 is the rank after the root; the root is last.
            CollectiveKind::Reduce => {
                let i = (p - self.pos[root as usize] as i64 - 1).rem_euclid(n as i64);
                ring_reduce(i, n, c, next, prev)
            }
            CollectiveKind::AllToAll | CollectiveKind::SendRecv => unreachable!(),
        }
    }

    /// All-gather: the rank's own block first, then forward the others around the ring.
    fn all_gather(&self, p: i64) -> Vec<Op> {
        let (nc, c32) = (self.nc, self.c);
        let n = self.order.len() as u32;
        let (rank, next, prev) = (self.at(p), self.at(p + 1), self.at(p - 1));
        let walk = BlockWalk {
            buffer: BufferKind::Output,
            order: c32,
            start: (p - 1).rem_euclid(n as i64) as u32,
            step: -1,
        };
        let mut v = vec![
            Op::copy(in_ref(c32), out_ref(rank * nc + c32)),
            Op::send(in_ref(c32), next),
        ];
        if n > 2 {
            v.push(
                Op::recv_copy_send(out_ref(prev * nc + c32), prev, next)
                    .repeated(n - 2, 0)
                    .walking(walk),
            );
        }
        v.push(Op::recv(out_ref(self.at(p + 1) * nc + c32), prev));
        v
    }

    /// Reduce-scatter: partial sums travel the ring and end reduced at their owner.
    fn reduce_scatter(&self, p: i64) -> Vec<Op> {
        let (nc, c32) = (self.nc, self.c);
        let n = self.order.len() as u32;
        let (rank, next, prev) = (self.at(p), self.at(p + 1), self.at(p - 1));
        let walk = BlockWalk {
            buffer: BufferKind::Input,
            order: c32,
            start: (p - 2).rem_euclid(n as i64) as u32,
            step: -1,
        };
        let mut v = vec![Op::send(in_ref(prev * nc + c32), next)];
        if n > 2 {
            v.push(
                Op::recv_reduce_send(in_ref(self.at(p - 2) * nc + c32), prev, next)
                    .repeated(n - 2, 0)
                    .walking(walk),
            );
        }
        v.push(Op::recv_reduce_copy(
            in_ref(rank * nc + c32),
            out_ref(c32),
            prev,
        ));
        v
    }
}

/// Ring broadcast for the rank `i` places after the root.
fn ring_broadcast(i: i64, n: u32, c: u32, next: u32, prev: u32) -> Vec<Op> {
    if i == 0 {
        vec![Op::copy(in_ref(c), out_ref(c)), Op::send(in_ref(c), next)]
    } else if i < n as i64 - 1 {
        vec![Op::recv_copy_send(out_ref(c), prev, next)]
    } else {
        vec![Op::recv(out_ref(c), prev)]
    }
}

/// Ring reduce for the rank `i` places after the one after the root (the root is last).
fn ring_reduce(i: i64, n: u32, c: u32, next: u32, prev: u32) -> Vec<Op> {
    if i == 0 {
        vec![Op::send(in_ref(c), next)]
    } else if i < n as i64 - 1 {
        vec![Op::recv_reduce_send(in_ref(c), prev, next)]
    } else {
        vec![Op::recv_reduce_copy(in_ref(c), out_ref(c), prev)]
    }
}

/// NCCL's ring all-reduce program for the rank at ring position `p` on channel `c`.
fn ring_all_reduce(p: i64, n: u32, nc: u32, c: u32, next: u32, prev: u32) -> Vec<Op> {
    let n_i = n as i64;
    let chunk = |pos: i64| pos.rem_euclid(n_i) as u32 * nc + c;
    let stride = -(nc as i32);
    let mut v = vec![Op::send(in_ref(chunk(p - 1)), next)];
    if n > 2 {
        v.push(Op::recv_reduce_send(in_ref(chunk(p - 2)), prev, next).repeated(n - 2, stride));
    }
    v.push(Op::recv_reduce_copy_send(
        in_ref(chunk(p)),
        out_ref(chunk(p)),
        prev,
        next,
    ));
    if n > 2 {
        v.push(Op::recv_copy_send(out_ref(chunk(p - 1)), prev, next).repeated(n - 2, stride));
    }
    v.push(Op::recv(out_ref(chunk(p + 1)), prev));
    v
}

/// Tree schedules, one [`TreeChannel`] per tree. All-reduce reduces up the tree and broadcasts
/// down it, each tree on two IR channels (`2t` up, `2t+1` down) so the two halves overlap across
/// loop iterations like NCCL's split tree; the root's first downward send depends on its last
/// upward reduce. Broadcast and reduce use one IR channel per tree and need the tree rooted at
/// the collective's root.
pub fn tree(
    coll: &Collective,
    trees: &[TreeChannel],
    proto: Protocol,
) -> Result<Schedule, ScheduleError> {
    let Some(first) = trees.first() else {
        return Err(shape("tree: at least one tree is needed".into()));
    };
    let n = first.parent.len() as u32;
    check_collective(coll, n)?;
    let per_tree = tree_channels_per_tree(coll, trees, n)?;
    let nt = trees.len() as u32;
    let kind = coll.kind;
    let mut s = empty(coll, Algorithm::Tree, proto, n, nt * per_tree, nt);
    for (t, tr) in trees.iter().enumerate() {
        let t32 = t as u32;
        let (inp, out) = (in_ref(t32), out_ref(t32));
        for r in 0..n {
            let kids = &tr.children[r as usize];
            let parent = tr.parent[r as usize];
            let up = if kind != CollectiveKind::Broadcast {
                tree_up(parent, kids, inp, out)
            } else {
                Vec::new()
            };
            let mut down = if kind != CollectiveKind::Reduce {
                tree_down(kind, parent, kids, inp, out)
            } else {
                Vec::new()
            };
            if per_tree == 2 {
                let (cu, cd) = (2 * t32, 2 * t32 + 1);
                if parent.is_none() && !up.is_empty() && !down.is_empty() {
                    let last = OpRef {
                        channel: cu,
                        index: up.len() as u32 - 1,
                    };
                    down[0].deps.push(last);
                }
                for op in up {
                    push(&mut s, r, cu, op);
                }
                for op in down {
                    push(&mut s, r, cd, op);
                }
            } else {
                for op in up.into_iter().chain(down) {
                    push(&mut s, r, t32, op);
                }
            }
        }
    }
    s.validate()?;
    Ok(s)
}

/// IR channels per tree (all-reduce: up and down; broadcast, reduce: one), after checking every
/// tree spans `0..n` and, for rooted collectives, is rooted at the collective's root.
fn tree_channels_per_tree(
    coll: &Collective,
    trees: &[TreeChannel],
    n: u32,
) -> Result<u32, ScheduleError> {
    let mut roots = Vec::with_capacity(trees.len());
    for (t, tr) in trees.iter().enumerate() {
        roots.push(
            tr.check(n)
                .map_err(|e| shape(format!("tree channel {t}: {e}")))?,
        );
    }
    let kind = coll.kind;
    match kind {
        CollectiveKind::AllReduce => Ok(2),
        CollectiveKind::Broadcast | CollectiveKind::Reduce => {
            let root = coll.root.unwrap_or(0);
            if let Some(t) = roots.iter().position(|r| *r != root) {
                return Err(unsupported(format!(
                    "tree: tree {t} is rooted at rank {}, but the {} root is {root}",
                    roots[t],
                    kind.name()
                )));
            }
            Ok(1)
        }
        _ => Err(unsupported(format!(
            "tree: {} has no tree schedule (use ring or direct patterns)",
            kind.name()
        ))),
    }
}

/// Upward half: reduce the children's partial sums into ours, pass it up.
fn tree_up(parent: Option<u32>, kids: &[u32], inp: ChunkRef, out: ChunkRef) -> Vec<Op> {
    let mut up = Vec::new();
    match (parent, kids.len()) {
        (None, 0) => up.push(Op::copy(inp, out)),
        (Some(p), 0) => up.push(Op::send(inp, p)),
        (parent, k) => {
            for (i, &kid) in kids.iter().enumerate() {
                let src = if i == 0 { inp } else { out };
                match parent {
                    Some(p) if i == k - 1 => up.push(Op::recv_reduce_send(src, kid, p)),
                    _ => up.push(Op::recv_reduce_copy(src, out, kid)),
                }
            }
        }
    }
    up
}

/// Downward half: receive the result from the parent, pass it to the children (the broadcast
/// root sends its input).
fn tree_down(
    kind: CollectiveKind,
    parent: Option<u32>,
    kids: &[u32],
    inp: ChunkRef,
    out: ChunkRef,
) -> Vec<Op> {
    let mut down = Vec::new();
    match parent {
        None => {
            let src = if kind == CollectiveKind::Broadcast {
                down.push(Op::copy(inp, out));
                inp
            } else {
                out
            };
            down.extend(kids.iter().map(|&k| Op::send(src, k)));
        }
        Some(p) => match kids.split_first() {
            None => down.push(Op::recv(out, p)),
            Some((k0, rest)) => {
                down.push(Op::recv_copy_send(out, p, *k0));
                down.extend(rest.iter().map(|&k| Op::send(out, k)));
            }
        },
    }
    down
}
