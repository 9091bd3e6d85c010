//! What a ring or tree call costs in the engine's own terms (`EngineTerms`), for the tuner's
//! candidates: the latency of its slowest path, an LL channel's rate within its links, a rooted
//! chain's pipeline fill and the broadcast root's copy.

use super::rooted_chain::MessageCosts;
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

/// Messages one connection of a ring or tree call carries, in `schedule::build`'s geometry (a
/// message per chunk of NCCL's, LL's 32 KiB): a loop iteration takes one chunk per channel, of
/// each rank's block on the ring pattern (all-reduce, all-gather, reduce-scatter), and sends
/// 2(n − 1) messages on each connection for a ring all-reduce, n − 1 for all-gather and
/// reduce-scatter, one for a broadcast, a reduce or a tree.
pub(super) fn messages(
    a: &Algorithm,
    kind: CollectiveKind,
    p: Protocol,
    n: u32,
    nc: u32,
    bytes: u64,
) -> u64 {
    let chunk = nccl::chunk_bytes(a, kind, p).max(1);
    let iters = bytes.div_ceil(chunk * blocks(a, kind, n, nc)).max(1);
    let sends = match a {
        Algorithm::Ring => ring_sends(kind, n),
        _ => 1,
    };
    sends * iters
}

/// The messages a ring connection carries per loop iteration: 2(n − 1) for all-reduce, n − 1 for
/// all-gather and reduce-scatter, one for a broadcast or a reduce.
pub(super) fn ring_sends(kind: CollectiveKind, n: u32) -> u64 {
    match kind {
        CollectiveKind::AllReduce => 2 * (n.max(2) as u64 - 1),
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter => n.max(2) as u64 - 1,
        _ => 1,
    }
}

/// One LL channel's payload rate once its slots are full, GB/s: NCCL's `llMaxBws` shared by the
/// call's `nc` channels.
fn ll_paced_gbps(m: &SystemModel, nc: u32) -> f64 {
    ll_max_bw(m.sm, m.nnodes.max(1)) / nc.max(1) as f64
}

/// The pieces a call's bytes are cut into before chunking: one per channel, and per rank's
/// block on the ring pattern.
fn blocks(a: &Algorithm, kind: CollectiveKind, n: u32, nc: u32) -> u64 {
    let ranks = if nccl::ring_chunked(a, kind) { n } else { 1 };
    nc.max(1) as u64 * ranks.max(1) as u64
}

/// What a ring call's steps cost beyond their transfers and the path's first `k` steps, µs.
/// The engine runs each channel's steps one after another: a sender whose hop crosses hosts pays
/// the network's step before each transfer, and the broadcast root copies each step's data to
/// its output before sending it (NCCL fuses the two, `directCopySend`; the IR has no fused
/// copy-send). Where that makes a sender's step the ring's slowest, every step of the connection
/// past the path's first `k` adds the difference to the transfers the bandwidth term prices (at
/// the slowest hop's rate); the root's first copy is on the path. A connection carries its
/// messages, each cut into steps of the protocol's size (at least `min_steps` on the ring
/// pattern); a step's transfer runs at the channel's rate within its hop's links (LL past its
/// slots at `llMaxBws`'s share). `None` where the rings were not measured.
pub(super) fn step_costs(
    m: &SystemModel,
    (kind, root): (CollectiveKind, u32),
    p: Protocol,
    nc: u32,
    bytes: u64,
    path_steps: u64,
) -> Option<f64> {
    let (e, n, a, i) = (&m.calib.engine, m.nranks, Algorithm::Ring, proto_idx(p));
    if e.step_bytes[i] == 0 || e.channel_gbps[i] <= 0.0 {
        return None;
    }
    let payload = nccl::chunk_bytes(&a, kind, p).min(bytes.div_ceil(blocks(&a, kind, n, nc)));
    let min = if nccl::ring_chunked(&a, kind) {
        e.min_steps[i].max(1)
    } else {
        1
    };
    let per_msg = payload.div_ceil(e.step_bytes[i]).max(min as u64);
    let msgs = messages(&a, kind, p, n, nc, bytes);
    let mut rate = e.channel_gbps[i];
    if p == Protocol::LL && msgs > nccl::STEPS as u64 {
        rate = rate.min(ll_paced_gbps(m, nc) * e.wire_factor[i]);
    }
    let step = payload as f64 / per_msg as f64;
    let wire = step * e.wire_factor[i].max(1.0);
    let copy = match kind {
        CollectiveKind::Broadcast if e.local_channel_gbps > 0.0 => {
            step / 1000.0 / e.local_channel_gbps
        }
        _ => 0.0,
    };
    let eff = link_eff(e);
    let excess = e.paths.step_excess(nc, (root, copy), |g| {
        wire / 1000.0 / rate.min(g * eff).max(1e-9)
    })?;
    // The path pays one iteration's messages, `path_steps` steps each.
    let k = ring_sends(kind, n) * path_steps.max(1);
    Some((msgs * per_msg).saturating_sub(k) as f64 * excess + copy)
}

