//! Paths between components with NCCL's rules (NCCL's `src/graph/paths.cc`: `ncclTopoComputePaths`,
//! `ncclTopoCheckP2p`, `ncclTopoCheckGdr`, `p2pPxnPath`).
//!
//! Inside a host, paths come from NCCL's breadth-first search towards every GPU, CPU, NIC and
//! NVSwitch ("base" nodes): a path's type is its worst hop, its bandwidth the bottleneck link,
//! and a GPU relays traffic for at most one NVLink hop (NVB). NCCL's post-processing follows:
//! GPU pairs without P2P go through the destination's CPU, PXN routes a GPU to a NIC through
//! an NVLink peer next to that NIC, and GPU↔NIC paths without GPUDirect RDMA go through the CPU.
//!
//! Host paths are computed lazily, once per host, and cached; paths between hosts are composed
//! structurally (GPU → its NIC → fabric switches → peer NIC → peer GPU), so a 1024-node cluster
//! never needs an all-pairs computation.

use super::host_paths::{bfs_to, HostPaths};
use super::model::*;
use super::nccl::LOC_BW;
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// NCCL's path types, best first: a path is as good as its worst hop. Serialized with NCCL's
/// spelling ("NVL"); the Rust names ("Nvl") are accepted when reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PathType {
    /// To itself.
    #[serde(rename = "LOC", alias = "Loc")]
    Loc,
    /// NVLink, direct or through NVSwitches.
    #[serde(rename = "NVL", alias = "Nvl")]
    Nvl,
    /// NVLink through one intermediate GPU.
    #[serde(rename = "NVB", alias = "Nvb")]
    Nvb,
    /// GPU ↔ its CPU over C2C (Grace).
    #[serde(rename = "C2C", alias = "C2c")]
    C2c,
    /// Through at most one PCIe switch.
    #[serde(rename = "PIX", alias = "Pix")]
    Pix,
    /// Through several PCIe switches, without the host bridge.
    #[serde(rename = "PXB", alias = "Pxb")]
    Pxb,
    /// GPU – C2C – CPU – PCIe – NIC.
    #[serde(rename = "P2C", alias = "P2c")]
    P2c,
    /// GPU → NVLink → peer GPU → PCIe → NIC.
    #[serde(rename = "PXN", alias = "Pxn")]
    Pxn,
    /// Through a PCIe host bridge (the CPU).
    #[serde(rename = "PHB", alias = "Phb")]
    Phb,
    /// Across the SMP interconnect between NUMA domains.
    #[serde(rename = "SYS", alias = "Sys")]
    Sys,
    /// Through the network, between hosts.
    #[serde(rename = "NET", alias = "Net")]
    Net,
    /// Disconnected.
    #[serde(rename = "DIS", alias = "Dis")]
    Dis,
}

impl PathType {
    pub const ALL: [PathType; 12] = [
        PathType::Loc,
        PathType::Nvl,
        PathType::Nvb,
        PathType::C2c,
        PathType::Pix,
        PathType::Pxb,
        PathType::P2c,
        PathType::Pxn,
        PathType::Phb,
        PathType::Sys,
        PathType::Net,
        PathType::Dis,
    ];

    /// NCCL's spelling ("NVL", "PXB", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            PathType::Loc => "LOC",
            PathType::Nvl => "NVL",
            PathType::Nvb => "NVB",
            PathType::C2c => "C2C",
            PathType::Pix => "PIX",
            PathType::Pxb => "PXB",
            PathType::P2c => "P2C",
            PathType::Pxn => "PXN",
            PathType::Phb => "PHB",
            PathType::Sys => "SYS",
            PathType::Net => "NET",
            PathType::Dis => "DIS",
        }
    }

    /// Parses NCCL's spelling, case-insensitively.
    pub fn parse(s: &str) -> Option<PathType> {
        PathType::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s.trim()))
    }

    pub(super) fn of_link(kind: LinkKind) -> PathType {
        match kind {
            LinkKind::NvLink => PathType::Nvl,
            LinkKind::C2c => PathType::C2c,
            LinkKind::Pcie => PathType::Pix,
            LinkKind::InterCpu => PathType::Sys,
            LinkKind::Network | LinkKind::Local => PathType::Loc,
        }
    }
}

impl fmt::Display for PathType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A route between two nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    pub kind: PathType,
    /// Bottleneck bandwidth (GB/s); for a path ending at a NIC, capped by the NIC's port speed.
    pub bw_gbps: f64,
    /// Sum of the links' latencies (µs).
    pub lat_us: f64,
    /// Links in travel order.
    pub links: Vec<LinkId>,
}

