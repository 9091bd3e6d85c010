//! Cycle check: a rank whose program order plus `deps` has a cycle can never run.

use super::super::ir::*;
use super::ScheduleError;

/// Program order plus `deps` must be acyclic within a rank (Kahn's algorithm over raw ops;
/// repeated copies are consecutive in program order, so raw ops suffice).
pub(super) fn check_cycles(rp: &RankProgram) -> Result<(), ScheduleError> {
    if rp
        .channels
        .iter()
        .all(|ch| ch.ops.iter().all(|o| o.deps.is_empty()))
    {
        return Ok(()); // program order alone is a set of chains
    }
    let mut base = Vec::with_capacity(rp.channels.len());
    let mut total = 0usize;
    for ch in &rp.channels {
        base.push(total);
        total += ch.ops.len();
    }
    let id = |r: OpRef| base[r.channel as usize] + r.index as usize;
    let mut indeg = vec![0u32; total];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); total];
    for (c, ch) in rp.channels.iter().enumerate() {
        for (i, op) in ch.ops.iter().enumerate() {
            let me = base[c] + i;
            if i > 0 {
                out[me - 1].push(me);
                indeg[me] += 1;
            }
            for d in &op.deps {
                out[id(*d)].push(me);
                indeg[me] += 1;
            }
        }
    }
    let mut stack: Vec<usize> = (0..total).filter(|i| indeg[*i] == 0).collect();
    let mut done = 0;
    while let Some(v) = stack.pop() {
        done += 1;
        for &w in &out[v] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                stack.push(w);
            }
        }
    }
    if done == total {
        return Ok(());
    }
    let stuck = (0..total).find(|i| indeg[*i] > 0).unwrap_or(0);
    let channel = base.iter().rposition(|b| *b <= stuck).unwrap_or(0);
    Err(ScheduleError::Cycle {
        rank: rp.rank,
        channel: channel as u32,
        index: (stuck - base[channel]) as u32,
    })
}
