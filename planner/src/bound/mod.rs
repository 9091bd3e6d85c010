//! The topology's throughput bound: the largest bus bandwidth any schedule of a collective can
//! reach at large sizes, by max-flow / min-cut over the topology graph (every GPU, NVSwitch, PCIe
//! switch, CPU, inter-CPU link, NIC and fabric switch, each link's bandwidth a capacity).
//!
//! - **All-gather** (ForestColl's cut bound): every rank holds a shard of `M/N` bytes that all
//!   others need, so for any node set `S` holding `k` GPUs, but not all, the `k` shards leave `S`
//!   through its outgoing links: time `≥ k·(M/N) / B⁺(S)`. The bound is the smallest
//!   `λ* = B⁺(S)/k` over all such `S`, and busbw `= (N−1)·λ*`. It is found without enumerating
//!   cuts: `λ` is feasible iff, with a source feeding every GPU at `λ`, every GPU can receive
//!   `N·λ` (a max-flow each), and an infeasible `λ` yields a cut of smaller ratio (Dinkelbach's
//!   iteration, which ends at the exact minimum).
//! - **Reduce-scatter** is all-gather on the reversed graph (shards flow into `S`).
//! - **All-reduce**: two bounds hold for any schedule. Every GPU outside a cut needs a sum of
//!   `M` bytes that depends on every input inside it, so algbw `≤` the smallest cut between two
//!   GPUs (the smaller of root 0's broadcast and reduce max-flows). And every byte of the result
//!   takes at least `2(N−1)` one-way transfers (the one-way gossip minimum), each leaving some
//!   GPU over its own links, so busbw `≤` the GPUs' total egress (and ingress) over `N`. The
//!   bound is the smaller. Reduce-scatter followed by all-gather reaches at most
//!   `2(N−1) / (1/λ*_rs + 1/λ*_ag)` (ForestColl's setting), reported beside it: equal on
//!   symmetric machines, lower where GPUs differ (a GPU with thin links can be a leaf of every
//!   tree).
//! - **Broadcast / reduce**: the smallest max-flow between the root and any other GPU (Menger);
//!   reduce on the reversed graph.
//! - All-to-all and send/recv have no bound here.
//!
//! **Which links count.** Transfers between two GPUs take the topology's path between them
//! (NCCL's path rules: a pair joined by NVLink never splits its traffic onto PCIe), so the bound
//! is taken over the links some GPU-to-GPU or GPU-to-NIC path uses ([`Bounds::new`]). The bound
//! over every link, paths ignored, is [`Bounds::every_link`]; where the two differ, the gap is
//! capacity no path reaches (a GPU's PCIe link to its CPU on an NVLink machine).
//!
//! Clusters from `topo scale` hold identical hosts that the fabric treats alike, so only the GPUs
//! of one or two hosts need a max-flow towards them: the others give the same values.

mod flow;
pub mod pack;
mod partition;
mod reduce;

use crate::schedule::CollectiveKind;
use crate::topology::{LinkKind, NodeId, Topology};
use petgraph::visit::EdgeRef;
use reduce::reduced;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BoundError {
    #[error("root {root} is not a rank (the topology has {n})")]
    Root { root: u32, n: u32 },
}

/// One link of a cut, named for people.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CutLink {
    pub from: String,
    pub to: String,
    pub kind: LinkKind,
    pub bw_gbps: f64,
}

/// The cut that limits a bound: the links data must cross, in the direction it travels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cut {
    /// Ranks on the sending side of the cut (for reduce-scatter and reduce, the receiving side
    /// holds the others).
    pub ranks: Vec<u32>,
    /// Capacity of the crossing links together (GB/s).
    pub capacity_gbps: f64,
    pub links: Vec<CutLink>,
}

