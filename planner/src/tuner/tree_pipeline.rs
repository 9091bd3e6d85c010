//! A tree all-reduce as the engine runs `schedule::build::tree`'s layout: every tree carries one
//! step of its share per loop iteration, up (reduce) and down (broadcast) on two programs of
//! each rank, which the iterations pipeline through.
//!
//! - Up, a rank takes its children one op after another: each op waits for that child's data,
//!   then reduces it (a local pass at the channel's local rate), the last op also sending the
//!   sum to the parent (a transfer instead). A leaf only sends.
//! - Down, the root starts after its last reduction; a rank forwards to its first child in the
//!   op that receives, then sends to the others in turn, one transfer each; a leaf's receive is
//!   a step.
//! - A transfer moves at the channel's rate or its links' share, whichever is lower. Each op
//!   costs the protocol's step after it (and the network's step on a route across hosts); data
//!   lands the route's latency and the protocol's hop after.
//!
//! The first iteration is the pipeline's fill, its slowest leaf, a link shared only by the sends
//! of the same wave step. The second follows it one op behind in every program. The later ones
//! take the busiest program's ops of one iteration, or the busiest link's bytes, a link shared
//! by the programs that send over it as often as they do (one program's sends never overlap).
//! The halves run apart: where a link carries both (into an interior host's GPU, a child host's
//! send up and the parent host's send down), the faster half runs ahead sharing it with the
//! slower until it is done, and the slower then runs its remaining iterations alone. LL past
//! its connection's slots is paced (`SimConfig::with_ll_channel_cap`): the leaves run their
//! unpaced iterations ahead, the first paced one fills the trees again at the paced rate, and
//! each after it takes a paced period.

use super::chain_costs::engine_path;
use super::nccl::{self, proto_idx};
use super::TunerParams;
use crate::schedule::build::TreeChannel;
use crate::schedule::Protocol;
use std::collections::HashMap;

/// One send of a tree's iteration: to whom, its route's latency (µs), its links (index,
/// GB/s), and what a step over it costs its sender beyond the protocol's (µs: the network's
/// step across hosts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeSend {
    pub to: u32,
    pub lat_us: f64,
    pub links: Vec<(usize, f64)>,
    pub send_us: f64,
}

/// A tree's sends: each rank's to its parent (`None` at the root) and to its children, in the
/// builder's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeSends {
    pub root: u32,
    pub up: Vec<Option<TreeSend>>,
    pub down: Vec<Vec<TreeSend>>,
}

impl TreeSends {
    /// The sends of `t`, `route(a, b)` the route from rank a to rank b: (latency, links, the
    /// sender's step cost). `None` without a root.
    pub fn of(
        t: &TreeChannel,
        route: &impl Fn(u32, u32) -> (f64, Vec<(usize, f64)>, f64),
    ) -> Option<Self> {
        let root = t.parent.iter().position(Option::is_none)? as u32;
        let send = |a: u32, b: u32| {
            let (lat_us, links, send_us) = route(a, b);
            TreeSend {
                to: b,
                lat_us,
                links,
                send_us,
            }
        };
        let up = (0..t.parent.len() as u32)
            .map(|v| t.parent[v as usize].map(|p| send(v, p)))
            .collect();
        let down = (0..t.parent.len() as u32)
            .map(|v| t.children[v as usize].iter().map(|&k| send(v, k)).collect())
            .collect();
        Some(TreeSends { root, up, down })
    }

    fn kids(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        self.down[v as usize].iter().map(|s| s.to)
    }

    /// The ranks parents first (breadth first from the root).
    fn order(&self) -> Vec<u32> {
        let mut order = vec![self.root];
        let mut i = 0;
        while i < order.len() {
            let v = order[i];
            order.extend(self.kids(v));
            i += 1;
        }
        order
    }

    /// Each rank's depth below the root and height above its deepest leaf.
    fn levels(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.up.len();
        let order = self.order();
        let mut depth = vec![0u32; n];
        for &v in &order {
            for k in self.kids(v) {
                depth[k as usize] = depth[v as usize] + 1;
            }
        }
        let mut height = vec![0u32; n];
        for &v in order.iter().rev() {
            height[v as usize] = self
                .kids(v)
                .map(|k| height[k as usize] + 1)
                .max()
                .unwrap_or(0);
        }
        (depth, height)
    }
}

