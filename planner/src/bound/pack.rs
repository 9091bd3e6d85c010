//! Spanning-tree packing: for every rank, out-trees over all ranks that broadcast its shard, so
//! that all-gather (and, run backwards, reduce-scatter; both halves at once, all-reduce) moves
//! every shard at the same rate `λ` without any link carrying more than its capacity.
//!
//! A tree edge `u → v` is a transfer along the topology's path from `u` to `v`, loading every
//! link of that path (so trees through an NVSwitch, a PCIe switch or the CPUs share them
//! correctly). The packing is Garg and Könemann's multiplicative-weights method for maximum
//! concurrent flow, each root a commodity and each step a minimum-cost arborescence (Chu–Liu /
//! Edmonds) under the current link lengths; it is within a factor `(1−ε)³` of the best packing
//! over these paths. The fractional trees are then rounded to `copies` trees per root, each
//! carrying `1/copies` of the shard, and the rate reached is computed exactly from the link
//! loads of the rounded trees (not assumed), so the schedule's claim can be checked against the
//! bound: ForestColl (arXiv 2402.06787) shows that over a graph whose switches can be split, the
//! best packing reaches the all-gather cut bound.

use crate::topology::{LinkId, Topology};
use std::collections::HashMap;

/// Accuracy of the fractional packing.
const EPS: f64 = 0.1;

/// The most trees per root the rounding tries.
const MAX_COPIES: u32 = 8;

/// A packing: `copies` trees per root, as parent arrays over ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct Packing {
    pub nranks: u32,
    /// Trees per root.
    pub copies: u32,
    /// `trees[r * copies + j]`: tree j of root r; `parent[v]` is `None` only at the root.
    pub trees: Vec<Vec<Option<u32>>>,
    /// All-gather busbw the trees reach over the topology's paths (GB/s).
    pub ag_busbw_gbps: f64,
    /// Reduce-scatter busbw of the same trees run backwards.
    pub rs_busbw_gbps: f64,
    /// All-reduce busbw with both halves running at once.
    pub ar_busbw_gbps: f64,
    /// Deepest tree (hops from root to leaf).
    pub depth: u32,
}

/// A tree as a parent array over ranks.
type Parents = Vec<Option<u32>>;

/// Per root, its trees with their weights.
type Weighted = Vec<Vec<(Parents, f64)>>;

/// Logical edges: the links of the path between every ordered pair of ranks.
struct Routes {
    n: usize,
    /// `links[u * n + v]`: link indices (into `cap`) of the path u → v; `None`: no path.
    links: Vec<Option<Vec<usize>>>,
    cap: Vec<f64>,
}

impl Routes {
    /// The length of tree edge u → v under link lengths `len`: its path's, plus the way back's
    /// when a tree carries both ways (`both`: all-reduce's reduce up and broadcast down);
    /// `None` where there is no path.
    fn edge_cost(&self, len: &[f64], u: usize, v: usize, both: bool) -> Option<f64> {
        let one = |u: usize, v: usize| {
            self.links[u * self.n + v]
                .as_ref()
                .map(|ls| ls.iter().map(|&e| len[e]).sum::<f64>())
        };
        let d = one(u, v)?;
        Some(if both { d + one(v, u)? } else { d })
    }

    fn new(t: &Topology) -> Routes {
        let n = t.n_ranks();
        let mut index: HashMap<LinkId, usize> = HashMap::new();
        let mut cap = Vec::new();
        let mut links = vec![None; n * n];
        for u in 0..n {
            for v in (0..n).filter(|&v| v != u) {
                let Some(p) = t.gpu_path(u as u32, v as u32) else {
                    continue;
                };
                let ids = p
                    .links
                    .iter()
                    .map(|l| {
                        *index.entry(*l).or_insert_with(|| {
                            cap.push(t.graph[*l].bw_gbps);
                            cap.len() - 1
                        })
                    })
                    .collect();
                links[u * n + v] = Some(ids);
            }
        }
        Routes { n, links, cap }
    }

