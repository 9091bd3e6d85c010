//! Symbolic verification of a schedule: does it compute its collective, and can it deadlock?
//!
//! Every chunk of every buffer holds a symbolic *value*: a position (which logical piece of the
//! collective's data it is) and the set of ranks whose contributions it sums. Inputs start as
//! `(position, {rank})`; outputs and scratch start empty. Ops are executed atomically, one at a time,
//! by a worklist scheduler that honours program order per (rank, channel), `deps`, message matching
//! per (channel, from, to) and the connection's `slots` (a send blocks while `slots` messages are
//! unread). Because every (rank, channel) is a sequential process reading FIFO connections, the
//! final state does not depend on the order the scheduler picks (Kahn's determinacy), except
//! through shared buffers touched by two channels of one rank: those accesses must be ordered
//! (by `deps`, or through messages via other ranks), otherwise the schedule has a race. Vector
//! clocks over all programs, carried by messages, decide the ordering.
//!
//! Errors name the rank, channel and op (index in the channel's *compact* op list, plus the
//! repeat copy and loop iteration) so a planner author can find the faulty op.

use planner::schedule::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

mod exec;
mod rankset;
mod report;
pub use rankset::RankSet;
pub use report::{Blocked, OpSite, VerifyError, VerifyReport, Wait};

fn join(mine: &mut [u32], other: &[u32]) {
    for (m, o) in mine.iter_mut().zip(other) {
        *m = (*m).max(*o);
    }
}

/// Largest number of symbolic chunk states `verify` accepts (memory guard).
pub const MAX_STATES: u64 = 1 << 26;

/// A symbolic chunk value: logical piece `pos` summed over `set`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Val {
    pos: u64,
    set: RankSet,
}

impl Val {
    fn describe(v: &Option<Val>) -> String {
        match v {
            None => "empty".into(),
            Some(v) => format!("piece {} of ranks {}", v.pos, v.set),
        }
    }
}

/// Per-chunk access history for the race check: last write and reads since, as
/// (channel, that channel's clock, site).
#[derive(Clone, Default)]
struct Access {
    write: Option<(u32, u32, OpSite)>,
    reads: Vec<(u32, u32, OpSite)>,
}

/// One rank's [input, output, scratch] chunk values.
type RankBuffers = [Vec<Option<Val>>; 3];

/// One rank's [input, output, scratch] chunk access histories.
type RankAccesses = [Vec<Access>; 3];

struct Msg {
    vals: Vec<Val>,
    /// The sender's vector clock (race check only).
    clock: Option<Vec<u32>>,
}

/// Largest rank × channel count for which races are checked (vector clocks cost that much per
/// op); larger schedules are verified without the race check (`VerifyReport::race_checked`).
pub const RACE_CHECK_LIMIT: u32 = 4096;

/// Verify `s`: structure (`Schedule::validate`), then symbolic execution. See module docs.
pub fn verify(s: &Schedule) -> Result<VerifyReport, VerifyError> {
    s.validate()?;
    Verifier::new(s)?.run()
}

struct Verifier<'a> {
    s: &'a Schedule,
    n: u32,
    nch: u32,
    iters: u32,
    /// expanded ops per rank per channel
    ops: Vec<Vec<Vec<Op>>>,
    /// expanded index -> (compact index, copy)
    origin: Vec<Vec<Vec<(u32, u32)>>>,
    /// per rank per channel: compact index -> last expanded index
    last_copy: Vec<Vec<Vec<u32>>>,
    pc: Vec<Vec<u64>>,
    /// buffer state per rank: [input, output, scratch] chunks × iterations
    bufs: Vec<RankBuffers>,
    access: Vec<RankAccesses>,
    /// Race check on (several channels, at most RACE_CHECK_LIMIT programs).
    races: bool,
    /// Vector clock per program (rank·channels + channel) over all programs; messages carry
    /// them, so orderings established through other ranks count.
    vc: Vec<Vec<u32>>,
    /// vc snapshots of completed dep-target ops: (rank, channel, global step) -> vc
    snaps: HashMap<(u32, u32, u64), Vec<u32>>,
    dep_targets: HashSet<(u32, u32, u32)>,
    conns: HashMap<(u32, u32, u32), VecDeque<Msg>>,
    ops_executed: u64,
    messages: u64,
    max_slots_used: u32,
}

