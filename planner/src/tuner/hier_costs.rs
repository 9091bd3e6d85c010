//! What a hierarchical all-reduce (a ring inside each host, one across hosts on each rail)
//! costs in the engine's own terms (`EngineTerms::hier_paths`), for the tuner's candidates: its
//! phases' paths, its payload rates inside and across hosts, and a one-iteration call priced
//! message by message.

use super::chain_costs::{engine_path, link_eff};
use super::*;

/// A small hierarchical all-reduce's paths as the engine runs them (`EngineTerms::hier_paths`):
/// each GPU's program reduce-scatters inside its host, all-reduces its piece across hosts on its
/// rail, and all-gathers inside its host, phase after phase, each phase its ring's steps in
/// program order (`ChainPaths::ring_us`), and the phases share the step that hands one's last
/// receive to the next. `None` where the rings were not measured.
pub(super) fn hier_path(e: &EngineTerms, p: Protocol, nc: u32, ppn: u32) -> Option<f64> {
    let i = proto_idx(p);
    let (hop, step) = (e.hop_us[i], e.step_us[i]);
    let [intra, rails] = &e.hier_paths;
    let ring = |paths: &ChainPaths, kind, nc| paths.ring_us(kind, 0, nc, hop, step);
    let phases = ring(intra, CollectiveKind::ReduceScatter, nc)?
        + ring(rails, CollectiveKind::AllReduce, ppn)?
        + ring(intra, CollectiveKind::AllGather, nc)?;
    Some(phases - 2.0 * step)
}

/// A hierarchical all-reduce's payload rates as the engine runs it, GB/s (inside a host, across
/// hosts): inside, each of the `nc` channels at the engine's channel rate within its share of the
/// host chains' links; across, a GPU's `nc` channels together within its rail's share of the
/// links. The engine neither ramps nor paces these channels (the size ramp and `llMaxBws` are
/// NCCL's rings'). `None` where the rings were not measured.
pub(super) fn hier_rates(e: &EngineTerms, p: Protocol, nc: u32, ppn: u32) -> Option<(f64, f64)> {
    let i = proto_idx(p);
    let (rate, wire) = (e.channel_gbps[i], e.wire_factor[i].max(1.0));
    if rate <= 0.0 {
        return None;
    }
    let [intra, rails] = &e.hier_paths;
    let slowest = |h: Vec<Vec<f64>>| h.iter().flatten().fold(f64::INFINITY, |a, &g| a.min(g));
    // Channels past the chains measured run the same chains again, over the same links.
    let repeats = nc.max(1) as f64 / (intra.rings.len().min(nc.max(1) as usize).max(1)) as f64;
    let share = slowest(intra.hop_gbps(nc)?) * link_eff(e) / repeats;
    let rail = slowest(rails.hop_gbps(ppn)?) * link_eff(e);
    let ncf = nc.max(1) as f64;
    Some((ncf * rate.min(share) / wire, (ncf * rate).min(rail) / wire))
}

/// A hierarchical all-reduce of one loop iteration as the engine runs it, µs beyond the tuner's
/// launch: its host phases as [`hier_path`] prices them, with their bytes at the host chains'
/// payload rate `intra_gbps`, and its rail phase message by message
/// (`ChainPaths::ring_messages_us`). A rail message is one chunk (`schedule::build::hier`'s
/// layout: the call's bytes over channels × local GPUs × hosts), one step, and each hop moves it
/// at the channel's rate within its share of the rail's links (the rail's `nc` channels share
/// them). On an oversubscribed fabric a slow uplink's transfer then hides in the other hops'
/// hand-offs, which a latency plus the bytes at the slowest hop's rate leaves out. `None` where
/// the call loops, a rail message takes more than one step or the rings were not measured.
pub(super) fn hier_steps_us(
    c: &TunerParams,
    p: Protocol,
    (nc, ppn, nnodes): (u32, u32, u32),
    bytes: u64,
    intra_gbps: f64,
) -> Option<f64> {
    let (e, i) = (&c.engine, proto_idx(p));
    let (rate, wire) = (e.channel_gbps[i], e.wire_factor[i].max(1.0));
    if rate <= 0.0 || e.step_bytes[i] == 0 || intra_gbps <= 0.0 || nnodes < 2 {
        return None;
    }
    // The builder's geometry in 4-byte elements: one chunk per channel, local GPU and host, and
    // a loop iteration of at most one protocol step per chunk.
    let blocks = nc.max(1) as u64 * ppn.max(1) as u64 * nnodes as u64;
    let count = bytes.div_ceil(4);
    if count.div_ceil(blocks * crate::schedule::build::step_elems(p)) > 1 {
        return None;
    }
    let chunk = count.div_ceil(blocks) * 4;
    if chunk.div_ceil(e.step_bytes[i]) > 1 {
        return None;
    }
    let (hop, step) = (e.hop_us[i], e.step_us[i]);
    let [intra, rails] = &e.hier_paths;
    let eff = link_eff(e);
    let share = |g: f64| rate.min(g * eff / nc.max(1) as f64).max(1e-9);
    let transfer = |g: f64| chunk as f64 * wire / 1000.0 / share(g);
    let k = 2 * (nnodes as usize - 1);
    let rail = rails.ring_messages_us(ppn, k, hop, step, transfer)?;
    let host = |kind| intra.ring_us(kind, 0, nc, hop, step);
    let phases = host(CollectiveKind::ReduceScatter)? + rail + host(CollectiveKind::AllGather)?;
    let l = ppn.max(1) as f64;
    let host_bytes = 2.0 * (l - 1.0) / l * bytes as f64 / 1000.0 / intra_gbps;
    engine_path(c, Some(phases - 2.0 * step)).map(|x| x + host_bytes)
}
