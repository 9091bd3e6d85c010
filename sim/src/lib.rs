//! topoplan's simulator: deterministic discrete-event timing of schedules on topologies, and
//! symbolic verification that a schedule computes its collective. Depends on `planner` only.
//!
//! - [`verify()`]: symbolic execution proving a schedule computes its collective without
//!   deadlock, double counting or races (`verify.rs`).
//! - [`simulate()`]: predicted time of a schedule on a topology for a message size, by the
//!   detailed event engine (`engine.rs`) or, for symmetric schedules at scale, the aggregated
//!   lockstep model (`aggregate.rs`). Model and parameters: `docs/sim.md`.

pub mod aggregate;
pub mod calibrate;
pub mod config;
mod engine;
pub mod fidelity;
#[allow(clippy::needless_range_loop)] // parallel arrays indexed by flow
pub mod flows;
mod line;
pub mod measurements;
pub mod nccl;
pub mod net;
pub mod price;
pub mod reference;
pub mod trace;
pub mod verify;

pub use config::{ExecParams, Mode, ProtoParams, SimConfig, SimParams};
pub use net::NetError;
pub use verify::{verify, VerifyError, VerifyReport};

use planner::schedule::{Schedule, ScheduleError};
use planner::topology::Topology;
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid schedule: {0}")]
    Invalid(#[from] ScheduleError),
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("schedule is not symmetric, the aggregated model cannot run it: {0}")]
    NotSymmetric(String),
    #[error("too large for the detailed engine: {0} (the aggregated model needs a symmetric schedule such as a ring)")]
    TooLarge(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("simulation stuck at {time_us:.3} µs: rank {rank} channel {channel} op {op} never completes (run `topoplan verify` for the wait cycle)")]
    Stuck {
        rank: u32,
        channel: u32,
        op: u32,
        time_us: f64,
    },
}

/// Load carried by one resource (a directional link, a GPU's memory or copy engine).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkLoad {
    pub name: String,
    pub bytes: f64,
    /// Average throughput over the run, GB/s.
    pub avg_gbps: f64,
    /// `avg_gbps` over the resource's effective capacity.
    pub utilization: f64,
}

#[derive(Clone, Debug)]
pub struct SimResult {
    /// Predicted time from launch to the last op's completion, µs.
    pub time_us: f64,
    pub time_ps: u64,
    /// Events processed (detailed) or flow evaluations (aggregated).
    pub events: u64,
    /// Protocol steps the run stands for (equals the steps executed in detailed mode).
    pub represented_steps: u64,
    pub mode: Mode,
    /// Resources that carried load, busiest first.
    pub links: Vec<LinkLoad>,
    pub trace: Option<trace::Trace>,
}

impl SimResult {
    pub(crate) fn with_represented(mut self, n: u64) -> Self {
        self.represented_steps = n;
        self
    }
}

/// Per-rank element count for an nccl-tests size in bytes (the size column of nccl-tests: the
/// per-rank buffer for all-reduce/broadcast/reduce, the whole gathered/scattered buffer for
/// all-gather/reduce-scatter/all-to-all).
pub fn count_for_bytes(s: &Schedule, bytes: u64, elem_bytes: u32) -> u64 {
    let (inb, outb) = s.collective.blocks(s.nranks);
    bytes / elem_bytes.max(1) as u64 / inb.max(outb).max(1) as u64
}

pub(crate) fn link_loads(
    names: &[String],
    caps: &[f64],
    bytes: &[f64],
    time_us: f64,
) -> Vec<LinkLoad> {
    let mut v: Vec<LinkLoad> = names
        .iter()
        .zip(caps)
        .zip(bytes)
        .filter(|(_, &b)| b > 0.0)
        .map(|((n, &c), &b)| {
            let avg = if time_us > 0.0 { b / time_us } else { 0.0 };
            LinkLoad {
                name: n.clone(),
                bytes: b,
                avg_gbps: avg / 1e3,
                utilization: if c > 0.0 { avg / c } else { 0.0 },
            }
        })
        .collect();
    v.sort_by(|a, b| b.bytes.total_cmp(&a.bytes).then(a.name.cmp(&b.name)));
    v
}

