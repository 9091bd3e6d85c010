//! A pipelined schedule too large to run whole, read off the line through two smaller runs.
//!
//! A pipelined schedule's time is affine in the size once its chunks and configuration are
//! fixed: a fill (launch, the first chunk down the deepest path) plus a steady cost per byte, set
//! by the busiest link or channel, that the size does not change. So the schedule, cut for
//! `bytes`, runs in the detailed engine at two smaller sizes (whole loop iterations, the larger
//! about half the budget, both past the call's settling, [`settle_iters`]), and the line through
//! them is read at `bytes`. Every mechanism of the engine stays in (link sharing, slots, per-step
//! costs, the chunk for `bytes`); only the count of identical steady-state iterations is cut
//! (test `extrapolated_prices_match_whole_runs`).

use crate::{detailed, Mode, SimConfig, SimError, SimResult};
use planner::schedule::{Algorithm, Schedule};
use planner::topology::Topology;
use std::collections::HashMap;

/// Loop iterations a tree's smaller run has at least (past LL's 8 unpaced slots, and past the
/// trees' settling: the tuner reads its op-by-op line the same way).
const STEADY_ITERS: u64 = planner::tuner::STEADY_ITERS as u64;

/// The detailed engine's result for `s` at `bytes` read off the line through two runs, within
/// about `budget` events in all (`est_events` the whole call's estimate). `None` where the
/// schedule does not loop or has too few iterations for two such runs: the caller runs it whole.
///
/// The result is the larger run's, its time read off the line, its links' bytes scaled to
/// `bytes`, and its events the two runs'.
pub(crate) fn run(
    topo: &Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
    est_events: u64,
    budget: u64,
) -> Result<Option<SimResult>, SimError> {
    // The larger run gets about half the budget, the smaller a quarter; events grow with size.
    let big = (bytes as u128 * (budget / 2) as u128 / est_events.max(1) as u128) as u64;
    let Some(l) = loop_bytes(s, cfg) else {
        return Ok(None);
    };
    // Whole iterations, at least `settle_iters` in the smaller run. Both runs keep the last,
    // partial iteration, which costs more than its share of bytes.
    let iters = bytes / l;
    let i1 = (big / l).max(2 * settle_iters(s));
    if 2 * i1 > iters {
        return Ok(None);
    }
    let (b1, b2) = (bytes % l + i1 * l, bytes % l + i1 / 2 * l);
    let r1 = detailed(topo, s, b1, cfg)?;
    let r2 = detailed(topo, s, b2, cfg)?;
    let slope = (r1.time_us - r2.time_us) / (b1 - b2) as f64;
    let time_us = r1.time_us + slope * (bytes - b1) as f64;
    Ok(Some(scaled(
        r1,
        r2.events,
        time_us,
        bytes as f64 / b1 as f64,
    )))
}

/// Loop iterations the smaller run has at least, for its slope to be the steady one.
///
/// A schedule of many trees settles into its steady cost per iteration only after several
/// (packed trees' channels drift apart first), so a slope read earlier is up to 15% low; an LL
/// connection's first slots' worth of messages run unpaced and the first paced one re-fills the
/// trees, a cost a line read across it would spread over every byte: [`STEADY_ITERS`].
///
/// A hierarchical call has no trees to settle: it runs periodic once every connection has
/// passed its slots, one iteration after its fewest-carrying connection's first `slots`
/// messages. Its engine runs share links exactly and cost several times a tree's per event, so
/// the fewer iterations matter (4×A6000 ×8, LL at 1 GiB: 14 s against 94 s for `sim`).
fn settle_iters(s: &Schedule) -> u64 {
    if s.algorithm != Algorithm::Hierarchical {
        return STEADY_ITERS;
    }
    let mut per_peer: HashMap<u32, u64> = HashMap::new();
    let ops = s.ranks.first().and_then(|r| r.channels.first());
    for op in ops.into_iter().flat_map(|c| &c.ops) {
        if let (true, Some(to)) = (op.kind.sends(), op.send_to) {
            *per_peer.entry(to).or_default() += u64::from(op.repeat.max(1));
        }
    }
    let fewest = per_peer.into_values().min().unwrap_or(1).max(1);
    (u64::from(s.slots).div_ceil(fewest) + 1).min(STEADY_ITERS)
}

/// The larger run `r` as the whole call: `time_us` long, its links carrying `k` times the bytes.
fn scaled(r: SimResult, more_events: u64, time_us: f64, k: f64) -> SimResult {
    let busy = k * r.time_us / time_us;
    let links = r
        .links
        .into_iter()
        .map(|l| crate::LinkLoad {
            bytes: l.bytes * k,
            avg_gbps: l.avg_gbps * busy,
            utilization: l.utilization * busy,
            ..l
        })
        .collect();
    SimResult {
        time_us,
        time_ps: (time_us * 1e6).round() as u64,
        events: r.events + more_events,
        represented_steps: (r.represented_steps as f64 * k).round() as u64,
        mode: Mode::Detailed,
        links,
        trace: None,
    }
}

/// Bytes (nccl-tests size) one loop iteration of `s` moves, where it loops.
fn loop_bytes(s: &Schedule, cfg: &SimConfig) -> Option<u64> {
    let (inb, outb) = s.collective.blocks(s.nranks);
    let l = s.loop_elems? * cfg.elem_bytes as u64 * u64::from(inb.max(outb).max(1));
    (l > 0).then_some(l)
}
