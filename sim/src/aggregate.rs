//! The aggregated (lockstep) model for symmetric schedules: rings at thousands of ranks.
//!
//! A schedule is *symmetric* when every (rank, channel) program has the same compact shape: the
//! same number of ops, and op by op the same kind, repeat count, chunk count and copy-engine use
//! (peers, chunk indices and the other transports may differ). Ring collectives are symmetric. In a symmetric pipeline
//! every program performs its k-th op at the same time (lockstep): a ring's cycle time is set by
//! its slowest stage, and slots keep faster stages from running ahead.
//!
//! For each compact op the model gathers the flows of *all* programs running it at once (one
//! per (rank, channel)), shares every link max-min fairly among them exactly as the detailed
//! engine would at that instant (`flows.rs`), and takes the slowest program's time:
//! `T_op = max over programs of max(m·t_step, t_step + latency)` with `m` protocol steps of
//! `t_step = step_bytes·wire/rate + step cost` — a program streams its `m` steps back to back,
//! and the next op can begin only once the first step of this one has arrived downstream.
//! Where the op's sends close rings (a ring call's channels, a hierarchical call's rings in each
//! host and along each rail), a ring's period is at least its steps and hand-offs around it over
//! its ranks instead of its slowest hand-off at every step, and where a connection carries more
//! messages than its slots hold, at least the cycles its credits close: a sender's message and
//! the credit's return over the slots, and the credits' chain around each ring. The total is `launch + Σ_iterations Σ_ops repeat·T_op`. Work and memory are linear in
//! ranks × channels × compact ops, independent of message size and of `repeat`.

use crate::config::SimConfig;
use crate::flows::{Allocator, Demand};
use crate::net::Net;
use crate::{LinkLoad, Mode, SimError, SimResult};
use planner::schedule::*;
use std::collections::HashMap;

/// Why a schedule is not symmetric (the first difference found), or None.
pub fn asymmetry(s: &Schedule) -> Option<String> {
    let first = s.ranks.first()?.channels.first()?;
    for rp in &s.ranks {
        for (c, ch) in rp.channels.iter().enumerate() {
            if ch.ops.len() != first.ops.len() {
                return Some(format!(
                    "rank {} channel {c} has {} ops, rank 0 channel 0 has {}",
                    rp.rank,
                    ch.ops.len(),
                    first.ops.len()
                ));
            }
            for (i, (a, b)) in ch.ops.iter().zip(&first.ops).enumerate() {
                // Transports may differ (NVLink inside a node, network across); only copy-engine
                // steps are costed differently per op, so that must agree.
                let ce = |o: &Op| o.transport == Transport::CopyEngine;
                if a.kind != b.kind
                    || a.repeat != b.repeat
                    || ce(a) != ce(b)
                    || a.chunk_count() != b.chunk_count()
                    || a.peer_stride != 0
                    || !a.deps.is_empty()
                {
                    return Some(format!(
                        "rank {} channel {c} op {i} differs from rank 0 channel 0 op {i}",
                        rp.rank
                    ));
                }
            }
        }
    }
    None
}

/// Light structural checks (the full `validate` expands `repeat` and is too slow at 8192 ranks).
fn check(s: &Schedule) -> Result<(), SimError> {
    if s.version != SCHEDULE_IR_VERSION {
        return Err(SimError::Invalid(ScheduleError::Version(s.version)));
    }
    if s.nranks == 0
        || s.ranks.len() != s.nranks as usize
        || s.chunks_per_block == 0
        || s.slots == 0
    {
        return Err(SimError::Invalid(ScheduleError::Shape(
            "nranks, rank programs, chunks_per_block or slots are inconsistent".into(),
        )));
    }
    for rp in &s.ranks {
        if rp.channels.len() != s.channels as usize {
            return Err(SimError::Invalid(ScheduleError::Shape(format!(
                "rank {} has {} channel programs, schedule has {}",
                rp.rank,
                rp.channels.len(),
                s.channels
            ))));
        }
        for ch in &rp.channels {
            for op in &ch.ops {
                for p in [op.send_to, op.recv_from].into_iter().flatten() {
                    if p >= s.nranks || p == rp.rank {
                        return Err(SimError::Invalid(ScheduleError::Shape(format!(
                            "rank {} names peer {p}",
                            rp.rank
                        ))));
                    }
                }
                if op.kind.sends() != op.send_to.is_some()
                    || op.kind.receives() != op.recv_from.is_some()
                {
                    return Err(SimError::Invalid(ScheduleError::Shape(format!(
                        "rank {} has a {:?} op with missing or extra peers",
                        rp.rank, op.kind
                    ))));
                }
            }
        }
    }
    Ok(())
}

