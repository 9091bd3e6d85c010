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

mod rankset;
pub use rankset::RankSet;

/// Which op: `(rank, channel, compact index, repeat copy, loop iteration)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OpSite {
    pub rank: u32,
    pub channel: u32,
    /// Index in the channel's op list as written in the schedule (before `repeat` expansion).
    pub op: u32,
    /// Which copy of a repeated op (0 for ops without `repeat`).
    pub copy: u32,
    /// Loop iteration (0 unless `loop_elems` pipelines the program).
    pub iter: u32,
    pub kind: OpKind,
}

impl fmt::Display for OpSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {} channel {} op {} ({:?}",
            self.rank, self.channel, self.op, self.kind
        )?;
        if self.copy > 0 {
            write!(f, ", repeat copy {}", self.copy)?;
        }
        if self.iter > 0 {
            write!(f, ", loop iteration {}", self.iter)?;
        }
        write!(f, ")")
    }
}

/// Why a blocked op cannot run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Wait {
    /// No message has arrived from `from` on the op's channel.
    Message { from: u32 },
    /// All `slots` of the connection to `to` hold unread messages.
    Slot { to: u32, unread: u32 },
    /// A dependency on another channel of the same rank has not completed.
    Dep { channel: u32, op: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Blocked {
    pub site: OpSite,
    pub wait: Wait,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.wait {
            Wait::Message { from } => {
                write!(f, "{} waits for a message from rank {from}", self.site)
            }
            Wait::Slot { to, unread } => write!(
                f,
                "{} waits for a free slot to rank {to} ({unread} unread)",
                self.site
            ),
            Wait::Dep { channel, op } => {
                write!(f, "{} waits for channel {channel} op {op}", self.site)
            }
        }
    }
}

fn fmt_cycle(v: &[Blocked]) -> String {
    v.iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("invalid schedule: {0}")]
    Invalid(#[from] ScheduleError),
    #[error("deadlock: {} op(s) blocked; wait cycle: {}", .blocked, fmt_cycle(.cycle))]
    Deadlock {
        /// Number of (rank, channel) programs that cannot finish.
        blocked: usize,
        /// A wait-for cycle (or chain ending at a finished program) through the blocked ops.
        cycle: Vec<Blocked>,
    },
    #[error("{site}: reads {buffer:?} chunk {chunk}, which holds no data yet")]
    Uninitialized {
        site: OpSite,
        buffer: BufferKind,
        chunk: u32,
    },
    #[error("{site}: reduction on {buffer:?} chunk {chunk} counts rank(s) {overlap:?} twice")]
    DoubleCount {
        site: OpSite,
        buffer: BufferKind,
        chunk: u32,
        overlap: Vec<u32>,
    },
    #[error("{site}: reduces {buffer:?} chunk {chunk} (piece {a}) with piece {b}: different data")]
    Misaligned {
        site: OpSite,
        buffer: BufferKind,
        chunk: u32,
        a: u64,
        b: u64,
    },
    #[error("rank {rank}: output chunk {chunk} should be {expected} but is {got}")]
    WrongResult {
        rank: u32,
        chunk: u32,
        expected: String,
        got: String,
    },
    #[error("race on rank {rank} {buffer:?} chunk {chunk}: {first} and {second} touch it unordered (add a dep)")]
    Race {
        rank: u32,
        buffer: BufferKind,
        chunk: u32,
        first: OpSite,
        second: OpSite,
    },
    #[error("send/recv collective: rank {0} is the target of more than one sender")]
    BadCollective(u32),
    #[error("schedule too large to verify symbolically: {0} chunk states or ops (limit {1})")]
    TooLarge(u64, u64),
}

