//! The tuner's terms for topoplan's point-to-point schedules (all-to-all, send/recv), measured
//! on the topology's paths as the engine runs them: every rank sends its messages one after
//! another in one channel, flows share links max-min fairly (`tuner::sequential_sends_time`),
//! and each message that crosses hosts costs its sender the network's step
//! (`sim.net_step_us`) before the next.
//!
//! A cluster from `topo scale` repeats its hosts, and the direct builder's order (rank i's k-th
//! message to rank i + k) shifts with them: where shifting every rank by s maps each message's
//! route onto the shifted message's route link by link, ranks s apart run alike, and only the
//! first s ranks' messages are run, each link standing for its orbit ([`Shift`]).

use crate::schedule::CollectiveKind;
use crate::search::Channels;
use crate::topology::{PathType, Topology};
use crate::tuner::{self, P2pTerms};
use std::collections::HashMap;

/// Most all-to-all messages the tuner runs at each size: 256 ranks' n(n − 1), or as many ranks'
/// of a cluster whose shift leaves fewer to run (512 NDv4 ranks on a fat tree of four hosts a
/// leaf run 32 ranks' messages). Send/recv's n messages are run at every size of communicator.
pub(super) const EXACT_ALL_TO_ALL_MESSAGES: usize = 256 * 255;

/// Most ranks whose all-to-all messages are run once, every message one unit of volume, for
/// the communicator's rate and network steps (about a second at 1024 ranks); beyond it the
/// all-to-all is measured on the first host's messages ([`all_to_all_bw`]).
pub(super) const MEASURED_ALL_TO_ALL_RANKS: u32 = 1024;

