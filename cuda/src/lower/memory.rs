//! The lowering's state and its view of memory: where a logical buffer element lives
//! physically (in-place calls alias input and output), how the schedule's scratch chunks are
//! renamed onto a scratch ring, and which ranges an op writes (to hold back ops that would
//! clobber a message still in flight).

use super::item::{Barrier, Buf, Item, LowerError, LowerParams, Operand};
use planner::schedule::{BufferKind, ChunkRef, CollectiveKind, OpKind, Schedule, Transport};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug)]
pub(super) struct Access {
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) phase: u32,
    pub(super) item: usize,
    pub(super) write: bool,
    pub(super) exec: u32,
    /// Operand start of the item (for partition matching) and the item length.
    pub(super) start: u64,
    pub(super) n: u64,
}

pub(super) struct Payload {
    /// Segments (operand, len) where the message's data lives on the sender.
    pub(super) segs: Vec<(Operand, u64)>,
    pub(super) transport: Transport,
    /// Items placed before the payload was registered (to detect a later overwrite).
    pub(super) mark: usize,
}

/// A schedule scratch chunk in one loop iteration: (rank, iteration, chunk).
pub(super) type ChunkKey = (u32, u64, u32);

pub(super) struct Lowerer<'a> {
    pub(super) s: &'a Schedule,
    pub(super) p: LowerParams,
    pub(super) items: Vec<Item>,
    pub(super) barriers: Vec<Barrier>,
    pub(super) acc: HashMap<(u32, Buf), Vec<Access>>,
    pub(super) ring_next: Vec<u64>,
    pub(super) scratch_used: u64,
    /// Ring regions still to be read: (rank, off, len, chunk key).
    pub(super) live: Vec<(u32, u64, u64, ChunkKey)>,
    /// Reads left of each of the schedule's scratch chunks in the current iteration.
    pub(super) scratch_reads: HashMap<(u32, u64, u32), u32>,
    /// The schedule's scratch chunks, renamed onto the scratch ring: (rank, iter, chunk) -> start.
    pub(super) scratch_map: HashMap<(u32, u64, u32), Operand>,
    /// In-place calls: input chunks saved to scratch before their alias was overwritten.
    pub(super) input_map: HashMap<(u32, u64, u32), Operand>,
    pub(super) pending: Vec<Item>,
    pub(super) elide: bool,
    /// Next free LL element per receiving rank.
    pub(super) ll_next: Vec<u64>,
    /// Next free element of each rank's non-ring scratch region.
    pub(super) bump_next: Vec<u64>,
}

impl<'a> Lowerer<'a> {
    /// Physical location of element `e` of a logical buffer of `rank`.
    pub(super) fn phys(&self, rank: u32, b: BufferKind, e: u64) -> (Buf, u64) {
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
    pub(super) fn segs(
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
    pub(super) fn scratch(
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

    /// Physical ranges (outside scratch) that `op` of rank `r` writes in iteration `iter`.
    pub(super) fn dst_ranges(
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
    pub(super) fn payload_intact(&self, p: &Payload) -> bool {
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

pub(super) fn overlaps(segs: &[(Operand, u64)], w: &[(u32, Buf, u64, u64)]) -> bool {
    segs.iter().any(|(o, len)| {
        w.iter()
            .any(|&(r, b, lo, hi)| r == o.rank && b == o.buf && lo < o.off + len && o.off < hi)
    })
}
