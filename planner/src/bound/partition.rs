//! All-reduce's partition bound: the one-way gossip argument behind the GPUs'-own-links bound,
//! applied to groups of GPUs.
//!
//! Split the GPUs into `k` groups and let transfers inside a group cost nothing. Each group
//! still needs the sum of every other group's inputs, so every byte of the result still takes
//! at least `2(k−1)` one-way transfers between groups (the one-way gossip minimum among `k`
//! parties), and each leaves its group over a link out of it. With `C` the capacity of the
//! links leaving the groups, time `≥ 2(k−1)·M / C`, so busbw `≤ (N−1)/N · C/(k−1)` (and the
//! same with the links entering them). Singletons give the GPUs'-own-links bound `C/N`; other
//! groupings can be lower where thin links join thick ones: on the cube-mesh GPUs 0,2,4,6
//! (a four-cycle, 0–4 a double NVLink) the groups {0,4}, {2}, {6} leave 120 GB/s over two
//! transfers per byte, 45 GB/s against the 50 of the GPUs' own links.
//!
//! Switches, CPUs and other non-GPU nodes either join a group (their links to it are then
//! inside it) or stay apart, where a transfer through them has already left its group. Every
//! grouping and every placement of them is tried, so this runs only on machines of a few GPUs
//! and switches ([`MAX_RANKS`], [`MAX_ASSIGNMENTS`]).

use super::{Cut, CutLink};
use crate::topology::Topology;
use petgraph::visit::EdgeRef;

/// Most GPUs whose groupings are enumerated (4140 groupings of 8).
pub const MAX_RANKS: usize = 8;

/// Most (grouping, placement) pairs tried; beyond it there is no partition bound.
const MAX_ASSIGNMENTS: u64 = 1 << 20;

/// The smallest partition bound: its busbw, the groups (ranks) and the links leaving them (or
/// entering them, whichever is smaller).
pub(super) struct Grouped {
    pub busbw_gbps: f64,
    pub groups: Vec<Vec<u32>>,
    pub cut: Cut,
}

/// One counted link between two nodes of interest: endpoints as slots (ranks first, then the
/// other nodes), capacity.
struct Arc {
    a: usize,
    b: usize,
    cap: f64,
    id: petgraph::graph::EdgeIndex,
}

/// The partition bound over the counted `links` (`None`: too many GPUs or other nodes, or
/// fewer than three GPUs, where the pair cut already says as much).
pub(super) fn partition_bound(t: &Topology, links: &[bool]) -> Option<Grouped> {
    let n = t.n_ranks();
    if !(3..=MAX_RANKS).contains(&n) {
        return None;
    }
    let mut slot = vec![usize::MAX; t.graph.node_count()];
    for r in 0..n {
        slot[t.gpu_of_rank(r as u32)?.index()] = r;
    }
    let mut others = 0;
    let mut arcs = Vec::new();
    for e in t.graph.edge_references().filter(|e| links[e.id().index()]) {
        let mut at = |x: usize| {
            if slot[x] == usize::MAX {
                slot[x] = n + others;
                others += 1;
            }
            slot[x]
        };
        let (a, b) = (at(e.source().index()), at(e.target().index()));
        arcs.push(Arc {
            a,
            b,
            cap: e.weight().bw_gbps,
            id: e.id(),
        });
    }
    let groupings = groupings(n);
    let work: u64 = groupings
        .iter()
        .map(|g| (*g.iter().max().unwrap_or(&0) as u64 + 2).saturating_pow(others as u32))
        .sum();
    if work > MAX_ASSIGNMENTS {
        return None;
    }
    let mut best: Option<(f64, Vec<usize>, bool)> = None;
    let mut label = vec![0; n + others];
    for g in &groupings {
        let k = g.iter().max().map_or(1, |m| m + 1);
        if k < 2 {
            continue;
        }
        label[..n].copy_from_slice(g);
        // Non-GPU nodes: a group's label, or `k` (apart).
        let mut place = vec![0; others];
        loop {
            label[n..].copy_from_slice(&place);
            let (mut out, mut inn) = (0.0, 0.0);
            for arc in &arcs {
                let (la, lb) = (label[arc.a], label[arc.b]);
                if la != lb {
                    out += if la < k { arc.cap } else { 0.0 };
                    inn += if lb < k { arc.cap } else { 0.0 };
                }
            }
            let (c, entering) = if inn < out { (inn, true) } else { (out, false) };
            let busbw = (n - 1) as f64 / n as f64 * c / (k - 1) as f64;
            if best.as_ref().is_none_or(|b| busbw < b.0 * (1.0 - 1e-12)) {
                best = Some((busbw, label.clone(), entering));
            }
            if !next_placement(&mut place, k) {
                break;
            }
        }
    }
    let (busbw_gbps, label, entering) = best?;
    let k = label[..n].iter().max().map_or(0, |m| m + 1);
    let groups = (0..k)
        .map(|g| (0..n as u32).filter(|&r| label[r as usize] == g).collect())
        .collect();
    let mut cut = Cut {
        ranks: (0..n as u32).collect(),
        capacity_gbps: 0.0,
        links: Vec::new(),
    };
    for arc in &arcs {
        let (la, lb) = (label[arc.a], label[arc.b]);
        let counted = if entering { lb < k } else { la < k };
        if la != lb && counted {
            let (s, d) = t.graph.edge_endpoints(arc.id)?;
            cut.capacity_gbps += arc.cap;
            cut.links.push(CutLink {
                from: t.describe(s),
                to: t.describe(d),
                kind: t.graph[arc.id].kind,
                bw_gbps: arc.cap,
            });
        }
    }
    Some(Grouped {
        busbw_gbps,
        groups,
        cut,
    })
}

/// Every way to split `n` ranks into groups, as restricted growth strings (rank 0 in group 0,
/// each rank in a group used before or the next new one).
fn groupings(n: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = vec![0; n];
    fn go(i: usize, max: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if i == cur.len() {
            out.push(cur.clone());
            return;
        }
        for g in 0..=max + 1 {
            cur[i] = g;
            go(i + 1, max.max(g), cur, out);
        }
    }
    if n > 0 {
        go(1, 0, &mut cur, &mut out);
    }
    out
}

/// The next placement of the non-GPU nodes (each `0..=k`), odometer order; false after the last.
fn next_placement(place: &mut [usize], k: usize) -> bool {
    for p in place.iter_mut() {
        if *p < k {
            *p += 1;
            return true;
        }
        *p = 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groupings_are_the_bell_numbers() {
        let bell = [1, 1, 2, 5, 15, 52, 203, 877, 4140];
        for (n, &b) in bell.iter().enumerate().skip(1) {
            let g = groupings(n);
            assert_eq!(g.len(), b, "{n}");
            let mut sorted = g.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), b, "{n}: duplicates");
        }
    }
}