impl Cut {
    /// "4 links, 96.0 GB/s: 2 x Pcie 24.0 GB/s (GPU0 -> PCI 0000:01:00.0, ...), ..." with at most
    /// `max` named links per group.
    pub fn summary(&self, max: usize) -> String {
        let mut groups: Vec<(LinkKind, f64, Vec<&CutLink>)> = Vec::new();
        for l in &self.links {
            match groups
                .iter_mut()
                .find(|g| g.0 == l.kind && (g.1 - l.bw_gbps).abs() < 1e-9)
            {
                Some(g) => g.2.push(l),
                None => groups.push((l.kind, l.bw_gbps, vec![l])),
            }
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|(k, bw, ls)| {
                let mut names: Vec<String> = ls
                    .iter()
                    .take(max)
                    .map(|l| format!("{} -> {}", l.from, l.to))
                    .collect();
                if ls.len() > max {
                    names.push(format!("{} more", ls.len() - max));
                }
                format!("{} x {k:?} {bw:.1} GB/s ({})", ls.len(), names.join(", "))
            })
            .collect();
        format!(
            "{} link(s), {:.1} GB/s: {}",
            self.links.len(),
            self.capacity_gbps,
            parts.join("; ")
        )
    }
}

/// The bound of one collective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub collective: CollectiveKind,
    /// Largest nccl-tests bus bandwidth any schedule can reach at large sizes (GB/s).
    pub busbw_gbps: f64,
    /// What limits it.
    pub limit: Limit,
    /// The limiting links: a cut, or for [`Limit::Volume`] every GPU's own links.
    pub cut: Cut,
    /// All-reduce: the most a reduce-scatter followed by an all-gather reaches (GB/s busbw).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rs_ag_busbw_gbps: Option<f64>,
    /// [`Limit::Partition`]: the groups of ranks whose links limit it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<u32>>,
}

/// The argument behind a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// Shards leaving a node set, per GPU inside it (all-gather, reduce-scatter).
    RatioCut,
    /// The smallest cut between two GPUs (broadcast, reduce, all-reduce).
    Cut,
    /// All-reduce: `2(N−1)` one-way transfers per byte over the GPUs' own links.
    Volume,
    /// All-reduce: `2(k−1)` one-way transfers per byte between `k` groups of GPUs, over the
    /// links leaving (or entering) the groups (`partition.rs`).
    Partition,
}

impl Bound {
    /// One line for people: the argument and the links.
    pub fn explain(&self, max_links: usize) -> String {
        let what = match self.limit {
            Limit::Volume => {
                "the GPUs' own links (every byte of an all-reduce takes 2(N-1) one-way transfers)"
                    .to_string()
            }
            Limit::Partition => {
                let g: Vec<String> = self
                    .groups
                    .iter()
                    .map(|g| {
                        let r: Vec<String> = g.iter().map(u32::to_string).collect();
                        format!("{{{}}}", r.join(","))
                    })
                    .collect();
                format!(
                    "the links between the groups {} (every byte of an all-reduce takes 2(k-1) one-way transfers between k groups, {} here)",
                    g.join(" "),
                    2 * (self.groups.len().max(1) - 1)
                )
            }
            Limit::RatioCut | Limit::Cut => what_cut(self.limit).to_string(),
        };
        format!("{what}: {}", self.cut.summary(max_links))
    }
}

fn what_cut(l: Limit) -> &'static str {
    match l {
        Limit::RatioCut => "limiting cut",
        _ => "smallest cut between two GPUs",
    }
}

/// A min-ratio cut: `λ = capacity / GPUs on the sending side`.
#[derive(Clone, Debug)]
struct RatioCut {
    lambda: f64,
    cut: Cut,
}

/// Bounds of one topology; the two min-ratio cuts (all-gather, reduce-scatter) are computed once
/// and serve all three collectives built from them.
#[derive(Clone, Debug)]
pub struct Bounds {
    n: u32,
    ag: Option<RatioCut>,
    rs: Option<RatioCut>,
    /// Which links count (by link index).
    links: Vec<bool>,
}

impl Bounds {
    /// The bound over the links the topology's paths use (module docs).
    pub fn new(t: &Topology) -> Self {
        Self::over(t, &routed_links(t))
    }

    /// The bound over every link of the graph, paths ignored.
    pub fn every_link(t: &Topology) -> Self {
        Self::over(t, &vec![true; t.graph.edge_count()])
    }