/// The engine's terms of one protocol that a tree's iteration reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterTerms {
    /// Payload bytes each tree carries per iteration.
    pub chunk: f64,
    /// Wire bytes per payload byte.
    pub wire: f64,
    /// One channel's transfer rate and, past the connection's slots, its paced rate (GB/s of
    /// wire; equal where the protocol is not paced).
    pub channel_gbps: f64,
    pub paced_gbps: f64,
    /// The rate of a local reduction (GB/s), and the fraction of a link's rate transfers reach.
    pub local_gbps: f64,
    pub link_eff: f64,
    /// The protocol's cost of a step and its one-way hop (µs), and the connection's slots.
    pub step_us: f64,
    pub hop_us: f64,
    pub slots: u32,
}

/// Each send's rate (GB/s of wire) per tree and rank: (up, down in order).
type SendRates = Vec<Vec<(f64, Vec<f64>)>>;

/// What a send loads at once: (link, half, wave step); per rank, its send up's and its sends
/// down's.
type LoadKey = (usize, u8, u32);
type RankSlots = (Vec<usize>, Vec<Vec<usize>>);

/// How long `trees` take to all-reduce `iters` iterations (at least 1; the last may be partial:
/// fractional), µs from the first op: the first iteration's slowest leaf, then a period per
/// iteration. Also the period of the last iterations. `None` without trees.
pub fn all_reduce_us(trees: &[TreeSends], x: &IterTerms, iters: f64) -> Option<(f64, f64)> {
    trees.first()?;
    let fill_at = |gbps: f64| {
        let wave = rates(trees, gbps, x.link_eff, Sharing::Wave);
        trees
            .iter()
            .zip(&wave)
            .map(|(t, r)| first_iteration(t, r, x))
            .fold(0.0, f64::max)
    };
    let fill = fill_at(x.channel_gbps);
    let per = |gbps: f64, sharing, links| {
        period(trees, &rates(trees, gbps, x.link_eff, sharing), x, links)
    };
    let steady = rates(trees, x.channel_gbps, x.link_eff, Sharing::Programs);
    let fast = period(trees, &steady, x, true);
    let paced = per(x.paced_gbps, Sharing::Programs, true);
    let at_channel = Halves::at(trees, x, x.channel_gbps);
    let paced_halves;
    let at_paced = if x.paced_gbps < x.channel_gbps {
        paced_halves = Halves::at(trees, x, x.paced_gbps);
        &paced_halves
    } else {
        &at_channel
    };
    // The second iteration follows the first one op behind in every program, its sends meeting
    // the first's on the links only at the same wave step; from the third on every program is
    // busy and the links carry every send.
    let second = per(x.channel_gbps, Sharing::Wave, false).min(fast);
    let iters = iters.max(1.0);
    let slots = x.slots.max(1) as f64;
    let mut us = fill
        + (iters - 1.0).min(1.0) * second
        + at_channel.us(iters.min(slots) - 2.0)
        + at_paced.us(iters - slots);
    if iters > slots && x.paced_gbps < x.channel_gbps {
        // The leaves send their first `slots` iterations unpaced and run ahead; the first paced
        // one then crosses the whole tree at the paced rate, a second fill.
        let leaves = leaf_send_us(trees, &steady, x);
        let refill = slots * leaves + fill_at(x.paced_gbps) + at_paced.us(iters - slots - 1.0);
        us = us.max(refill);
    }
    Some((us, if iters > slots { paced } else { fast }))
}

/// The slowest leaf's send up, µs, at rates `r`.
fn leaf_send_us(trees: &[TreeSends], r: &SendRates, x: &IterTerms) -> f64 {
    let mut most = 0.0f64;
    for (t, rt) in trees.iter().zip(r) {
        for (v, (up_rate, _)) in rt.iter().enumerate() {
            if let (Some(s), true) = (&t.up[v], t.down[v].is_empty()) {
                most = most.max(send_us(x, s, *up_rate));
            }
        }
    }
    most
}

