//! What a ring or tree call costs in the engine's own terms (`EngineTerms`), for the tuner's
//! candidates: the latency of its slowest path, an LL channel's rate within its links, a rooted
//! chain's pipeline fill and the broadcast root's copy.

use super::*;

/// A small ring or tree call's latency beyond the tuner's launch as the engine runs it: the
/// engine's launch, then the call's slowest path (`ChainPaths`), `None` without the engine's
/// terms or the paths (NCCL's latency table prices it then).
pub(super) fn engine_path(c: &TunerParams, path_us: Option<f64>) -> Option<f64> {
    match path_us {
        Some(x) if c.engine.launch_us > 0.0 => Some(c.engine.launch_us - c.launch_us + x),
        _ => None,
    }
}

/// The payload rate of one LL channel of `nc` as the engine runs it, GB/s: the engine's LL
/// channel rate within `link_gbps`, the channel's share of its links (`None` without the
/// engine's terms: NCCL's form prices it then). `llMaxBws` bounds the call's channels together.
pub(super) fn ll_channel(e: &EngineTerms, link_gbps: f64) -> Option<f64> {
    let (rate, wire) = (e.channel_gbps[0], e.wire_factor[0]);
    if rate <= 0.0 || wire <= 0.0 {
        return None;
    }
    Some(rate.min(link_gbps) / wire)
}

/// The payload rate of one LL128 channel of `nc` as the engine runs it, GB/s: the engine's
/// LL128 channel rate, ramped with the size where `ramp_bytes` is given (NCCL's ring pattern),
/// within `link_gbps` (`None` without the engine's terms: NCCL's form prices it then).
pub(super) fn ll128_channel(
    e: &EngineTerms,
    link_gbps: f64,
    ramp_bytes: Option<u64>,
) -> Option<f64> {
    let (rate, wire) = (e.channel_gbps[1], e.wire_factor[1]);
    if rate <= 0.0 || wire <= 0.0 {
        return None;
    }
    let [s0, a] = e.nccl_ramp;
    let f = match ramp_bytes {
        Some(bytes) if s0 > 0.0 && a > 0.0 => 1.0 / (1.0 + (s0 / bytes.max(1) as f64).powf(a)),
        _ => 1.0,
    };
    Some((rate * f).min(link_gbps) / wire)
}

/// The channels' share of a set's links, GB/s: the search's bandwidth split among the `nc`
/// channels a call runs.
pub(super) fn set_share(set: &ChannelSet, nc: u32) -> f64 {
    set.bw_gbps * set.count as f64 / nc.max(1) as f64
}

/// A ring channel's share of its links, GB/s: the slowest hop of the first `nc` rings where the
/// planner measured them (`ChainPaths::hop_gbps`, at SM traffic's link efficiency), else the
/// search's bandwidth split among them.
pub(super) fn ring_share(e: &EngineTerms, r: &ChannelSet, nc: u32) -> f64 {
    match e.paths.hop_gbps(nc) {
        Some(h) => h.iter().flatten().fold(f64::INFINITY, |a, &g| a.min(g)) * link_eff(e),
        None => set_share(r, nc),
    }
}

pub(super) fn link_eff(e: &EngineTerms) -> f64 {
    if e.link_eff > 0.0 {
        e.link_eff
    } else {
        1.0
    }
}

/// The pipeline fill of a ring broadcast or reduce, µs: the data runs down a chain of n − 1
/// hops one chunk per step, so the last GPU starts a chunk's time over every hop but the slowest
/// after the first (the call's bandwidth term pays the slowest hop for every chunk). A chunk is
/// NCCL's, or the channel's whole share when smaller, at the hop's rate: the engine's
/// per-protocol channel rate within its links' share among the chains' hops of the same step
/// (`ChainPaths::fill`; without
/// the paths, n − 2 hops at the ring's share). LL's `llMaxBws` pacing only starts once a
/// connection's slots are full. NCCL's tuner leaves the fill out; on 8 GPUs it is a third of a
/// 128 MiB call. All-reduce, all-gather and reduce-scatter keep every hop busy from the first
/// step.
pub(super) fn chain_fill(
    m: &SystemModel,
    kind: CollectiveKind,
    root: u32,
    p: Protocol,
    bytes: u64,
    r: &ChannelSet,
    nc: u32,
) -> f64 {
    let (e, n) = (&m.calib.engine, m.nranks);
    if !matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) || n < 3 {
        return 0.0;
    }
    let i = proto_idx(p);
    let ncf = nc.max(1) as f64;
    let wire = if e.wire_factor[i] > 0.0 {
        e.wire_factor[i]
    } else {
        1.0
    };
    let chunk = (nccl::chunk_bytes(&Algorithm::Ring, kind, p) as f64).min(bytes as f64 / ncf);
    let us = |link: f64| {
        let rate = match e.channel_gbps[i] {
            x if x > 0.0 => x.min(link),
            _ => link,
        } / wire;
        chunk / 1000.0 / rate.max(1e-9)
    };
    let eff = link_eff(e);
    e.paths
        .fill(kind, root, nc, |g| us(g * eff))
        .unwrap_or_else(|| (n - 2) as f64 * us(set_share(r, nc)))
}

/// The broadcast root's copy of its input to its output, µs: the ring builder's root copies a
/// chunk and then sends it, op after op on its channel, at the engine's local copy rate per
/// channel. (NCCL fuses the two into one pass, `directCopySend`; the IR has no fused copy-send.)
pub(super) fn root_copy(kind: CollectiveKind, bytes: u64, e: &EngineTerms, nc: u32) -> f64 {
    if kind != CollectiveKind::Broadcast || e.local_channel_gbps <= 0.0 {
        return 0.0;
    }
    bytes as f64 / 1000.0 / (nc.max(1) as f64 * e.local_channel_gbps)
}