    fn over(t: &Topology, links: &[bool]) -> Self {
        let n = t.n_ranks() as u32;
        if n < 2 {
            return Bounds {
                n,
                ag: None,
                rs: None,
                links: links.to_vec(),
            };
        }
        Bounds {
            n,
            ag: Some(min_ratio_cut(t, links, false)),
            rs: Some(min_ratio_cut(t, links, true)),
            links: links.to_vec(),
        }
    }

    /// The bound of `kind` (`root` for broadcast and reduce); `None` where there is none (one
    /// rank, all-to-all, send/recv).
    pub fn of(
        &self,
        t: &Topology,
        kind: CollectiveKind,
        root: u32,
    ) -> Result<Option<Bound>, BoundError> {
        let n = self.n;
        let (Some(ag), Some(rs)) = (&self.ag, &self.rs) else {
            return Ok(None);
        };
        let nf = (n - 1) as f64;
        let (busbw, cut) = match kind {
            CollectiveKind::AllGather => (nf * ag.lambda, ag.cut.clone()),
            CollectiveKind::ReduceScatter => (nf * rs.lambda, rs.cut.clone()),
            CollectiveKind::AllReduce => {
                let rs_ag = 2.0 * nf / (1.0 / rs.lambda + 1.0 / ag.lambda);
                return Ok(Some(self.all_reduce(t, rs_ag)));
            }
            CollectiveKind::Broadcast | CollectiveKind::Reduce => {
                if root >= n {
                    return Err(BoundError::Root { root, n });
                }
                let (f, cut) = rooted_cut(t, &self.links, root, kind == CollectiveKind::Reduce);
                (f, cut)
            }
            CollectiveKind::AllToAll | CollectiveKind::SendRecv => return Ok(None),
        };
        let limit = match kind {
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => Limit::RatioCut,
            _ => Limit::Cut,
        };
        Ok(Some(Bound {
            collective: kind,
            busbw_gbps: busbw,
            limit,
            cut,
            rs_ag_busbw_gbps: None,
            groups: Vec::new(),
        }))
    }

    /// All-reduce (module docs): the smallest cut between two GPUs, or the GPUs' own links.
    fn all_reduce(&self, t: &Topology, rs_ag: f64) -> Bound {
        let n = self.n as f64;
        let (fb, cb) = rooted_cut(t, &self.links, 0, false);
        let (fr, cr) = rooted_cut(t, &self.links, 0, true);
        let (f, pair_cut) = if fb <= fr { (fb, cb) } else { (fr, cr) };
        let pair = 2.0 * (n - 1.0) / n * f;
        let (out, inn) = (
            own_links(t, &self.links, false),
            own_links(t, &self.links, true),
        );
        let own = if out.capacity_gbps <= inn.capacity_gbps {
            out
        } else {
            inn
        };
        let volume = own.capacity_gbps / n;
        let (busbw_gbps, limit, cut) = if pair <= volume {
            (pair, Limit::Cut, pair_cut)
        } else {
            (volume, Limit::Volume, own)
        };
        let mut b = Bound {
            collective: CollectiveKind::AllReduce,
            busbw_gbps,
            limit,
            cut,
            rs_ag_busbw_gbps: Some(rs_ag),
            groups: Vec::new(),
        };
        // Groups of GPUs can limit it more than the GPUs one by one (`partition.rs`).
        if let Some(g) = partition::partition_bound(t, &self.links)
            .filter(|g| g.busbw_gbps < b.busbw_gbps * (1.0 - 1e-9))
        {
            b.busbw_gbps = g.busbw_gbps;
            b.limit = Limit::Partition;
            b.cut = g.cut;
            b.groups = g.groups;
        }
        b
    }
}

