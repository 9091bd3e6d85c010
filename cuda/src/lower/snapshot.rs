//! Snapshots: copies into scratch that let an op overwrite memory whose old contents are still
//! needed. In-place calls alias input and output, so an output write can clobber an input that
//! a later op reads; and a message stays in the sender's memory until its receiver reads it, so
//! an op that would overwrite it waits, and when only such ops are left the messages are staged.
//! Snapshots are never elided: the copy must really happen before the overwrite.

use super::item::{Buf, ItemKind, LowerError, Operand};
use super::memory::{overlaps, Lowerer, Payload};
use planner::schedule::{BufferKind, Op, Transport};
use std::collections::{HashMap, VecDeque};

/// Messages in flight per (channel, from, to), in program order.
pub(super) type Inflight = HashMap<(u32, u32, u32), VecDeque<Payload>>;

impl Lowerer<'_> {
    /// Before op `c` of rank `r` writes `writes`: saves the inputs this rank still reads later
    /// (`progs`: its programs per channel, `cursor`: its next op per channel).
    pub(super) fn save_aliased_inputs(
        &mut self,
        r: u32,
        c: u32,
        iter: u64,
        progs: &[Vec<Op>],
        cursor: &[usize],
        writes: &[(u32, Buf, u64, u64)],
    ) -> Result<(), LowerError> {
        // Inputs that this rank still reads later but that this op's writes
        // clobber through in-place aliasing are saved to scratch first.
        for c2 in 0..self.s.channels {
            let from_idx = cursor[c2 as usize] + usize::from(c2 == c);
            for later in progs[c2 as usize].iter().skip(from_idx) {
                let Some(src) = later.src.filter(|x| x.buffer == BufferKind::Input) else {
                    continue;
                };
                for k in 0..src.count {
                    let ch = src.chunk + k;
                    if self.input_map.contains_key(&(r, iter, ch))
                        || ch >= self.s.buffer_chunks(BufferKind::Input)
                    {
                        continue;
                    }
                    let er = self.s.chunk_elems(self.p.count, iter, ch);
                    let (b, off) = self.phys(r, BufferKind::Input, er.start);
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
                    let stage = self.scratch(r, len, false)?;
                    let el = std::mem::replace(&mut self.elide, false);
                    self.emit(
                        r,
                        ItemKind::Reduce,
                        std::slice::from_ref(&seg),
                        std::slice::from_ref(&stage),
                        false,
                    )?;
                    self.elide = el;
                    self.input_map.insert((r, iter, ch), stage[0].0);
                }
            }
        }
        Ok(())
    }

    /// Every op left is held back by a message in flight that it would overwrite (`postponed`:
    /// the ranges those ops write): moves each such message out of the way.
    pub(super) fn stage_inflight(
        &mut self,
        inflight: &mut Inflight,
        postponed: &[Vec<(u32, Buf, u64, u64)>],
    ) -> Result<(), LowerError> {
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
                if self.s.protocol == planner::schedule::Protocol::LL && !ce && k.1 != k.2 {
                    // Under LL the snapshot is the sender's push into our LL buffer.
                    let ll = self.ll_push(k.1, k.2, &segs)?;
                    let pl = &mut inflight.get_mut(&k).expect("key")[qi];
                    pl.segs = ll;
                    pl.transport = Transport::P2pLoad;
                    pl.mark = self.items.len();
                    continue;
                }
                let stage = self.scratch(k.2, total, false)?;
                let exec = if ce && self.p.ce_push { k.1 } else { k.2 };
                // A snapshot must really be taken: never elided.
                let el = std::mem::replace(&mut self.elide, false);
                self.emit(
                    exec,
                    ItemKind::Reduce,
                    std::slice::from_ref(&segs),
                    std::slice::from_ref(&stage),
                    ce,
                )?;
                self.elide = el;
                let pl = &mut inflight.get_mut(&k).expect("key")[qi];
                pl.segs = stage;
                pl.mark = self.items.len();
            }
        }
        Ok(())
    }
}
