//! Phase placement. Items in one phase run unordered, so every hazard on the same memory is
//! put across a phase boundary, and each boundary gets the weakest barrier that orders what
//! crosses it. Pure copies are held back so that a later item can read their source directly.

use super::item::{Barrier, Buf, Item, ItemKind, LowerError, Operand};
use super::memory::{Access, Lowerer};

impl Lowerer<'_> {
    /// Places an item, eliding copies: a pure copy is held back as *pending*; a later item that
    /// reads exactly its destination reads its source instead, and one that then overwrites the
    /// destination makes the copy unnecessary. One-shot's "copy own input, then add the peer's"
    /// thus becomes one pass. Any other touch of a pending copy's memory places it first.
    pub(super) fn place(&mut self, mut it: Item) {
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

    pub(super) fn flush_pending(&mut self) {
        for pc in std::mem::take(&mut self.pending) {
            self.place_now(pc);
        }
    }

    /// Places an item: finds the earliest phase after every conflicting access, raises that
    /// phase's barrier as needed, records its accesses.
    pub(super) fn place_now(&mut self, mut it: Item) -> usize {
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
    pub(super) fn emit(
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
}

/// The barrier after the last phase: needed when any rank touched another rank's memory after
/// the last full or per-CTA barrier (a per-CTA barrier suffices: a kernel ends only when all
/// its CTAs do).
pub(super) fn end_barrier(items: &[Item], barriers: &[Barrier]) -> Barrier {
    let mut last_remote = 0u32;
    for it in items {
        if it
            .srcs
            .iter()
            .chain(it.dsts.iter())
            .any(|o| o.rank != it.exec && o.buf != Buf::Ll)
        {
            last_remote = last_remote.max(it.phase);
        }
    }
    let nph = barriers.len();
    let covered = (last_remote as usize + 1..nph).any(|q| barriers[q] != Barrier::None);
    if last_remote > 0 && !covered {
        Barrier::Cta
    } else {
        Barrier::None
    }
}