/// A ring LL or LL128 all-reduce, all-gather or reduce-scatter of one loop iteration, whose
/// every message is one step (LL: no more messages than a connection's slots hold), as the
/// engine runs it: µs beyond the tuner's launch, every rank's messages in program order, each
/// its step, its sender's network step and its transfer at the hop's rate (the channel's rate,
/// LL128's ramped with the size on the ring pattern, within the hop's share of the links), handed on
/// after the route's latency (`ChainPaths::ring_messages_us`). Where the hops differ in rate
/// (the uplinks of an oversubscribed fat tree) a slow hop's transfer hides in the others'
/// hand-offs, which a latency plus the bytes at the slowest hop's rate leaves out. `None` where
/// the call loops, a message takes more than one step or the rings were not measured.
pub(super) fn ring_steps_us(
    m: &SystemModel,
    c: &TunerParams,
    (kind, p): (CollectiveKind, Protocol),
    nc: u32,
    bytes: u64,
) -> Option<f64> {
    let (e, n, a) = (&m.calib.engine, m.nranks, Algorithm::Ring);
    let i = proto_idx(p);
    if !nccl::ring_chunked(&a, kind) || e.step_bytes[i] == 0 || p == Protocol::Simple {
        return None;
    }
    let payload = nccl::chunk_bytes(&a, kind, p).min(bytes.div_ceil(blocks(&a, kind, n, nc)));
    if payload
        .div_ceil(e.step_bytes[i])
        .max(e.min_steps[i].max(1) as u64)
        != 1
    {
        return None;
    }
    let wire = e.wire_factor[i].max(1.0);
    let rate = match p {
        Protocol::LL => ll_channel(e, f64::INFINITY)?,
        _ => ll128_channel(e, f64::INFINITY, Some(bytes))?,
    } * wire;
    let eff = link_eff(e);
    // One loop iteration: a later iteration's first message waits for no predecessor. LL's
    // messages land in empty slots (past them the receiver paces the sender).
    let k = messages(&a, kind, p, n, nc, bytes);
    if k != ring_sends(kind, n) || (p == Protocol::LL && k > nccl::STEPS as u64) {
        return None;
    }
    // At the collective's efficiency, as the bandwidth term of every ring candidate.
    let coll = c.coll_eff[coll_idx(kind)];
    let transfer = |g: f64| payload as f64 * wire / 1000.0 / (rate.min(g * eff) * coll).max(1e-9);
    let us = e
        .paths
        .ring_messages_us(nc, k as usize, e.hop_us[i], e.step_us[i], transfer)?;
    engine_path(c, Some(us))
}

