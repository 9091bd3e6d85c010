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

/// Most ranks whose every message is routed (an all-to-all has n(n − 1)); beyond it the
/// all-to-all is measured on the first host's messages ([`all_to_all_bw`]) and send/recv keeps
/// the tuner's closed form.
pub(super) const EXACT_P2P_RANKS: u32 = 64;

/// The whole communicator's messages for `kind` (all-to-all or send/recv) on `t`, `None` past
/// [`EXACT_P2P_RANKS`] or for another collective. `flow_cap` bounds one flow (the executor's
/// rate), `net_step_us` is the engine's cost of a network step.
pub(super) fn measure(
    t: &Topology,
    kind: CollectiveKind,
    flow_cap: f64,
    net_step_us: f64,
) -> Option<P2pTerms> {
    let n = t.n_ranks() as u32;
    if !(2..=EXACT_P2P_RANKS).contains(&n) {
        return None;
    }
    // The direct builder's order: rank r's k-th message goes to rank r + k.
    let peers: Vec<u32> = match kind {
        CollectiveKind::AllToAll => (1..n).collect(),
        CollectiveKind::SendRecv => vec![1],
        _ => return None,
    };
    let mut links = LinkIndex::default();
    let mut msgs = Vec::with_capacity(n as usize);
    let (mut chain_us, mut landing_us) = (0.0f64, 0.0f64);
    for r in 0..n {
        let mut mine = Vec::with_capacity(peers.len());
        let mut chain = 0.0;
        for &k in &peers {
            let p = t.gpu_path(r, (r + k) % n)?;
            if p.kind == PathType::Net {
                chain += net_step_us;
            }
            landing_us = landing_us.max(p.lat_us);
            mine.push(p.links.iter().map(|&l| links.of(t, l)).collect());
        }
        chain_us = chain_us.max(chain);
        msgs.push(mine);
    }
    let time = tuner::sequential_sends_time(&msgs, &links.caps, flow_cap);
    (time > 0.0).then(|| P2pTerms {
        gbps: peers.len() as f64 / time,
        lat_us: chain_us + landing_us,
    })
}

/// Per-rank rate of an all-to-all on a host without all-peer NVLink (GB/s), and the slowest
/// GPU-to-GPU path's latency on the host (µs), from the first host's messages alone (the
/// planner's form past [`EXACT_P2P_RANKS`] and the latency term on one host). Each GPU sends to
/// its peers one after another, the k-th message to the rank k places on (the direct builder's
/// order), over `gpu_path`s that share links (a PCIe switch's uplink, the link into a GPU, the
/// inter-socket link), as the engine runs them: no GPU waits for the others' k-th message
/// before its next, and flows share links max-min fairly, none above `flow_cap` (the executor's
/// rate; `tuner::sequential_sends_time`). The rate is the n − 1 messages over that time, never
/// above `direct` (the slowest single path, with the NIC share across hosts). On all-peer
/// NVLink, `direct`.
pub(super) fn all_to_all_bw(t: &Topology, ch: &Channels, direct: f64, flow_cap: f64) -> (f64, f64) {
    let h0 = &ch.hosts[0];
    let n = h0.len();
    let mut lat: f64 = 0.0;
    let mut links = LinkIndex::default();
    let mut msgs = vec![Vec::new(); n];
    for (i, &a) in h0.iter().enumerate() {
        for k in 1..n {
            let Some(p) = t.gpu_path(a, h0[(i + k) % n]) else {
                continue;
            };
            lat = lat.max(p.lat_us);
            msgs[i].push(p.links.iter().map(|&l| links.of(t, l)).collect());
        }
    }
    let time = tuner::sequential_sends_time(&msgs, &links.caps, flow_cap);
    if ch.all_peers_nvlink_gbps.is_some() || time <= 0.0 {
        return (direct, lat);
    }
    (direct.min((n - 1) as f64 / time), lat)
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