/// Estimated number of detailed-engine events for `s` at `bytes` (to choose a mode).
pub fn estimate_events(s: &Schedule, bytes: u64, cfg: &SimConfig) -> u64 {
    // topoplan's executor moves each message whole, once (`engine::run`).
    if cfg.exec.is_some() && ExecParams::applies(s) {
        let ops = s.expanded_op_count();
        return ops.saturating_mul(4);
    }
    let count = count_for_bytes(s, bytes, cfg.elem_bytes);
    let iters = s.loop_iterations(count);
    let per_iter = match s.loop_elems {
        Some(l) if l > 0 => l.min(count),
        _ => count,
    };
    let chunk_bytes = per_iter.div_ceil(s.chunks_per_block as u64) * cfg.elem_bytes as u64;
    let step = cfg.proto(s.protocol).step_bytes.max(1);
    let mut total: u64 = 0;
    for rp in &s.ranks {
        for ch in &rp.channels {
            for op in &ch.ops {
                let subs = (chunk_bytes * op.chunk_count() as u64)
                    .div_ceil(step)
                    .max(cfg.proto(s.protocol).min_steps_for(s) as u64);
                total = total.saturating_add(op.repeat as u64 * subs * 4);
            }
        }
    }
    total.saturating_mul(iters)
}

/// Most expanded ops the detailed engine accepts (about 2 GiB of programs).
pub const MAX_EXPANDED_OPS: u64 = 20_000_000;

/// Predicts the time of schedule `s` moving `bytes` (nccl-tests size) on `topo`.
pub fn simulate(
    topo: &Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
) -> Result<SimResult, SimError> {
    let detailed = match cfg.mode {
        Mode::Detailed => true,
        Mode::Aggregated => false,
        Mode::Auto => {
            let est = estimate_events(s, bytes, cfg);
            let symmetric = aggregate::asymmetry(s).is_none();
            if !symmetric && est > cfg.max_detailed_events {
                return Err(SimError::TooLarge(format!(
                    "about {est} events for this asymmetric {} schedule (limit {}; --mode detailed runs it anyway)",
                    s.algorithm.name(),
                    cfg.max_detailed_events
                )));
            }
            let large = !cfg.trace && est > cfg.detailed_limit;
            if large && symmetric {
                return beyond_detailed(topo, s, bytes, cfg, est);
            }
            true
        }
    };
    if detailed {
        self::detailed(topo, s, bytes, cfg)
    } else {
        aggregate::run(topo, s, bytes, cfg)
    }
}

/// A symmetric `s` past the detailed limit: the aggregated model where its programs keep the
/// lockstep it assumes, else the line through two detailed runs within the pricer's budget
/// (they share links exactly, so an event costs more than a ring's), as `plan` prices the call;
/// else the whole call where it has too few iterations for a line and fits.
fn beyond_detailed(
    topo: &Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
    est: u64,
) -> Result<SimResult, SimError> {
    if let Some(r) = aggregate::run_in_lockstep(topo, s, bytes, cfg)? {
        return Ok(r);
    }
    let budget = cfg.detailed_limit.min(price::PRICE_EVENTS);
    if let Some(r) = line::run(topo, s, bytes, cfg, est, budget)? {
        return Ok(r);
    }
    if est <= cfg.max_detailed_events {
        detailed(topo, s, bytes, cfg)
    } else {
        aggregate::run(topo, s, bytes, cfg)
    }
}

/// `s` at `bytes` in the detailed engine, every step an event.
fn detailed(
    topo: &Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
) -> Result<SimResult, SimError> {
    // Expanded programs live in memory (~100 B per op); refuse what cannot fit.
    let expanded = s.expanded_op_count();
    if expanded > MAX_EXPANDED_OPS {
        return Err(SimError::TooLarge(format!(
            "{expanded} expanded ops (limit {MAX_EXPANDED_OPS})"
        )));
    }
    s.validate()?;
    engine::run(topo, s, bytes, cfg)
}