    /// Per link, how many tree edges of `parent` cross it (edges run parent → child, or child
    /// → parent when `up`).
    fn load(&self, parent: &[Option<u32>], up: bool, w: f64, into: &mut [f64]) {
        for (v, p) in parent.iter().enumerate() {
            let Some(p) = *p else { continue };
            let (a, b) = if up { (v, p as usize) } else { (p as usize, v) };
            for &e in self.links[a * self.n + b].as_deref().unwrap_or(&[]) {
                into[e] += w;
            }
        }
    }
}

/// Packs trees on `t` (one host; at least two ranks), with at most `per_channel_gbps` asked of
/// any tree (so each of its channels fits one channel of the executor). `None` when some rank
/// cannot reach another.
pub fn pack(t: &Topology, per_channel_gbps: f64) -> Option<Packing> {
    let r = Routes::new(t);
    let n = r.n;
    if n < 2
        || r.links
            .iter()
            .enumerate()
            .any(|(i, l)| i / n != i % n && l.is_none())
    {
        return None;
    }
    // Demands at the all-gather bound's rate: the best concurrent fraction is then at most 1,
    // which keeps the number of phases small.
    let lam = super::Bounds::new(t)
        .of(t, crate::schedule::CollectiveKind::AllGather, 0)
        .ok()
        .flatten()
        .map(|b| b.busbw_gbps / (n - 1) as f64)?;
    // Two fractional packings: one for all-gather's loads (down the trees), one for
    // all-reduce's (down and up the same trees at once). The second often reaches far more
    // all-reduce (cube-mesh subsets: 102.9 against 80 GB/s on seven V100s), the first more
    // all-gather; the rounding keeps whichever does best.
    let fracs = [
        (fractional(&r, lam, false), false),
        (fractional(&r, lam, true), true),
    ];
    let all: Vec<Packing> = fracs
        .iter()
        .flat_map(|f| (1..=MAX_COPIES).map(move |c| (f, c)))
        .map(|((f, both), c)| {
            let rounded = evaluate(&r, round(f, n, c), c);
            // Local search only where it gains: it can trade chains for wider trees at the
            // same link loads, which the executor runs slower (a node's children are received
            // one after another going up).
            let better = evaluate(&r, improve(&r, rounded.trees.clone(), c, *both), c);
            if better.ar_busbw_gbps > rounded.ar_busbw_gbps * 1.005 {
                better
            } else {
                rounded
            }
        })
        .collect();
    Some(choose(all, n, per_channel_gbps))
}

/// Of the rounded packings, the best all-reduce (within 0.5%), then the best all-gather plus
/// reduce-scatter (within 0.5%), then the fewest copies; each rate capped at what the trees'
/// channels carry at `per_channel_gbps` each (`build::packed` runs a tree's every lane, and
/// all-reduce's upward half, on channels of their own, each carrying the tree's rate), since the
/// executor cannot run a tree faster than a channel.
fn choose(all: Vec<Packing>, n: usize, per_channel_gbps: f64) -> Packing {
    let nf = (n - 1) as f64;
    let cap = |p: &Packing, halves: f64| halves * nf * p.copies as f64 * per_channel_gbps;
    let ar = |p: &Packing| p.ar_busbw_gbps.min(cap(p, 2.0));
    let halves = |p: &Packing| p.ag_busbw_gbps.min(cap(p, 1.0)) + p.rs_busbw_gbps.min(cap(p, 1.0));
    let top = all.iter().map(ar).fold(0.0, f64::max);
    let good: Vec<&Packing> = all.iter().filter(|p| ar(p) >= top * 0.995).collect();
    let best = good.iter().map(|p| halves(p)).fold(0.0, f64::max);
    good.into_iter()
        .filter(|p| halves(p) >= best * 0.995)
        .min_by_key(|p| p.copies)
        .cloned()
        .expect("at least one packing is within 0.5% of the best")
}

