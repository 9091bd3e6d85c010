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
    let mut l = lowerer(s, p);
    let progs: Programs = (0..s.nranks)
        .map(|r| (0..s.channels).map(|c| s.expanded_ops(r, c)).collect())
        .collect();
    let ends = op_ends(s);
    for iter in 0..s.loop_iterations(p.count) {
        count_scratch_reads(&mut l, &progs, iter);
        run_iteration(&mut l, &progs, &ends, iter)?;
    }
    if p.average && s.collective.kind.reduces() {
        scale_outputs(&mut l)?;
    }
    finish(l)
}

/// Every rank's expanded ops, per channel.
type Programs = Vec<Vec<Vec<planner::schedule::Op>>>;

fn lowerer<'a>(s: &'a Schedule, p: LowerParams) -> Lowerer<'a> {
    let n = s.nranks as usize;
    Lowerer {
        s,
        p,
        items: Vec::new(),
        barriers: vec![Barrier::None],
        acc: HashMap::new(),
        ring_next: vec![0; n],
        scratch_used: 0,
        live: Vec::new(),
        scratch_reads: HashMap::new(),
        scratch_map: HashMap::new(),
        input_map: HashMap::new(),
        pending: Vec::new(),
        elide: p.elide_copies,
        ll_next: vec![0; n],
        bump_next: vec![0; n],
    }
}

/// Dependencies name ops of the unexpanded list: each one's end in the expanded list, per
/// rank and channel.
fn op_ends(s: &Schedule) -> Vec<Vec<Vec<usize>>> {
    (0..s.nranks as usize)
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
        .collect()
}

/// Counts the reads of every scratch chunk in iteration `iter` (scratch is reused once read).
fn count_scratch_reads(l: &mut Lowerer, progs: &Programs, iter: u64) {
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
}

/// Where every (rank, channel) program is, and the messages in flight.
struct Progress {
    cursor: Vec<Vec<usize>>,
    inflight: Inflight,
}

/// One op per (rank, channel) per round, so that ranks advance together. An op whose writes
/// would clobber a message still in flight (its receiver has not read it) waits; when only such
/// ops are left, the receivers pull those messages into their scratch.
fn run_iteration(
    l: &mut Lowerer,
    progs: &Programs,
    ends: &[Vec<Vec<usize>>],
    iter: u64,
) -> Result<(), LowerError> {
    let s = l.s;
    let mut at = Progress {
        cursor: vec![vec![0usize; s.channels as usize]; s.nranks as usize],
        inflight: Inflight::new(),
    };
    loop {
        let mut progressed = false;
        let mut done = true;
        let mut postponed: Vec<Vec<(u32, Buf, u64, u64)>> = Vec::new();
        for r in 0..s.nranks {
            for c in 0..s.channels {
                if at.cursor[r as usize][c as usize] >= progs[r as usize][c as usize].len() {
                    continue;
                }
                done = false;
                match try_op(l, progs, ends, &mut at, (r, c), iter)? {
                    Step::Ran => progressed = true,
                    Step::Waits => {}
                    Step::Clobbers(writes) => postponed.push(writes),
                }
            }
        }
        if done {
            return Ok(());
        }
        if !progressed {
            if postponed.is_empty() {
                return Err(LowerError::Invalid(
                    "schedule deadlocks: some receive never gets its message".into(),
                ));
            }
            l.stage_inflight(&mut at.inflight, &postponed)?;
        }
    }
}

/// What became of one (rank, channel)'s next op in a round.
enum Step {
    Ran,
    /// A dependency or its message is not there yet.
    Waits,
    /// Its writes would clobber a message in flight.
    Clobbers(Vec<(u32, Buf, u64, u64)>),
}

fn try_op(
    l: &mut Lowerer,
    progs: &Programs,
    ends: &[Vec<Vec<usize>>],
    at: &mut Progress,
    (r, c): (u32, u32),
    iter: u64,
) -> Result<Step, LowerError> {
    let i = at.cursor[r as usize][c as usize];
    let op = &progs[r as usize][c as usize][i];
    // deps on other channels of this rank must be processed first.
    let unmet = |d: &planner::schedule::OpRef| {
        let end = ends[r as usize]
            .get(d.channel as usize)
            .and_then(|v| v.get(d.index as usize))
            .copied()
            .unwrap_or(0);
        at.cursor[r as usize][d.channel as usize] < end
    };
    if op.deps.iter().any(unmet) {
        return Ok(Step::Waits);
    }
    let from = if op.kind.receives() {
        let from = op.recv_from.ok_or_else(|| {
            LowerError::Invalid(format!(
                "rank {r} channel {c} op {i}: receive without recv_from"
            ))
        })?;
        if at.inflight.get(&(c, from, r)).is_none_or(|q| q.is_empty()) {
            return Ok(Step::Waits); // sender not there yet
        }
        Some(from)
    } else {
        None
    };
    let writes = l.dst_ranges(r, op, iter);
    let clobbers = at.inflight.iter().any(|(k, q)| {
        q.iter().enumerate().any(|(qi, pl)| {
            // The message this op consumes is read by the op itself.
            let own = Some(k.1) == from && k.0 == c && k.2 == r && qi == 0;
            !own && overlaps(&pl.segs, &writes)
        })
    });
    if clobbers {
        return Ok(Step::Clobbers(writes));
    }
    if l.p.in_place && !writes.is_empty() {
        l.save_aliased_inputs(
            r,
            c,
            iter,
            &progs[r as usize],
            &at.cursor[r as usize],
            &writes,
        )?;
    }
    let recv = from.and_then(|f| at.inflight.get_mut(&(c, f, r)).and_then(|q| q.pop_front()));
    lower_op(l, r, op, recv, iter, &mut at.inflight, c)?;
    at.cursor[r as usize][c as usize] += 1;
    Ok(Step::Ran)
}

/// Average: scales each rank's final output, after everything (peers' reads of it too).
fn scale_outputs(l: &mut Lowerer) -> Result<(), LowerError> {
    let (s, p) = (l.s, l.p);
    let n = s.nranks;
    l.flush_pending();
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
    Ok(())
}

/// The end barrier, the paths the plan needs and the LL checks.
fn finish(mut l: Lowerer) -> Result<Lowered, LowerError> {
    l.flush_pending();
    let end_barrier = place::end_barrier(&l.items, &l.barriers);
    let uses_copy_engine = l.items.iter().any(|i| i.copy_engine);
    let uses_ll = l
        .items
        .iter()
        .any(|i| i.srcs.iter().chain(&i.dsts).any(|o| o.buf == Buf::Ll));
    if uses_ll {
        ll::check_ll(&l.items, l.p.elem_bytes)?;
    }
    Ok(Lowered {
        nranks: l.s.nranks,
        items: l.items,
        barriers: l.barriers,
        end_barrier,
        scratch_elems: l.scratch_used,
        uses_copy_engine,
        uses_ll,
    })
}
