//! The engine's price of a planner candidate: the schedule the planner builds for it, cut NCCL's
//! way where it is a ring or tree, timed by [`simulate`]. `topoplan sim` reports it and
//! `topoplan plan` chooses by it ([`planner::plan::Pricer`]), so the two agree on every pick.

use crate::{aggregate, estimate_events, nccl, simulate, SimConfig, SimError, SimResult};
use planner::plan::{Candidate, Planner, Pricer};
use planner::schedule::{Algorithm, Collective, Protocol, Schedule};
use planner::topology::Topology;
use std::cell::RefCell;
use std::collections::HashMap;

/// Schedules by (algorithm, protocol, channels), kept across sizes by the caller.
pub type Schedules = RefCell<HashMap<(String, Protocol, u32), Schedule>>;

/// A price's candidate and size: (algorithm, protocol, channels, bytes).
type PriceKey = (String, Protocol, u32, u64);

/// Most events of an asymmetric schedule the pricer runs whole (past it, [`extrapolate`]).
pub const PRICE_EVENTS: u64 = 50_000;

/// Most ranks the pricer simulates; larger machines keep the tuner's closed form.
pub const PRICE_RANKS: u32 = 64;

/// Prices candidates with the engine, remembering the schedules it built.
pub struct EnginePricer<'a> {
    topo: &'a Topology,
    planner: &'a Planner,
    cfg: &'a SimConfig,
    /// Most events an asymmetric schedule may take to be priced (symmetric ones run the
    /// aggregated model, whose cost does not grow with the size).
    budget_events: u64,
    schedules: &'a Schedules,
    /// Prices given so far, by (algorithm, protocol, channels, bytes): choosing and reporting
    /// the best candidate ask for the same ones.
    prices: RefCell<HashMap<PriceKey, Option<f64>>>,
}

impl<'a> EnginePricer<'a> {
    /// A pricer keeping its schedules in `schedules`.
    pub fn with_cache(
        topo: &'a Topology,
        planner: &'a Planner,
        cfg: &'a SimConfig,
        schedules: &'a Schedules,
    ) -> Self {
        Self {
            topo,
            planner,
            cfg,
            budget_events: PRICE_EVENTS,
            schedules,
            prices: RefCell::default(),
        }
    }

    /// The schedule of `c` (with `channels` when given, else the candidate's), as the engine
    /// runs it.
    pub fn schedule(
        &self,
        coll: &Collective,
        c: &Candidate,
        channels: Option<u32>,
    ) -> Result<Schedule, SimError> {
        let nch = channels.unwrap_or(c.channels);
        let key = (c.algorithm.name(), c.protocol, nch);
        if let Some(s) = self.schedules.borrow().get(&key) {
            return Ok(s.clone());
        }
        let want = match c.algorithm {
            Algorithm::Ring
            | Algorithm::Tree
            | Algorithm::OneShot
            | Algorithm::TwoShot
            | Algorithm::Hierarchical => Some(nch),
            _ => channels,
        };
        let mut s = self
            .planner
            .schedule(coll, &c.algorithm, c.protocol, want)
            .map_err(|e| SimError::Unsupported(e.to_string()))?;
        // Rings and trees run NCCL-style: NCCL's chunking, and its channels' size ramp.
        nccl::chunk(&mut s, self.cfg.elem_bytes);
        self.schedules.borrow_mut().insert(key, s.clone());
        Ok(s)
    }

    /// The configuration `s` runs under at `bytes`.
    pub fn config(&self, s: &Schedule, bytes: u64) -> SimConfig {
        if matches!(s.algorithm, Algorithm::Ring | Algorithm::Tree) {
            let m = self.planner.model();
            // NCCL's channels: a tree's up and down halves are one channel.
            let channels = if s.algorithm == Algorithm::Tree {
                s.chunks_per_block
            } else {
                s.channels
            }
            .max(1) as f64;
            let ll = planner::tuner::nccl::ll_max_bw(m.sm, m.nnodes) / channels;
            self.cfg.with_ring_ramp(s, bytes).with_ll_channel_cap(ll)
        } else {
            self.cfg.clone()
        }
    }

    /// Simulates `s` at `bytes`.
    pub fn run(&self, s: &Schedule, bytes: u64) -> Result<SimResult, SimError> {
        simulate(self.topo, s, bytes, &self.config(s, bytes))
    }

    /// The engine's price of `s` at `bytes`, or `None` past [`PRICE_RANKS`]
    /// ranks or where the engine cannot run it. Symmetric schedules run the aggregated model past
    /// the budget where their programs keep its lockstep, else the line through two detailed
    /// runs (`simulate`); asymmetric ones (trees, packed trees, broadcast and reduce) past the
    /// budget are extrapolated from two smaller runs ([`extrapolate`]).
    pub fn engine_price(&self, s: &Schedule, bytes: u64) -> Option<f64> {
        if s.nranks > PRICE_RANKS {
            return None;
        }
        let mut cfg = self.config(s, bytes);
        cfg.detailed_limit = cfg.detailed_limit.min(self.budget_events);
        let est = estimate_events(s, bytes, &cfg);
        if aggregate::asymmetry(s).is_none() || est <= self.budget_events {
            return simulate(self.topo, s, bytes, &cfg).ok().map(|r| r.time_us);
        }
        extrapolate(self.topo, s, bytes, &cfg, est, self.budget_events)
    }
}