/// A tree all-reduce of `bytes` on the first `nc` of the engine's measured trees, as the tuner
/// prices it: its latency beyond the tuner's launch and its bandwidth (GB/s), so that the two
/// give the pipeline's time. `llmax` is NCCL's LL bound for the call's channels together.
/// `None` where the trees were not measured or the engine's terms are missing.
pub(super) fn priced(
    c: &TunerParams,
    p: Protocol,
    nc: u32,
    bytes: u64,
    llmax: f64,
) -> Option<(f64, f64)> {
    let e = &c.engine;
    let all = &e.paths.tree_sends;
    let used = &all[..(nc.max(1) as usize).min(all.len())];
    let i = proto_idx(p);
    if used.is_empty() || e.channel_gbps[i] <= 0.0 || e.step_bytes[i] == 0 {
        return None;
    }
    let share = bytes.max(1) as f64 / used.len() as f64;
    let chunk = (e.step_bytes[i] as f64).min(share);
    let channel = e.channel_gbps[i];
    let paced = match p {
        Protocol::LL => (llmax / used.len() as f64 * e.wire_factor[i]).min(channel),
        _ => channel,
    };
    let x = IterTerms {
        chunk,
        wire: e.wire_factor[i].max(1.0),
        channel_gbps: channel,
        paced_gbps: paced,
        local_gbps: e.local_channel_gbps,
        link_eff: if e.link_eff > 0.0 { e.link_eff } else { 1.0 },
        step_us: e.step_us[i],
        hop_us: e.hop_us[i],
        slots: nccl::STEPS,
    };
    let (us, period) = all_reduce_us(used, &x, share / chunk)?;
    let algbw = used.len() as f64 * chunk / 1000.0 / period.max(1e-9);
    let lat = engine_path(c, Some(us))? - bytes as f64 / 1000.0 / algbw;
    Some((lat, algbw))
}

/// Which sends share a link at once: every program of the same half with a send over it
/// (steady state), or only the sends of the first iteration's wave at the same step (its fill),
/// where a rank sends up at its height above its leaves and its i-th send down at its depth
/// plus i.
#[derive(Clone, Copy, PartialEq)]
enum Sharing {
    Programs,
    Wave,
}

/// Every send's rate: the channel's, or its most loaded link's share among the sends that
/// load it at once (`sharing`), whichever is lower.
fn rates(trees: &[TreeSends], channel_gbps: f64, link_eff: f64, sharing: Sharing) -> SendRates {
    // Each (link, half, wave step; 0 for every step when programs share) gets a slot: dense
    // when programs share, numbered as met in a wave. Then each send's slots.
    let links = link_count(trees);
    let mut wave_slots = HashMap::<LoadKey, usize>::new();
    let mut slot = |k: LoadKey| match sharing {
        Sharing::Programs => k.1 as usize * links + k.0,
        Sharing::Wave => {
            let next = 2 * links + wave_slots.len();
            *wave_slots.entry(k).or_insert(next)
        }
    };
    let keys: Vec<Vec<RankSlots>> = trees
        .iter()
        .map(|t| {
            let (depth, height) = t.levels();
            (0..t.up.len())
                .map(|v| {
                    let mut key = |s: &TreeSend, half: u8, step: u32| -> Vec<usize> {
                        let step = if sharing == Sharing::Wave { step } else { 0 };
                        s.links.iter().map(|l| slot((l.0, half, step))).collect()
                    };
                    let up = t.up[v]
                        .as_ref()
                        .map_or(Vec::new(), |s| key(s, 0, height[v]));
                    let down = t.down[v]
                        .iter()
                        .enumerate()
                        .map(|(i, s)| key(s, 1, depth[v] + i as u32))
                        .collect();
                    (up, down)
                })
                .collect()
        })
        .collect();
    let mut load = vec![0u32; 2 * links + wave_slots.len()];
    for (up, down) in keys.iter().flatten() {
        // A program's sends never overlap: each link counts once per program.
        let mut program: Vec<usize> = down.iter().flatten().copied().collect();
        if sharing == Sharing::Programs {
            program.sort_unstable();
            program.dedup();
        }
        for &k in up.iter().chain(&program) {
            load[k] += 1;
        }
    }
    let rate = |s: &TreeSend, k: &[usize]| {
        s.links
            .iter()
            .zip(k)
            .map(|(&(_, cap), &key)| cap * link_eff / load[key].max(1) as f64)
            .fold(channel_gbps, f64::min)
    };
    trees
        .iter()
        .zip(&keys)
        .map(|(t, tk)| {
            t.up.iter()
                .zip(&t.down)
                .zip(tk)
                .map(|((up, down), (uk, dk))| {
                    (
                        up.as_ref().map_or(f64::INFINITY, |s| rate(s, uk)),
                        down.iter().zip(dk).map(|(s, k)| rate(s, k)).collect(),
                    )
                })
                .collect()
        })
        .collect()
}

