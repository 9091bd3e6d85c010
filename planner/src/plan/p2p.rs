//! The tuner's terms for topoplan's point-to-point schedules (all-to-all, send/recv), measured
//! on the topology's paths as the engine runs them: every rank sends its messages one after
//! another in one channel, flows share links max-min fairly (`tuner::sequential_sends_time`),
//! and each message that crosses hosts costs its sender the network's step
//! (`sim.net_step_us`) before the next.

use crate::schedule::CollectiveKind;
use crate::search::Channels;
use crate::topology::{PathType, Topology};
use crate::tuner::{self, P2pTerms};
use std::collections::HashMap;

/// Most ranks whose all-to-all messages (n(n − 1)) the tuner runs at each size (at 256 ranks
/// planning takes about a second). Send/recv's n messages are run at every size of
/// communicator.
pub(super) const EXACT_ALL_TO_ALL_RANKS: u32 = 256;

/// Most ranks whose all-to-all messages are run once, every message one unit of volume, for
/// the communicator's rate and network steps (about a second at 1024 ranks); beyond it the
/// all-to-all is measured on the first host's messages ([`all_to_all_bw`]).
pub(super) const MEASURED_ALL_TO_ALL_RANKS: u32 = 1024;

/// The whole communicator's messages for `kind` (all-to-all or send/recv) on `t`, run at each
/// size up to [`EXACT_ALL_TO_ALL_RANKS`] (send/recv: always), and past it once for a rate;
/// `None` for an all-to-all past [`MEASURED_ALL_TO_ALL_RANKS`], for another collective or where
/// a message has no route. `flow_cap` bounds one flow (the executor's rate), `net_step_us` is
/// the engine's cost of a network step.
pub(super) fn measure(
    t: &Topology,
    kind: CollectiveKind,
    flow_cap: f64,
    net_step_us: f64,
) -> Option<P2pTerms> {
    let n = t.n_ranks() as u32;
    if n < 2 {
        return None;
    }
    let peers = match kind {
        CollectiveKind::AllToAll if n <= MEASURED_ALL_TO_ALL_RANKS => n as usize - 1,
        CollectiveKind::SendRecv => 1,
        _ => return None,
    };
    let ranks: Vec<u32> = (0..n).collect();
    let m = Messages::of(t, &ranks, peers, net_step_us);
    if m.unrouted {
        return None;
    }
    let time = tuner::sequential_sends_time(&m.msgs, &m.links.caps, flow_cap);
    if kind == CollectiveKind::AllToAll && n > EXACT_ALL_TO_ALL_RANKS {
        return (time > 0.0).then(|| P2pTerms {
            gbps: peers as f64 / time,
            lat_us: m.chain_us + m.landing_us,
            landing_us: m.landing_us,
            messages: None,
        });
    }
    let messages = tuner::RankMessages {
        msgs: m
            .msgs
            .iter()
            .zip(&m.steps)
            .map(|(links, steps)| links.iter().cloned().zip(steps.iter().copied()).collect())
            .collect(),
        caps: m.links.caps.clone(),
    };
    (time > 0.0).then(|| P2pTerms {
        gbps: peers as f64 / time,
        lat_us: m.chain_us + m.landing_us,
        landing_us: m.landing_us,
        messages: Some(std::sync::Arc::new(messages)),
    })
}

/// Per-rank rate of an all-to-all on a host without all-peer NVLink (GB/s), and the slowest
/// GPU-to-GPU path's latency on the host (µs), from the first host's messages alone (the
/// planner's form past [`MEASURED_ALL_TO_ALL_RANKS`] and the latency term on one host). Each GPU sends to
/// its peers one after another, the k-th message to the rank k places on (the direct builder's
/// order), over `gpu_path`s that share links (a PCIe switch's uplink, the link into a GPU, the
/// inter-socket link), as the engine runs them: no GPU waits for the others' k-th message
/// before its next, and flows share links max-min fairly, none above `flow_cap` (the executor's
/// rate; `tuner::sequential_sends_time`). The rate is the n − 1 messages over that time, never
/// above `direct` (the slowest single path, with the NIC share across hosts). On all-peer
/// NVLink, `direct`.
pub(super) fn all_to_all_bw(t: &Topology, ch: &Channels, direct: f64, flow_cap: f64) -> (f64, f64) {
    let h0 = &ch.hosts[0];
    let m = Messages::of(t, h0, h0.len().saturating_sub(1), 0.0);
    let time = tuner::sequential_sends_time(&m.msgs, &m.links.caps, flow_cap);
    if ch.all_peers_nvlink_gbps.is_some() || time <= 0.0 {
        return (direct, m.landing_us);
    }
    (direct.min((h0.len() - 1) as f64 / time), m.landing_us)
}

/// Every rank's messages in the direct builder's order (the i-th rank's k-th message goes to
/// the rank k places on), each the links of its route; a message without a route is left out.
struct Messages {
    msgs: Vec<Vec<Vec<usize>>>,
    /// Per message, the network's step its sender pays after it (µs).
    steps: Vec<Vec<f64>>,
    links: LinkIndex,
    /// The slowest route's latency, µs.
    landing_us: f64,
    /// The most network steps one rank pays (`net_step_us` per message across hosts), µs.
    chain_us: f64,
    /// Some message had no route.
    unrouted: bool,
}

impl Messages {
    fn of(t: &Topology, ranks: &[u32], peers: usize, net_step_us: f64) -> Messages {
        let n = ranks.len();
        let mut m = Messages {
            msgs: Vec::with_capacity(n),
            steps: Vec::with_capacity(n),
            links: LinkIndex::default(),
            landing_us: 0.0,
            chain_us: 0.0,
            unrouted: false,
        };
        for (i, &a) in ranks.iter().enumerate() {
            let mut mine = Vec::with_capacity(peers);
            let mut steps = Vec::with_capacity(peers);
            for k in 1..=peers {
                let Some(p) = t.gpu_path(a, ranks[(i + k) % n]) else {
                    m.unrouted = true;
                    continue;
                };
                steps.push(if p.kind == PathType::Net {
                    net_step_us
                } else {
                    0.0
                });
                m.landing_us = m.landing_us.max(p.lat_us);
                mine.push(p.links.iter().map(|&l| m.links.of(t, l)).collect());
            }
            m.chain_us = m.chain_us.max(steps.iter().sum());
            m.msgs.push(mine);
            m.steps.push(steps);
        }
        m
    }
}

/// Dense indices of the links that messages use, with their rates.
#[derive(Default)]
struct LinkIndex {
    index: HashMap<crate::topology::LinkId, usize>,
    caps: Vec<f64>,
}

impl LinkIndex {
    fn of(&mut self, t: &Topology, l: crate::topology::LinkId) -> usize {
        *self.index.entry(l).or_insert_with(|| {
            self.caps.push(t.graph[l].bw_gbps.max(1e-9));
            self.caps.len() - 1
        })
    }
}