impl Path {
    pub(super) fn local() -> Path {
        Path {
            kind: PathType::Loc,
            bw_gbps: LOC_BW,
            lat_us: 0.0,
            links: Vec::new(),
        }
    }

    /// Number of hops.
    pub fn hops(&self) -> usize {
        self.links.len()
    }

    pub(super) fn join(&self, other: &Path, kind: PathType) -> Path {
        let mut links = self.links.clone();
        links.extend_from_slice(&other.links);
        Path {
            kind,
            bw_gbps: self.bw_gbps.min(other.bw_gbps),
            lat_us: self.lat_us + other.lat_us,
            links,
        }
    }
}

/// Per-topology caches behind [`Topology::path`]. Reset whenever the graph changes through
/// `add_node`/`add_link`/`validate`.
#[derive(Debug, Default)]
pub struct PathCache {
    /// Node → (host, index within that host's node list); u32::MAX for fabric switches.
    local: Vec<(u32, u32)>,
    host_nodes: Vec<Vec<NodeId>>,
    hosts: Vec<OnceLock<HostPaths>>,
    /// NIC → (its leaf switch, NIC→leaf link, leaf→NIC link).
    nic_leaf: HashMap<NodeId, (NodeId, LinkId, LinkId)>,
    /// Switch-to-switch links.
    sw_links: HashMap<(NodeId, NodeId), LinkId>,
    /// Leaf → switches one level up.
    uplinks: HashMap<NodeId, Vec<NodeId>>,
}

/// The lazily built [`PathCache`] of a topology. Cloning a topology starts with an empty cell
/// (rebuilding is cheap, and a clone is usually about to be mutated).
#[derive(Debug, Default)]
pub struct CacheCell(OnceLock<PathCache>);

impl Clone for CacheCell {
    fn clone(&self) -> Self {
        CacheCell::default()
    }
}

impl CacheCell {
    pub(crate) fn reset(&mut self) {
        self.0 = OnceLock::new();
    }
}

impl PathCache {
    pub(crate) fn build(t: &Topology) -> PathCache {
        let n_hosts = t.n_hosts.max(1) as usize;
        let mut host_nodes = vec![Vec::new(); n_hosts];
        let mut local = vec![(u32::MAX, u32::MAX); t.graph.node_count()];
        for n in t.graph.node_indices() {
            if let Some(h) = t.graph[n].host {
                let h = h as usize;
                if h >= host_nodes.len() {
                    host_nodes.resize(h + 1, Vec::new());
                }
                local[n.index()] = (h as u32, host_nodes[h].len() as u32);
                host_nodes[h].push(n);
            }
        }
        let mut nic_leaf = HashMap::new();
        let mut sw_links = HashMap::new();
        let mut uplinks: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
        for e in t.graph.edge_references() {
            let (a, b) = (e.source(), e.target());
            match (&t.graph[a].kind, &t.graph[b].kind) {
                (NodeKind::Nic(_), NodeKind::NetSwitch { .. }) => {
                    let down = t.graph.find_edge(b, a);
                    if let Some(down) = down {
                        nic_leaf.entry(a).or_insert((b, e.id(), down));
                    }
                }
                (NodeKind::NetSwitch { level: la, .. }, NodeKind::NetSwitch { level: lb, .. }) => {
                    sw_links.insert((a, b), e.id());
                    if lb > la {
                        uplinks.entry(a).or_default().push(b);
                    }
                }
                _ => {}
            }
        }
        let hosts = (0..host_nodes.len()).map(|_| OnceLock::new()).collect();
        PathCache {
            local,
            host_nodes,
            hosts,
            nic_leaf,
            sw_links,
            uplinks,
        }
    }

    fn host(&self, t: &Topology, h: usize) -> &HostPaths {
        self.hosts[h].get_or_init(|| HostPaths::compute(t, &self.host_nodes[h], &self.local))
    }
}

impl Topology {
    pub(crate) fn path_cache(&self) -> &PathCache {
        self.cache.0.get_or_init(|| PathCache::build(self))
    }

    /// The route from `from` to `to` with NCCL's path rules. Inside a host any node may be an
    /// endpoint; across hosts the route is GPU → the NIC on the peer NIC's rail (else its own) →
    /// fabric → peer's NIC → GPU with type NET. `None` when there is no route (or an endpoint is
    /// a fabric switch).
    pub fn path(&self, from: NodeId, to: NodeId) -> Option<Path> {
        self.path_via(from, to, 0)
    }