/// One more than the largest link index the trees' sends cross: the size of a per-link table.
fn link_count(trees: &[TreeSends]) -> usize {
    trees
        .iter()
        .flat_map(|t| t.up.iter().flatten().chain(t.down.iter().flatten()))
        .flat_map(|s| s.links.iter().map(|l| l.0 + 1))
        .max()
        .unwrap_or(0)
}

/// Per link: how often a program's sends load it, their ops over the program's half's period
/// (µs). The op, not only its transfer: programs paced alike send in step, so their transfers
/// meet more often than independent ones would (counting only the transfers left p5 ×2's LL128
/// trees 11–12 % fast against the engine).
type Load = Vec<(usize, f64)>;

/// Adds `v` to link `l`'s entry of `m`.
fn add_load(m: &mut Load, l: usize, v: f64) {
    match m.iter_mut().find(|e| e.0 == l) {
        Some(e) => e.1 += v,
        None => m.push((l, v)),
    }
}

/// Each program's [`Load`] at rates `r`, per tree and rank (up, down), its half paced by its
/// busiest program (`periods`).
fn program_loads(
    trees: &[TreeSends],
    r: &SendRates,
    x: &IterTerms,
    periods: [f64; 2],
) -> Vec<Vec<[Load; 2]>> {
    let load = |sends: &mut dyn Iterator<Item = (&TreeSend, f64)>, period: f64| {
        let mut m = Load::new();
        for (s, g) in sends {
            let share = send_us(x, s, g) / period.max(1e-9);
            for &(l, _) in &s.links {
                add_load(&mut m, l, share);
            }
        }
        m
    };
    trees
        .iter()
        .zip(r)
        .map(|(t, rt)| {
            rt.iter()
                .enumerate()
                .map(|(v, (up_rate, down_rates))| {
                    let mut up = t.up[v].iter().map(|s| (s, *up_rate));
                    let mut down = t.down[v].iter().zip(down_rates.iter().copied());
                    [load(&mut up, periods[0]), load(&mut down, periods[1])]
                })
                .collect()
        })
        .collect()
}

/// Every send's rate in steady state, where a link is shared by the programs that send over it
/// as often as they do: a send's share of a link is its capacity over one plus how much the
/// other programs load it (its half's; with `together`, both halves'), found by iterating from
/// every program of a half loading it all the time.
fn busy_rates(trees: &[TreeSends], x: &IterTerms, gbps: f64, together: bool) -> SendRates {
    let mut r = rates(trees, gbps, x.link_eff, Sharing::Programs);
    let links = link_count(trees);
    let mut total = [vec![0.0f64; links], vec![0.0f64; links]];
    for _ in 0..4 {
        let loads = program_loads(trees, &r, x, half_periods(trees, &r, x));
        total.iter_mut().for_each(|t| t.fill(0.0));
        for [up, down] in loads.iter().flatten() {
            for (half, m) in [(0, up), (1, down)] {
                for &(l, v) in m {
                    total[half][l] += v;
                }
            }
        }
        let rate = |s: &TreeSend, half: usize, own: &Load| {
            s.links
                .iter()
                .map(|&(l, cap)| {
                    let of = |h: usize| total[h][l];
                    let own = own.iter().find(|e| e.0 == l).map_or(0.0, |e| e.1);
                    let mut others = of(half) - own;
                    if together {
                        others += of(1 - half);
                    }
                    cap * x.link_eff / (1.0 + others.max(0.0))
                })
                .fold(gbps, f64::min)
        };
        r = trees
            .iter()
            .zip(&loads)
            .map(|(t, tl)| {
                tl.iter()
                    .enumerate()
                    .map(|(v, [up, down])| {
                        let u = t.up[v].as_ref().map_or(f64::INFINITY, |s| rate(s, 0, up));
                        (u, t.down[v].iter().map(|s| rate(s, 1, down)).collect())
                    })
                    .collect()
            })
            .collect();
    }
    r
}

