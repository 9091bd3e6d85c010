//! The driver: lowers a whole schedule. Every rank's program runs in rounds of one op per
//! (rank, channel), so ranks advance together and each receive meets its message in flight;
//! then averaging, the end barrier and the LL checks finish the plan.

use super::item::{Barrier, Buf, ItemKind, LowerError, LowerParams, Lowered, Operand};
use super::memory::{overlaps, Lowerer};
use super::ops::lower_op;
use super::snapshot::Inflight;
use super::{ll, place};
use planner::schedule::{BufferKind, CollectiveKind, OpKind, Schedule};
use std::collections::HashMap;

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
        let mut inflight = Inflight::new();
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
                        l.save_aliased_inputs(
                            r,
                            c,
                            iter,
                            &progs[r as usize],
                            &cursor[r as usize],
                            &writes,
                        )?;
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
                l.stage_inflight(&mut inflight, &postponed)?;
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
    let end_barrier = place::end_barrier(&l.items, &l.barriers);
    let uses_copy_engine = l.items.iter().any(|i| i.copy_engine);
    let uses_ll = l
        .items
        .iter()
        .any(|i| i.srcs.iter().chain(&i.dsts).any(|o| o.buf == Buf::Ll));
    if uses_ll {
        ll::check_ll(&l.items, p.elem_bytes)?;
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
