//! The packed trees' slowest paths, op by op as `schedule::build::packed` lays them out: what a
//! small packed call costs beyond its launch in the engine, whose every step pays its protocol's
//! fixed cost and every transfer its route's link latencies and the protocol's one-way hop.
//!
//! - Down a tree (all-gather, all-reduce's second half) each GPU forwards to its first child in
//!   the op that receives (one step); its other children's sends wait for that op (one step
//!   more), and a leaf's receive is a step. (An all-gather root's copy of its input receives
//!   nothing and pays no step's cost.)
//! - Up a tree (reduce-scatter, all-reduce's first half) a GPU takes its children one op after
//!   another on one channel, the last op also sending to its parent: from the i-th of k
//!   children, k − i steps.
//! - All-reduce's root starts down after its last reduction, so a tree's call is its slowest
//!   path up plus its slowest path down.

use super::nccl::{hw_lat, proto_idx, BASE_LAT};
use super::{EngineTerms, PackedSet};
use crate::schedule::build::TreeChannel;
use crate::schedule::{CollectiveKind, Protocol};
use serde::{Deserialize, Serialize};

/// One path's costs: transfers, steps, and the routes' link latencies (µs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathCost {
    pub hops: u32,
    pub steps: u32,
    pub route_lat_us: f64,
}

impl PathCost {
    /// The path's time for a protocol's one-way hop and step cost, µs.
    pub fn us(&self, hop_us: f64, step_us: f64) -> f64 {
        self.hops as f64 * hop_us + self.steps as f64 * step_us + self.route_lat_us
    }

    /// The path's time for protocol `p`'s one-way hop and step cost in the engine, µs.
    pub fn us_for(&self, e: &EngineTerms, p: Protocol) -> f64 {
        let i = proto_idx(p);
        self.us(e.hop_us[i], e.step_us[i])
    }

    fn plus(self, o: PathCost) -> PathCost {
        PathCost {
            hops: self.hops + o.hops,
            steps: self.steps + o.steps,
            route_lat_us: self.route_lat_us + o.route_lat_us,
        }
    }
}

/// The paths that can be slowest, per packed collective: of all paths with the same hops and
/// steps, only the one with the largest latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PackedPaths {
    pub all_gather: Vec<PathCost>,
    pub reduce_scatter: Vec<PathCost>,
    pub all_reduce: Vec<PathCost>,
}

impl PackedPaths {
    /// The paths of `trees`, `lat(a, b)` the route latency from rank a to rank b (µs).
    pub fn of(trees: &[TreeChannel], lat: impl Fn(u32, u32) -> f64) -> Self {
        let mut p = PackedPaths::default();
        for t in trees {
            let Some(root) = t.parent.iter().position(Option::is_none) else {
                continue;
            };
            let root = root as u32;
            // A second child's send waits for its parent's receive: one step more.
            let edge = |v: u32, i: usize, k: u32| {
                let steps = if v == root || i == 0 { 1 } else { 2 };
                (steps, lat(v, k))
            };
            let (up, down) = (up(t, &lat), down(t, root, edge));
            merge(&mut p.all_gather, down.clone());
            merge(&mut p.reduce_scatter, up.clone());
            let sums = up.iter().flat_map(|u| down.iter().map(|d| u.plus(*d)));
            merge(&mut p.all_reduce, sums.collect());
        }
        p
    }
}

/// The slowest of `paths` for a protocol's hop and step cost, µs (`None`: no paths).
pub fn slowest(paths: &[PathCost], hop_us: f64, step_us: f64) -> Option<f64> {
    paths.iter().map(|p| p.us(hop_us, step_us)).reduce(f64::max)
}

/// Root-to-leaf paths down `t`, ending with the leaf's receive; `edge(v, i, k)` is the steps
/// and latency from GPU v's data landing to its i-th child k's (the builder's layout).
fn down(t: &TreeChannel, root: u32, edge: impl Fn(u32, usize, u32) -> (u32, f64)) -> Vec<PathCost> {
    let mut out = Vec::new();
    // (rank, the cost until its data arrived there)
    let mut todo = vec![(root, PathCost::default())];
    while let Some((v, at)) = todo.pop() {
        let kids = &t.children[v as usize];
        if kids.is_empty() {
            out.push(PathCost {
                steps: at.steps + 1,
                ..at
            });
        }
        for (i, &k) in kids.iter().enumerate() {
            let (steps, route_lat_us) = edge(v, i, k);
            todo.push((
                k,
                at.plus(PathCost {
                    hops: 1,
                    steps,
                    route_lat_us,
                }),
            ));
        }
    }
    dedup(out)
}