struct OpRates {
    /// per program: (rate bytes/µs, latency µs, network route)
    per_prog: Vec<(f64, f64, bool)>,
    /// per program: resources and weights of its flow (for the load report)
    res: Vec<Vec<(u32, f64)>>,
    /// Where every program's send goes to a program of its channel that sends on, closing
    /// cycles (the rings of a ring call, or of a hierarchical call's phase): each program's
    /// cycle and each cycle's length. `None` otherwise.
    cycles: Option<(Vec<usize>, Vec<usize>)>,
}

/// The cycles the programs' sends (`peers`, per program in rank then channel order; `u32::MAX`:
/// none) close within each of the `channels`, as [`OpRates::cycles`]: `None` where a send
/// leads to a program that does not send or where two sends meet one receiver.
fn send_cycles(
    ranks: &[RankProgram],
    channels: usize,
    peers: &[u32],
) -> Option<(Vec<usize>, Vec<usize>)> {
    let mut index = vec![usize::MAX; ranks.len()];
    for (i, rp) in ranks.iter().enumerate() {
        *index.get_mut(rp.rank as usize)? = i;
    }
    let next = |k: usize| -> Option<usize> {
        let to = *index.get(*peers.get(k)? as usize)?;
        (to != usize::MAX).then_some(to * channels + k % channels)
    };
    let (mut cycle, mut lengths) = (vec![usize::MAX; peers.len()], Vec::new());
    for start in 0..peers.len() {
        if cycle[start] != usize::MAX {
            continue;
        }
        let id = lengths.len();
        let (mut k, mut len) = (start, 0);
        loop {
            if cycle[k] != usize::MAX {
                return None;
            }
            cycle[k] = id;
            len += 1;
            k = next(k)?;
            if k == start {
                break;
            }
        }
        lengths.push(len);
    }
    Some((cycle, lengths))
}

/// The flows' rates of every compact op, by pattern: ops with the same kind, transport and peers
/// share one evaluation. Returns (patterns, each op's pattern, evaluations).
fn op_patterns(
    s: &Schedule,
    cfg: &SimConfig,
    net: &mut Net,
    paced_ll: bool,
) -> Result<(Vec<OpRates>, Vec<usize>, u64), SimError> {
    let nprog = (s.nranks * s.channels) as usize;
    let shape = &s.ranks[0].channels[0].ops;
    let mut alloc = Allocator::default();
    let mut rates = Vec::new();
    let mut evaluations: u64 = 0;
    let mut cache: HashMap<(OpKind, Transport, Vec<u32>), usize> = HashMap::new();
    let mut patterns: Vec<OpRates> = Vec::new();
    let mut op_pattern = Vec::with_capacity(shape.len());
    let mut demands: Vec<Demand> = Vec::with_capacity(nprog);
    let sends = s.ranks.iter().flat_map(|rp| {
        rp.channels.iter().enumerate().flat_map(move |(c, ch)| {
            ch.ops
                .iter()
                .filter_map(move |o| o.send_to.map(|t| (c as u32, rp.rank, t)))
        })
    });
    let spreads = crate::net::entry_spreads(net.topo, sends);
    for (i, op0) in shape.iter().enumerate() {
        let peers: Vec<u32> = s
            .ranks
            .iter()
            .flat_map(|rp| {
                rp.channels
                    .iter()
                    .map(move |ch| ch.ops[i].send_to.unwrap_or(u32::MAX))
            })
            .collect();
        let key = (op0.kind, op0.transport, peers);
        if let Some(&p) = cache.get(&key) {
            op_pattern.push(p);
            continue;
        }
        demands.clear();
        let mut meta = Vec::with_capacity(nprog);
        for rp in &s.ranks {
            for c in 0..s.channels {
                let peer = key.2[demands.len()];
                let sp = spreads.get(&(c, peer)).copied().unwrap_or(0);
                let (d, m) = demand(s, cfg, net, op0, (rp.rank, sp), peer, paced_ll)?;
                demands.push(d);
                meta.push(m);
            }
        }
        let caps: Vec<f64> = net.res.iter().map(|r| r.cap).collect();
        alloc.allocate(&caps, |k| &demands[k], demands.len(), &mut rates);
        evaluations += demands.len() as u64;
        let per_prog = rates
            .iter()
            .zip(&meta)
            .map(|(&r, &(lat, netw))| (r, lat, netw))
            .collect();
        let res = demands.iter().map(|d| d.res.clone()).collect();
        let cycles = send_cycles(&s.ranks, s.channels as usize, &key.2);
        patterns.push(OpRates {
            per_prog,
            res,
            cycles,
        });
        cache.insert(key, patterns.len() - 1);
        op_pattern.push(patterns.len() - 1);
    }
    Ok((patterns, op_pattern, evaluations))
}

