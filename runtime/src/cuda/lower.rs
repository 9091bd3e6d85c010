//! Lowering a schedule (planner IR) into device work for ranks that share one address space
//! (one process driving several GPUs with peer access, or IPC-mapped peers).
//!
//! Every matched send/receive pair becomes a *work item* that reads the sender's payload where it
//! lives and writes the receiver's destination: the receiver's SMs load it (`P2pLoad`), the
//! sender's SMs store it (`P2pStore`, for receives that only copy), or a copy engine moves it
//! (`CopyEngine`, staged in scratch when the receive also reduces). A payload that the sender never
//! stores (`RecvReduceSend`) is materialised in the sender's scratch ring first.
//!
//! Items are placed into *phases*. Inside a phase items have no order, so every read-after-write,
//! write-after-read and write-after-write on the same memory goes across a phase boundary. A
//! boundary carries the weakest barrier that orders the dependency: none when the same rank's same
//! CTA produced the data (same item length and offset, hence the same split into CTAs), a per-CTA
//! barrier across ranks under the same condition, and a full barrier otherwise. Remote access in
//! the first phase needs a barrier (the peer's stream must have reached the collective), and a
//! final barrier keeps a rank from finishing while peers still touch its memory.
//!
//! The lowering is pure and CPU-testable: [`emulate`] runs a lowered plan on host vectors, reading
//! every phase's inputs before writing its outputs, so an ordering bug shows as a wrong result.

use planner::schedule::{BufferKind, ChunkRef, CollectiveKind, OpKind, Schedule, Transport};
use std::collections::HashMap;

/// Physical buffers of a rank. In-place calls alias input and output before lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    Input = 0,
    Output = 1,
    Scratch = 2,
    /// The receiver's low-latency buffer (LL protocol): data and epoch flags in each line.
    Ll = 3,
}

/// Data bytes one rank can receive through LL buffers per call (all senders together); must
/// match `TP_LL_HALF / 2` in `kernels/src/exec.cu`.
pub const LL_DATA_BYTES: u64 = 2 << 20;

/// A contiguous element range start in one rank's buffer; the length is the item's `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Operand {
    pub rank: u32,
    pub buf: Buf,
    pub off: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// `dst[j] = src[0] ⊕ … ⊕ src[k]` (a copy when there is one source).
    Reduce,
    /// `dst = src / nranks` (the second half of `Avg`).
    Scale,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Barrier {
    None = 0,
    Cta = 1,
    Full = 2,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// Rank whose GPU executes it (its SMs, or its copy engine when `copy_engine`).
    pub exec: u32,
    pub kind: ItemKind,
    pub srcs: Vec<Operand>,
    pub dsts: Vec<Operand>,
    pub n: u64,
    pub phase: u32,
    /// Moved by a copy engine (then exactly one source and one destination).
    pub copy_engine: bool,
    /// Items this one must follow (data hazards), for engines that order by events.
    pub deps: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    pub nranks: u32,
    pub items: Vec<Item>,
    /// Barrier before phase p (index p); phase 0 is never used by items (it is "before the call").
    pub barriers: Vec<Barrier>,
    /// Barrier after the last phase.
    pub end_barrier: Barrier,
    /// Scratch elements each rank needs.
    pub scratch_elems: u64,
    pub uses_copy_engine: bool,
    /// Some transfer goes through LL buffers (the kernel then advances its LL epoch).
    pub uses_ll: bool,
}

impl Lowered {
    pub fn nphases(&self) -> u32 {
        self.barriers.len() as u32
    }
    /// Largest item, in elements (sizes the grid).
    pub fn max_item(&self) -> u64 {
        self.items.iter().map(|i| i.n).max().unwrap_or(0)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LowerError {
    #[error("invalid schedule: {0}")]
    Invalid(String),
    #[error("schedule cannot be lowered: {0}")]
    Unsupported(String),
}

/// How the caller's buffers alias: `in_place` means NCCL's in-place convention (all-reduce:
/// input == output; all-gather: input is the rank's block of the output; reduce-scatter: output is
/// the rank's block of the input).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LowerParams {
    pub count: u64,
    pub in_place: bool,
    /// Divide by nranks at the end (ReduceOp::Avg).
    pub average: bool,
    /// Scratch ring capacity per rank, in elements.
    pub scratch_cap: u64,
    /// Run the program once over whole blocks instead of per `loop_elems` slice.
    pub flatten_loops: bool,
    /// Elide local copies whose destination is only read back (see `Lowerer::place`).
    pub elide_copies: bool,
    /// Copy-engine transfers issued by the sender (push) instead of the receiver (pull).
    pub ce_push: bool,
    /// Element size in bytes (LL buffers are laid out in bytes).
    pub elem_bytes: u64,
}

#[derive(Clone, Copy, Debug)]
struct Access {
    lo: u64,
    hi: u64,
    phase: u32,
    item: usize,
    write: bool,
    exec: u32,
    /// Operand start of the item (for partition matching) and the item length.
    start: u64,
    n: u64,
}

struct Payload {
    /// Segments (operand, len) where the message's data lives on the sender.
    segs: Vec<(Operand, u64)>,
    transport: Transport,
    /// Items placed before the payload was registered (to detect a later overwrite).
    mark: usize,
}

/// A schedule scratch chunk in one loop iteration: (rank, iteration, chunk).
type ChunkKey = (u32, u64, u32);

struct Lowerer<'a> {
    s: &'a Schedule,
    p: LowerParams,
    items: Vec<Item>,
    barriers: Vec<Barrier>,
    acc: HashMap<(u32, Buf), Vec<Access>>,
    ring_next: Vec<u64>,
    scratch_used: u64,
    /// Ring regions still to be read: (rank, off, len, chunk key).
    live: Vec<(u32, u64, u64, ChunkKey)>,
    /// Reads left of each of the schedule's scratch chunks in the current iteration.
    scratch_reads: HashMap<(u32, u64, u32), u32>,
    /// The schedule's scratch chunks, renamed onto the scratch ring: (rank, iter, chunk) -> start.
    scratch_map: HashMap<(u32, u64, u32), Operand>,
    /// In-place calls: input chunks saved to scratch before their alias was overwritten.
    input_map: HashMap<(u32, u64, u32), Operand>,
    pending: Vec<Item>,
    elide: bool,
    /// Next free LL element per receiving rank.
    ll_next: Vec<u64>,
    /// Next free element of each rank's non-ring scratch region.
    bump_next: Vec<u64>,
}