fn bidx(b: BufferKind) -> usize {
    match b {
        BufferKind::Input => 0,
        BufferKind::Output => 1,
        BufferKind::Scratch => 2,
    }
}

/// Refuse schedules whose expanded ops or symbolic chunk states exceed [`MAX_STATES`].
fn check_state_budget(s: &Schedule, chunks: &[u32; 3], iters: u32) -> Result<(), VerifyError> {
    let n = s.nranks;
    let expanded = s.expanded_op_count();
    if expanded > MAX_STATES {
        return Err(VerifyError::TooLarge(expanded, MAX_STATES));
    }
    let states = n as u64 * chunks.iter().map(|&c| c as u64).sum::<u64>() * iters as u64;
    let words = (n as u64).div_ceil(64).max(1);
    if states.saturating_mul(words) > MAX_STATES {
        return Err(VerifyError::TooLarge(states * words, MAX_STATES));
    }
    Ok(())
}

/// Every program's ops with repeats expanded, and the maps back to the compact op lists.
struct ExpandedPrograms {
    ops: Vec<Vec<Vec<Op>>>,
    origin: Vec<Vec<Vec<(u32, u32)>>>,
    last_copy: Vec<Vec<Vec<u32>>>,
    dep_targets: HashSet<(u32, u32, u32)>,
}

impl ExpandedPrograms {
    fn of(s: &Schedule) -> Self {
        let n = s.nranks;
        let nch = s.channels;
        let mut ops = Vec::with_capacity(n as usize);
        let mut origin = Vec::with_capacity(n as usize);
        let mut last_copy = Vec::with_capacity(n as usize);
        let mut dep_targets = HashSet::new();
        for r in 0..n {
            let mut ro = Vec::new();
            let mut rorig = Vec::new();
            let mut rlast = Vec::new();
            for c in 0..nch {
                ro.push(s.expanded_ops(r, c));
                let compact = &s.ranks[r as usize].channels[c as usize].ops;
                let mut orig = Vec::new();
                let mut last = Vec::new();
                for (i, op) in compact.iter().enumerate() {
                    for k in 0..op.repeat.max(1) {
                        orig.push((i as u32, k));
                    }
                    last.push(orig.len() as u32 - 1);
                    for d in &op.deps {
                        dep_targets.insert((r, d.channel, d.index));
                    }
                }
                rorig.push(orig);
                rlast.push(last);
            }
            ops.push(ro);
            origin.push(rorig);
            last_copy.push(rlast);
        }
        Self {
            ops,
            origin,
            last_copy,
            dep_targets,
        }
    }
}

/// Whether some chunk of some rank is touched by two of that rank's channels.
fn channels_share_chunks(ops: &[Vec<Vec<Op>>]) -> bool {
    let mut owner: HashMap<(u32, BufferKind, u32), u32> = HashMap::new();
    for (r, ro) in ops.iter().enumerate() {
        for (c, co) in ro.iter().enumerate() {
            for op in co {
                for cr in [op.src, op.dst].into_iter().flatten() {
                    for k in 0..cr.count {
                        let o = *owner
                            .entry((r as u32, cr.buffer, cr.chunk + k))
                            .or_insert(c as u32);
                        if o != c as u32 {
                            return true;
                        }
                    }
                }
            }
        }
    }
    false
}

