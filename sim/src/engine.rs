//! The detailed discrete-event engine. See `docs/sim.md` for the model; in short:
//!
//! - Every (rank, channel) program runs its expanded ops in order, once per loop iteration.
//! - An op's message is cut into protocol *steps* (`ProtoParams::step_bytes` of payload) that
//!   stream to the receiver one by one; the message holds one of the connection's `slots` from
//!   its first step until the receiver has consumed its last (the IR's slot semantics).
//! - A step starts when its program reached it, its deps completed (first step of an op), the
//!   incoming step has arrived (receiving ops) and a slot is free at the peer (sending ops). It
//!   then becomes one *flow* over the route's links, the GPU memories it reads and writes, and its
//!   channel's throughput cap; flows share resources max-min fairly (`flows.rs`), recomputed
//!   whenever a flow starts or ends.
//! - When the flow ends the step pays its fixed cost (`step_us`, copy-engine setup, network
//!   overhead); the data then arrives at the receiver after the route's latency, and the freed
//!   slot's credit returns to the sender after the same latency.
//!
//! Time is integer picoseconds; events are ordered by (time, sequence number), so runs are
//! bit-for-bit reproducible; the only randomness is the optional seeded jitter.

use crate::config::{ExecParams, SimConfig};
use crate::flows::{Allocator, Demand};
use crate::net::Net;
use crate::trace::{Trace, TraceStep};
use crate::{SimError, SimResult};
use planner::schedule::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

mod rates;
mod setup;
mod steps;
mod work;

const PS_PER_US: f64 = 1e6;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    StepDone(u32),
    Arrive(u32),
    Credit(u32),
    /// Flow (slot id, epoch) finishes; stale when the flow's epoch moved on.
    FlowDone(u32, u64),
    /// The earliest flow finish after a congested recomputation (stale unless current).
    FlowTick(u64),
    /// Quantised rate recomputation (many concurrent flows; see `SimConfig::rate_quantum_us`).
    Recompute,
}

struct Prog {
    rank: u32,
    ch: u32,
    ops: Vec<Op>,
    /// Per expanded op: (incoming connection, outgoing connection).
    conns: Vec<(Option<u32>, Option<u32>)>,
    /// Compact op index -> last expanded index (for deps).
    last_copy: Vec<u32>,
    total: u64,
    pc: u64,
    sub: u32,
    nsub: u32,
    payload: u64,
    busy: bool,
    step_start: u64,
    finish: u64,
}

struct Conn {
    route: u32,
    from_prog: u32,
    to_prog: u32,
    arrived: u64,
    recv_next: u64,
    /// Messages whose first step the sender has started.
    msgs_started: u64,
    /// Messages the receiver has fully consumed (known to the sender).
    credits: u64,
}

struct Flow {
    prog: u32,
    /// Bytes left at time `since` (materialised when rates change).
    remaining: f64,
    since: u64,
    volume: f64,
    rate: f64,
    demand: Demand,
    /// Resources the flow loads without being limited by them, (resource, weight): the links of
    /// a hybrid transfer (`ExecParams::runs_hybrid`). Recorded in the link report and the trace.
    unmetered: Vec<(u32, f64)>,
    overhead_ps: u64,
}

struct RouteInfo {
    res: Vec<u32>,
    lat_us: f64,
    network: bool,
}

pub(crate) fn run(
    topo: &planner::topology::Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
) -> Result<SimResult, SimError> {
    if cfg.exec.is_some() && ExecParams::applies(s) && s.loop_elems.is_some() {
        // The SM executor runs a program once over whole blocks (its CTAs overlap the slices
        // anyway; docs/cuda.md "Loops"), so the executor model does too.
        let mut whole = s.clone();
        whole.loop_elems = None;
        return Engine::new(topo, &whole, bytes, cfg)?.run();
    }
    Engine::new(topo, s, bytes, cfg)?.run()
}

struct Engine<'a> {
    s: &'a Schedule,
    cfg: &'a SimConfig,
    /// topoplan's SM executor model, when it times this schedule (`ExecParams::applies`).
    exec: Option<&'a ExecParams>,
    /// The executor's copy-engine path (`ExecParams::applies_ce`): one copy per message.
    exec_ce: Option<&'a ExecParams>,
    /// The executor runs this call in pull mode (`ExecParams::pulls`): its floor and read rate.
    pull: bool,
    /// The executor runs this call as the hybrid (`ExecParams::runs_hybrid`): its floor and
    /// rate, not held to the route's link capacity.
    hybrid: bool,
    /// Most channels of one rank that send: the executor divides its grid among them.
    send_channels: u32,
    count: u64,
    iters: u64,
    caps: Vec<f64>,
    res_names: Vec<String>,
    mem: Vec<u32>,
    ce: Vec<u32>,
    routes: Vec<RouteInfo>,
    progs: Vec<Prog>,
    /// programs by rank: first program index (channels are contiguous)
    conns: Vec<Conn>,
    flows: Vec<Option<Flow>>,
    free_flows: Vec<u32>,
    active: Vec<u32>,
    alloc: Allocator,
    rates: Vec<f64>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: u64,
    dirty: bool,
    /// Per flow slot: bumped whenever the flow's finish event is superseded.
    epoch: Vec<u64>,
    /// Every active flow runs at its cap (no resource binds): flows can then be added and removed
    /// incrementally without a global recomputation.
    all_at_cap: bool,
    /// Per resource: Σ rate × weight of active flows (kept while `all_at_cap`).
    usage: Vec<f64>,
    /// Congested: the finishes due before the next recomputation (time, flow, epoch), latest
    /// first.
    finish_queue: Vec<(u64, u32, u64)>,
    /// When bandwidth was last shared anew.
    last_recompute: u64,
    /// A quantised recomputation is scheduled.
    recompute_pending: bool,
    quantum_ps: u64,
    tick_version: u64,
    recomputes: u64,
    recompute_flows: u64,
    /// Current quantum: the configured one, or 1/16 of the mean remaining flow time at the last
    /// recomputation if larger (slow, congested runs recompute less often).
    quantum_dyn: u64,
    events: u64,
    steps: u64,
    load_bytes: Vec<f64>,
    rng: u64,
    trace: Option<Trace>,
}