/// Prices an asymmetric schedule too large to run whole within `budget` events from the line
/// through two smaller detailed runs (`line.rs`); where the two runs would take more than three
/// quarters of the whole, the whole size runs.
pub fn extrapolate(
    topo: &Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
    est_events: u64,
    budget: u64,
) -> Option<f64> {
    match crate::line::run(topo, s, bytes, cfg, est_events, budget) {
        Ok(Some(r)) => Some(r.time_us),
        Ok(None) => simulate(topo, s, bytes, cfg).ok().map(|r| r.time_us),
        Err(_) => None,
    }
}

impl Pricer for EnginePricer<'_> {
    fn price(&self, coll: &Collective, c: &Candidate, bytes: u64) -> Option<f64> {
        let key = (c.algorithm.name(), c.protocol, c.channels, bytes);
        if let Some(&t) = self.prices.borrow().get(&key) {
            return t;
        }
        // Past the engine's ranks no schedule is built: `engine_price` would not run it.
        if self.planner.model().nranks > PRICE_RANKS {
            return None;
        }
        let t = self
            .schedule(coll, c, None)
            .ok()
            .and_then(|s| self.engine_price(&s, bytes));
        self.prices.borrow_mut().insert(key, t);
        t
    }
}

/// One collective and size on one machine: the planner's engine-priced pick, what the tuner's
/// closed form says of it, and the fastest candidate by the engine's price.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Agreement {
    pub kind: planner::schedule::CollectiveKind,
    pub bytes: u64,
    pub algorithm: String,
    pub protocol: Protocol,
    pub channels: u32,
    /// The pick's price (the engine's where it priced it).
    pub picked_us: f64,
    pub by_engine: bool,
    /// The tuner's estimate of the pick.
    pub tuner_us: f64,
    /// The engine's price of every candidate it can price, fastest.
    pub best_engine_us: Option<f64>,
}

impl Agreement {
    /// The tuner's estimate over the pick's price, minus one.
    pub fn tuner_error(&self) -> f64 {
        self.tuner_us / self.picked_us - 1.0
    }

    /// How much slower the pick is than the engine's fastest candidate (0: it is the fastest).
    pub fn regret(&self) -> f64 {
        self.best_engine_us
            .map_or(0.0, |b| (self.picked_us / b - 1.0).max(0.0))
    }
}

/// [`Agreement`] of every collective at every size of `sizes` on `topo`.
pub fn agreement(
    topo: &Topology,
    planner: &Planner,
    cfg: &SimConfig,
    sizes: &[u64],
) -> Vec<Agreement> {
    let f = planner::tuner::Filter::default();
    let mut out = Vec::new();
    for_each_size(topo, planner, cfg, sizes, |coll, pricer, bytes| {
        let Some(p) = planner.choose_priced(coll, bytes, &f, pricer) else {
            return;
        };
        let best = planner
            .candidates_filtered(coll, bytes, &f)
            .iter()
            .filter_map(|c| pricer.price(coll, c, bytes))
            .reduce(f64::min);
        out.push(Agreement {
            kind: coll.kind,
            bytes,
            algorithm: p.choice.algorithm.name(),
            protocol: p.choice.protocol,
            channels: p.choice.channels,
            picked_us: p.choice.est_us,
            by_engine: p.by_pricer,
            tuner_us: p.tuner_us,
            best_engine_us: best,
        });
    });
    out
}

/// Calls `f` with every collective (as nccl-tests runs it on the planner's ranks), its engine
/// pricer and each of `sizes`. Schedules are cached by candidate, so one cache per collective.
fn for_each_size(
    topo: &Topology,
    planner: &Planner,
    cfg: &SimConfig,
    sizes: &[u64],
    mut f: impl FnMut(&Collective, &EnginePricer, u64),
) {
    for kind in planner::schedule::CollectiveKind::ALL {
        let coll = Collective::as_nccl_tests(kind, planner.nranks(), 0);
        let cache = Schedules::default();
        let pricer = EnginePricer::with_cache(topo, planner, cfg, &cache);
        for &bytes in sizes {
            f(&coll, &pricer, bytes);
        }
    }
}

/// One candidate of one collective and size: the tuner's estimate beside the engine's price of
/// the schedule it names.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CandidateRow {
    pub kind: planner::schedule::CollectiveKind,
    pub bytes: u64,
    pub protocol: Protocol,
    pub channels: u32,
    pub tuner_us: f64,
    pub engine_us: f64,
}

impl CandidateRow {
    /// The tuner's estimate over the engine's price, minus one.
    pub fn tuner_error(&self) -> f64 {
        self.tuner_us / self.engine_us - 1.0
    }
}

/// Every candidate of `algorithm` (its name: ring, tree, ...) the engine prices on `topo`, for
/// every collective at every size of `sizes`.
pub fn candidate_rows(
    topo: &Topology,
    planner: &Planner,
    cfg: &SimConfig,
    algorithm: &str,
    sizes: &[u64],
) -> Vec<CandidateRow> {
    let f = planner::tuner::Filter::default();
    let mut out = Vec::new();
    for_each_size(topo, planner, cfg, sizes, |coll, pricer, bytes| {
        for c in planner.candidates_filtered(coll, bytes, &f) {
            if c.algorithm.name() != algorithm {
                continue;
            }
            if let Some(engine_us) = pricer.price(coll, &c, bytes) {
                out.push(CandidateRow {
                    kind: coll.kind,
                    bytes,
                    protocol: c.protocol,
                    channels: c.channels,
                    tuner_us: c.time_us,
                    engine_us,
                });
            }
        }
    });
    out
}