/// Initial buffers (inputs hold each rank's own pieces; outputs and scratch are empty) and, when
/// races are checked, their empty access histories.
fn initial_buffers(
    s: &Schedule,
    chunks: &[u32; 3],
    iters: u32,
    races: bool,
) -> (Vec<RankBuffers>, Vec<RankAccesses>) {
    let n = s.nranks;
    let cpb = s.chunks_per_block;
    let mut bufs = Vec::with_capacity(n as usize);
    let mut access = Vec::with_capacity(n as usize);
    for r in 0..n {
        let mut input = Vec::with_capacity((chunks[0] * iters) as usize);
        for _ in 0..iters {
            for c in 0..chunks[0] {
                let pos = match s.collective.kind {
                    CollectiveKind::AllGather => r as u64 * cpb as u64 + c as u64,
                    CollectiveKind::AllToAll => r as u64 * chunks[0] as u64 + c as u64,
                    _ => c as u64,
                };
                input.push(Some(Val {
                    pos,
                    set: RankSet::single(n, r),
                }));
            }
        }
        bufs.push([
            input,
            vec![None; (chunks[1] * iters) as usize],
            vec![None; (chunks[2] * iters) as usize],
        ]);
        if races {
            access.push([
                vec![Access::default(); (chunks[0] * iters) as usize],
                vec![Access::default(); (chunks[1] * iters) as usize],
                vec![Access::default(); (chunks[2] * iters) as usize],
            ]);
        } else {
            access.push([Vec::new(), Vec::new(), Vec::new()]);
        }
    }
    (bufs, access)
}

impl<'a> Verifier<'a> {
    fn new(s: &'a Schedule) -> Result<Self, VerifyError> {
        let n = s.nranks;
        let nch = s.channels;
        let iters = if s.loop_elems.is_some() { 2 } else { 1 };
        let chunks: [u32; 3] = [
            s.buffer_chunks(BufferKind::Input),
            s.buffer_chunks(BufferKind::Output),
            s.buffer_chunks(BufferKind::Scratch),
        ];
        check_state_budget(s, &chunks, iters)?;
        let ExpandedPrograms {
            ops,
            origin,
            last_copy,
            dep_targets,
        } = ExpandedPrograms::of(s);
        // Races need a chunk that two channels of one rank touch; rings and trees keep channels
        // on disjoint chunks, so the (costly) vector clocks are skipped for them.
        let races =
            nch > 1 && n.saturating_mul(nch) <= RACE_CHECK_LIMIT && channels_share_chunks(&ops);
        let (bufs, access) = initial_buffers(s, &chunks, iters, races);
        Ok(Self {
            s,
            n,
            nch,
            iters,
            ops,
            origin,
            last_copy,
            pc: vec![vec![0; nch as usize]; n as usize],
            bufs,
            access,
            races,
            vc: if races {
                vec![vec![0; (n * nch) as usize]; (n * nch) as usize]
            } else {
                Vec::new()
            },
            snaps: HashMap::new(),
            dep_targets,
            conns: HashMap::new(),
            ops_executed: 0,
            messages: 0,
            max_slots_used: 0,
        })
    }

    fn len(&self, r: u32, c: u32) -> u64 {
        self.ops[r as usize][c as usize].len() as u64
    }

    fn site(&self, r: u32, c: u32, step: u64) -> OpSite {
        let len = self.len(r, c).max(1);
        let (iter, e) = (step / len, (step % len) as usize);
        let (op, copy) = self.origin[r as usize][c as usize][e];
        OpSite {
            rank: r,
            channel: c,
            op,
            copy,
            iter: iter as u32,
            kind: self.ops[r as usize][c as usize][e].kind,
        }
    }