/// What a successful verification saw.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    pub collective: CollectiveKind,
    pub algorithm: String,
    pub nranks: u32,
    pub channels: u32,
    /// Loop iterations executed symbolically (2 when the program is pipelined, else 1).
    pub iterations: u32,
    pub ops_executed: u64,
    pub messages: u64,
    /// Most unread messages seen on one connection (<= slots).
    pub max_slots_used: u32,
    /// Whether unordered cross-channel buffer accesses were checked (see [`RACE_CHECK_LIMIT`]);
    /// false also when no chunk is shared between channels of a rank (no race is possible).
    pub race_checked: bool,
}

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
    bufs: Vec<[Vec<Option<Val>>; 3]>,
    access: Vec<[Vec<Access>; 3]>,
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
        let expanded: u64 = s
            .ranks
            .iter()
            .flat_map(|r| r.channels.iter())
            .flat_map(|c| c.ops.iter())
            .map(|o| o.repeat.max(1) as u64)
            .sum();
        if expanded > MAX_STATES {
            return Err(VerifyError::TooLarge(expanded, MAX_STATES));
        }
        let states = n as u64 * chunks.iter().map(|&c| c as u64).sum::<u64>() * iters as u64;
        let words = (n as u64).div_ceil(64).max(1);
        if states.saturating_mul(words) > MAX_STATES {
            return Err(VerifyError::TooLarge(states * words, MAX_STATES));
        }
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
        // Initial buffers.
        let cpb = s.chunks_per_block;
        // Races need a chunk that two channels of one rank touch; rings and trees keep channels
        // on disjoint chunks, so the (costly) vector clocks are skipped for them.
        let races = nch > 1 && n.saturating_mul(nch) <= RACE_CHECK_LIMIT && {
            let mut owner: HashMap<(u32, BufferKind, u32), u32> = HashMap::new();
            let mut shared = false;
            'scan: for (r, ro) in ops.iter().enumerate() {
                for (c, co) in ro.iter().enumerate() {
                    for op in co {
                        for cr in [op.src, op.dst].into_iter().flatten() {
                            for k in 0..cr.count {
                                let o = *owner
                                    .entry((r as u32, cr.buffer, cr.chunk + k))
                                    .or_insert(c as u32);
                                if o != c as u32 {
                                    shared = true;
                                    break 'scan;
                                }
                            }
                        }
                    }
                }
            }
            shared
        };
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

    fn slot_index(&self, cr: ChunkRef, iter: u64, k: u32) -> usize {
        let total = self.s.buffer_chunks(cr.buffer) as u64;
        (iter * total + (cr.chunk + k) as u64) as usize
    }

    /// Records an access for the race check (multi-channel schedules only).
    fn touch(
        &mut self,
        r: u32,
        c: u32,
        b: BufferKind,
        idx: usize,
        write: bool,
        site: OpSite,
    ) -> Result<(), VerifyError> {
        if !self.races {
            return Ok(());
        }
        let pid = r * self.nch + c;
        let vc = &self.vc[pid as usize];
        let me = vc[pid as usize];
        let hb = |p: u32, t: u32| p == pid || vc[p as usize] >= t;
        let a = &mut self.access[r as usize][bidx(b)][idx];
        let chunk = (idx % self.s.buffer_chunks(b).max(1) as usize) as u32;
        let race = |first: OpSite| VerifyError::Race {
            rank: r,
            buffer: b,
            chunk,
            first,
            second: site,
        };
        if let Some((wc, wt, ws)) = a.write {
            if !hb(wc, wt) {
                return Err(race(ws));
            }
        }
        if write {
            for &(rc, rt, rs) in &a.reads {
                if !hb(rc, rt) {
                    return Err(race(rs));
                }
            }
            a.write = Some((pid, me, site));
            a.reads.clear();
        } else if let Some(e) = a.reads.iter_mut().find(|e| e.0 == pid) {
            *e = (pid, me, site);
        } else {
            a.reads.push((pid, me, site));
        }
        Ok(())
    }

    fn read(
        &mut self,
        r: u32,
        c: u32,
        cr: ChunkRef,
        iter: u64,
        site: OpSite,
    ) -> Result<Vec<Val>, VerifyError> {
        let mut out = Vec::with_capacity(cr.count as usize);
        for k in 0..cr.count {
            let idx = self.slot_index(cr, iter, k);
            self.touch(r, c, cr.buffer, idx, false, site)?;
            match &self.bufs[r as usize][bidx(cr.buffer)][idx] {
                Some(v) => out.push(v.clone()),
                None => {
                    return Err(VerifyError::Uninitialized {
                        site,
                        buffer: cr.buffer,
                        chunk: cr.chunk + k,
                    })
                }
            }
        }
        Ok(out)
    }

    fn write(
        &mut self,
        r: u32,
        c: u32,
        cr: ChunkRef,
        iter: u64,
        vals: &[Val],
        site: OpSite,
    ) -> Result<(), VerifyError> {
        for (k, v) in vals.iter().enumerate() {
            let idx = self.slot_index(cr, iter, k as u32);
            self.touch(r, c, cr.buffer, idx, true, site)?;
            self.bufs[r as usize][bidx(cr.buffer)][idx] = Some(v.clone());
        }
        Ok(())
    }

    fn combine(
        a: Vec<Val>,
        b: Vec<Val>,
        cr: ChunkRef,
        site: OpSite,
    ) -> Result<Vec<Val>, VerifyError> {
        a.into_iter()
            .zip(b)
            .enumerate()
            .map(|(k, (x, y))| {
                let chunk = cr.chunk + k as u32;
                if x.pos != y.pos {
                    return Err(VerifyError::Misaligned {
                        site,
                        buffer: cr.buffer,
                        chunk,
                        a: y.pos,
                        b: x.pos,
                    });
                }
                let overlap = x.set.intersection(&y.set);
                if !overlap.is_empty() {
                    return Err(VerifyError::DoubleCount {
                        site,
                        buffer: cr.buffer,
                        chunk,
                        overlap,
                    });
                }
                Ok(Val {
                    pos: x.pos,
                    set: x.set.union(&y.set),
                })
            })
            .collect()
    }

    /// Executes the next op of (r, c), which must be ready.
    fn execute(&mut self, r: u32, c: u32) -> Result<Op, VerifyError> {
        let step = self.pc[r as usize][c as usize];
        let len = self.len(r, c);
        let (iter, e) = (step / len, (step % len) as usize);
        let op = self.ops[r as usize][c as usize][e].clone();
        let site = self.site(r, c, step);
        let pid = (r * self.nch + c) as usize;
        let recv: Option<Vec<Val>> = match op.recv_from {
            Some(from) => {
                let q = self.conns.get_mut(&(c, from, r)).expect("wait_of checked");
                let m = q.pop_front().expect("wait_of checked");
                if let Some(clock) = m.clock {
                    join(&mut self.vc[pid], &clock);
                }
                Some(m.vals)
            }
            None => None,
        };
        // Vector clock: join the clocks of completed deps (and the message, above), then tick.
        if self.races {
            for d in &op.deps {
                let dstep = iter * self.len(r, d.channel)
                    + self.last_copy[r as usize][d.channel as usize][d.index as usize] as u64;
                if let Some(snap) = self.snaps.get(&(r, d.channel, dstep)) {
                    join(&mut self.vc[pid], snap);
                }
            }
            self.vc[pid][pid] += 1;
        }
        let src = match op.src {
            Some(cr) => Some(self.read(r, c, cr, iter, site)?),
            None => None,
        };
        // `dst` value (what a recv-side op stores) and what is sent on.
        let result: Vec<Val> = match op.kind {
            OpKind::Send => src.expect("validated"),
            OpKind::Recv | OpKind::RecvCopySend => recv.expect("validated"),
            OpKind::Copy => src.expect("validated"),
            OpKind::RecvReduceSend | OpKind::RecvReduceCopy | OpKind::RecvReduceCopySend => {
                let cr = op.src.expect("validated");
                Self::combine(src.expect("validated"), recv.expect("validated"), cr, site)?
            }
            OpKind::Reduce => {
                let d = op.dst.expect("validated");
                let cur = self.read(r, c, d, iter, site)?;
                Self::combine(cur, src.expect("validated"), d, site)?
            }
        };
        if let Some(d) = op.dst {
            self.write(r, c, d, iter, &result, site)?;
        }
        if let Some(to) = op.send_to {
            let clock = self.races.then(|| self.vc[pid].clone());
            let q = self.conns.entry((c, r, to)).or_default();
            q.push_back(Msg {
                vals: result,
                clock,
            });
            self.max_slots_used = self.max_slots_used.max(q.len() as u32);
            self.messages += 1;
        }
        if self.races {
            let (ci, _) = self.origin[r as usize][c as usize][e];
            let last = self.last_copy[r as usize][c as usize][ci as usize] as usize;
            if e == last && self.dep_targets.contains(&(r, c, ci)) {
                self.snaps.insert((r, c, step), self.vc[pid].clone());
            }
        }
        self.pc[r as usize][c as usize] += 1;
        self.ops_executed += 1;
        Ok(op)
    }

    fn check_final(&self) -> Result<(), VerifyError> {
        let s = self.s;
        let n = self.n;
        let cpb = s.chunks_per_block as u64;
        let out_chunks = s.buffer_chunks(BufferKind::Output);
        let in_chunks = s.buffer_chunks(BufferKind::Input) as u64;
        let all = RankSet::all(n);
        // send/recv: who sends to whom.
        let mut sender_of: Vec<Option<u32>> = vec![None; n as usize];
        if s.collective.kind == CollectiveKind::SendRecv {
            for (i, p) in s.collective.send_peers.iter().enumerate() {
                if let Some(p) = p {
                    if (*p as usize) < sender_of.len() {
                        if sender_of[*p as usize].is_some() {
                            return Err(VerifyError::BadCollective(*p));
                        }
                        sender_of[*p as usize] = Some(i as u32);
                    }
                }
            }
        }
        for r in 0..n {
            for it in 0..self.iters as u64 {
                for c in 0..out_chunks {
                    let cu = c as u64;
                    let expected: Option<Val> = match s.collective.kind {
                        CollectiveKind::AllReduce => Some(Val {
                            pos: cu,
                            set: all.clone(),
                        }),
                        CollectiveKind::AllGather => Some(Val {
                            pos: cu,
                            set: RankSet::single(n, (cu / cpb) as u32),
                        }),
                        CollectiveKind::ReduceScatter => Some(Val {
                            pos: r as u64 * cpb + cu,
                            set: all.clone(),
                        }),
                        CollectiveKind::Broadcast => Some(Val {
                            pos: cu,
                            set: RankSet::single(n, s.collective.root.unwrap_or(0)),
                        }),
                        CollectiveKind::Reduce => (Some(r) == s.collective.root).then(|| Val {
                            pos: cu,
                            set: all.clone(),
                        }),
                        CollectiveKind::AllToAll => {
                            let (i, sub) = (cu / cpb, cu % cpb);
                            Some(Val {
                                pos: i * in_chunks + r as u64 * cpb + sub,
                                set: RankSet::single(n, i as u32),
                            })
                        }
                        CollectiveKind::SendRecv => sender_of[r as usize].map(|i| Val {
                            pos: cu,
                            set: RankSet::single(n, i),
                        }),
                    };
                    let Some(expected) = expected else { continue };
                    let got = &self.bufs[r as usize][1][(it * out_chunks as u64 + cu) as usize];
                    if got.as_ref() != Some(&expected) {
                        return Err(VerifyError::WrongResult {
                            rank: r,
                            chunk: c,
                            expected: Val::describe(&Some(expected)),
                            got: Val::describe(got),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