impl<'a> Lowerer<'a> {
    /// Physical location of element `e` of a logical buffer of `rank`.
    fn phys(&self, rank: u32, b: BufferKind, e: u64) -> (Buf, u64) {
        let c = self.p.count;
        let kind = self.s.collective.kind;
        match b {
            BufferKind::Scratch => (Buf::Scratch, e),
            _ if !self.p.in_place => (
                if b == BufferKind::Input {
                    Buf::Input
                } else {
                    Buf::Output
                },
                e,
            ),
            BufferKind::Input => match kind {
                CollectiveKind::AllGather => (Buf::Output, rank as u64 * c + e),
                CollectiveKind::ReduceScatter => (Buf::Input, e),
                _ => (Buf::Output, e),
            },
            BufferKind::Output => match kind {
                CollectiveKind::ReduceScatter => (Buf::Input, rank as u64 * c + e),
                _ => (Buf::Output, e),
            },
        }
    }

    /// Contiguous physical segments of a chunk reference in loop iteration `iter`. The schedule's
    /// scratch chunks are renamed onto the scratch ring: a write gets fresh ring space (the hazard
    /// tracking orders its reuse), a read finds the last write's.
    fn segs(
        &mut self,
        rank: u32,
        r: &ChunkRef,
        iter: u64,
        write: bool,
    ) -> Result<Vec<(Operand, u64)>, LowerError> {
        let total = self.s.buffer_chunks(r.buffer);
        let mut out: Vec<(Operand, u64)> = Vec::new();
        for k in 0..r.count {
            let c = r.chunk + k;
            if c >= total {
                return Err(LowerError::Invalid(format!(
                    "rank {rank}: chunk {c} of {:?} is past its {total} chunks",
                    r.buffer
                )));
            }
            let er = self.s.chunk_elems(self.p.count, iter, c);
            if er.is_empty() {
                continue;
            }
            let len = er.end - er.start;
            let o = if r.buffer == BufferKind::Scratch {
                // Keyed by chunk; sub-ranges of a looped chunk get their own key per iteration.
                let key = (rank, iter, c);
                match (write, self.scratch_map.get(&key).copied()) {
                    (false, Some(o)) => {
                        if let Some(n) = self.scratch_reads.get_mut(&key) {
                            *n = n.saturating_sub(1);
                            if *n == 0 {
                                self.live.retain(|l| l.3 != key);
                            }
                        }
                        o
                    }
                    (false, None) => {
                        return Err(LowerError::Invalid(format!(
                            "rank {rank}: scratch chunk {c} is read before anything writes it"
                        )))
                    }
                    (true, _) => {
                        let o = self.scratch(rank, len, true)?[0].0;
                        self.scratch_map.insert(key, o);
                        if self.scratch_reads.get(&key).copied().unwrap_or(0) > 0
                            && o.off < self.p.scratch_cap
                        {
                            self.live.push((rank, o.off, len, key));
                        }
                        o
                    }
                }
            } else if let Some(o) = self
                .input_map
                .get(&(rank, iter, c))
                .filter(|_| r.buffer == BufferKind::Input && !write)
            {
                *o
            } else {
                let (buf, off) = self.phys(rank, r.buffer, er.start);
                Operand { rank, buf, off }
            };
            if let Some(last) = out.last_mut() {
                if last.0.buf == o.buf && last.0.rank == o.rank && last.0.off + last.1 == o.off {
                    last.1 += len;
                    continue;
                }
            }
            out.push((o, len));
        }
        Ok(out)
    }

