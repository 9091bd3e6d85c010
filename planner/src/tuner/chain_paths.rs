//! The paths a small ring or tree call takes (on one host or across hosts, up to
//! `plan::CHAIN_PATH_RANKS` ranks), op by op as `schedule::build::{ring,
//! tree}` lay them out: what it costs beyond its launch in the engine, whose every transfer pays
//! its route's link latencies and the protocol's one-way hop, and every step its fixed cost.
//!
//! - A ring call of k steps (all-reduce 2(n − 1), the others n − 1) is a chain of k hops: a
//!   rank's op of step i waits for its predecessor's op of step i − 1, so the slowest chain is
//!   the k consecutive hops of the ring with the largest latency (broadcast's starts at the
//!   root, reduce's ends there). Each hop is a sending op's step; the last rank's receive is one
//!   step more.
//! - A tree all-reduce's sends, as `schedule::build::tree` lays them out, are kept for
//!   `tree_pipeline`, which runs its iterations through them.
//! - A ring hop moves at its links' capacity shared among the call's channels that cross them
//!   (every channel of a ring call is in the same phase, so the engine's max-min sharing gives
//!   each its equal share of the most loaded link).

use super::drift::{dag_time, DagFlow};
use super::packed_paths::PathCost;
use super::tree_pipeline::TreeSends;
use crate::schedule::build::TreeChannel;
use crate::schedule::CollectiveKind;

/// One hop of a ring: its sender, the route's latency (µs) and links (index, GB/s), and what a
/// step over it costs the sender beyond the protocol's step (µs: the network's step across
/// hosts), which holds the sender's next op back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RingHop {
    pub rank: u32,
    pub lat_us: f64,
    pub links: Vec<(usize, f64)>,
    pub send_us: f64,
}

/// A route as [`ChainPaths::of`] reads it: latency (µs), links (index, GB/s), and the sender's
/// cost of a step over it beyond the protocol's (µs).
pub type HopRoute = (f64, Vec<(usize, f64)>, f64);

/// The rings' and trees' paths (empty: not measured, as past `plan::CHAIN_PATH_RANKS`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChainPaths {
    /// Per ring channel, in the order calls use them: its hops in ring order.
    pub rings: Vec<Vec<RingHop>>,
    /// Per tree channel, in the order calls use them: its sends, which the tuner pipelines as
    /// the engine does (`tree_pipeline`).
    pub tree_sends: Vec<TreeSends>,
    /// The trees' pipeline stages that a call's size does not change, kept across sizes.
    pub tree_memo: super::tree_pipeline::Memo,
}