    /// Like [`Topology::path`], with the receiving GPU's `spread`-th NIC (modulo the NICs tied
    /// for its best path, its local NIC first) where the route crosses hosts: NCCL spreads a
    /// GPU's channels over those NICs (a ring's channel enters a host through the NIC its search
    /// gave it, next to the GPU it enters; `ncclTopoGetLocalNet` turns the channel into one).
    pub fn path_via(&self, from: NodeId, to: NodeId, spread: usize) -> Option<Path> {
        let n = self.graph.node_count();
        if from.index() >= n || to.index() >= n {
            return None;
        }
        if from == to {
            return Some(Path::local());
        }
        let c = self.path_cache();
        let (ha, _) = c.local[from.index()];
        let (hb, _) = c.local[to.index()];
        if ha == u32::MAX || hb == u32::MAX {
            return None;
        }
        if ha == hb {
            let hp = c.host(self, ha as usize);
            if hp.base_idx.contains_key(&to) {
                return hp.get(from, to, &c.local).cloned();
            }
            // Paths to PCI switches are not cached (NCCL has none); compute this one.
            let nodes = &c.host_nodes[ha as usize];
            let paths = bfs_to(self, to, nodes, &c.local);
            return paths[c.local[from.index()].1 as usize].clone();
        }
        let hpa = c.host(self, ha as usize);
        let hpb = c.host(self, hb as usize);
        let nb = match hpb.local_nics.get(&to) {
            Some(ns) if !ns.is_empty() => ns[spread % ns.len()],
            _ => exit_nic(self, hpb, to, &c.local)?,
        };
        let na = rail_nic(self, c, (hpa, hpb), from, nb)
            .or_else(|| exit_nic(self, hpa, from, &c.local))?;
        let p1 = if na == from {
            Path::local()
        } else {
            hpa.get(from, na, &c.local)?.clone()
        };
        let p3 = if nb == to {
            Path::local()
        } else {
            // Receiving side: NIC → GPU, computed towards the GPU base.
            hpb.get(nb, to, &c.local)?.clone()
        };
        // ECMP stand-in: the spine follows the host pair and the NIC, so a host pair's NICs
        // spread over the spines as hashed flows do.
        let nic_ord = hpa.nics.iter().position(|&x| x == na).unwrap_or(0);
        let fabric = self.fabric_route(c, na, nb, ha as usize + hb as usize + nic_ord)?;
        let mid = Path {
            kind: PathType::Net,
            bw_gbps: fabric
                .iter()
                .map(|l| self.graph[*l].bw_gbps)
                .fold(f64::INFINITY, f64::min),
            lat_us: fabric.iter().map(|l| self.graph[*l].lat_us).sum(),
            links: fabric,
        };
        Some(p1.join(&mid, PathType::Net).join(&p3, PathType::Net))
    }

    /// Switch-level route NIC → NIC: through a shared leaf, or leaf → spine → leaf with the
    /// spine chosen by `salt` (ECMP-like spreading: the caller mixes in the hosts and the NIC).
    fn fabric_route(
        &self,
        c: &PathCache,
        na: NodeId,
        nb: NodeId,
        salt: usize,
    ) -> Option<Vec<LinkId>> {
        let (la, up_a, _) = *c.nic_leaf.get(&na)?;
        let (lb, _, down_b) = *c.nic_leaf.get(&nb)?;
        if la == lb {
            return Some(vec![up_a, down_b]);
        }
        if let Some(l) = c.sw_links.get(&(la, lb)) {
            return Some(vec![up_a, *l, down_b]);
        }
        let spines = c.uplinks.get(&la)?;
        for k in 0..spines.len() {
            let s = spines[(salt + k) % spines.len()];
            if let (Some(l1), Some(l2)) = (c.sw_links.get(&(la, s)), c.sw_links.get(&(s, lb))) {
                return Some(vec![up_a, *l1, *l2, down_b]);
            }
        }
        None
    }

    /// Path between the GPUs of two ranks.
    pub fn gpu_path(&self, rank_a: u32, rank_b: u32) -> Option<Path> {
        self.path(self.gpu_of_rank(rank_a)?, self.gpu_of_rank(rank_b)?)
    }