    /// Scratch space. `ring`: from the ring of `scratch_cap` elements, reused in turn (the hazard
    /// tracking orders reuse; right for data consumed by this rank's next items). Otherwise from
    /// the region after the ring, never reused in a call (messages in flight, snapshots): the
    /// group grows its scratch buffers to `Lowered::scratch_elems`.
    fn scratch(
        &mut self,
        rank: u32,
        len: u64,
        ring: bool,
    ) -> Result<Vec<(Operand, u64)>, LowerError> {
        let cap = self.p.scratch_cap;
        let mut found = None;
        if ring && len <= cap {
            // Next position after the last allocation that overlaps no live region (data some
            // op of this rank has yet to read); wrap once; else fall back to the bump region.
            let mut off = self.ring_next[rank as usize];
            let mut wrapped = false;
            loop {
                if off + len > cap {
                    if wrapped {
                        break;
                    }
                    wrapped = true;
                    off = 0;
                }
                match self
                    .live
                    .iter()
                    .filter(|l| l.0 == rank && l.1 < off + len && off < l.1 + l.2)
                    .map(|l| l.1 + l.2)
                    .max()
                {
                    Some(end) => {
                        if wrapped
                            && end > self.ring_next[rank as usize]
                            && off <= self.ring_next[rank as usize]
                        {
                            break;
                        }
                        off = end;
                    }
                    None => {
                        found = Some(off);
                        break;
                    }
                }
            }
        }
        let off = match found {
            Some(off) => {
                self.ring_next[rank as usize] = off + len;
                self.scratch_used = self.scratch_used.max(off + len);
                off
            }
            None => {
                let b = &mut self.bump_next[rank as usize];
                let off = cap + *b;
                *b += len;
                self.scratch_used = self.scratch_used.max(off + len);
                off
            }
        };
        Ok(vec![(
            Operand {
                rank,
                buf: Buf::Scratch,
                off,
            },
            len,
        )])
    }

    /// Places an item, eliding copies: a pure copy is held back as *pending*; a later item that
    /// reads exactly its destination reads its source instead, and one that then overwrites the
    /// destination makes the copy unnecessary. One-shot's "copy own input, then add the peer's"
    /// thus becomes one pass. Any other touch of a pending copy's memory places it first.
    fn place(&mut self, mut it: Item) {
        for s in it.srcs.iter_mut() {
            if let Some(pc) = self
                .pending
                .iter()
                .find(|pc| pc.dsts[0] == *s && pc.n == it.n)
            {
                *s = pc.srcs[0];
            }
        }
        let touches = |pc: &Item, it: &Item| {
            let ov = |a: &Operand, an: u64, b: &Operand, bn: u64| {
                a.rank == b.rank && a.buf == b.buf && a.off < b.off + bn && b.off < a.off + an
            };
            let d = pc.dsts[0];
            it.srcs.iter().any(|x| ov(x, it.n, &d, pc.n))
                || it.dsts.iter().any(|x| ov(x, it.n, &pc.srcs[0], pc.n))
                || it
                    .dsts
                    .iter()
                    .any(|x| ov(x, it.n, &d, pc.n) && !(*x == d && it.n == pc.n))
        };
        let mut k = 0;
        while k < self.pending.len() {
            if touches(&self.pending[k], &it) {
                let pc = self.pending.remove(k);
                self.place_now(pc);
            } else {
                k += 1;
            }
        }
        // An exact overwrite kills the pending copy to that destination.
        self.pending
            .retain(|pc| !it.dsts.iter().any(|x| *x == pc.dsts[0] && it.n == pc.n));
        // LL pushes are the transfer itself: eliding one would turn it back into a remote load.
        let pure_copy = it.kind == ItemKind::Reduce
            && it.srcs.len() == 1
            && it.dsts.len() == 1
            && !it.copy_engine
            && it.dsts[0].buf != Buf::Ll;
        if pure_copy && self.elide {
            if it.srcs[0] != it.dsts[0] {
                self.pending.push(it);
            }
            return;
        }
        self.place_now(it);
    }

    fn flush_pending(&mut self) {
        for pc in std::mem::take(&mut self.pending) {
            self.place_now(pc);
        }
    }