/// Every GPU's counted links out (or in, `incoming`), as a cut with every rank inside.
fn own_links(t: &Topology, links: &[bool], incoming: bool) -> Cut {
    let dir = if incoming {
        petgraph::Direction::Incoming
    } else {
        petgraph::Direction::Outgoing
    };
    let mut cut = Cut {
        ranks: (0..t.n_ranks() as u32).collect(),
        capacity_gbps: 0.0,
        links: Vec::new(),
    };
    for g in (0..t.n_ranks() as u32).filter_map(|r| t.gpu_of_rank(r)) {
        for e in t.graph.edges_directed(g, dir) {
            if links[e.id().index()] {
                cut.capacity_gbps += e.weight().bw_gbps;
                cut.links.push(CutLink {
                    from: t.describe(e.source()),
                    to: t.describe(e.target()),
                    kind: e.weight().kind,
                    bw_gbps: e.weight().bw_gbps,
                });
            }
        }
    }
    cut
}

/// The bound of one collective (see the module docs).
pub fn bound(t: &Topology, kind: CollectiveKind, root: u32) -> Result<Option<Bound>, BoundError> {
    Bounds::new(t).of(t, kind, root)
}

/// The GPUs a max-flow must be run towards: every GPU, or on a cluster of identical hosts those
/// of the hosts in `hosts` (the others are images of these under a symmetry of the fabric).
fn sinks(t: &Topology, hosts: &[u32]) -> Vec<NodeId> {
    let all = (0..t.n_ranks() as u32).filter_map(|r| t.gpu_of_rank(r));
    if t.n_hosts > 1 && t.fabric.is_some() {
        all.filter(|g| hosts.contains(&t.graph[*g].host.unwrap_or(0)))
            .collect()
    } else {
        all.collect()
    }
}

/// The links leaving `side` (in the network's direction) and the ranks inside it.
fn cut_of(t: &Topology, counted: &[bool], side: &[bool], reversed: bool) -> Cut {
    let mut links = Vec::new();
    let mut cap = 0.0;
    for e in t
        .graph
        .edge_references()
        .filter(|e| counted[e.id().index()])
    {
        let (a, b) = (e.source().index(), e.target().index());
        let (u, v) = if reversed { (b, a) } else { (a, b) };
        if side[u] && !side[v] {
            cap += e.weight().bw_gbps;
            links.push(CutLink {
                from: t.describe(e.source()),
                to: t.describe(e.target()),
                kind: e.weight().kind,
                bw_gbps: e.weight().bw_gbps,
            });
        }
    }
    let ranks = (0..t.n_ranks() as u32)
        .filter(|&r| t.gpu_of_rank(r).is_some_and(|g| side[g.index()]))
        .collect();
    Cut {
        ranks,
        capacity_gbps: cap,
        links,
    }
}