    /// Path between the GPUs of two ranks for channel `spread` ([`Topology::path_via`]).
    pub fn gpu_path_via(&self, rank_a: u32, rank_b: u32, spread: usize) -> Option<Path> {
        self.path_via(self.gpu_of_rank(rank_a)?, self.gpu_of_rank(rank_b)?, spread)
    }

    /// How many NICs a GPU's traffic from other hosts spreads over (1 without a tie or NIC).
    pub fn local_nic_count(&self, rank: u32) -> usize {
        let Some(g) = self.gpu_of_rank(rank) else {
            return 1;
        };
        let c = self.path_cache();
        let (h, _) = c.local[g.index()];
        if h == u32::MAX {
            return 1;
        }
        c.host(self, h as usize)
            .local_nics
            .get(&g)
            .map_or(1, |v| v.len().max(1))
    }

    /// NIC nodes of a host, in graph order.
    pub fn nics_of_host(&self, host: u32) -> Vec<NodeId> {
        let c = self.path_cache();
        c.host_nodes
            .get(host as usize)
            .map(|ns| {
                ns.iter()
                    .copied()
                    .filter(|n| matches!(self.graph[*n].kind, NodeKind::Nic(_)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Host of a rank's GPU (0 if the rank does not exist).
    pub fn host_of_rank(&self, rank: u32) -> u32 {
        self.gpu_of_rank(rank)
            .and_then(|n| self.graph[n].host)
            .unwrap_or(0)
    }

    /// Ranks of the GPUs of a host, ascending.
    pub fn gpus_of_host(&self, host: u32) -> Vec<u32> {
        let c = self.path_cache();
        let mut v: Vec<u32> = c
            .host_nodes
            .get(host as usize)
            .map(|ns| {
                ns.iter()
                    .filter_map(|n| self.gpu(*n).map(|g| g.rank))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// The NIC a GPU uses for traffic leaving its host (NCCL's "local NIC"), if any.
    pub fn local_nic(&self, gpu: NodeId) -> Option<NodeId> {
        let c = self.path_cache();
        let (h, _) = *c.local.get(gpu.index())?;
        if h == u32::MAX {
            return None;
        }
        c.host(self, h as usize).local_nic(gpu)
    }
}

/// The NIC on `from`'s host that NCCL sends to `nb` through, when `from` is a GPU that reaches
/// it within PXN: the NIC with `nb`'s index on its host (`ncclTopoGetNetDev`: a point-to-point
/// peer's local NIC, reached through an NVLink peer by PXN; a ring's channel uses one NIC index
/// on every host), else one on `nb`'s leaf switch (its rail), so the traffic stays on one leaf.
/// `from`'s own NIC when it is that one; `None` without such a NIC.
fn rail_nic(
    t: &Topology,
    c: &PathCache,
    (hp, hpb): (&HostPaths, &HostPaths),
    from: NodeId,
    nb: NodeId,
) -> Option<NodeId> {
    if !matches!(t.graph[from].kind, NodeKind::Gpu(_)) {
        return None;
    }
    let reach = |n: NodeId| {
        hp.get(from, n, &c.local)
            .filter(|p| p.kind <= PathType::Pxn)
            .map(|p| (n, p.bw_gbps, p.kind))
    };
    let same_index = hpb
        .nics
        .iter()
        .position(|&x| x == nb)
        .and_then(|i| hp.nics.get(i).copied());
    if let Some(n) = same_index.filter(|&n| reach(n).is_some()) {
        return Some(n);
    }
    let (leaf, _, _) = *c.nic_leaf.get(&nb)?;
    let own = hp.local_nic(from);
    if own.is_some_and(|n| c.nic_leaf.get(&n).is_some_and(|x| x.0 == leaf)) {
        return own;
    }
    hp.nics
        .iter()
        .copied()
        .filter(|n| c.nic_leaf.get(n).is_some_and(|x| x.0 == leaf))
        .filter_map(reach)
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.2.cmp(&a.2)))
        .map(|x| x.0)
}

/// The NIC traffic from `n` leaves its host through.
fn exit_nic(t: &Topology, hp: &HostPaths, n: NodeId, local: &[(u32, u32)]) -> Option<NodeId> {
    match &t.graph[n].kind {
        NodeKind::Nic(_) => Some(n),
        NodeKind::Gpu(_) => hp.local_nic(n),
        _ => hp
            .nics
            .iter()
            .copied()
            .filter_map(|x| hp.get(n, x, local).map(|p| (x, p.bw_gbps, p.kind)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.2.cmp(&a.2)))
            .map(|x| x.0),
    }
}