    /// Places an item: finds the earliest phase after every conflicting access, raises that
    /// phase's barrier as needed, records its accesses.
    fn place_now(&mut self, mut it: Item) -> usize {
        let id = self.items.len();
        let mut phase = 1u32;
        let mut needs: Vec<(u32, Barrier)> = Vec::new(); // (producer phase, barrier needed after it)
        let mut deps = Vec::new();
        let operands: Vec<(Operand, bool)> = it
            .srcs
            .iter()
            .map(|o| (*o, false))
            .chain(it.dsts.iter().map(|o| (*o, true)))
            .collect();
        for (o, write) in &operands {
            // LL lines are ordered by the epoch flags inside the data: phases keep the order
            // (for emulation) but no barrier is needed.
            let ll = o.buf == Buf::Ll;
            let (lo, hi) = (o.off, o.off + it.n);
            let remote = o.rank != it.exec && !ll;
            if remote {
                needs.push((0, Barrier::Cta)); // the owner's stream must have reached the call
            }
            if let Some(list) = self.acc.get(&(o.rank, o.buf)) {
                for a in list {
                    if a.hi <= lo || a.lo >= hi || (!a.write && !write) {
                        continue;
                    }
                    phase = phase.max(a.phase + 1);
                    deps.push(a.item);
                    let aligned = a.n == it.n && a.start == o.off && !it.copy_engine;
                    let need = match (a.exec == it.exec, aligned) {
                        _ if ll => Barrier::None,
                        (true, true) => Barrier::None,
                        (false, true) => Barrier::Cta,
                        _ => Barrier::Full,
                    };
                    needs.push((a.phase, need));
                }
            }
        }
        while self.barriers.len() <= phase as usize {
            self.barriers.push(Barrier::None);
        }
        for (q, need) in needs {
            let have = (q as usize + 1..=phase as usize)
                .map(|r| self.barriers[r])
                .max()
                .unwrap_or(Barrier::None);
            if have < need {
                self.barriers[phase as usize] = self.barriers[phase as usize].max(need);
            }
        }
        deps.sort_unstable();
        deps.dedup();
        it.phase = phase;
        it.deps = deps;
        for (o, write) in operands {
            self.acc.entry((o.rank, o.buf)).or_default().push(Access {
                lo: o.off,
                hi: o.off + it.n,
                phase,
                item: id,
                write,
                exec: it.exec,
                start: o.off,
                n: it.n,
            });
        }
        self.items.push(it);
        id
    }

    /// Emits items for `dsts[j] = srcs[0] ⊕ …` where every operand is a segment list of equal
    /// total length, cutting at every segment boundary.
    fn emit(
        &mut self,
        exec: u32,
        kind: ItemKind,
        srcs: &[Vec<(Operand, u64)>],
        dsts: &[Vec<(Operand, u64)>],
        copy_engine: bool,
    ) -> Result<(), LowerError> {
        let all: Vec<&Vec<(Operand, u64)>> = srcs.iter().chain(dsts.iter()).collect();
        let totals: Vec<u64> = all.iter().map(|v| v.iter().map(|s| s.1).sum()).collect();
        if totals.windows(2).any(|w| w[0] != w[1]) {
            return Err(LowerError::Invalid(format!(
                "rank {exec}: operands of one transfer have different element counts {totals:?}"
            )));
        }
        let mut idx = vec![0usize; all.len()];
        let mut used = vec![0u64; all.len()];
        loop {
            if all.iter().zip(&idx).any(|(v, &i)| i >= v.len()) {
                break;
            }
            let len = all
                .iter()
                .zip(idx.iter().zip(&used))
                .map(|(v, (&i, &u))| v[i].1 - u)
                .min()
                .unwrap_or(0);
            let at = |k: usize| {
                let (o, _) = all[k][idx[k]];
                Operand {
                    off: o.off + used[k],
                    ..o
                }
            };
            let it = Item {
                exec,
                kind,
                srcs: (0..srcs.len()).map(at).collect(),
                dsts: (srcs.len()..all.len()).map(at).collect(),
                n: len,
                phase: 0,
                copy_engine,
                deps: Vec::new(),
            };
            if len > 0 {
                self.place(it);
            }
            for k in 0..all.len() {
                used[k] += len;
                if used[k] == all[k][idx[k]].1 {
                    idx[k] += 1;
                    used[k] = 0;
                }
            }
        }
        Ok(())
    }

    /// The sender pushes `segs` into `r`'s LL buffer; returns where they land.
    fn ll_push(
        &mut self,
        sender: u32,
        r: u32,
        segs: &[(Operand, u64)],
    ) -> Result<Vec<(Operand, u64)>, LowerError> {
        let mut ll = Vec::new();
        for (o, len) in segs {
            let grain = (16 / self.p.elem_bytes.max(1)).max(1);
            let start = self.ll_next[r as usize].div_ceil(grain) * grain;
            if (start + len) * self.p.elem_bytes > LL_DATA_BYTES {
                return Err(LowerError::Unsupported(format!(
                    "rank {r} would receive more than {LL_DATA_BYTES} bytes through LL buffers"
                )));
            }
            self.ll_next[r as usize] = start + len;
            let d = vec![(
                Operand {
                    rank: r,
                    buf: Buf::Ll,
                    off: start,
                },
                *len,
            )];
            self.emit(
                sender,
                ItemKind::Reduce,
                &[vec![(*o, *len)]],
                std::slice::from_ref(&d),
                false,
            )?;
            ll.extend(d);
        }
        Ok(ll)
    }

    /// Physical ranges (outside scratch) that `op` of rank `r` writes in iteration `iter`.
    fn dst_ranges(
        &self,
        r: u32,
        op: &planner::schedule::Op,
        iter: u64,
    ) -> Vec<(u32, Buf, u64, u64)> {
        let Some(d) = &op.dst else { return Vec::new() };
        if d.buffer == BufferKind::Scratch {
            return Vec::new();
        }
        if let (OpKind::Copy, Some(sr)) = (op.kind, &op.src) {
            // In place, "copy input to output" is the identity and writes nothing.
            let a = self.s.chunk_elems(self.p.count, iter, sr.chunk);
            let b = self.s.chunk_elems(self.p.count, iter, d.chunk);
            if sr.count == d.count
                && self.phys(r, sr.buffer, a.start) == self.phys(r, d.buffer, b.start)
            {
                return Vec::new();
            }
        }
        let total = self.s.buffer_chunks(d.buffer);
        (0..d.count)
            .filter(|k| d.chunk + k < total)
            .map(|k| {
                let er = self.s.chunk_elems(self.p.count, iter, d.chunk + k);
                let (b, off) = self.phys(r, d.buffer, er.start);
                (r, b, off, off + (er.end - er.start))
            })
            .filter(|x| x.3 > x.2)
            .collect()
    }