impl ChainPaths {
    /// The paths of `rings` and `trees`; `route(a, b)` is the route from rank a to rank b.
    pub fn of(
        rings: &[Vec<u32>],
        trees: &[TreeChannel],
        route: impl Fn(u32, u32) -> HopRoute,
    ) -> Self {
        let rings = rings
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| {
                        let (lat_us, links, send_us) = route(r[i], r[(i + 1) % r.len()]);
                        RingHop {
                            rank: r[i],
                            lat_us,
                            links,
                            send_us,
                        }
                    })
                    .collect()
            })
            .collect();
        let tree_sends = trees
            .iter()
            .filter_map(|t| TreeSends::of(t, &route))
            .collect();
        ChainPaths {
            rings,
            tree_sends,
            tree_memo: Default::default(),
        }
    }

    /// The first `nc` rings (those a call of `nc` channels runs).
    pub(super) fn used(&self, nc: u32) -> &[Vec<RingHop>] {
        &self.rings[..(nc.max(1) as usize).min(self.rings.len())]
    }

    /// Per hop of each of the first `nc` rings, its rate (GB/s of wire): its most loaded link's
    /// capacity shared by the hops of those rings that cross it. `None`: not measured.
    pub fn hop_gbps(&self, nc: u32) -> Option<Vec<Vec<f64>>> {
        let rings = self.used(nc);
        rings.first()?;
        let links = rings
            .iter()
            .flatten()
            .flat_map(|h| h.links.iter().map(|l| l.0 + 1));
        let mut load = vec![0u32; links.max().unwrap_or(0)];
        for h in rings.iter().flatten() {
            for &(l, _) in &h.links {
                load[l] += 1;
            }
        }
        let rate = |h: &RingHop| {
            h.links
                .iter()
                .map(|&(l, cap)| cap / load[l].max(1) as f64)
                .fold(f64::INFINITY, f64::min)
        };
        Some(rings.iter().map(|r| r.iter().map(rate).collect()).collect())
    }

    /// A ring-pattern message's period where every rank waits for its neighbour's message
    /// before sending its own (the ranks in step), and the same message's transfer as the
    /// call's bandwidth term prices it, µs: (period, transfer). A hop's op is its transfer
    /// (`us(gbps)` at the hop's rate), the protocol's step and its sender's network step; the
    /// next rank's op starts once that landed (the route's latency and `hop_us`). Around the
    /// ring the period is the mean of the hops' ops and landings, or the slowest hop's op where
    /// that is longer; the transfer is the slowest hop's with its network step, and also
    /// without it. The first `nc` rings, the longest. `None`: not measured.
    pub fn lockstep_us(
        &self,
        nc: u32,
        (hop_us, step_us): (f64, f64),
        us: impl Fn(f64) -> f64,
    ) -> Option<(f64, f64, f64)> {
        let rings = self.used(nc);
        let gbps = self.hop_gbps(nc)?;
        let (mut period, mut transfer, mut plain) = (0.0f64, 0.0f64, 0.0f64);
        for (r, g) in rings.iter().zip(&gbps) {
            let (mut sum, mut slowest) = (0.0, 0.0f64);
            for (h, &g) in r.iter().zip(g) {
                let op = us(g) + step_us + h.send_us;
                sum += op + h.lat_us + hop_us;
                slowest = slowest.max(op);
                transfer = transfer.max(us(g) + h.send_us);
                plain = plain.max(us(g));
            }
            period = period.max(slowest.max(sum / r.len().max(1) as f64));
        }
        Some((period, transfer, plain))
    }

    /// How much longer the slowest step of the first `nc` rings is than the slowest transfer,
    /// µs, where `us(gbps)` is a step's transfer at a hop's rate, a sender whose hop crosses
    /// hosts pays its network step (`send_us`) before it, and `root` pays `copy_us` more.
    /// `None` where not measured.
    pub fn step_excess(
        &self,
        nc: u32,
        (root, copy_us): (u32, f64),
        us: impl Fn(f64) -> f64,
    ) -> Option<f64> {
        let rings = self.used(nc);
        let gbps = self.hop_gbps(nc)?;
        let (mut step, mut transfer) = (0.0f64, 0.0f64);
        for (r, g) in rings.iter().zip(&gbps) {
            for (h, &g) in r.iter().zip(g) {
                let t = us(g);
                transfer = transfer.max(t);
                let copy = if h.rank == root { copy_us } else { 0.0 };
                step = step.max(t + h.send_us + copy);
            }
        }
        Some(step - transfer)
    }

    /// The hops (ring, first position) of a ring call of `kind`'s chain: broadcast's starts at
    /// the root, reduce's after it (it ends there).
    pub(super) fn chain_start(&self, r: &[RingHop], kind: CollectiveKind, root: u32) -> usize {
        let at = r.iter().position(|h| h.rank == root).unwrap_or(0);
        match kind {
            CollectiveKind::Reduce => at + 1,
            _ => at,
        }
    }

    /// How long the first chunk of a rooted chain's call (broadcast from `root`, reduce to it)
    /// takes to cross its n − 1 hops on the first `nc` rings beyond the hops' latencies, µs:
    /// each hop a transfer of `volume` (kB of wire) over its links, starting once the previous
    /// hop's data landed (its route's latency, its sender's network step and `extra`), every
    /// channel's transfers sharing the links max-min fairly and none above `flow_cap` (GB/s), as
    /// the engine runs them: chains that start on idle links run ahead of those that share one.
    /// `None` where the rings were not measured.
    pub fn fill(
        &self,
        kind: CollectiveKind,
        root: u32,
        nc: u32,
        volume: f64,
        flow_cap: f64,
        extra: f64,
    ) -> Option<f64> {
        let rings = self.used(nc);
        let n = rings.first()?.len();
        let mut index = std::collections::HashMap::<usize, usize>::new();
        let mut caps = Vec::new();
        let mut flows = Vec::with_capacity(rings.len() * n);
        for r in rings {
            let start = self.chain_start(r, kind, root);
            for k in 0..n.saturating_sub(1) {
                let h = &r[(start + k) % n];
                let links = h
                    .links
                    .iter()
                    .map(|&(l, cap)| {
                        *index.entry(l).or_insert_with(|| {
                            caps.push(cap);
                            caps.len() - 1
                        })
                    })
                    .collect();
                let deps = if k == 0 {
                    vec![]
                } else {
                    vec![flows.len() - 1]
                };
                flows.push(DagFlow {
                    links,
                    deps,
                    delay: h.lat_us + h.send_us,
                });
            }
        }
        let wave = |v: f64| dag_time(&flows, &caps, flow_cap, v, extra);
        Some(wave(volume) - wave(0.0))
    }

    /// The slowest chain of a ring call of `kind` on the first `nc` rings (`root`: broadcast's
    /// and reduce's), `None` where the rings were not measured.
    pub fn ring(&self, kind: CollectiveKind, root: u32, nc: u32) -> Option<PathCost> {
        let rings = self.used(nc);
        let n = rings.first()?.len();
        let k = match kind {
            CollectiveKind::AllReduce => 2 * (n - 1),
            _ => n - 1,
        };
        let window = |r: &[RingHop], s: usize| {
            (s..s + k)
                .map(|i| r[i % n].lat_us + r[i % n].send_us)
                .sum::<f64>()
        };
        let lat = rings
            .iter()
            .map(|r| match kind {
                CollectiveKind::Broadcast | CollectiveKind::Reduce => {
                    window(r, self.chain_start(r, kind, root))
                }
                _ => (0..n).map(|s| window(r, s)).fold(0.0, f64::max),
            })
            .fold(0.0, f64::max);
        Some(PathCost {
            hops: k as u32,
            steps: k as u32 + 1,
            route_lat_us: lat,
        })
    }

    /// What a small ring call of `kind` costs beyond its launch on the first `nc` rings, µs, for
    /// a protocol's one-way hop and step cost. Broadcast and reduce: their chain from or to the
    /// root ([`ChainPaths::ring`]). The others: every rank's k steps as the engine runs them, a
    /// step starting once the rank's previous one is done and its predecessor's data landed,
    /// and ending a step (and the hop's `send_us`) later; the data lands a hop and the route's
    /// latency after, and the last receive is one step more. A sender that pays the network's
    /// step at every step holds its own next steps back, which a chain along the ring leaves
    /// out. `None` where the rings were not measured.
    pub fn ring_us(
        &self,
        kind: CollectiveKind,
        root: u32,
        nc: u32,
        hop_us: f64,
        step_us: f64,
    ) -> Option<f64> {
        if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
            return self.ring(kind, root, nc).map(|c| c.us(hop_us, step_us));
        }
        let rings = self.used(nc);
        let n = rings.first()?.len();
        let k = match kind {
            CollectiveKind::AllReduce => 2 * (n - 1),
            _ => n - 1,
        };
        self.ring_chain_us(nc, k, hop_us, step_us, None)
    }

    /// A ring call of `k` messages per connection on the first `nc` rings, µs beyond its launch,
    /// where every message is one step: a rank's message starts once its own previous one is
    /// done and its predecessor's previous one landed (the route's latency and `hop_us`), and
    /// costs `step_us`, the hop's `send_us` and `transfer(gbps)`, its transfer at the hop's rate
    /// (GB/s of wire: its most loaded link's share, [`ChainPaths::hop_gbps`]); the last receive
    /// is one step more. Where hops differ in rate, a slow hop's transfer hides in the others'
    /// hand-offs while they are longer. `None` where the rings were not measured.
    pub fn ring_messages_us(
        &self,
        nc: u32,
        k: usize,
        hop_us: f64,
        step_us: f64,
        transfer: impl Fn(f64) -> f64,
    ) -> Option<f64> {
        let gbps = self.hop_gbps(nc)?;
        let transfers: Vec<Vec<f64>> = gbps
            .iter()
            .map(|r| r.iter().map(|&g| transfer(g)).collect())
            .collect();
        self.ring_chain_us(nc, k, hop_us, step_us, Some(&transfers))
    }

    /// [`ChainPaths::ring_messages_us`] with each ring's hops' transfers given (µs; `None`: no
    /// transfers, so the links' shares are not computed).
    fn ring_chain_us(
        &self,
        nc: u32,
        k: usize,
        hop_us: f64,
        step_us: f64,
        transfers: Option<&[Vec<f64>]>,
    ) -> Option<f64> {
        let rings = self.used(nc);
        rings.first()?;
        let one = |(j, r): (usize, &Vec<RingHop>)| {
            let n = r.len();
            let transfer = |i: usize| transfers.map_or(0.0, |t| t[j][i]);
            let cost: Vec<f64> = r
                .iter()
                .enumerate()
                .map(|(i, h)| step_us + h.send_us + transfer(i))
                .collect();
            let hand_off: Vec<f64> = r.iter().map(|h| h.lat_us + hop_us).collect();
            let done = ring_steps_done(&cost, &hand_off, k);
            (0..n)
                .map(|i| {
                    let p = (i + n - 1) % n;
                    done[i].max(done[p] + hand_off[p]) + step_us
                })
                .fold(0.0, f64::max)
        };
        Some(rings.iter().enumerate().map(one).fold(0.0, f64::max))
    }
}