/// An LL broadcast or reduce whose connections carry more messages than their slots, as the
/// engine runs it: µs beyond the tuner's launch, every message of the chain in program order
/// (`ChainPaths::rooted_messages_us`), a step each, the first `STEPS` at the channel's rate
/// within the hop's share of the links and the later ones at `llMaxBws`'s share for the call's
/// channels; the broadcast root copies each message to its output first. `None` within the
/// slots, for other calls, or where the rings were not measured.
pub(super) fn rooted_steps_us(
    m: &SystemModel,
    c: &TunerParams,
    (kind, root): (CollectiveKind, u32),
    p: Protocol,
    nc: u32,
    bytes: u64,
) -> Option<f64> {
    let (e, n, a) = (&m.calib.engine, m.nranks, Algorithm::Ring);
    let i = proto_idx(p);
    let rooted = matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce);
    let msgs = messages(&a, kind, p, n, nc, bytes);
    if !rooted || p != Protocol::LL || msgs <= nccl::STEPS as u64 || e.channel_gbps[i] <= 0.0 {
        return None;
    }
    let wire = e.wire_factor[i].max(1.0);
    let chunk = (nccl::chunk_bytes(&a, kind, p) as f64).min(bytes as f64 / nc.max(1) as f64);
    let eff = link_eff(e);
    let at = |cap: f64| move |g: f64| chunk * wire / 1000.0 / cap.min(g * eff).max(1e-9);
    let copy = match kind {
        CollectiveKind::Broadcast if e.local_channel_gbps > 0.0 => {
            chunk / 1000.0 / e.local_channel_gbps + e.step_us[i]
        }
        _ => 0.0,
    };
    let costs = MessageCosts {
        hop_us: e.hop_us[i],
        step_us: e.step_us[i],
        root_us: copy,
    };
    let paced = ll_paced_gbps(m, nc) * wire;
    let us = e.paths.rooted_messages_us(
        (kind, root),
        nc,
        (msgs, nccl::STEPS),
        costs,
        at(e.channel_gbps[i]),
        at(paced),
    )?;
    engine_path(c, Some(us))
}

/// LL's bus bandwidth over a whole call as the engine runs it, GB/s: a connection's first
/// `STEPS` messages land in empty slots at the channels' own rate `fast`; each later one waits
/// for the receiver's flag-polling copy, which NCCL's `llMaxBws` bounds for the call's channels
/// together. The call's bytes split between the two rates in that proportion. (NCCL's own
/// tuner applies `llMaxBws` at every size.)
pub(super) fn ll_bus(fast: f64, llmax: f64, messages: u64) -> f64 {
    let paced = fast.min(llmax);
    let m = messages.max(1) as f64;
    let unpaced = (nccl::STEPS as f64).min(m) / m;
    1.0 / (unpaced / fast + (1.0 - unpaced) / paced)
}