/// The whole communicator's messages for `kind` (all-to-all or send/recv) on `t`, run at each
/// size up to [`EXACT_ALL_TO_ALL_MESSAGES`] (send/recv: always), and past it once for a rate;
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
    let mut m = Messages::of(t, &ranks, peers, net_step_us);
    if m.unrouted {
        return None;
    }
    if let Some(shift) = Shift::of(&m) {
        m = shift.quotient(&m);
    }
    let time = tuner::sequential_sends_time(&m.msgs, &m.links.caps, flow_cap);
    let count: usize = m.msgs.iter().map(Vec::len).sum();
    let at_each_size = kind != CollectiveKind::AllToAll || count <= EXACT_ALL_TO_ALL_MESSAGES;
    (time > 0.0).then(|| P2pTerms {
        gbps: peers as f64 / time,
        lat_us: m.chain_us + m.landing_us,
        landing_us: m.landing_us,
        messages: at_each_size.then(|| std::sync::Arc::new(m.rank_messages())),
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

    /// The messages with their steps, as the tuner runs them at each size.
    fn rank_messages(&self) -> tuner::RankMessages {
        tuner::RankMessages {
            msgs: self
                .msgs
                .iter()
                .zip(&self.steps)
                .map(|(links, steps)| links.iter().cloned().zip(steps.iter().copied()).collect())
                .collect(),
            caps: self.links.caps.clone(),
        }
    }
}

/// A shift of the ranks that the messages' routes follow: rank i + s's k-th message crosses, link
/// for link, the images under `image` of the links rank i's k-th crosses (ranks modulo n), at the
/// same rates and with the same network steps. Ranks s apart then run alike (max-min sharing of
/// a system that the shift maps onto itself is itself shifted), so ranks 0..s stand for all.
struct Shift {
    by: usize,
    /// Per link (a dense index of the messages' links), its image under the shift.
    image: Vec<usize>,
}

/// No link yet (an image, a preimage or an orbit's first link not found).
const NO_LINK: usize = usize::MAX;

impl Shift {
    /// The smallest shift, a divisor of the ranks below their number, that the messages follow.
    fn of(m: &Messages) -> Option<Shift> {
        let n = m.msgs.len();
        (1..n)
            .filter(|&s| n.is_multiple_of(s))
            .find_map(|by| Shift::try_by(m, by))
    }

    fn try_by(m: &Messages, by: usize) -> Option<Shift> {
        let (n, caps) = (m.msgs.len(), &m.links.caps);
        let mut image = vec![NO_LINK; caps.len()];
        let mut preimage = vec![NO_LINK; caps.len()];
        for i in 0..n {
            let j = (i + by) % n;
            if m.msgs[i].len() != m.msgs[j].len() || m.steps[i] != m.steps[j] {
                return None;
            }
            for (from, to) in m.msgs[i].iter().zip(&m.msgs[j]) {
                if from.len() != to.len() {
                    return None;
                }
                for (&a, &b) in from.iter().zip(to) {
                    let fits = (image[a] == NO_LINK || image[a] == b)
                        && (preimage[b] == NO_LINK || preimage[b] == a)
                        && caps[a] == caps[b];
                    if !fits {
                        return None;
                    }
                    image[a] = b;
                    preimage[b] = a;
                }
            }
        }
        // Every link some message crosses has its image: the message `by` ranks on crosses it.
        debug_assert!(image.iter().all(|&x| x != NO_LINK));
        Some(Shift { by, image })
    }

    /// The first `by` ranks' messages, each link replaced by the first of its orbit under the
    /// shift and listed once per shifted copy of the message that crosses it: a link every shift
    /// leaves in place carries all n / `by` copies of a message, one the shifts move around
    /// carries one.
    fn quotient(&self, m: &Messages) -> Messages {
        let group = m.msgs.len() / self.by;
        let mut first = vec![NO_LINK; self.image.len()];
        let mut copies = vec![0usize; self.image.len()];
        // Each orbit once: the shift permutes the links, so from any link its images come back.
        for l in 0..self.image.len() {
            if first[l] != NO_LINK {
                continue;
            }
            let mut orbit = vec![l];
            while self.image[orbit[orbit.len() - 1]] != l {
                orbit.push(self.image[orbit[orbit.len() - 1]]);
            }
            for &x in &orbit {
                (first[x], copies[x]) = (l, group / orbit.len());
            }
        }
        let msgs = m.msgs[..self.by]
            .iter()
            .map(|rank| {
                let each = |links: &Vec<usize>| {
                    links
                        .iter()
                        .flat_map(|&l| std::iter::repeat_n(first[l], copies[l]))
                        .collect()
                };
                rank.iter().map(each).collect()
            })
            .collect();
        Messages {
            msgs,
            steps: m.steps[..self.by].to_vec(),
            links: LinkIndex {
                index: HashMap::new(),
                caps: m.links.caps.clone(),
            },
            ..*m
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{scale, Fabric, FabricKind};

    /// `nodes` NDv4 hosts on a fat tree of four hosts a leaf, 200 Gbit/s ports, the leaves'
    /// uplinks 8:1 oversubscribed.
    fn ndv4_fat_tree(nodes: u32) -> Topology {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/topologies/azure-ndv4-topo.xml");
        let node = crate::topology::load_file(&path, &Default::default())
            .unwrap()
            .topology;
        let fabric = Fabric {
            kind: FabricKind::FatTree {
                hosts_per_leaf: 4,
                oversubscription: 8.0,
            },
            port_gbps: 25.0,
            switch_lat_us: 0.6,
        };
        scale(&node, nodes, fabric).unwrap()
    }

    /// On 16 NDv4 hosts (128 ranks, four leaves) the all-to-all's routes repeat from leaf to
    /// leaf, not from host to host: the shift is a leaf's 32 ranks. Their messages, each link
    /// standing for its orbit, take what all 128 ranks' take, at every size (steps, shared
    /// uplinks and the executor's cap of a message all weigh in) and as units of volume.
    #[test]
    fn a_leafs_ranks_stand_for_the_whole_fat_trees_all_to_all() {
        let t = ndv4_fat_tree(16);
        let ranks: Vec<u32> = (0..t.n_ranks() as u32).collect();
        let all = Messages::of(&t, &ranks, ranks.len() - 1, 2.0);
        let shift = Shift::of(&all).expect("the cluster repeats its leaves");
        assert_eq!(shift.by, 32);
        let few = shift.quotient(&all);
        assert_eq!(few.msgs.len(), 32);
        let (whole, part) = (all.rank_messages(), few.rank_messages());
        for bytes in [8, 32 << 10, 2 << 20, 128 << 20] {
            let (a, b) = (whole.time_us(bytes, 300.0), part.time_us(bytes, 300.0));
            assert!(
                (a - b).abs() <= 1e-9 * a,
                "{bytes} B: {a} us whole, {b} us a leaf"
            );
        }
        let unit = |m: &Messages| tuner::sequential_sends_time(&m.msgs, &m.links.caps, 300.0);
        let (a, b) = (unit(&all), unit(&few));
        assert!((a - b).abs() <= 1e-9 * a, "units: {a} whole, {b} a leaf");
    }

    /// A shift must carry every link onto one of the same rate: with one link of a route
    /// slowed, the leaf's shift no longer maps the cluster onto itself.
    #[test]
    fn a_link_of_another_rate_breaks_the_shift() {
        let t = ndv4_fat_tree(8);
        let ranks: Vec<u32> = (0..t.n_ranks() as u32).collect();
        let mut m = Messages::of(&t, &ranks, ranks.len() - 1, 2.0);
        assert!(Shift::try_by(&m, 32).is_some());
        let first_net = m.msgs[0].last().and_then(|links| links.first()).copied();
        m.links.caps[first_net.unwrap()] *= 0.5;
        assert!(Shift::try_by(&m, 32).is_none());
    }

    /// 512 ranks on 64 NDv4 hosts: past 256 ranks' messages, the all-to-all still runs at each
    /// size, because a leaf's 32 ranks stand for all (32 × 511 messages).
    #[test]
    fn a_512_rank_fat_tree_runs_its_all_to_all_at_each_size() {
        let t = ndv4_fat_tree(64);
        let p = measure(&t, CollectiveKind::AllToAll, 300.0, 2.0).unwrap();
        let msgs = p.messages.expect("a leaf's messages, run at each size");
        assert_eq!(msgs.msgs.len(), 32);
        assert!(msgs.msgs.iter().all(|m| m.len() == 511));
    }
}