/// The cut of smallest capacity per GPU on its sending side (module docs), by Dinkelbach's
/// iteration over max-flows.
fn min_ratio_cut(t: &Topology, links: &[bool], reversed: bool) -> RatioCut {
    let mut r = reduced(t, links, reversed, &[0]);
    let gpus: Vec<NodeId> = (0..t.n_ranks() as u32)
        .filter_map(|x| t.gpu_of_rank(x))
        .collect();
    let n = gpus.len() as f64;
    // The source feeds every GPU at λ: a class of k GPUs gets k·λ.
    let mut per_class: std::collections::BTreeMap<u32, f64> = Default::default();
    for g in &gpus {
        *per_class.entry(r.class_of[g.index()]).or_default() += 1.0;
    }
    let src_edges: Vec<(usize, f64)> = per_class
        .iter()
        .map(|(&c, &k)| (r.net.add_edge(r.src, c as usize, 0.0), k))
        .collect();
    // Start from the best single GPU: its own links are a cut.
    let dir = if reversed {
        petgraph::Direction::Incoming
    } else {
        petgraph::Direction::Outgoing
    };
    let (mut lambda, first) = gpus
        .iter()
        .map(|&g| {
            let c: f64 = t
                .graph
                .edges_directed(g, dir)
                .filter(|e| links[e.id().index()])
                .map(|e| e.weight().bw_gbps)
                .sum();
            (c, g)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("at least two GPUs");
    let mut side = vec![false; t.graph.node_count()];
    side[first.index()] = true;
    let mut sinks: Vec<u32> = sinks(t, &[0])
        .iter()
        .map(|v| r.class_of[v.index()])
        .collect();
    sinks.dedup();
    // Each round either proves λ optimal or finds a strictly better cut; cuts are finite, so
    // this ends; the cap guards against rounding ping-pong.
    for _ in 0..200 {
        for &(e, k) in &src_edges {
            r.net.set_cap(e, lambda * k);
        }
        let mut better = None;
        for &v in &sinks {
            let f = r.net.max_flow(r.src, v as usize);
            if f < n * lambda * (1.0 - 1e-9) {
                let s = r.lift(&r.net.source_side(r.src));
                let c = cut_of(t, links, &s, reversed);
                let k = c.ranks.len() as f64;
                if k > 0.0 && c.capacity_gbps / k < lambda * (1.0 - 1e-12) {
                    better = Some((c.capacity_gbps / k, s));
                    break;
                }
            }
        }
        match better {
            Some((l, s)) => {
                lambda = l;
                side = s;
            }
            None => break,
        }
    }
    RatioCut {
        lambda,
        cut: cut_of(t, links, &side, reversed),
    }
}

/// Broadcast (reduce with `reversed`): the smallest root → GPU max-flow and its cut.
fn rooted_cut(t: &Topology, links: &[bool], root: u32, reversed: bool) -> (f64, Cut) {
    let r = t.gpu_of_rank(root).expect("root checked against n_ranks");
    let rh = t.graph[r].host.unwrap_or(0);
    let hosts = [rh, (rh + 1) % t.n_hosts.max(1), t.n_hosts.saturating_sub(1)];
    let mut red = reduced(t, links, reversed, &hosts);
    let src = red.class_of[r.index()] as usize;
    let mut best: Option<(f64, Vec<bool>)> = None;
    for v in sinks(t, &hosts) {
        if v == r {
            continue;
        }
        let f = red.net.max_flow(src, red.class_of[v.index()] as usize);
        if best.as_ref().is_none_or(|b| f < b.0) {
            best = Some((f, red.lift(&red.net.source_side(src))));
        }
    }
    let (f, side) = best.expect("at least two GPUs");
    (f, cut_of(t, links, &side, reversed))
}

/// The links some path between two GPUs, or between a GPU and a NIC of a cluster's host, uses. Hosts of a
/// cluster are identical, so host 0's paths are mapped onto every host by node position within
/// the host; links between hosts (NICs, fabric) all count.
fn routed_links(t: &Topology) -> Vec<bool> {
    let mut ord = vec![(u32::MAX, 0u32); t.graph.node_count()];
    let mut next = vec![0u32; t.n_hosts.max(1) as usize];
    for n in t.graph.node_indices() {
        if let Some(h) = t.graph[n].host {
            if let Some(c) = next.get_mut(h as usize) {
                ord[n.index()] = (h, *c);
                *c += 1;
            }
        }
    }
    let gpus: Vec<NodeId> = t
        .gpus_of_host(0)
        .iter()
        .filter_map(|&r| t.gpu_of_rank(r))
        .collect();
    // NICs carry collective traffic only between hosts.
    let nics = if t.n_hosts > 1 {
        t.nics_of_host(0)
    } else {
        Vec::new()
    };
    let mut used = std::collections::HashSet::new();
    let mut mark = |p: Option<crate::topology::Path>| {
        for l in p.map(|p| p.links).unwrap_or_default() {
            if let Some((a, b)) = t.graph.edge_endpoints(l) {
                used.insert((ord[a.index()].1, ord[b.index()].1));
            }
        }
    };
    for &a in &gpus {
        for &b in gpus.iter().chain(&nics) {
            if a != b {
                mark(t.path(a, b));
                mark(t.path(b, a));
            }
        }
    }
    t.graph
        .edge_references()
        .map(|e| {
            let (a, b) = (ord[e.source().index()], ord[e.target().index()]);
            a.0 == u32::MAX || a.0 != b.0 || used.contains(&(a.1, b.1))
        })
        .collect()
}

#[cfg(test)]
mod tests;