/// Garg–Könemann: per root, trees (parent arrays) with their weights.
/// `both`: each tree is used in both directions at once (all-reduce: reduced up, broadcast
/// down), so its edges load the links of both directions' paths.
fn fractional(r: &Routes, demand_gbps: f64, both: bool) -> Weighted {
    let n = r.n;
    let m = r.cap.len().max(1) as f64;
    let delta = (1.0 + EPS) / ((1.0 + EPS) * m).powf(1.0 / EPS);
    let mut len: Vec<f64> = r.cap.iter().map(|c| delta / c).collect();
    let mut trees: Weighted = vec![Vec::new(); n];
    let mut load = vec![0.0; r.cap.len()];
    let dual = |len: &[f64]| len.iter().zip(&r.cap).map(|(l, c)| l * c).sum::<f64>();
    // Each phase routes one unit of every root's shard; D grows by at least a factor (1+ε)
    // per phase, so the number of phases is O(log(m)/ε²).
    'phases: while dual(&len) < 1.0 {
        for (root, mine) in trees.iter_mut().enumerate() {
            let mut demand: f64 = demand_gbps;
            while demand > 1e-12 {
                if dual(&len) >= 1.0 {
                    break 'phases;
                }
                let cost = |u, v| r.edge_cost(&len, u, v, both);
                let parent = arborescence(n, root, &cost)
                    .expect("every pair has a path, so a spanning tree exists");
                load.iter_mut().for_each(|x| *x = 0.0);
                r.load(&parent, false, 1.0, &mut load);
                if both {
                    r.load(&parent, true, 1.0, &mut load);
                }
                let room = load
                    .iter()
                    .zip(&r.cap)
                    .filter(|(l, _)| **l > 0.0)
                    .map(|(l, c)| c / l)
                    .fold(f64::INFINITY, f64::min);
                let f = demand.min(room);
                demand -= f;
                for (e, l) in load.iter().enumerate().filter(|(_, l)| **l > 0.0) {
                    len[e] *= 1.0 + EPS * f * l / r.cap[e];
                }
                match mine.iter_mut().find(|(p, _)| *p == parent) {
                    Some(x) => x.1 += f,
                    None => mine.push((parent, f)),
                }
            }
        }
    }
    trees
}

/// `copies` trees per root by largest remainder of the fractional weights.
fn round(frac: &[Vec<(Parents, f64)>], n: usize, copies: u32) -> Vec<Parents> {
    let mut out = Vec::with_capacity(n * copies as usize);
    for ts in frac {
        let total: f64 = ts.iter().map(|x| x.1).sum();
        let want: Vec<f64> = ts.iter().map(|x| x.1 / total * copies as f64).collect();
        let mut got: Vec<u32> = want.iter().map(|w| w.floor() as u32).collect();
        let mut left = copies - got.iter().sum::<u32>();
        let mut order: Vec<usize> = (0..ts.len()).collect();
        // Largest remainder first; ties to the earlier (more used first) tree, deterministically.
        order.sort_by(|&a, &b| {
            (want[b] - got[b] as f64)
                .total_cmp(&(want[a] - got[a] as f64))
                .then(a.cmp(&b))
        });
        for &i in &order {
            if left == 0 {
                break;
            }
            got[i] += 1;
            left -= 1;
        }
        for (i, (p, _)) in ts.iter().enumerate() {
            for _ in 0..got[i] {
                out.push(p.clone());
            }
        }
    }
    out
}

/// How sharply [`improve`]'s potential punishes a link's load near the most loaded one's.
const SHARPNESS: f64 = 16.0;