    /// Why the next op of (r, c) cannot run now, or None if it can.
    fn wait_of(&self, r: u32, c: u32) -> Option<Wait> {
        let len = self.len(r, c);
        let step = self.pc[r as usize][c as usize];
        let (iter, e) = (step / len, (step % len) as usize);
        let op = &self.ops[r as usize][c as usize][e];
        for d in &op.deps {
            let need = iter * self.len(r, d.channel)
                + self.last_copy[r as usize][d.channel as usize][d.index as usize] as u64
                + 1;
            if self.pc[r as usize][d.channel as usize] < need {
                return Some(Wait::Dep {
                    channel: d.channel,
                    op: d.index,
                });
            }
        }
        if let Some(from) = op.recv_from {
            if self.conns.get(&(c, from, r)).is_none_or(|q| q.is_empty()) {
                return Some(Wait::Message { from });
            }
        }
        if let Some(to) = op.send_to {
            let unread = self.conns.get(&(c, r, to)).map_or(0, |q| q.len()) as u32;
            if unread >= self.s.slots {
                return Some(Wait::Slot { to, unread });
            }
        }
        None
    }

    fn done(&self, r: u32, c: u32) -> bool {
        self.pc[r as usize][c as usize] >= self.len(r, c) * self.iters as u64
    }

    fn run(mut self) -> Result<VerifyReport, VerifyError> {
        let mut queue: VecDeque<(u32, u32)> = VecDeque::new();
        let mut queued = vec![vec![false; self.nch as usize]; self.n as usize];
        for r in 0..self.n {
            for c in 0..self.nch {
                queue.push_back((r, c));
                queued[r as usize][c as usize] = true;
            }
        }
        while let Some((r, c)) = queue.pop_front() {
            queued[r as usize][c as usize] = false;
            // Run this program as far as it goes, then wake whoever may now proceed.
            let mut woke: Vec<(u32, u32)> = Vec::new();
            let mut progressed = false;
            while !self.done(r, c) && self.wait_of(r, c).is_none() {
                let op = self.execute(r, c)?;
                progressed = true;
                if let Some(to) = op.send_to {
                    woke.push((to, c));
                }
                if let Some(from) = op.recv_from {
                    woke.push((from, c));
                }
            }
            if progressed && self.nch > 1 {
                for c2 in 0..self.nch {
                    woke.push((r, c2));
                }
            }
            for (wr, wc) in woke {
                if !queued[wr as usize][wc as usize] && !self.done(wr, wc) {
                    queued[wr as usize][wc as usize] = true;
                    queue.push_back((wr, wc));
                }
            }
        }
        let blocked: Vec<(u32, u32)> = (0..self.n)
            .flat_map(|r| (0..self.nch).map(move |c| (r, c)))
            .filter(|&(r, c)| !self.done(r, c))
            .collect();
        if !blocked.is_empty() {
            return Err(self.deadlock(&blocked));
        }
        self.check_final()?;
        Ok(VerifyReport {
            collective: self.s.collective.kind,
            algorithm: self.s.algorithm.name(),
            nranks: self.n,
            channels: self.nch,
            iterations: self.iters,
            ops_executed: self.ops_executed,
            messages: self.messages,
            max_slots_used: self.max_slots_used,
            race_checked: self.races,
        })
    }

    /// Follows wait-for edges from the first blocked program until one repeats (a cycle) or the
    /// chain reaches a finished program (a recv whose sender has nothing left to send).
    fn deadlock(&self, blocked: &[(u32, u32)]) -> VerifyError {
        let mut chain: Vec<Blocked> = Vec::new();
        let mut seen: HashMap<(u32, u32), usize> = HashMap::new();
        let (mut r, mut c) = blocked[0];
        loop {
            if let Some(&i) = seen.get(&(r, c)) {
                chain.drain(..i);
                break;
            }
            if self.done(r, c) {
                break;
            }
            let Some(wait) = self.wait_of(r, c) else {
                break;
            };
            seen.insert((r, c), chain.len());
            let next = match &wait {
                Wait::Message { from } => (*from, c),
                Wait::Slot { to, .. } => (*to, c),
                Wait::Dep { channel, .. } => (r, *channel),
            };
            chain.push(Blocked {
                site: self.site(r, c, self.pc[r as usize][c as usize]),
                wait,
            });
            (r, c) = next;
        }
        VerifyError::Deadlock {
            blocked: blocked.len(),
            cycle: chain,
        }
    }
}
