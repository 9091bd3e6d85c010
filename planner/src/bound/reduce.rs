//! Max-flows on clusters through symmetry: nodes are merged into the classes of an equitable
//! partition (every node of a class has the same total capacity towards each class, both ways),
//! found by colour refinement from "every node of the named hosts on its own, the rest by kind".
//! A flow on the merged network spreads back over the links of each class pair in proportion to
//! their capacities and stays a flow, and every flow merges into one of the same value, so max-flow
//! values and min cuts (unions of classes) are exact. On one host nothing is merged.

use super::flow::Net;
use crate::topology::{NodeKind, Topology};
use petgraph::visit::EdgeRef;
use std::collections::HashMap;

/// A flow network over node classes, with a source node after them.
pub(super) struct Reduced {
    pub net: Net,
    /// Class of every topology node.
    pub class_of: Vec<u32>,
    pub src: usize,
}

impl Reduced {
    /// The nodes of the classes marked in `side` (a cut's source side), source excluded.
    pub fn lift(&self, side: &[bool]) -> Vec<bool> {
        self.class_of.iter().map(|&c| side[c as usize]).collect()
    }
}

/// The network of `t` over the links marked in `links` (reversed for data flowing towards the
/// roots); on a cluster, merged with every node of `hosts` kept on its own.
pub(super) fn reduced(t: &Topology, links: &[bool], reversed: bool, hosts: &[u32]) -> Reduced {
    let class_of = if t.n_hosts > 1 && t.fabric.is_some() {
        refine(t, links, hosts)
    } else {
        (0..t.graph.node_count() as u32).collect()
    };
    let k = class_of.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut caps: HashMap<(u32, u32), f64> = HashMap::new();
    for e in t.graph.edge_references().filter(|e| links[e.id().index()]) {
        let (a, b) = (class_of[e.source().index()], class_of[e.target().index()]);
        let (u, v) = if reversed { (b, a) } else { (a, b) };
        if u != v || t.n_hosts <= 1 {
            *caps.entry((u, v)).or_default() += e.weight().bw_gbps;
        }
    }
    let mut pairs: Vec<_> = caps.into_iter().collect();
    pairs.sort_by_key(|p| p.0);
    let mut net = Net::new(k + 1);
    for ((u, v), c) in pairs {
        net.add_edge(u as usize, v as usize, c);
    }
    Reduced {
        net,
        class_of,
        src: k,
    }
}

/// A node's neighbourhood: (direction, neighbour's colour, capacity bits), sorted.
type Signature = Vec<(u8, u32, u64)>;

/// Colour refinement to the coarsest equitable partition below the starting colours.
fn refine(t: &Topology, links: &[bool], hosts: &[u32]) -> Vec<u32> {
    let n = t.graph.node_count();
    let mut start: HashMap<(u8, u32, u32), u32> = HashMap::new();
    let mut color: Vec<u32> = t
        .graph
        .node_indices()
        .map(|x| {
            let node = &t.graph[x];
            let kind = match &node.kind {
                NodeKind::Gpu(_) => 0,
                NodeKind::Cpu(_) => 1,
                NodeKind::PciSwitch(_) => 2,
                NodeKind::NvSwitch => 3,
                NodeKind::Nic(_) => 4,
                NodeKind::NetSwitch { .. } => 5,
            };
            let own = node.host.is_some_and(|h| hosts.contains(&h));
            let key = (
                kind,
                if own { 1 } else { 0 },
                if own { x.index() as u32 } else { 0 },
            );
            let next = start.len() as u32;
            *start.entry(key).or_insert(next)
        })
        .collect();
    let mut count = start.len();
    loop {
        let mut sig: Vec<Signature> = vec![Vec::new(); n];
        for e in t.graph.edge_references().filter(|e| links[e.id().index()]) {
            let (a, b) = (e.source().index(), e.target().index());
            let w = e.weight().bw_gbps.to_bits();
            sig[a].push((0, color[b], w));
            sig[b].push((1, color[a], w));
        }
        let mut ids: HashMap<(u32, Signature), u32> = HashMap::new();
        let mut next = vec![0u32; n];
        for (i, mut s) in sig.into_iter().enumerate() {
            s.sort_unstable();
            let fresh = ids.len() as u32;
            next[i] = *ids.entry((color[i], s)).or_insert(fresh);
        }
        color = next;
        if ids.len() == count {
            return color;
        }
        count = ids.len();
    }
}