impl<'a> Engine<'a> {
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn jitter(&mut self) -> f64 {
        if self.cfg.jitter <= 0.0 {
            return 1.0;
        }
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        1.0 + self.cfg.jitter * (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Payload bytes of expanded op `e` in loop iteration `iter`.
    fn op_payload(&self, op: &Op, iter: u64) -> u64 {
        let Some(cr) = op.src.or(op.dst) else {
            return 0;
        };
        let mut elems = 0;
        for k in 0..cr.count {
            let r = self.s.chunk_elems(self.count, iter, cr.chunk + k);
            elems += r.end - r.start;
        }
        elems * self.cfg.elem_bytes as u64
    }

    /// Shares bandwidth anew: with many concurrent flows at most once per quantum (flows started
    /// meanwhile wait for it; the error is below one quantum per step), with few exactly at
    /// every change.
    fn reshare(&mut self) {
        if self.quantised() {
            if !self.recompute_pending {
                self.recompute_pending = true;
                let q = self.quantum_dyn.max(1);
                let t = self.now.max(self.last_recompute + q);
                self.push(t, Ev::Recompute);
            }
        } else {
            self.recompute();
        }
    }

    /// Many flows at once: bandwidth is shared anew at most once per quantum.
    fn quantised(&self) -> bool {
        self.quantum_ps > 0 && self.active.len() >= self.cfg.quantum_min_flows
    }

    /// Finishes the queued flows that are due (their rates have not changed since the queue was
    /// built: a recomputation rebuilds it) and ticks again at the next one.
    fn flow_tick(&mut self) {
        let now = self.now;
        while let Some(&(t, id, e)) = self.finish_queue.last() {
            if t > now {
                break;
            }
            self.finish_queue.pop();
            if self.epoch[id as usize] == e {
                self.finish_flow(id);
            }
        }
        self.dirty = true;
        if let Some(&(t, _, _)) = self.finish_queue.last() {
            self.tick_version += 1;
            let v = self.tick_version;
            self.push(t, Ev::FlowTick(v));
        }
    }

    fn run(mut self) -> Result<SimResult, SimError> {
        let launch_us = match (self.exec, self.exec_ce) {
            (Some(x), _) if self.hybrid => x.hybrid_launch_us,
            (Some(x), _) if self.pull => x.pull_launch_us,
            (Some(x), _) => x.launch_us(self.s.protocol),
            (_, Some(x)) => x.ce_launch_us,
            _ => self.cfg.launch_us,
        };
        let launch = (launch_us * PS_PER_US).round() as u64;
        self.now = 0;
        for p in 0..self.progs.len() as u32 {
            self.prepare_op(p);
        }
        self.now = launch;
        for p in 0..self.progs.len() as u32 {
            self.try_start(p);
        }
        loop {
            if self.dirty {
                self.reshare();
            }
            let Some(Reverse((t, _, ev))) = self.heap.pop() else {
                break;
            };
            match ev {
                Ev::FlowDone(id, e) if self.epoch[id as usize] != e => continue,
                Ev::FlowTick(v) if v != self.tick_version => continue,
                _ => {}
            }
            self.events += 1;
            self.advance(t);
            match ev {
                Ev::FlowDone(id, _) => self.finish_flow(id),
                Ev::FlowTick(_) => self.flow_tick(),
                Ev::Recompute => {
                    self.recompute_pending = false;
                    if self.dirty {
                        self.recompute();
                    }
                }
                Ev::StepDone(p) => self.step_done(p),
                Ev::Arrive(c) => {
                    self.conns[c as usize].arrived += 1;
                    let p = self.conns[c as usize].to_prog;
                    self.try_start(p);
                }
                Ev::Credit(c) => {
                    self.conns[c as usize].credits += 1;
                    let p = self.conns[c as usize].from_prog;
                    self.try_start(p);
                }
            }
        }
        if let Some(p) = self.progs.iter().find(|p| p.pc < p.total) {
            return Err(SimError::Stuck {
                rank: p.rank,
                channel: p.ch,
                op: (p.pc % p.ops.len().max(1) as u64) as u32,
                time_us: self.now as f64 / PS_PER_US,
            });
        }
        let end = self
            .progs
            .iter()
            .map(|p| p.finish)
            .max()
            .unwrap_or(launch)
            .max(launch);
        let time_us = end as f64 / PS_PER_US;
        if params::SIM_STATS.flag_or_warn() {
            eprintln!(
                "sim stats: {} events, {} recomputations over {} flows in all",
                self.events, self.recomputes, self.recompute_flows
            );
        }
        let links = crate::link_loads(&self.res_names, &self.caps, &self.load_bytes, time_us);
        let trace = self.trace.take().map(|mut t| {
            t.resources = self.res_names.clone();
            t
        });
        Ok(SimResult {
            time_us,
            time_ps: end,
            events: self.events,
            represented_steps: self.steps,
            mode: crate::Mode::Detailed,
            links,
            trace,
        })
    }
}