/// Leaf-to-root paths up `t`, ending with the root's last reduction.
fn up(t: &TreeChannel, lat: &impl Fn(u32, u32) -> f64) -> Vec<PathCost> {
    let mut out = Vec::new();
    for leaf in (0..t.parent.len()).filter(|&v| t.children[v].is_empty()) {
        let mut c = PathCost {
            hops: 0,
            steps: 1,
            route_lat_us: 0.0,
        };
        let mut v = leaf as u32;
        while let Some(p) = t.parent[v as usize] {
            let kids = &t.children[p as usize];
            let i = kids.iter().position(|&k| k == v).unwrap_or(0);
            c = c.plus(PathCost {
                hops: 1,
                steps: (kids.len() - i) as u32,
                route_lat_us: lat(v, p),
            });
            v = p;
        }
        out.push(c);
    }
    dedup(out)
}

/// Packed trees' latency beyond the tuner's launch: the engine's launch, then the trees' slowest
/// path, op by op (`PackedPaths`: each transfer its route's link latencies and the protocol's
/// one-way hop, each step the protocol's fixed cost). Without the engine's terms or the paths,
/// NCCL's tree latencies over the deepest tree, once per half.
pub(super) fn packed_lat(
    pk: &PackedSet,
    e: &EngineTerms,
    launch_us: f64,
    kind: CollectiveKind,
    p: Protocol,
) -> f64 {
    let pi = proto_idx(p);
    let paths = match kind {
        CollectiveKind::AllGather => &pk.paths.all_gather,
        CollectiveKind::ReduceScatter => &pk.paths.reduce_scatter,
        _ => &pk.paths.all_reduce,
    };
    match slowest(paths, e.hop_us[pi], e.step_us[pi]) {
        Some(path) if e.launch_us > 0.0 => e.launch_us - launch_us + path,
        _ => {
            let halves = if kind == CollectiveKind::AllReduce {
                2.0
            } else {
                1.0
            };
            BASE_LAT[0][pi] + halves * pk.depth as f64 * hw_lat(pk.intra, 0, p)
        }
    }
}

/// Keeps, of the paths with the same hops and steps, the slowest.
fn dedup(mut v: Vec<PathCost>) -> Vec<PathCost> {
    v.sort_by(|a, b| {
        (a.hops, a.steps)
            .cmp(&(b.hops, b.steps))
            .then(b.route_lat_us.total_cmp(&a.route_lat_us))
    });
    v.dedup_by(|b, a| (a.hops, a.steps) == (b.hops, b.steps));
    v
}

fn merge(into: &mut Vec<PathCost>, more: Vec<PathCost>) {
    into.extend(more);
    *into = dedup(std::mem::take(into));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(parent: &[Option<u32>]) -> TreeChannel {
        TreeChannel::from_parents(parent.to_vec()).unwrap()
    }

    fn costs(v: &[PathCost]) -> Vec<(u32, u32, f64)> {
        v.iter()
            .map(|p| (p.hops, p.steps, p.route_lat_us))
            .collect()
    }

    #[test]
    fn a_second_child_waits_for_its_parents_receive_and_children_reduce_in_turn() {
        // 0 -> {1, 2}, 1 -> {3, 4}; every route 0.5 µs, the route from 1 to 4 1.5 µs.
        let t = tree(&[None, Some(0), Some(0), Some(1), Some(1)]);
        let lat = |a: u32, b: u32| if (a, b) == (1, 4) { 1.5 } else { 0.5 };
        let p = PackedPaths::of(&[t], lat);
        // Down to 2: send, receive. To 3: send, forward in the receive, receive. To 4: send,
        // receive, the send that waits for it, receive.
        assert_eq!(
            costs(&p.all_gather),
            [(1, 2, 0.5), (2, 3, 1.0), (2, 4, 2.0)]
        );
        // Up from 2 (the root's second child): send, the root's second reduction. From 3
        // (first of two): send, both of 1's reductions, both of the root's.
        assert_eq!(
            costs(&p.reduce_scatter),
            [(1, 2, 0.5), (2, 4, 1.0), (2, 5, 1.0)]
        );
        // A call of all-reduce is its slowest path up and then down.
        assert_eq!(slowest(&p.all_reduce, 1.0, 0.0), Some(4.0 + 3.0));
        assert_eq!(
            slowest(&p.all_reduce, 0.0, 1.0),
            Some(5.0 + 1.0 + 4.0 + 2.0)
        );
        assert_eq!(slowest(&p.all_gather, 1.0, 1.0), Some(8.0));
    }
}