/// A send's op: its transfer, the protocol's step and the sender's step over the route (µs).
fn send_us(x: &IterTerms, s: &TreeSend, gbps: f64) -> f64 {
    x.chunk * x.wire / 1000.0 / gbps.max(1e-9) + x.step_us + s.send_us
}

/// A reduction's op: the local pass and the protocol's step (µs).
fn reduce_us(x: &IterTerms) -> f64 {
    x.chunk / 1000.0 / x.local_gbps.max(1e-9) + x.step_us
}

/// The first iteration of one tree: up from the leaves, the root's last reduction, down to the
/// slowest leaf's receive (µs from the first op).
fn first_iteration(t: &TreeSends, r: &[(f64, Vec<f64>)], x: &IterTerms) -> f64 {
    let n = t.up.len();
    // Parents first, so that children come before their parent in reverse.
    let order = t.order();
    let lands = |s: &TreeSend| s.lat_us + x.hop_us;
    let mut up_end = vec![0.0; n];
    for &v in order.iter().rev() {
        let kids: Vec<u32> = t.kids(v).collect();
        let mut at = 0.0f64;
        for (i, &k) in kids.iter().enumerate() {
            let from = t.up[k as usize].as_ref().expect("a child sends up");
            at = at.max(up_end[k as usize] + lands(from));
            let sends_up = i + 1 == kids.len() && t.up[v as usize].is_some();
            if !sends_up {
                at += reduce_us(x);
            }
        }
        if let Some(s) = &t.up[v as usize] {
            at += send_us(x, s, r[v as usize].0);
        }
        up_end[v as usize] = at;
    }
    // Down: a rank's data lands, then it sends to its children in turn.
    let mut landed = vec![0.0; n];
    landed[t.root as usize] = up_end[t.root as usize];
    let mut last = 0.0f64;
    for &v in &order {
        let mut at = landed[v as usize];
        let sends = &t.down[v as usize];
        if sends.is_empty() {
            last = last.max(at + x.step_us);
        }
        for (s, &g) in sends.iter().zip(&r[v as usize].1) {
            at += send_us(x, s, g);
            landed[s.to as usize] = at + lands(s);
        }
    }
    last
}

/// One iteration in steady state, µs: the busiest program's ops at `r`'s rates, or (with
/// `links`) the busiest link's bytes at its capacity.
fn period(trees: &[TreeSends], r: &SendRates, x: &IterTerms, links: bool) -> f64 {
    let [up, down] = half_periods(trees, r, x);
    let busiest = up.max(down);
    if links {
        busiest.max(link_period(trees, x))
    } else {
        busiest
    }
}

/// The busiest program's ops of one iteration at `r`'s rates, µs, in each half (up, down).
fn half_periods(trees: &[TreeSends], r: &SendRates, x: &IterTerms) -> [f64; 2] {
    let mut busiest = [0.0f64; 2];
    for (t, rt) in trees.iter().zip(r) {
        for (v, (up_rate, down_rates)) in rt.iter().enumerate() {
            let kids = t.down[v].len();
            let up = match &t.up[v] {
                Some(s) => kids.saturating_sub(1) as f64 * reduce_us(x) + send_us(x, s, *up_rate),
                None => kids as f64 * reduce_us(x),
            };
            let down = if kids == 0 {
                x.step_us
            } else {
                t.down[v]
                    .iter()
                    .zip(down_rates)
                    .map(|(s, &g)| send_us(x, s, g))
                    .sum()
            };
            busiest = [busiest[0].max(up), busiest[1].max(down)];
        }
    }
    busiest
}