    /// False when an item placed after the payload was registered wrote the payload's memory.
    fn payload_intact(&self, p: &Payload) -> bool {
        self.items[p.mark..].iter().all(|it| {
            it.dsts.iter().all(|d| {
                p.segs.iter().all(|(o, len)| {
                    d.rank != o.rank
                        || d.buf != o.buf
                        || d.off + it.n <= o.off
                        || d.off >= o.off + len
                })
            })
        })
    }
}

fn overlaps(segs: &[(Operand, u64)], w: &[(u32, Buf, u64, u64)]) -> bool {
    segs.iter().any(|(o, len)| {
        w.iter()
            .any(|&(r, b, lo, hi)| r == o.rank && b == o.buf && lo < o.off + len && o.off < hi)
    })
}

/// Lowers `s` for per-rank element count `p.count`.
pub fn lower(s: &Schedule, p: LowerParams) -> Result<Lowered, LowerError> {
    s.validate()
        .map_err(|e| LowerError::Invalid(e.to_string()))?;
    // Loop iterations only pipeline a program over slices of the buffer; every op is
    // elementwise, so running the program once over whole blocks computes the same result.
    // On GPUs the CTAs of one phase already overlap, and one large item per transfer keeps
    // every SM busy, so the SM path flattens the loop (the copy-engine pipeline uses chunks).
    let flat;
    let s = if p.flatten_loops && s.loop_elems.is_some() {
        flat = Schedule {
            loop_elems: None,
            ..s.clone()
        };
        &flat
    } else {
        s
    };
    if s.nranks > 8 {
        return Err(LowerError::Unsupported(format!(
            "{} ranks (at most 8)",
            s.nranks
        )));
    }
    let n = s.nranks;
    let mut l = Lowerer {
        s,
        p,
        items: Vec::new(),
        barriers: vec![Barrier::None],
        acc: HashMap::new(),
        ring_next: vec![0; s.nranks as usize],
        scratch_used: 0,
        live: Vec::new(),
        scratch_reads: HashMap::new(),
        scratch_map: HashMap::new(),
        input_map: HashMap::new(),
        pending: Vec::new(),
        elide: p.elide_copies,
        ll_next: vec![0; n as usize],
        bump_next: vec![0; n as usize],
    };
    let progs: Vec<Vec<Vec<planner::schedule::Op>>> = (0..n)
        .map(|r| (0..s.channels).map(|c| s.expanded_ops(r, c)).collect())
        .collect();
    // Dependencies name ops of the unexpanded list; map each to its last expanded copy's end.
    let ends: Vec<Vec<Vec<usize>>> = (0..n as usize)
        .map(|r| {
            s.ranks[r]
                .channels
                .iter()
                .map(|ch| {
                    ch.ops
                        .iter()
                        .scan(0usize, |acc, o| {
                            *acc += o.repeat.max(1) as usize;
                            Some(*acc)
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    for iter in 0..s.loop_iterations(p.count) {
        // Messages in flight per (channel, from, to), in program order.
        let mut inflight: HashMap<(u32, u32, u32), std::collections::VecDeque<Payload>> =
            HashMap::new();
        let mut cursor = vec![vec![0usize; s.channels as usize]; n as usize];
        l.scratch_reads.clear();
        l.live.clear();
        for (r, chans) in progs.iter().enumerate() {
            for op in chans.iter().flatten() {
                let reads = op
                    .src
                    .iter()
                    .chain(op.dst.iter().filter(|_| op.kind == OpKind::Reduce));
                for c in reads.filter(|c| c.buffer == BufferKind::Scratch) {
                    for k in 0..c.count {
                        *l.scratch_reads
                            .entry((r as u32, iter, c.chunk + k))
                            .or_insert(0) += 1;
                    }
                }
            }
        }
        // One op per (rank, channel) per round, so that ranks advance together. An op whose
        // writes would clobber a message still in flight (its receiver has not read it) waits;
        // when only such ops are left, the receivers pull those messages into their scratch.
        loop {
            let mut progressed = false;
            let mut done = true;
            let mut postponed: Vec<Vec<(u32, Buf, u64, u64)>> = Vec::new();
            for r in 0..n {
                for c in 0..s.channels {
                    let ops = &progs[r as usize][c as usize];
                    let i = cursor[r as usize][c as usize];
                    if i >= ops.len() {
                        continue;
                    }
                    done = false;
                    let op = &ops[i];
                    // deps on other channels of this rank must be processed first.
                    let unmet = |d: &planner::schedule::OpRef| {
                        let end = ends[r as usize]
                            .get(d.channel as usize)
                            .and_then(|v| v.get(d.index as usize))
                            .copied()
                            .unwrap_or(0);
                        cursor[r as usize][d.channel as usize] < end
                    };
                    if op.deps.iter().any(unmet) {
                        continue;
                    }
                    let from = if op.kind.receives() {
                        let from = op.recv_from.ok_or_else(|| {
                            LowerError::Invalid(format!(
                                "rank {r} channel {c} op {i}: receive without recv_from"
                            ))
                        })?;
                        if inflight.get(&(c, from, r)).is_none_or(|q| q.is_empty()) {
                            continue; // sender not there yet
                        }
                        Some(from)
                    } else {
                        None
                    };
                    let writes = l.dst_ranges(r, op, iter);
                    let clobbers = inflight.iter().any(|(k, q)| {
                        q.iter().enumerate().any(|(qi, pl)| {
                            // The message this op consumes is read by the op itself.
                            let own = Some(k.1) == from && k.0 == c && k.2 == r && qi == 0;
                            !own && overlaps(&pl.segs, &writes)
                        })
                    });
                    if clobbers {
                        postponed.push(writes);
                        continue;
                    }
                    if p.in_place && !writes.is_empty() {
                        // Inputs that this rank still reads later but that this op's writes
                        // clobber through in-place aliasing are saved to scratch first.
                        for c2 in 0..s.channels {
                            let from_idx = cursor[r as usize][c2 as usize] + usize::from(c2 == c);
                            for later in progs[r as usize][c2 as usize].iter().skip(from_idx) {
                                let Some(src) = later.src.filter(|x| x.buffer == BufferKind::Input)
                                else {
                                    continue;
                                };
                                for k in 0..src.count {
                                    let ch = src.chunk + k;
                                    if l.input_map.contains_key(&(r, iter, ch))
                                        || ch >= s.buffer_chunks(BufferKind::Input)
                                    {
                                        continue;
                                    }
                                    let er = s.chunk_elems(p.count, iter, ch);
                                    let (b, off) = l.phys(r, BufferKind::Input, er.start);
                                    let len = er.end - er.start;
                                    if len == 0
                                        || !writes.iter().any(|&(wr, wb, lo, hi)| {
                                            wr == r && wb == b && lo < off + len && off < hi
                                        })
                                    {
                                        continue;
                                    }
                                    let seg = vec![(
                                        Operand {
                                            rank: r,
                                            buf: b,
                                            off,
                                        },
                                        len,
                                    )];
                                    let stage = l.scratch(r, len, false)?;
                                    let el = std::mem::replace(&mut l.elide, false);
                                    l.emit(
                                        r,
                                        ItemKind::Reduce,
                                        std::slice::from_ref(&seg),
                                        std::slice::from_ref(&stage),
                                        false,
                                    )?;
                                    l.elide = el;
                                    l.input_map.insert((r, iter, ch), stage[0].0);
                                }
                            }
                        }
                    }
                    let recv =
                        from.and_then(|f| inflight.get_mut(&(c, f, r)).and_then(|q| q.pop_front()));
                    lower_op(&mut l, r, op, recv, iter, &mut inflight, c)?;
                    cursor[r as usize][c as usize] += 1;
                    progressed = true;
                }
            }
            if done {
                break;
            }
            if !progressed {
                if postponed.is_empty() {
                    return Err(LowerError::Invalid(
                        "schedule deadlocks: some receive never gets its message".into(),
                    ));
                }
                // Stage every in-flight message that a waiting op would clobber.
                let mut keys: Vec<(u32, u32, u32)> = inflight.keys().copied().collect();
                keys.sort_unstable();
                for k in keys {
                    let len = inflight[&k].len();
                    for qi in 0..len {
                        let (segs, tr) = {
                            let pl = &inflight[&k][qi];
                            (pl.segs.clone(), pl.transport)
                        };
                        if !postponed.iter().any(|w| overlaps(&segs, w)) {
                            continue;
                        }
                        let total = segs.iter().map(|x| x.1).sum();
                        let ce = tr == Transport::CopyEngine;
                        if l.s.protocol == planner::schedule::Protocol::LL && !ce && k.1 != k.2 {
                            // Under LL the snapshot is the sender's push into our LL buffer.
                            let ll = l.ll_push(k.1, k.2, &segs)?;
                            let pl = &mut inflight.get_mut(&k).expect("key")[qi];
                            pl.segs = ll;
                            pl.transport = Transport::P2pLoad;
                            pl.mark = l.items.len();
                            continue;
                        }
                        let stage = l.scratch(k.2, total, false)?;
                        let exec = if ce && l.p.ce_push { k.1 } else { k.2 };
                        // A snapshot must really be taken: never elided.
                        let el = std::mem::replace(&mut l.elide, false);
                        l.emit(
                            exec,
                            ItemKind::Reduce,
                            std::slice::from_ref(&segs),
                            std::slice::from_ref(&stage),
                            ce,
                        )?;
                        l.elide = el;
                        let pl = &mut inflight.get_mut(&k).expect("key")[qi];
                        pl.segs = stage;
                        pl.mark = l.items.len();
                    }
                }
            }
        }
    }
    if p.average && s.collective.kind.reduces() {
        l.flush_pending();
        // Scale each rank's final output (after everything, including peers' reads of it).
        let (_, outb) = s.collective.blocks(n);
        let out_len = if s.collective.kind == CollectiveKind::ReduceScatter {
            p.count
        } else {
            outb as u64 * p.count
        };
        for r in 0..n {
            if s.collective.kind == CollectiveKind::Reduce && Some(r) != s.collective.root {
                continue;
            }
            let (buf, off) = l.phys(r, BufferKind::Output, 0);
            let seg = vec![(Operand { rank: r, buf, off }, out_len)];
            // Hazard tracking places it after every read (peers' too) of this output.
            l.emit(
                r,
                ItemKind::Scale,
                std::slice::from_ref(&seg),
                std::slice::from_ref(&seg),
                false,
            )?;
        }
    }
    l.flush_pending();
    // End barrier: needed when any rank touched another rank's memory after the last full or
    // per-CTA barrier (a per-CTA barrier suffices: a kernel ends only when all its CTAs do).
    let mut last_remote = 0u32;
    for it in &l.items {
        if it
            .srcs
            .iter()
            .chain(it.dsts.iter())
            .any(|o| o.rank != it.exec && o.buf != Buf::Ll)
        {
            last_remote = last_remote.max(it.phase);
        }
    }
    let nph = l.barriers.len();
    let covered = (last_remote as usize + 1..nph).any(|q| l.barriers[q] != Barrier::None);
    let end_barrier = if last_remote > 0 && !covered {
        Barrier::Cta
    } else {
        Barrier::None
    };
    let uses_copy_engine = l.items.iter().any(|i| i.copy_engine);
    let uses_ll = l
        .items
        .iter()
        .any(|i| i.srcs.iter().chain(&i.dsts).any(|o| o.buf == Buf::Ll));
    if uses_ll {
        // LL buffers alternate two halves by epoch; a sender may rewrite a half two calls
        // later only because it had to receive from that receiver in between. A one-way LL
        // flow (broadcast, reduce) would let the sender lap the receiver: refuse it.
        let mut pairs = std::collections::HashSet::new();
        for it in &l.items {
            for d in it
                .dsts
                .iter()
                .filter(|o| o.buf == Buf::Ll && o.rank != it.exec)
            {
                pairs.insert((it.exec, d.rank));
            }
        }
        if let Some((a, b)) = pairs.iter().find(|(a, b)| !pairs.contains(&(*b, *a))) {
            return Err(LowerError::Unsupported(format!(
                "LL needs traffic both ways between ranks, but rank {a} only sends to rank {b} (use the Simple protocol)"
            )));
        }
        // The kernel's LL path moves 8-byte groups: every LL operand must start on one.
        let eb = p.elem_bytes.max(1);
        if l.items.iter().any(|i| {
            i.srcs
                .iter()
                .chain(&i.dsts)
                .any(|o| o.buf == Buf::Ll && !(o.off * eb).is_multiple_of(8))
        }) {
            return Err(LowerError::Unsupported(
                "LL transfer cut at an unaligned element".into(),
            ));
        }
    }
    let scratch_elems = l.scratch_used;
    Ok(Lowered {
        nranks: n,
        items: l.items,
        barriers: l.barriers,
        end_barrier,
        scratch_elems,
        uses_copy_engine,
        uses_ll,
    })
}

fn lower_op(
    l: &mut Lowerer,
    r: u32,
    op: &planner::schedule::Op,
    recv: Option<Payload>,
    iter: u64,
    inflight: &mut HashMap<(u32, u32, u32), std::collections::VecDeque<Payload>>,
    channel: u32,
) -> Result<(), LowerError> {
    let src = match &op.src {
        Some(c) => Some(l.segs(r, c, iter, false)?),
        None => None,
    };
    // A destination that is also read (`Reduce`: dst = dst ⊕ src) is read first.
    let dst_old = match (&op.dst, op.kind) {
        (Some(c), OpKind::Reduce) => Some(l.segs(r, c, iter, false)?),
        _ => None,
    };
    let dst = match &op.dst {
        Some(c) => Some(l.segs(r, c, iter, true)?),
        None => None,
    };
    if let Some(pl) = &recv {
        if !l.payload_intact(pl) {
            return Err(LowerError::Unsupported(
                "a message's source is overwritten before the receive reads it (needs staging)"
                    .into(),
            ));
        }
    }
    // The payload this op sends on, once computed.
    let mut out_payload: Option<Vec<(Operand, u64)>> = None;
    match op.kind {
        OpKind::Send => out_payload = src.clone(),
        OpKind::Copy | OpKind::Reduce => {
            let (s, d) = (src.unwrap_or_default(), dst.unwrap_or_default());
            if op.kind == OpKind::Copy && s == d {
                return Ok(()); // in-place aliasing made it a no-op
            }
            let srcs = if op.kind == OpKind::Reduce {
                vec![dst_old.unwrap_or_default(), s]
            } else {
                vec![s]
            };
            l.emit(r, ItemKind::Reduce, &srcs, std::slice::from_ref(&d), false)?;
        }
        _ => {
            let pl = recv.ok_or_else(|| LowerError::Invalid("receive without payload".into()))?;
            // Where the result goes: the op's dst, or scratch when it is only forwarded.
            let target = match (&dst, op.kind) {
                (Some(d), _) => d.clone(),
                (None, OpKind::RecvReduceSend) => {
                    let len = pl.segs.iter().map(|s| s.1).sum();
                    l.scratch(r, len, false)?
                }
                _ => {
                    return Err(LowerError::Invalid(format!(
                        "rank {r}: {:?} without dst",
                        op.kind
                    )))
                }
            };
            let local_src = if op.kind.reduces() { src.clone() } else { None };
            let sender = pl.segs.first().map(|s| s.0.rank).unwrap_or(r);
            let mut pl = pl;
            if l.s.protocol == planner::schedule::Protocol::LL
                && pl.transport != Transport::CopyEngine
                && sender != r
            {
                // LL: the sender writes the message into our LL buffer (data and epoch flag
                // together); our items then read it locally, waiting on the flags.
                let ll = l.ll_push(sender, r, &pl.segs)?;
                pl.segs = ll;
                pl.transport = Transport::P2pLoad; // now local to us
            }
            match (pl.transport, local_src) {
                (Transport::CopyEngine, None) => {
                    let exec = if l.p.ce_push {
                        pl.segs.first().map(|s| s.0.rank).unwrap_or(r)
                    } else {
                        r
                    };
                    l.emit(
                        exec,
                        ItemKind::Reduce,
                        std::slice::from_ref(&pl.segs),
                        std::slice::from_ref(&target),
                        true,
                    )?;
                }
                (Transport::CopyEngine, Some(ls)) => {
                    let len = pl.segs.iter().map(|s| s.1).sum();
                    let stage = l.scratch(r, len, true)?;
                    let exec = if l.p.ce_push {
                        pl.segs.first().map(|s| s.0.rank).unwrap_or(r)
                    } else {
                        r
                    };
                    l.emit(
                        exec,
                        ItemKind::Reduce,
                        std::slice::from_ref(&pl.segs),
                        std::slice::from_ref(&stage),
                        true,
                    )?;
                    l.emit(
                        r,
                        ItemKind::Reduce,
                        &[stage, ls],
                        std::slice::from_ref(&target),
                        false,
                    )?;
                }
                (Transport::P2pStore, None) => {
                    // The sender's SMs push the data into our buffer.
                    let sender = pl.segs.first().map(|s| s.0.rank).unwrap_or(r);
                    l.emit(
                        sender,
                        ItemKind::Reduce,
                        std::slice::from_ref(&pl.segs),
                        std::slice::from_ref(&target),
                        false,
                    )?;
                }
                (_, None) => {
                    l.emit(
                        r,
                        ItemKind::Reduce,
                        std::slice::from_ref(&pl.segs),
                        std::slice::from_ref(&target),
                        false,
                    )?;
                }
                (_, Some(ls)) => {
                    l.emit(
                        r,
                        ItemKind::Reduce,
                        &[pl.segs, ls],
                        std::slice::from_ref(&target),
                        false,
                    )?;
                }
            }
            if op.kind.sends() {
                out_payload = Some(target);
            }
        }
    }
    if op.kind.sends() {
        let to = op
            .send_to
            .ok_or_else(|| LowerError::Invalid(format!("rank {r}: send without send_to")))?;
        let segs = out_payload.unwrap_or_default();
        inflight
            .entry((channel, r, to))
            .or_default()
            .push_back(Payload {
                segs,
                transport: op.transport,
                mark: l.items.len(),
            });
    }
    Ok(())
}

/// Runs a lowered plan on host memory (`mem[rank][buf]`, elements as f64 or exact integers via
/// `combine`), phase by phase, all reads of a phase before its writes.
pub fn emulate<T: Copy>(
    l: &Lowered,
    mem: &mut [[Vec<T>; 4]],
    combine: impl Fn(T, T) -> T,
    scale: impl Fn(T) -> T,
) {
    for ph in 1..l.nphases() {
        let mut writes: Vec<(Operand, Vec<T>)> = Vec::new();
        for it in l.items.iter().filter(|i| i.phase == ph) {
            let read = |o: &Operand| -> Vec<T> {
                mem[o.rank as usize][o.buf as usize][o.off as usize..(o.off + it.n) as usize]
                    .to_vec()
            };
            let mut acc = read(&it.srcs[0]);
            for s in &it.srcs[1..] {
                let x = read(s);
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = combine(*a, b);
                }
            }
            if it.kind == ItemKind::Scale {
                acc.iter_mut().for_each(|a| *a = scale(*a));
            }
            for d in &it.dsts {
                writes.push((*d, acc.clone()));
            }
        }
        for (d, v) in writes {
            mem[d.rank as usize][d.buf as usize][d.off as usize..d.off as usize + v.len()]
                .copy_from_slice(&v);
        }
    }
}

#[cfg(test)]
#[path = "lower_tests.rs"]
mod tests;