/// The flow of one program running `op0` (sending to `peer`, or `u32::MAX` for local work) and
/// its route's (latency, network) — as the detailed engine would start it. LL sends are paced at
/// `ll_steady_gbps` when `paced_ll` (the connection carries more messages than it has slots).
fn demand(
    s: &Schedule,
    cfg: &SimConfig,
    net: &mut Net,
    op0: &Op,
    (rank, spread): (u32, usize),
    peer: u32,
    paced_ll: bool,
) -> Result<(Demand, (f64, bool)), SimError> {
    let touches = cfg.local_touches(op0.kind);
    let mem = net.mem[rank as usize];
    if peer == u32::MAX {
        let d = Demand {
            res: vec![(mem, touches as f64)],
            cap: cfg.channel_caps(s).1,
        };
        return Ok((d, (0.0, false)));
    }
    let proto = cfg.proto(s.protocol);
    let ce = op0.transport == Transport::CopyEngine;
    let route = net.route(rank, peer, spread)?.clone();
    let wire = proto.wire_factor;
    let lw = if ce {
        cfg.sm_link_efficiency / cfg.ce_link_efficiency
    } else {
        1.0
    };
    let mut res: Vec<(u32, f64)> = route.res.iter().map(|&r| (r, lw)).collect();
    res.push((mem, touches as f64 / wire));
    res.push((net.mem[peer as usize], 1.0 / wire));
    if ce {
        res.push((net.ce[rank as usize], 1.0));
    }
    let mut cap = if ce {
        f64::INFINITY
    } else {
        cfg.channel_caps(s).0
    };
    if let (true, Protocol::LL, Some(st)) = (paced_ll, s.protocol, cfg.ll_steady_gbps) {
        cap = cap.min(st * 1e3);
    }
    Ok((Demand { res, cap }, (route.lat_us, route.network)))
}

pub(crate) fn run(
    topo: &planner::topology::Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
) -> Result<SimResult, SimError> {
    run_where(topo, s, bytes, cfg, false).map(|r| r.expect("lockstep not required"))
}

/// [`run`], or `None` where the programs would fall out of the lockstep the model assumes in a
/// way that changes the time ([`phases_share_a_link`]).
pub(crate) fn run_in_lockstep(
    topo: &planner::topology::Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
) -> Result<Option<SimResult>, SimError> {
    run_where(topo, s, bytes, cfg, true)
}

fn run_where(
    topo: &planner::topology::Topology,
    s: &Schedule,
    bytes: u64,
    cfg: &SimConfig,
    lockstep_only: bool,
) -> Result<Option<SimResult>, SimError> {
    check(s)?;
    if let Some(why) = asymmetry(s) {
        return Err(SimError::NotSymmetric(why));
    }
    let count = crate::count_for_bytes(s, bytes, cfg.elem_bytes);
    let mut net = Net::new(topo, s.nranks, cfg.sm_link_efficiency)?;
    let iters = s.loop_iterations(count);
    // A connection carries one message per op repeat and iteration: past its slots, LL steps
    // wait for the receiver (the detailed engine's `ll_steady_gbps`). Lockstep runs the call
    // both ways and takes the slots' share of the messages unpaced, the rest paced.
    let messages = s.ranks[0].channels[0]
        .ops
        .iter()
        .filter(|o| o.kind.sends())
        .map(|o| o.repeat.max(1) as u64)
        .sum::<u64>()
        * iters;
    let (patterns, op_pattern, mut evaluations) = op_patterns(s, cfg, &mut net, false)?;
    if lockstep_only && phases_share_a_link(s, &net, &patterns, &op_pattern) {
        return Ok(None);
    }
    let caps: Vec<f64> = net.res.iter().map(|r| r.cap).collect();
    let mut load = vec![0.0; caps.len()];
    let (mut total_us, represented) =
        lockstep_time(s, cfg, count, &patterns, &op_pattern, &mut load);
    let paces = s.protocol == Protocol::LL && cfg.ll_steady_gbps.is_some();
    if paces && messages > s.slots as u64 {
        let (patterns, op_pattern, more) = op_patterns(s, cfg, &mut net, true)?;
        evaluations += more;
        let mut unused = vec![0.0; caps.len()];
        let (paced_us, _) = lockstep_time(s, cfg, count, &patterns, &op_pattern, &mut unused);
        let unpaced = s.slots as f64 / messages as f64;
        total_us = unpaced * total_us + (1.0 - unpaced) * paced_us;
    }
    let time_ps = (total_us * 1e6).round() as u64;
    let names: Vec<String> = net.res.iter().map(|r| r.name.clone()).collect();
    let links: Vec<LinkLoad> = crate::link_loads(&names, &caps, &load, total_us);
    Ok(Some(
        SimResult {
            time_us: time_ps as f64 / 1e6,
            time_ps,
            events: evaluations,
            represented_steps: 0,
            mode: Mode::Aggregated,
            links,
            trace: None,
        }
        .with_represented(represented),
    ))
}