/// The busiest link's bytes of one iteration (both halves) at its capacity, µs.
fn link_period(trees: &[TreeSends], x: &IterTerms) -> f64 {
    let mut link_us = HashMap::<usize, f64>::new();
    for t in trees {
        for s in t.up.iter().flatten().chain(t.down.iter().flatten()) {
            for &(l, cap) in &s.links {
                *link_us.entry(l).or_default() +=
                    x.chunk * x.wire / 1000.0 / (cap * x.link_eff).max(1e-9);
            }
        }
    }
    link_us.values().copied().fold(0.0, f64::max)
}

/// A tree's steady state at one channel rate: each half's busiest program by itself and while
/// both halves run, and the busiest link's bytes (µs per iteration).
struct Halves {
    alone: [f64; 2],
    shared: [f64; 2],
    link: f64,
}

impl Halves {
    fn at(trees: &[TreeSends], x: &IterTerms, gbps: f64) -> Self {
        Halves {
            alone: half_periods(trees, &busy_rates(trees, x, gbps, false), x),
            shared: half_periods(trees, &busy_rates(trees, x, gbps, true), x),
            link: link_period(trees, x),
        }
    }

    /// `n` steady iterations, µs. The halves run apart, so the one whose busiest program is
    /// faster runs ahead, sharing links with the slower one (where a link carries both, e.g.
    /// into an interior host's GPU, from a child host going up and from the parent host coming
    /// down) until it has done its `n`; the slower then runs its remaining iterations alone.
    /// Never less than the busiest link's or program's period per iteration.
    fn us(&self, n: f64) -> f64 {
        let n = n.max(0.0);
        let (fast, slow) = if self.shared[0] <= self.shared[1] {
            (0, 1)
        } else {
            (1, 0)
        };
        let ahead_us = n * self.shared[fast];
        let slow_done = (ahead_us / self.shared[slow].max(1e-9)).min(n);
        let two_phases = ahead_us + (n - slow_done) * self.alone[slow];
        let floor = n * self.alone[0].max(self.alone[1]).max(self.link);
        two_phases.max(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms() -> IterTerms {
        IterTerms {
            chunk: 10_000.0,
            wire: 1.0,
            channel_gbps: 10.0,
            paced_gbps: 10.0,
            local_gbps: 100.0,
            link_eff: 1.0,
            step_us: 0.5,
            hop_us: 1.0,
            slots: 8,
        }
    }

    fn sends(
        parent: &[Option<u32>],
        route: impl Fn(u32, u32) -> (f64, Vec<(usize, f64)>, f64),
    ) -> TreeSends {
        let t = TreeChannel::from_parents(parent.to_vec()).unwrap();
        TreeSends::of(&t, &route).unwrap()
    }

    #[test]
    fn a_chain_fills_hop_by_hop_then_streams_one_transfer_per_iteration() {
        // 0 <- 1 <- 2, every route its own fast link, 0.25 µs of latency.
        let t = sends(&[None, Some(0), Some(1)], |a, b| {
            (0.25, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
        });
        let x = terms();
        // A transfer: 10 kB at 10 GB/s, 1 µs, plus a 0.5 µs step; it lands 1.25 µs later.
        let (xfer, land) = (1.5, 1.25);
        // Up: 2 sends, 1 sends, the root reduces (0.1 + 0.5); down: 0 sends, 1 sends, 2 receives.
        let fill = 2.0 * (xfer + land) + 0.6 + 2.0 * (xfer + land) + 0.5;
        let one = all_reduce_us(std::slice::from_ref(&t), &x, 1.0).unwrap().0;
        assert!((one - fill).abs() < 1e-9, "{one} {fill}");
        // Each further iteration adds the busiest program's op: one send.
        let four = all_reduce_us(&[t], &x, 4.0).unwrap().0;
        assert!((four - fill - 3.0 * xfer).abs() < 1e-9, "{four}");
    }

    #[test]
    fn a_rank_sends_to_its_children_in_turn_sharing_the_links_with_other_programs() {
        // 0 -> {1, 2}: both sends from 0 leave on link 7 (10 GB/s); the sends up from 1 and 2
        // use their own links. Link 7 carries one program's sends (0's down), so each gets the
        // channel's 10 GB/s, one after another.
        let route = |a: u32, b: u32| {
            let l = if a == 0 {
                7
            } else {
                a as usize * 3 + b as usize
            };
            (0.0, vec![(l, 10.0)], 0.0)
        };
        let t = sends(&[None, Some(0), Some(0)], route);
        let x = IterTerms {
            hop_us: 0.0,
            ..terms()
        };
        // Period: 0's down program sends twice (2 × 1.5); link 7 carries 2 µs of bytes.
        let p = all_reduce_us(std::slice::from_ref(&t), &x, 2.0).unwrap().0
            - all_reduce_us(std::slice::from_ref(&t), &x, 1.0).unwrap().0;
        assert!((p - 3.0).abs() < 1e-9, "{p}");
        // A second tree whose root also sends over link 7 halves each send's rate there.
        let two = [t.clone(), t];
        let p2 = all_reduce_us(&two, &x, 2.0).unwrap().0 - all_reduce_us(&two, &x, 1.0).unwrap().0;
        assert!((p2 - 2.0 * (2.0 + 0.5)).abs() < 1e-9, "{p2}");
    }

    #[test]
    fn the_faster_half_runs_ahead_sharing_links_with_the_slower_which_then_runs_alone() {
        // 0 -> {1, 2}, 1 -> {3}: the sends into 1 (3's up, 0's down) share link 9 at the
        // channel's rate; every other send has its own fast link. Up, 1's program sends once an
        // iteration (1.5 µs); down, 0's sends twice (3 µs): up runs ahead.
        let route = |a: u32, b: u32| {
            let l = if b == 1 {
                9
            } else {
                a as usize * 10 + b as usize
            };
            (0.0, vec![(l, if b == 1 { 10.0 } else { 1e3 })], 0.0)
        };
        let t = sends(&[None, Some(0), Some(0), Some(1)], route);
        let x = IterTerms {
            hop_us: 0.0,
            ..terms()
        };
        let trees = std::slice::from_ref(&t);
        let alone = half_periods(trees, &busy_rates(trees, &x, 10.0, false), &x);
        assert!((alone[0] - 1.5).abs() < 1e-9 && (alone[1] - 3.0).abs() < 1e-9);
        // Together, each send into 1 shares link 9 with the other half's sends, as often as
        // they load it: both halves slow down.
        let shared = half_periods(trees, &busy_rates(trees, &x, 10.0, true), &x);
        assert!(shared[0] > 1.5 + 0.1 && shared[1] > 3.0 + 0.1, "{shared:?}");
        // 100 iterations: up's at the shared period; down's meanwhile at its shared period, the
        // rest alone.
        let ahead = 100.0 * shared[0];
        let want = ahead + (100.0 - ahead / shared[1]) * 3.0;
        let got = Halves::at(trees, &x, 10.0).us(100.0);
        assert!((got - want).abs() < 1e-6, "{got} {want}");
        assert!(got > 100.0 * 3.0 + 1.0, "{got}");
    }

    #[test]
    fn paced_iterations_past_the_slots_refill_the_tree_then_take_the_paced_period() {
        let t = sends(&[None, Some(0)], |a, b| {
            (0.0, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
        });
        let x = IterTerms {
            paced_gbps: 5.0,
            slots: 2,
            ..terms()
        };
        let at = |i: f64| all_reduce_us(std::slice::from_ref(&t), &x, i).unwrap().0;
        // Iteration 2 at 10 GB/s: a 1.5 µs send.
        assert!((at(2.0) - at(1.0) - 1.5).abs() < 1e-9);
        // The leaf sends both unpaced iterations (2 × 1.5 µs), then the third crosses the tree
        // at 5 GB/s: up 2.5 + 1 (landing), the root's reduction 0.6, down 2.5 + 1, the receive
        // 0.5; the fourth adds a paced period (2.5).
        let refill = 3.0 + (2.5 + 1.0 + 0.6 + 2.5 + 1.0 + 0.5);
        assert!((at(3.0) - refill).abs() < 1e-9, "{}", at(3.0));
        assert!((at(4.0) - refill - 2.5).abs() < 1e-9);
        // Without pacing, the third and fourth add a period each.
        let fast = IterTerms {
            slots: 2,
            ..terms()
        };
        let unpaced = |i: f64| all_reduce_us(std::slice::from_ref(&t), &fast, i).unwrap().0;
        assert!((unpaced(4.0) - unpaced(2.0) - 3.0).abs() < 1e-9);
    }
}