/// Local search on rounded trees (rounding loses what the fractional packing had where few
/// trees per root cannot match its weights): each tree in turn is replaced by the cheapest tree
/// of its root under lengths that grow exponentially with the other trees' load on each link,
/// kept if the potential `Σ exp(SHARPNESS·load/(cap·U₀))` falls. `both`: loads of both halves
/// of all-reduce.
fn improve(r: &Routes, mut trees: Vec<Parents>, copies: u32, both: bool) -> Vec<Parents> {
    let n = r.n;
    let w = 1.0 / copies as f64;
    let add = |t: &Parents, sign: f64, load: &mut [f64]| {
        r.load(t, false, sign * w, load);
        if both {
            r.load(t, true, sign * w, load);
        }
    };
    let mut load = vec![0.0; r.cap.len()];
    for t in &trees {
        add(t, 1.0, &mut load);
    }
    let u0 = (0..r.cap.len())
        .map(|e| load[e] / r.cap[e])
        .fold(0.0, f64::max)
        .max(1e-12);
    let potential = |load: &[f64]| {
        (0..r.cap.len())
            .map(|e| (SHARPNESS * load[e] / r.cap[e] / u0).exp())
            .sum::<f64>()
    };
    for _pass in 0..4 {
        let mut changed = false;
        for (i, tree) in trees.iter_mut().enumerate() {
            let before = potential(&load);
            add(tree, -1.0, &mut load);
            let len: Vec<f64> = (0..r.cap.len())
                .map(|e| (SHARPNESS * load[e] / r.cap[e] / u0).exp() / r.cap[e])
                .collect();
            let cost = |u, v| r.edge_cost(&len, u, v, both);
            let root = i / copies as usize;
            let cand = arborescence(n, root, &cost).expect("every pair has a path");
            add(&cand, 1.0, &mut load);
            if cand != *tree && potential(&load) < before * (1.0 - 1e-9) {
                *tree = cand;
                changed = true;
            } else {
                add(&cand, -1.0, &mut load);
                add(tree, 1.0, &mut load);
            }
        }
        if !changed {
            break;
        }
    }
    trees
}

/// The rates `trees` reach: λ such that no link carries more than its capacity.
fn evaluate(r: &Routes, trees: Vec<Vec<Option<u32>>>, copies: u32) -> Packing {
    let n = r.n;
    let w = 1.0 / copies as f64;
    let (mut down, mut up) = (vec![0.0; r.cap.len()], vec![0.0; r.cap.len()]);
    for t in &trees {
        r.load(t, false, w, &mut down);
        r.load(t, true, w, &mut up);
    }
    let rate = |load: &dyn Fn(usize) -> f64| {
        (0..r.cap.len())
            .filter(|&e| load(e) > 0.0)
            .map(|e| r.cap[e] / load(e))
            .fold(f64::INFINITY, f64::min)
    };
    let ag = rate(&|e| down[e]);
    let rs = rate(&|e| up[e]);
    let ar = rate(&|e| down[e] + up[e]);
    let depth = trees.iter().map(|t| depth_of(t)).max().unwrap_or(0);
    let nf = (n - 1) as f64;
    Packing {
        nranks: n as u32,
        copies,
        trees,
        ag_busbw_gbps: nf * ag,
        rs_busbw_gbps: nf * rs,
        ar_busbw_gbps: 2.0 * nf * ar,
        depth,
    }
}

fn depth_of(parent: &[Option<u32>]) -> u32 {
    (0..parent.len())
        .map(|mut v| {
            let mut d = 0;
            while let Some(p) = parent[v] {
                v = p as usize;
                d += 1;
            }
            d
        })
        .max()
        .unwrap_or(0)
}

/// A minimum-cost spanning out-tree rooted at `root` (Chu–Liu / Edmonds), as a parent array;
/// `cost(u, v)` is `None` where there is no edge.
pub(crate) fn arborescence(
    n: usize,
    root: usize,
    cost: &dyn Fn(usize, usize) -> Option<f64>,
) -> Option<Vec<Option<u32>>> {
    // In-edges of v listed from its cyclic predecessor backwards: among equal costs the first
    // wins, so a symmetric machine gets chains (one child per node: a tree fits one channel).
    let mut edges = Vec::new();
    for v in (0..n).filter(|&v| v != root) {
        for k in 1..n {
            let u = (v + n - k) % n;
            if let Some(c) = cost(u, v) {
                edges.push(Edge {
                    u,
                    v,
                    w: c,
                    id: edges.len(),
                });
            }
        }
    }
    let orig: Vec<(usize, usize)> = edges.iter().map(|e| (e.u, e.v)).collect();
    let chosen = contract(n, root, edges)?;
    let mut parent = vec![None; n];
    for id in chosen {
        let (u, v) = orig[id];
        parent[v] = Some(u as u32);
    }
    Some(parent)
}

#[derive(Clone, Copy, Debug)]
struct Edge {
    u: usize,
    v: usize,
    w: f64,
    id: usize,
}