/// What an LL or LL128 ring-pattern call's (all-reduce, all-gather, reduce-scatter) later
/// messages cost beyond what its bandwidth term bills them, as the engine runs them, µs. Every
/// rank's receive waits for its neighbour's message of the same step, and the channels run
/// their steps together, so no other channel's transfer fills a hand-off: a message takes its
/// ring's mean op and landing (`ChainPaths::lockstep_us`), and each rank's local pass of an
/// iteration (all-gather's copy of its own block into the output, reduce-scatter's last
/// reduction; all-reduce's ride on its sends) takes its turn between its sends. A message's
/// transfer moves at `cap_gbps` (wire) within its hop's links; the bandwidth term bills it at
/// `billed_gbps` (payload, one channel). The later messages: LL's past a connection's slots
/// (the earlier ones land in empty slots, link-bound where the channels' rates exceed their
/// links, which the bandwidth term prices with the collective's efficiency) and LL128's past
/// the first loop iteration, whose hand-offs the path prices. `None` where there are none, the
/// call is not of the ring pattern in LL or LL128 or the rings were not measured.
pub(super) fn lockstep_us(
    m: &SystemModel,
    (kind, p): (CollectiveKind, Protocol),
    nc: u32,
    bytes: u64,
    (cap_gbps, billed_gbps): (f64, f64),
) -> Option<f64> {
    let (e, n, a, i) = (&m.calib.engine, m.nranks, Algorithm::Ring, proto_idx(p));
    if !nccl::ring_chunked(&a, kind) || p == Protocol::Simple {
        return None;
    }
    let sends = ring_sends(kind, n);
    let first = match p {
        Protocol::LL => sends.max(nccl::STEPS as u64),
        _ => sends,
    };
    let later = messages(&a, kind, p, n, nc, bytes)
        .checked_sub(first)
        .filter(|&k| k > 0)?;
    let payload = nccl::chunk_bytes(&a, kind, p).min(bytes.div_ceil(blocks(&a, kind, n, nc)));
    let kb = payload as f64 / 1000.0;
    let wire_kb = kb * e.wire_factor[i].max(1.0);
    let pass_us = match (kind, e.local_channel_gbps) {
        (CollectiveKind::AllReduce, _) => 0.0,
        (_, g) if g > 0.0 => kb / g + e.step_us[i],
        _ => 0.0,
    };
    let eff = link_eff(e);
    let us = |g: f64| wire_kb / cap_gbps.min(g * eff).max(1e-9);
    let (period, transfer, plain) = e.paths.lockstep_us(nc, (e.hop_us[i], e.step_us[i]), us)?;
    // The bandwidth term bills the transfer; `step_costs` the network step beyond it.
    let billed = kb / billed_gbps.max(1e-9) + (transfer - plain);
    Some(later as f64 * (period + pass_us / sends as f64 - billed).max(0.0))
}

/// The steps and payload bytes of the `j`-th message that ring position `pos` sends on ring `c` of a one-iteration
/// ring-pattern call (all-reduce, all-gather, reduce-scatter) of `bytes`, as the engine cuts
/// it: its chunk's whole elements (`schedule::build`'s chunks: all-reduce's position p sends
/// block p − 1 − j, the others' blocks are the ranks', each split among the channels), at most
/// NCCL's chunk, in the protocol's steps, at least its fewest and at most one a byte (a small
/// message's bytes; an empty one a step).
pub(super) fn ring_message_steps(
    e: &EngineTerms,
    (kind, p): (CollectiveKind, Protocol),
    (n, nc): (u32, u32),
    bytes: u64,
    (c, pos, j): (u32, u32, u32),
) -> (u32, u64) {
    let (i, nc) = (proto_idx(p), nc.max(1));
    let elems = bytes / ENGINE_ELEM_BYTES;
    let chunk = match kind {
        CollectiveKind::AllReduce => {
            let b = (pos as i64 - 1 - j as i64).rem_euclid(n.max(1) as i64) as u32;
            crate::schedule::chunk_range(elems, n * nc, b * nc + c % nc)
        }
        _ => crate::schedule::chunk_range(elems / n.max(1) as u64, nc, c % nc),
    };
    let payload = ((chunk.end - chunk.start) * ENGINE_ELEM_BYTES).min(nccl::chunk_bytes(
        &Algorithm::Ring,
        kind,
        p,
    ));
    let steps = payload
        .div_ceil(e.step_bytes[i].max(1))
        .max(e.min_steps[i] as u64);
    (steps.min(payload.max(1)) as u32, payload)
}

/// The engine's Simple channel rate, GB/s of wire (`None` without the engine's terms).
pub(super) fn simple_channel(e: &EngineTerms) -> Option<f64> {
    Some(e.channel_gbps[2]).filter(|&r| r > 0.0 && e.wire_factor[2] > 0.0)
}