/// Whether a hierarchical call's rail and host phases cross a common link. Its programs fall
/// out of step: a GPU whose rail finishes early starts the host's all-gather while the others
/// still send on their rails. Over disjoint links that overlap is what lockstep's rings and
/// credits already price (two 8×H800 hosts, LL at 256 MiB: 0.6 % off the detailed engine); over
/// a shared link (a 4×A6000 host's inter-CPU link, which its second CPU's GPUs cross to reach
/// their NICs) the phases contend where lockstep takes them one at a time: 5 % fast in Simple,
/// 11 % in LL and LL128 at 256 MiB.
fn phases_share_a_link(
    s: &Schedule,
    net: &Net,
    patterns: &[OpRates],
    op_pattern: &[usize],
) -> bool {
    if s.algorithm != Algorithm::Hierarchical {
        return false;
    }
    let own: std::collections::HashSet<u32> = net.mem.iter().chain(&net.ce).copied().collect();
    let mut links: [std::collections::HashSet<u32>; 2] = Default::default();
    for (op, &p) in s.ranks[0].channels[0].ops.iter().zip(op_pattern) {
        let phase = &mut links[usize::from(op.transport == Transport::Network)];
        let res = patterns[p].res.iter().flatten().map(|&(r, _)| r);
        phase.extend(res.filter(|r| !own.contains(r)));
    }
    !links[0].is_disjoint(&links[1])
}

/// Launch plus every op's lockstep time over the iterations (all full iterations alike, the
/// last possibly partial), adding the bytes each resource carries to `load`; also the protocol
/// steps represented.
fn lockstep_time(
    s: &Schedule,
    cfg: &SimConfig,
    count: u64,
    patterns: &[OpRates],
    op_pattern: &[usize],
    load: &mut [f64],
) -> (f64, u64) {
    let proto = cfg.proto(s.protocol);
    let nprog = (s.nranks * s.channels) as u64;
    let shape = &s.ranks[0].channels[0].ops;
    let iters = s.loop_iterations(count);
    let slice = |it: u64| -> u64 {
        match s.loop_elems {
            Some(l) if l > 0 => ((it + 1) * l).min(count) - (it * l).min(count),
            _ => count,
        }
    };
    let classes = [(iters - 1, slice(0)), (1, slice(iters - 1))];
    // A connection holding fewer messages than it carries: a sender's message waits for the
    // receiver to consume the one `slots` back and for the credit to return.
    let sends: u64 = shape
        .iter()
        .filter(|o| o.kind.sends())
        .map(|o| o.repeat as u64)
        .sum();
    let credits = (sends * iters > s.slots as u64).then_some(s.slots.max(1) as f64);
    let mut total_us = cfg.launch_us;
    let mut represented: u64 = 0;
    for &(times, len) in &classes {
        if times == 0 {
            continue;
        }
        let chunk_elems = len.div_ceil(s.chunks_per_block as u64);
        for (i, op) in shape.iter().enumerate() {
            let payload = chunk_elems * op.chunk_count() as u64 * cfg.elem_bytes as u64;
            let comm = op.kind.sends() || op.kind.receives();
            let m = if comm {
                payload
                    .div_ceil(proto.step_bytes.max(1))
                    .max(proto.min_steps_for(s) as u64)
                    .min(payload.max(1))
            } else {
                1
            };
            let pat = &patterns[op_pattern[i]];
            let worst = op_time(s, cfg, op, pat, (payload, m, credits), times, load);
            total_us += worst * op.repeat as f64 * times as f64;
            represented += m * op.repeat as u64 * times * nprog;
        }
    }
    (total_us, represented)
}