/// Edmonds' contraction: the ids of the chosen edges (one into every node but the root).
fn contract(n: usize, root: usize, edges: Vec<Edge>) -> Option<Vec<usize>> {
    let mut best: Vec<Option<Edge>> = vec![None; n];
    for e in &edges {
        if e.v != root && e.u != e.v && best[e.v].is_none_or(|b| e.w < b.w) {
            best[e.v] = Some(*e);
        }
    }
    if (0..n).any(|v| v != root && best[v].is_none()) {
        return None;
    }
    // Find a cycle among the best in-edges.
    let mut color = vec![usize::MAX; n];
    let mut cycle: Option<Vec<usize>> = None;
    for s in 0..n {
        let mut v = s;
        while v != root && color[v] == usize::MAX {
            color[v] = s;
            v = best[v].expect("checked above").u;
        }
        if v != root && color[v] == s {
            let mut c = vec![v];
            let mut x = best[v].expect("on a cycle").u;
            while x != v {
                c.push(x);
                x = best[x].expect("on a cycle").u;
            }
            cycle = Some(c);
            break;
        }
    }
    let Some(cycle) = cycle else {
        return Some(
            (0..n)
                .filter(|&v| v != root)
                .map(|v| best[v].expect("checked").id)
                .collect(),
        );
    };
    // Contract the cycle into one node; edges into it pay the difference to the cycle's edge.
    let mut in_cycle = vec![false; n];
    for &v in &cycle {
        in_cycle[v] = true;
    }
    let mut map = vec![0; n];
    let mut k = 0;
    for v in 0..n {
        if !in_cycle[v] {
            map[v] = k;
            k += 1;
        }
    }
    let c = k;
    for &v in &cycle {
        map[v] = c;
    }
    let mut target = HashMap::new();
    let mut next = Vec::new();
    for e in &edges {
        let (a, b) = (map[e.u], map[e.v]);
        if a == b {
            continue;
        }
        let w = if in_cycle[e.v] {
            e.w - best[e.v].expect("checked").w
        } else {
            e.w
        };
        target.insert(e.id, e.v);
        next.push(Edge {
            u: a,
            v: b,
            w,
            id: e.id,
        });
    }
    let chosen = contract(k + 1, map[root], next)?;
    // Expand: the one edge entering the cycle replaces its target's cycle edge.
    let entry = chosen
        .iter()
        .find(|id| in_cycle[target[id]])
        .map(|id| target[id])?;
    let mut out = chosen;
    out.extend(
        cycle
            .iter()
            .filter(|&&v| v != entry)
            .map(|&v| best[v].expect("checked").id),
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arborescence_is_minimal_on_small_graphs() {
        // Against brute force over every parent array on 5 nodes with random costs.
        let mut rng = crate::topology::synth::Rng::new(7);
        for _ in 0..40 {
            let n = 5;
            let c: Vec<f64> = (0..n * n).map(|_| rng.range(1, 50) as f64).collect();
            let cost = |u: usize, v: usize| Some(c[u * n + v]);
            let got = arborescence(n, 0, &cost).unwrap();
            let total = |p: &[Option<u32>]| -> f64 {
                (1..n).map(|v| c[p[v].unwrap() as usize * n + v]).sum()
            };
            let mut best = f64::INFINITY;
            for code in 0..n.pow(n as u32 - 1) {
                let mut p = vec![None; n];
                let mut x = code;
                for slot in p.iter_mut().skip(1) {
                    *slot = Some((x % n) as u32);
                    x /= n;
                }
                if (1..n).any(|v| p[v] == Some(v as u32)) || depth_cycles(&p) {
                    continue;
                }
                best = best.min(total(&p));
            }
            assert!((total(&got) - best).abs() < 1e-9, "{got:?}");
            assert!(!depth_cycles(&got));
        }
    }

    fn depth_cycles(p: &[Option<u32>]) -> bool {
        (0..p.len()).any(|mut v| {
            for _ in 0..p.len() {
                match p[v] {
                    Some(q) => v = q as usize,
                    None => return false,
                }
            }
            true
        })
    }
}
