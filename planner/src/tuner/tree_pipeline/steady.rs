//! A tree all-reduce's steady state: which sends share each link, every send's rate, and the
//! period of an iteration, each half's busiest program alone and while both halves run.

use super::{reduce_us, send_us, IterTerms, SendRates, TreeSend, TreeSends};
use std::collections::HashMap;

/// What a send loads at once: (link, half, wave step); per rank, its send up's and its sends
/// down's.
type LoadKey = (usize, u8, u32);
type RankSlots = (Vec<usize>, Vec<Vec<usize>>);

/// Which sends share a link at once: every program of the same half with a send over it
/// (steady state), or only the sends of the first iteration's wave at the same step (its fill),
/// where a rank sends up at its height above its leaves and its i-th send down at its depth
/// plus i.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Sharing {
    Programs,
    Wave,
}

/// Which sends load each link at once: per tree and rank, its send up's and its sends down's
/// slots, and each slot's count of sends.
pub(super) struct Loads {
    keys: Vec<Vec<RankSlots>>,
    count: Vec<u32>,
}

impl Loads {
    /// Each send's slots and how many sends load each slot at once under `sharing`. A slot is a
    /// (link, half, wave step; 0 for every step when programs share): dense when programs share,
    /// numbered as met in a wave.
    pub(super) fn of(trees: &[TreeSends], sharing: Sharing) -> Self {
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
        let mut count = vec![0u32; 2 * links + wave_slots.len()];
        for (up, down) in keys.iter().flatten() {
            // A program's sends never overlap: each link counts once per program.
            let mut program: Vec<usize> = down.iter().flatten().copied().collect();
            if sharing == Sharing::Programs {
                program.sort_unstable();
                program.dedup();
            }
            for &k in up.iter().chain(&program) {
                count[k] += 1;
            }
        }
        Loads { keys, count }
    }
}

/// Every send's rate: the channel's, or its most loaded link's share among the sends that
/// load it at once (`loads`), whichever is lower.
pub(super) fn rates(
    trees: &[TreeSends],
    loads: &Loads,
    channel_gbps: f64,
    link_eff: f64,
) -> SendRates {
    let rate = |s: &TreeSend, k: &[usize]| {
        s.links
            .iter()
            .zip(k)
            .map(|(&(_, cap), &key)| cap * link_eff / loads.count[key].max(1) as f64)
            .fold(channel_gbps, f64::min)
    };
    trees
        .iter()
        .zip(&loads.keys)
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
        .flat_map(TreeSends::sends)
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
pub(super) fn busy_rates(
    trees: &[TreeSends],
    x: &IterTerms,
    gbps: f64,
    together: bool,
    programs: &Loads,
) -> SendRates {
    let mut r = rates(trees, programs, gbps, x.link_eff);
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

/// One iteration in steady state, µs: the busiest program's ops at `r`'s rates, or (with
/// `links`) the busiest link's bytes at its capacity.
pub(super) fn period(trees: &[TreeSends], r: &SendRates, x: &IterTerms, links: bool) -> f64 {
    let [up, down] = half_periods(trees, r, x);
    let busiest = up.max(down);
    if links {
        busiest.max(link_period(trees, x))
    } else {
        busiest
    }
}

/// The busiest program's ops of one iteration at `r`'s rates, µs, in each half (up, down).
pub(super) fn half_periods(trees: &[TreeSends], r: &SendRates, x: &IterTerms) -> [f64; 2] {
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
        for s in t.sends() {
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
#[derive(Clone, Copy)]
pub(super) struct Halves {
    alone: [f64; 2],
    shared: [f64; 2],
    link: f64,
}

impl Halves {
    pub(super) fn at(trees: &[TreeSends], x: &IterTerms, gbps: f64, programs: &Loads) -> Self {
        Halves {
            alone: half_periods(trees, &busy_rates(trees, x, gbps, false, programs), x),
            shared: half_periods(trees, &busy_rates(trees, x, gbps, true, programs), x),
            link: link_period(trees, x),
        }
    }

    /// `n` steady iterations, µs. The halves run apart, so the one whose busiest program is
    /// faster runs ahead, sharing links with the slower one (where a link carries both, e.g.
    /// into an interior host's GPU, from a child host going up and from the parent host coming
    /// down) until it has done its `n`; the slower then runs its remaining iterations alone.
    /// Never less than the busiest link's or program's period per iteration.
    pub(super) fn us(&self, n: f64) -> f64 {
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