/// When each rank of a ring ends its `k`-th step, where rank i's step starts once its own
/// previous step ended and its predecessor's previous step landed (`hand_off[i − 1]` after it
/// ended), and costs `cost[i]`.
///
/// The recursion `done[i] = max(done[i], done[i − 1] + hop) + cost[i]`, k − 1 times, is a
/// longest path: from some rank s, j ≤ k − 1 hops forward to i (each hop's latency and the
/// cost of the rank it enters), and k − 1 − j waits, each best spent at the dearest rank passed.
/// For each distinct step cost v, the paths whose dearest rank costs at least v are a window
/// of starts s ∈ [i − (k − 1), i − (distance back to a rank costing ≥ v)] that slides forward
/// with i, so a monotone queue takes its best start in O(n + k) rather than O(n·k) per ring.
fn ring_steps_done(cost_of: &[f64], hand_off: &[f64], k: usize) -> Vec<f64> {
    let n = cost_of.len();
    let span = k.saturating_sub(1);
    // Starts s, unwrapped: s = x − span for x in 0..span + n.
    let node = |x: usize| (x + n * span.div_ceil(n.max(1)) - span) % n;
    let cost = |x: usize| cost_of[node(x)];
    // q[x]: the hops' latencies and the entered ranks' costs from the first start up to x.
    let mut q = vec![0.0f64; span + n];
    for x in 1..span + n {
        let p = node(x - 1);
        q[x] = q[x - 1] + hand_off[p] + cost(x);
    }
    let mut costs: Vec<f64> = cost_of.to_vec();
    costs.sort_by(f64::total_cmp);
    costs.dedup();
    let mut done = vec![f64::NEG_INFINITY; n];
    for &v in &costs {
        // A path from start x to rank i (at xi = i + span), its waits at cost v, gains
        // h(x) + q[xi] + (span − xi)·v.
        let h = |x: usize| cost(x) - q[x] + x as f64 * v;
        let mut window = std::collections::VecDeque::<usize>::new();
        let (mut next, mut last_dear) = (0usize, None::<usize>);
        for (i, done_i) in done.iter_mut().enumerate() {
            let xi = i + span;
            // Starts up to the last rank at or before i that costs at least v.
            while next <= xi {
                if cost(next) >= v {
                    last_dear = Some(next);
                }
                next += 1;
            }
            let Some(upper) = last_dear.filter(|&u| u >= i) else {
                continue;
            };
            for x in window.back().map_or(i, |&b| b + 1).max(i)..=upper {
                while window.back().is_some_and(|&b| h(b) <= h(x)) {
                    window.pop_back();
                }
                window.push_back(x);
            }
            while window.front().is_some_and(|&f| f < i) {
                window.pop_front();
            }
            if let Some(&best) = window.front() {
                let path = h(best) + q[xi] + (span as f64 - xi as f64) * v;
                *done_i = done_i.max(path);
            }
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_in_step_take_the_rings_mean_op_and_landing_or_its_slowest_op() {
        // 0 -> 1 -> 2 -> 0, latencies 1 µs, each hop its own 10 GB/s link: a 10 kB transfer
        // is 1 µs, the step 0.5, the landing 1 + 0.25.
        let route = |a: u32, _b: u32| (1.0, vec![(a as usize, 10.0)], 0.0);
        let p = ChainPaths::of(&[vec![0, 1, 2]], &[], route);
        let xfer = |g: f64| 10.0 / g;
        // Every hop alike: an op (1.5) and its landing (1.25) each message.
        assert_eq!(p.lockstep_us(1, (0.25, 0.5), xfer), Some((2.75, 1.0, 1.0)));
        // One hop at 1 GB/s (from 2): its op (10.5) is longer than the ring's mean op and
        // landing ((2 × 2.75 + 11.75) / 3 = 5.75), and paces the ring.
        let slow = |a: u32, _b: u32| {
            (
                1.0,
                vec![(a as usize, if a == 2 { 1.0 } else { 10.0 })],
                0.0,
            )
        };
        let q = ChainPaths::of(&[vec![0, 1, 2]], &[], slow);
        assert_eq!(
            q.lockstep_us(1, (0.25, 0.5), xfer),
            Some((10.5, 10.0, 10.0))
        );
        assert_eq!(
            ChainPaths::default().lockstep_us(1, (0.25, 0.5), xfer),
            None
        );
    }

    #[test]
    fn a_ring_call_takes_its_slowest_window_of_hops() {
        // 0 -> 1 -> 2 -> 3 -> 0 with latencies 1, 2, 3, 4.
        let route = |a: u32, _b: u32| {
            let links = vec![(a as usize, 10.0 * (a + 1) as f64)];
            ((a + 1) as f64, links, 0.0)
        };
        let p = ChainPaths::of(&[vec![0, 1, 2, 3]], &[], route);
        let at = |k, root| {
            p.ring(k, root, 1)
                .map(|c| (c.hops, c.steps, c.route_lat_us))
        };
        // All-gather: three hops, the slowest window 2 + 3 + 4.
        assert_eq!(at(CollectiveKind::AllGather, 0), Some((3, 4, 9.0)));
        // All-reduce: six hops, the window missing the two fastest (1, 2): 3+4+1+2+3+4.
        assert_eq!(at(CollectiveKind::AllReduce, 0), Some((6, 7, 17.0)));
        // Broadcast from 2 runs 2 -> 3 -> 0 -> 1; reduce to 2 runs 3 -> 0 -> 1 -> 2.
        assert_eq!(at(CollectiveKind::Broadcast, 2), Some((3, 4, 8.0)));
        assert_eq!(at(CollectiveKind::Reduce, 2), Some((3, 4, 7.0)));
        // Two channels on the ring share every link; broadcast from 2 fills over its hops at 30
        // and 40 GB/s but the slowest (10, from 0).
        assert_eq!(p.hop_gbps(1), Some(vec![vec![10.0, 20.0, 30.0, 40.0]]));
        let q = ChainPaths::of(&[vec![0, 1, 2, 3], vec![0, 1, 2, 3]], &[], route);
        assert_eq!(q.hop_gbps(2).unwrap()[1], [5.0, 10.0, 15.0, 20.0]);
        // Both chains move in step, sharing each hop's link: 60 kB at 15, 20 and 5 GB/s.
        let fill = q.fill(CollectiveKind::Broadcast, 2, 2, 60.0, f64::INFINITY, 0.0);
        assert_eq!(fill, Some(60.0 / 15.0 + 60.0 / 20.0 + 60.0 / 5.0));
        assert_eq!(
            ChainPaths::default().ring(CollectiveKind::AllGather, 0, 1),
            None
        );
    }

    #[test]
    fn a_sender_that_pays_a_network_step_holds_its_own_next_steps_back() {
        // 0 -> 1 -> 2 -> 3 -> 0, no latency, 1 µs a step; rank 3's hop costs it 10 µs more.
        let route = |a: u32, _b: u32| (0.0, vec![], if a == 3 { 10.0 } else { 0.0 });
        let p = ChainPaths::of(&[vec![0, 1, 2, 3]], &[], route);
        // All-gather: rank 3 sends at each of its three steps (11 µs each), then receives.
        assert_eq!(
            p.ring_us(CollectiveKind::AllGather, 0, 1, 0.0, 1.0),
            Some(34.0)
        );
        // A chain along the ring counts that cost once: 10 + four steps.
        let chain = p.ring(CollectiveKind::AllGather, 0, 1).unwrap();
        assert_eq!(chain.us(0.0, 1.0), 14.0);
        // Broadcast from 0 is one chain (0 -> 1 -> 2 -> 3): rank 3 never sends.
        assert_eq!(
            p.ring_us(CollectiveKind::Broadcast, 0, 1, 0.0, 1.0),
            Some(4.0)
        );
    }

    #[test]
    fn a_fill_shares_links_only_with_the_chains_crossing_them_at_the_same_time() {
        // One link per GPU pair, both ways, 10 GB/s. From 0, ring A runs 0-1, 1-2, 2-3 and ring
        // B runs 0-3, 3-2, 2-1: they cross 1-2 and 2-3 at different times, so every hop of the
        // first chunk has its link alone (6 µs each).
        let route = |a: u32, b: u32| (0.0, vec![((a.min(b) * 4 + a.max(b)) as usize, 10.0)], 0.0);
        let p = ChainPaths::of(&[vec![0, 1, 2, 3], vec![0, 3, 2, 1]], &[], route);
        let fill = p.fill(CollectiveKind::Broadcast, 0, 2, 60.0, f64::INFINITY, 0.0);
        assert_eq!(fill, Some(18.0));
        // B's first hop lands 2 µs later (a network step), so its hop over 3-2 meets A's over
        // 2-3 from 12 µs: they share that link for 4 µs, B's last hop ends at 22 µs, and 22 less
        // the 2 µs step is 20.
        let slow = |a: u32, b: u32| {
            let (lat, links, _) = route(a, b);
            (lat, links, if (a, b) == (0, 3) { 2.0 } else { 0.0 })
        };
        let q = ChainPaths::of(&[vec![0, 1, 2, 3], vec![0, 3, 2, 1]], &[], slow);
        let fill = q.fill(CollectiveKind::Broadcast, 0, 2, 60.0, f64::INFINITY, 0.0);
        assert_eq!(fill, Some(20.0));
        // Over the whole call every link carries a hop of each ring: the steady rate halves.
        assert_eq!(p.hop_gbps(2).unwrap()[0], [5.0; 4]);
    }

    #[test]
    fn a_step_is_longer_than_its_transfer_only_where_the_slowest_sender_pays_more() {
        // 0 -> 1 -> 2 -> 0; link 0 (rank 0's hop) carries 10 GB/s, the others 20. Rank 2's hop
        // crosses hosts: 3 µs of network step before each transfer.
        let route = |a: u32, _b: u32| {
            let link = (a as usize, if a == 0 { 10.0 } else { 20.0 });
            (0.0, vec![link], if a == 2 { 3.0 } else { 0.0 })
        };
        let p = ChainPaths::of(&[vec![0, 1, 2]], &[], route);
        let us = |g: f64| 100.0 / g;
        // Transfers: 10 µs on rank 0's hop, 5 on the others; rank 2's step is 8, below 10.
        assert_eq!(p.step_excess(1, (u32::MAX, 0.0), us), Some(0.0));
        // A 7 µs network step makes rank 2's step (12 µs) the slowest: 2 µs over the transfer.
        let slow = |a: u32, b: u32| {
            let (lat, links, send) = route(a, b);
            (lat, links, if a == 2 { 7.0 } else { send })
        };
        let q = ChainPaths::of(&[vec![0, 1, 2]], &[], slow);
        assert_eq!(q.step_excess(1, (u32::MAX, 0.0), us), Some(2.0));
        // The broadcast root's copy lengthens its own step only.
        assert_eq!(p.step_excess(1, (1, 4.0), us), Some(0.0));
        assert_eq!(p.step_excess(1, (0, 4.0), us), Some(4.0));
        assert_eq!(ChainPaths::default().step_excess(1, (0, 4.0), us), None);
    }

    /// A ring whose one slow hop's transfer (4 µs) is shorter than the others' hand-offs and
    /// transfers around the ring (3 µs latency each, 1 µs transfers) runs at the ring's mean:
    /// (4 + 1 + 1 + 1) / 4 + 3 = 4.75 µs a step, not the slowest transfer after every hand-off
    /// (7 µs).
    #[test]
    fn a_slow_hops_transfer_hides_in_the_others_hand_offs() {
        let route = |a: u32, _b: u32| {
            let cap = if a == 0 { 1.0 } else { 4.0 };
            (3.0, vec![(a as usize, cap)], 0.0)
        };
        let p = ChainPaths::of(&[vec![0, 1, 2, 3]], &[], route);
        let k = 400;
        let us = p.ring_messages_us(1, k, 0.0, 0.0, |g| 4.0 / g).unwrap();
        assert!(
            (us / k as f64 - 4.75).abs() < 0.05,
            "{} µs a step",
            us / k as f64
        );
    }

    /// The monotone-queue longest path gives what the step-by-step recursion gives, on rings of
    /// random latencies and network steps, for every step count up to twice around the ring.
    #[test]
    fn ring_steps_done_is_the_step_by_step_recursion() {
        use proptest::prelude::*;
        let hop = (0.0f64..3.0, prop_oneof![Just(0.0), Just(2.5), 0.0f64..5.0]);
        let ring = proptest::collection::vec(hop, 1..12);
        proptest!(|(hops in ring, k in 0usize..26, hop_us in 0.0f64..2.0, step_us in 0.0f64..2.0)| {
            let n = hops.len();
            let costs: Vec<f64> = hops.iter().map(|h| step_us + h.1).collect();
            let hand_off: Vec<f64> = hops.iter().map(|h| h.0 + hop_us).collect();
            let cost = |i: usize| costs[i];
            let mut done: Vec<f64> = (0..n).map(cost).collect();
            for _ in 1..k {
                done = (0..n)
                    .map(|i| {
                        let p = (i + n - 1) % n;
                        done[i].max(done[p] + hand_off[p]) + cost(i)
                    })
                    .collect();
            }
            let fast = ring_steps_done(&costs, &hand_off, k);
            for (a, b) in fast.iter().zip(&done) {
                prop_assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{fast:?} vs {done:?}");
            }
        });
    }
}