/// The slowest program's time for one op of `payload` bytes in `m` steps, adding what each
/// program moves (over `times` iterations) to `load`. With `credits` (the messages a
/// connection holds, where it carries more), a sender's message also waits for its receiver to
/// have consumed the message `credits` back (that message's steps, its landing and the
/// receiver's step) and for the credit to return (a landing): a cycle of `credits` ops.
fn op_time(
    s: &Schedule,
    cfg: &SimConfig,
    op: &Op,
    pat: &OpRates,
    (payload, m, credits): (u64, u64, Option<f64>),
    times: u64,
    load: &mut [f64],
) -> f64 {
    let proto = cfg.proto(s.protocol);
    let sub = payload as f64 / m as f64;
    let mut worst: f64 = 0.0;
    // A ring's step waits for its predecessor's: per ring, the steps and hand-offs around it,
    // over its ranks, bound the period, which a rank with a faster step or route absorbs. The
    // rings are a ring call's channels, or a hierarchical call's rings inside each host and
    // along each rail, whose hops' latencies differ (a fat tree's leaf and spine).
    let rings = match (&pat.cycles, &s.algorithm) {
        (Some(c), Algorithm::Ring | Algorithm::Hierarchical) if op.kind.sends() => Some(c),
        _ => None,
    };
    let ring = rings.is_some();
    let mut around = vec![0.0; rings.map_or(0, |(_, lengths)| lengths.len())];
    // The credits' chain around a ring: a sender's message waits for its successor's op that
    // consumes the message `credits` back, whose start waits in turn for the next successor's,
    // so each hop forward adds a whole message and a hand-off, `credits − 1` ops earlier.
    let mut around_credits = around.clone();
    let mut slowest_steps: f64 = 0.0;
    let mut credit_cycle: f64 = 0.0;
    for (k, &(rate, lat, netw)) in pat.per_prog.iter().enumerate() {
        let sends = op.kind.sends();
        let wire = if sends { proto.wire_factor } else { 1.0 };
        let mut over = 0.0;
        if sends {
            over += if op.transport == Transport::CopyEngine {
                cfg.ce_setup_us
            } else {
                proto.step_us
            };
            if netw {
                over += cfg.net_step_us;
            }
        } else if op.kind.receives() {
            over += proto.step_us;
        }
        let moves = sends || cfg.local_touches(op.kind) > 0;
        let t_step = if sub > 0.0 && moves {
            sub * wire / rate
        } else {
            0.0
        } + over;
        let t = if sends {
            (m as f64 * t_step).max(t_step + lat + proto.hop_us)
        } else {
            m as f64 * t_step
        };
        worst = worst.max(t);
        if let Some(slots) = credits.filter(|_| sends) {
            let receiver_step = t_step - if netw { cfg.net_step_us } else { 0.0 };
            let landing = lat + proto.hop_us;
            credit_cycle =
                credit_cycle.max((m as f64 * t_step + 2.0 * landing + receiver_step) / slots);
        }
        if ring {
            let r = rings.map_or(0, |(cycle, _)| cycle[k]);
            around[r] += t_step + lat + proto.hop_us;
            around_credits[r] += m as f64 * t_step + lat + proto.hop_us;
            slowest_steps = slowest_steps.max(m as f64 * t_step);
        }
        let moved = payload as f64 * wire * (op.repeat as f64) * times as f64;
        for &(r, w) in &pat.res[k] {
            load[r as usize] += moved * w;
        }
    }
    if let Some((_, lengths)) = rings {
        let ring = ring_period([&around, &around_credits], lengths, credits);
        worst = slowest_steps.max(ring);
    }
    worst.max(credit_cycle)
}

/// The op's period that its rings bound, µs: per ring, its steps and hand-offs around it over
/// its ranks (`around`), and with `credits` (a connection's slots, where it carries more
/// messages) its credits' chain, a whole message and a hand-off a hop (`around_credits`), over
/// `credits − 1` ops a hop.
fn ring_period(
    [around, around_credits]: [&[f64]; 2],
    lengths: &[usize],
    credits: Option<f64>,
) -> f64 {
    let per = |sums: &[f64], ops_a_hop: f64| {
        sums.iter().zip(lengths).fold(0.0f64, |a, (&x, &len)| {
            a.max(x / (len.max(1) as f64 * ops_a_hop))
        })
    };
    let chain = match credits {
        Some(slots) if slots >= 2.0 => per(around_credits, slots - 1.0),
        _ => 0.0,
    };
    per(around, 1.0).max(chain)
}