/// The engine's size ramp of NCCL's Simple and LL128 channels at `bytes` (`sim.nccl_ramp_*`),
/// 1 without one or where the call is not the ring pattern (`None`).
pub(super) fn engine_ramp(e: &EngineTerms, bytes: Option<u64>) -> f64 {
    let [s0, a] = e.nccl_ramp;
    match bytes {
        Some(bytes) if s0 > 0.0 && a > 0.0 => super::size_ramp(s0, a, bytes),
        _ => 1.0,
    }
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
    Some((rate * engine_ramp(e, ramp_bytes)).min(link_gbps) / wire)
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

/// The pipeline fill of a ring broadcast or reduce, µs: the data runs down a chain of n − 1 hops
/// one chunk per step, so the last GPU starts its first chunk only after that chunk crossed every
/// hop, which the engine runs as flows sharing the links (`ChainPaths::fill`), less one chunk at
/// the call's rate per channel (`algbw / nc`: the bandwidth term pays it for every chunk). A
/// chunk is NCCL's, or the channel's whole share when smaller, at the engine's per-protocol
/// channel rate (LL's first chunks land in empty slots, unpaced; past its slots the call is
/// priced message by message, [`rooted_steps_us`]). Without the paths, n − 2 hops
/// at the ring's share. NCCL's tuner leaves the fill out; on 8 GPUs it is a third of a 128 MiB
/// call. All-reduce, all-gather and reduce-scatter keep every hop busy from the first step.
#[allow(clippy::too_many_arguments)]
pub(super) fn chain_fill(
    m: &SystemModel,
    kind: CollectiveKind,
    root: u32,
    p: Protocol,
    bytes: u64,
    r: &ChannelSet,
    nc: u32,
    algbw: f64,
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
    let rate = match e.channel_gbps[i] {
        x if x > 0.0 => x,
        _ => f64::INFINITY,
    };
    let extra = e.hop_us[i] + e.step_us[i];
    let wave = e
        .paths
        .fill(kind, root, nc, chunk * wire / 1000.0, rate, extra);
    match wave {
        Some(w) if algbw > 0.0 => (w - chunk / 1000.0 / (algbw / ncf)).max(0.0),
        _ => {
            let us = |link: f64| chunk / 1000.0 / (rate.min(link) / wire).max(1e-9);
            (n - 2) as f64 * us(set_share(r, nc))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::build::{ring, tree, TreeChannel};
    use crate::schedule::{Collective, Schedule};

    /// The builder's ring schedule of `kind` over `nc` rings of `n` ranks in rank order.
    fn ring_schedule(kind: CollectiveKind, p: Protocol, n: u32, nc: u32) -> Schedule {
        let rings: Vec<Vec<u32>> = (0..nc).map(|_| (0..n).collect()).collect();
        ring(&Collective::as_nccl_tests(kind, n, 0), &rings, p).unwrap()
    }

    /// The engine's per-rank element count of an nccl-tests call of `bytes` on `s`.
    fn per_rank_count(s: &Schedule, n: u32, bytes: u64) -> u64 {
        let (inb, outb) = s.collective.blocks(n);
        bytes / ENGINE_ELEM_BYTES / inb.max(outb) as u64
    }

    /// A small ring-pattern message's steps are those the engine cuts the built schedule's
    /// message into: its chunk's bytes in Simple's steps, at least four and at most one a byte,
    /// an empty one a step (8 B over 8 ranks: two of the all-reduce's eight chunks hold a float).
    #[test]
    fn a_small_messages_steps_are_its_built_chunks() {
        let e = EngineTerms {
            step_bytes: [32768, 576000, 524288],
            min_steps: [1, 1, 4],
            ..EngineTerms::default()
        };
        let (n, p) = (8u32, Protocol::Simple);
        let mut four = 0;
        for kind in [
            CollectiveKind::AllReduce,
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
        ] {
            for nc in [1u32, 2] {
                let s = ring_schedule(kind, p, n, nc);
                for bytes in [8u64, 40, 200, 4096] {
                    let count = per_rank_count(&s, n, bytes);
                    for c in 0..nc {
                        for pos in 0..n {
                            let msgs = s.expanded_ops(pos, c).into_iter();
                            let msgs = msgs.filter(|o| o.kind.sends() || o.kind.receives());
                            for (j, op) in msgs.enumerate() {
                                let cr = op.src.or(op.dst).unwrap();
                                let elems: u64 = (0..cr.count)
                                    .map(|k| s.chunk_elems(count, 0, cr.chunk + k))
                                    .map(|r| r.end - r.start)
                                    .sum();
                                let payload = elems * ENGINE_ELEM_BYTES;
                                let want = payload.div_ceil(524288).max(4).min(payload.max(1));
                                let at = (c, pos, j as u32);
                                let (got, got_payload) =
                                    ring_message_steps(&e, (kind, p), (n, nc), bytes, at);
                                assert_eq!(got as u64, want, "{kind:?} {nc} {bytes} B {at:?}");
                                assert_eq!(got_payload, payload, "{kind:?} {nc} {bytes} B {at:?}");
                                four += usize::from(bytes == 8 && got == 4);
                            }
                        }
                    }
                }
            }
        }
        // 8 B: only all-reduce's chunks hold a float, two of n · nc (on one channel), each
        // carried twice in a rank's 2n − 1 messages but once at the rank that sends it last:
        // 2 × (2 · 8 − 1) four-step messages on one channel and on two.
        assert_eq!(four, 2 * 2 * (2 * 8 - 1), "four-step messages at 8 B");
    }

    /// The messages a connection carries are those of the schedule the engine runs: the built
    /// program's sends per loop iteration times its iterations (LL, whose chunk the builder and
    /// the engine share).
    #[test]
    fn messages_are_the_built_schedules_sends_per_connection() {
        let (n, p) = (8u32, Protocol::LL);
        for kind in [
            CollectiveKind::AllReduce,
            CollectiveKind::AllGather,
            CollectiveKind::Broadcast,
        ] {
            for nc in [1u32, 4] {
                let s = ring_schedule(kind, p, n, nc);
                for bytes in [4096u64, 1 << 20, 3 << 20, 64 << 20] {
                    let count = per_rank_count(&s, n, bytes);
                    let sends: u64 = s.ranks[0].channels[0]
                        .ops
                        .iter()
                        .filter(|o| o.kind.sends())
                        .map(|o| o.repeat.max(1) as u64)
                        .sum();
                    assert_eq!(
                        messages(&Algorithm::Ring, kind, p, n, nc, bytes),
                        sends * s.loop_iterations(count),
                        "{kind:?} {nc} channels {bytes} B"
                    );
                }
            }
        }
        // A chain tree: a middle rank sends once per iteration on each half.
        let chain = TreeChannel::from_parents((0..n).map(|r| r.checked_sub(1)).collect()).unwrap();
        let coll = Collective::as_nccl_tests(CollectiveKind::AllReduce, n, 0);
        let s = tree(&coll, &[chain.clone(), chain], p).unwrap();
        for bytes in [4096u64, 3 << 20] {
            for half in s.ranks[3].channels.iter() {
                let sends: u64 = half.ops.iter().filter(|o| o.kind.sends()).count() as u64;
                assert_eq!(
                    messages(&Algorithm::Tree, CollectiveKind::AllReduce, p, n, 2, bytes),
                    sends * s.loop_iterations(bytes / 4),
                    "tree {bytes} B"
                );
            }
        }
    }

    /// Within its slots LL runs at its channels' rate; past them the paced share of the bytes
    /// runs at `llMaxBws`.
    #[test]
    fn ll_is_paced_only_past_its_slots() {
        assert_eq!(ll_bus(100.0, 40.0, 1), 100.0);
        assert_eq!(ll_bus(100.0, 40.0, nccl::STEPS as u64), 100.0);
        let m = 4 * nccl::STEPS as u64;
        let t = 0.25 / 100.0 + 0.75 / 40.0;
        assert!((ll_bus(100.0, 40.0, m) - 1.0 / t).abs() < 1e-9);
        assert_eq!(ll_bus(30.0, 40.0, m), 30.0);
    }
}
