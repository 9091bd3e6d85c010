//! Paths between components with NCCL's rules (nccl-2.28-facts.md §2.3–2.5).
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

use super::build::LOC_BW;
use super::model::*;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// NCCL's path types, best first: a path is as good as its worst hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PathType {
    /// To itself.
    Loc,
    /// NVLink, direct or through NVSwitches.
    Nvl,
    /// NVLink through one intermediate GPU.
    Nvb,
    /// GPU ↔ its CPU over C2C (Grace).
    C2c,
    /// Through at most one PCIe switch.
    Pix,
    /// Through several PCIe switches, without the host bridge.
    Pxb,
    /// GPU – C2C – CPU – PCIe – NIC.
    P2c,
    /// GPU → NVLink → peer GPU → PCIe → NIC.
    Pxn,
    /// Through a PCIe host bridge (the CPU).
    Phb,
    /// Across the SMP interconnect between NUMA domains.
    Sys,
    /// Through the network, between hosts.
    Net,
    /// Disconnected.
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

    fn of_link(kind: LinkKind) -> PathType {
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
    fn local() -> Path {
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

    fn join(&self, other: &Path, kind: PathType) -> Path {
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

#[derive(Debug, Default)]
struct HostPaths {
    /// Base node → index into `paths`.
    base_idx: HashMap<NodeId, usize>,
    n_local: usize,
    /// `paths[base * n_local + src]`: path from local node `src` to `base`.
    paths: Vec<Option<Path>>,
    /// GPU → the NIC it uses for traffic leaving the host.
    local_nic: HashMap<NodeId, NodeId>,
    nics: Vec<NodeId>,
}

fn is_base(k: &NodeKind) -> bool {
    matches!(
        k,
        NodeKind::Gpu(_) | NodeKind::Cpu(_) | NodeKind::Nic(_) | NodeKind::NvSwitch
    )
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

/// NCCL's BFS towards `base` over the nodes of one host. Returns, per local node, the path from
/// that node to `base`.
fn bfs_to(t: &Topology, base: NodeId, nodes: &[NodeId], local: &[(u32, u32)]) -> Vec<Option<Path>> {
    let g = &t.graph;
    let host = local[base.index()].0;
    let li = |n: NodeId| local[n.index()].1 as usize;
    let mut paths: Vec<Option<Path>> = vec![None; nodes.len()];
    let mut start = Path::local();
    if let NodeKind::Nic(nic) = &g[base].kind {
        // NCCL's base is the NIC's network port: every path to it is capped by the port speed.
        start.bw_gbps = nic.speed_gbps;
    }
    paths[li(base)] = Some(start);
    let mut frontier = vec![base];
    let mut in_next = vec![false; nodes.len()];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &node in &frontier {
            let p = paths[li(node)].clone().expect("frontier nodes have paths");
            let node_is_gpu = matches!(g[node].kind, NodeKind::Gpu(_));
            // Links rem → node: the last hop of a path from rem to base via node.
            for e in g.edges_directed(node, Direction::Incoming) {
                let rem = e.source();
                if local[rem.index()].0 != host || rem == node {
                    continue;
                }
                let l = e.weight();
                let rem_is_gpu = matches!(g[rem].kind, NodeKind::Gpu(_));
                // A GPU relays only one NVLink hop, from another GPU, next to the base.
                if node != base
                    && node_is_gpu
                    && !(l.kind == LinkKind::NvLink && rem_is_gpu && p.links.len() <= 1)
                {
                    continue;
                }
                let bw = p.bw_gbps.min(l.bw_gbps);
                let ri = li(rem);
                let better = match &paths[ri] {
                    None => true,
                    Some(rp) => rp.links.len() > p.links.len() && rp.bw_gbps < bw,
                };
                if !better {
                    continue;
                }
                let mut ty = PathType::of_link(l.kind);
                let node_pci = matches!(g[node].kind, NodeKind::PciSwitch(_));
                let rem_pci = matches!(g[rem].kind, NodeKind::PciSwitch(_));
                if node_pci && rem_pci {
                    ty = PathType::Pxb;
                }
                let touches_cpu = matches!(g[node].kind, NodeKind::Cpu(_))
                    || matches!(g[rem].kind, NodeKind::Cpu(_));
                if l.kind == LinkKind::Pcie && touches_cpu {
                    ty = PathType::Phb;
                }
                if node_is_gpu && p.kind == PathType::Nvl && ty == PathType::Nvl {
                    ty = PathType::Nvb;
                }
                let mut links = Vec::with_capacity(p.links.len() + 1);
                links.push(e.id());
                links.extend_from_slice(&p.links);
                paths[ri] = Some(Path {
                    kind: p.kind.max(ty),
                    bw_gbps: bw,
                    lat_us: p.lat_us + l.lat_us,
                    links,
                });
                if !in_next[ri] {
                    in_next[ri] = true;
                    next.push(rem);
                }
            }
        }
        for &n in &next {
            in_next[li(n)] = false;
        }
        frontier = next;
    }
    paths
}

impl HostPaths {
    fn compute(t: &Topology, nodes: &[NodeId], local: &[(u32, u32)]) -> HostPaths {
        let g = &t.graph;
        let n_local = nodes.len();
        let bases: Vec<NodeId> = nodes
            .iter()
            .copied()
            .filter(|n| is_base(&g[*n].kind))
            .collect();
        let mut hp = HostPaths {
            base_idx: bases.iter().enumerate().map(|(i, b)| (*b, i)).collect(),
            n_local,
            paths: Vec::with_capacity(bases.len() * n_local),
            local_nic: HashMap::new(),
            nics: Vec::new(),
        };
        for &b in &bases {
            hp.paths.extend(bfs_to(t, b, nodes, local));
        }
        let li = |n: NodeId| local[n.index()].1 as usize;
        let gpus: Vec<NodeId> = bases
            .iter()
            .copied()
            .filter(|n| matches!(g[*n].kind, NodeKind::Gpu(_)))
            .collect();
        let cpus: Vec<NodeId> = bases
            .iter()
            .copied()
            .filter(|n| matches!(g[*n].kind, NodeKind::Cpu(_)))
            .collect();
        hp.nics = bases
            .iter()
            .copied()
            .filter(|n| matches!(g[*n].kind, NodeKind::Nic(_)))
            .collect();
        let get = |hp: &HostPaths, a: NodeId, b: NodeId| -> Option<Path> {
            let bi = *hp.base_idx.get(&b)?;
            hp.paths[bi * n_local + li(a)].clone()
        };
        let set = |hp: &mut HostPaths, a: NodeId, b: NodeId, p: Path| {
            let bi = hp.base_idx[&b];
            hp.paths[bi * n_local + li(a)] = Some(p);
        };
        // The CPU with the fewest hops from a node (NCCL's local CPU).
        let local_cpu = |hp: &HostPaths, n: NodeId| -> Option<NodeId> {
            cpus.iter()
                .copied()
                .filter_map(|c| get(hp, n, c).map(|p| (p.hops(), c)))
                .min_by_key(|(h, c)| (*h, c.index()))
                .map(|(_, c)| c)
        };

        // 1. GPU pairs beyond the P2P level go through the destination's CPU.
        let amd = cpus.iter().any(|c| {
            matches!(&g[*c].kind, NodeKind::Cpu(cpu) if cpu.arch == CpuArch::X86_64 && cpu.vendor == CpuVendor::Amd)
        });
        let p2p_level = if amd && gpus.len() <= 2 {
            PathType::Sys
        } else {
            PathType::Pxb
        };
        for &a in &gpus {
            for &b in &gpus {
                if a == b {
                    continue;
                }
                let Some(p) = get(&hp, a, b) else { continue };
                if p.kind <= p2p_level {
                    continue;
                }
                if let Some(c) = local_cpu(&hp, b) {
                    if let (Some(p1), Some(p2)) = (get(&hp, a, c), get(&hp, c, b)) {
                        let kind = merge_via_cpu(p1.kind, p2.kind);
                        set(&mut hp, a, b, p1.join(&p2, kind));
                    }
                }
            }
        }
        // 2. Grace-style machines: GPU –C2C– CPU –PCIe– NIC is P2C.
        for &gp in &gpus {
            let Some(c) = local_cpu(&hp, gp) else {
                continue;
            };
            let gc = get(&hp, gp, c).map(|p| p.kind);
            for &n in &hp.nics.clone() {
                let nc = get(&hp, n, c).map(|p| p.kind);
                if gc == Some(PathType::C2c) && nc == Some(PathType::Phb) {
                    for (x, y) in [(gp, n), (n, gp)] {
                        if let Some(mut p) = get(&hp, x, y) {
                            p.kind = p.kind.min(PathType::P2c);
                            set(&mut hp, x, y, p);
                        }
                    }
                }
            }
        }
        // 3. PXN: reach a NIC through the NVLink peer that sits next to it.
        let mut proxy: HashMap<(NodeId, NodeId), NodeId> = HashMap::new();
        for &n in &hp.nics.clone() {
            let Some(p) = local_gpu(&hp, &gpus, n, &get) else {
                continue;
            };
            let Some(pn) = get(&hp, p, n) else { continue };
            if pn.kind > PathType::Pxb {
                continue;
            }
            for &gp in &gpus {
                if gp == p {
                    continue;
                }
                let (Some(gpp), Some(gn)) = (get(&hp, gp, p), get(&hp, gp, n)) else {
                    continue;
                };
                if gpp.kind <= PathType::Nvl && (pn.bw_gbps > gn.bw_gbps || gn.kind > PathType::Pxn)
                {
                    set(&mut hp, gp, n, gpp.join(&pn, PathType::Pxn));
                    proxy.insert((gp, n), p);
                }
            }
        }
        // 4. Without GPUDirect RDMA, GPU ↔ NIC traffic bounces through the GPU's CPU.
        for &gp in &gpus {
            for &n in &hp.nics.clone() {
                let Some(p) = get(&hp, gp, n) else { continue };
                if p.kind >= PathType::Phb {
                    continue;
                }
                let via = proxy.get(&(gp, n)).copied().unwrap_or(gp);
                let dist = if via == gp {
                    p.kind
                } else {
                    get(&hp, via, n).map(|q| q.kind).unwrap_or(PathType::Sys)
                };
                let gdr_gpu = t.gpu(via).is_some_and(|x| x.gdr);
                let gdr_nic = matches!(&g[n].kind, NodeKind::Nic(x) if x.gdr);
                if gdr_gpu && gdr_nic && dist <= PathType::Pxb {
                    continue;
                }
                let Some(c) = local_cpu(&hp, gp) else {
                    continue;
                };
                for (x, y) in [(gp, n), (n, gp)] {
                    if let (Some(p1), Some(p2)) = (get(&hp, x, c), get(&hp, c, y)) {
                        let kind = merge_via_cpu(p1.kind, p2.kind);
                        set(&mut hp, x, y, p1.join(&p2, kind));
                    }
                }
            }
        }
        // The NIC each GPU sends through: best bandwidth, then best type; ties are spread by
        // device index so GPUs sharing a switch use different NICs.
        for &gp in &gpus {
            let mut best: Vec<(NodeId, f64, PathType)> = Vec::new();
            for &n in &hp.nics {
                if let Some(p) = get(&hp, gp, n) {
                    best.push((n, p.bw_gbps, p.kind));
                }
            }
            let Some(max_bw) = best.iter().map(|b| b.1).reduce(f64::max) else {
                continue;
            };
            best.retain(|b| b.1 >= max_bw - 1e-9);
            let min_ty = best.iter().map(|b| b.2).min().expect("non-empty");
            best.retain(|b| b.2 == min_ty);
            let dev = t.gpu(gp).map(|x| x.dev).unwrap_or(0) as usize;
            hp.local_nic.insert(gp, best[dev % best.len()].0);
        }
        hp
    }

    fn get(&self, a: NodeId, b: NodeId, local: &[(u32, u32)]) -> Option<&Path> {
        let bi = *self.base_idx.get(&b)?;
        self.paths[bi * self.n_local + local[a.index()].1 as usize].as_ref()
    }
}

/// The GPU closest to a NIC: best bandwidth, then best type, then first.
fn local_gpu<F>(hp: &HostPaths, gpus: &[NodeId], nic: NodeId, get: &F) -> Option<NodeId>
where
    F: Fn(&HostPaths, NodeId, NodeId) -> Option<Path>,
{
    let mut best: Option<(NodeId, f64, PathType)> = None;
    for &gp in gpus {
        if let Some(p) = get(hp, gp, nic) {
            let better = match best {
                None => true,
                Some((_, bw, ty)) => {
                    p.bw_gbps > bw + 1e-9 || (p.bw_gbps >= bw - 1e-9 && p.kind < ty)
                }
            };
            if better {
                best = Some((gp, p.bw_gbps, p.kind));
            }
        }
    }
    best.map(|b| b.0)
}

/// Type of a path stitched at a CPU: PHB + C2C is P2C, otherwise the worse of the two.
fn merge_via_cpu(a: PathType, b: PathType) -> PathType {
    match (a, b) {
        (PathType::C2c, PathType::Phb) | (PathType::Phb, PathType::C2c) => PathType::P2c,
        _ => a.max(b),
    }
}

impl Topology {
    pub(crate) fn path_cache(&self) -> &PathCache {
        self.cache.0.get_or_init(|| PathCache::build(self))
    }

    /// The route from `from` to `to` with NCCL's path rules. Inside a host any node may be an
    /// endpoint; across hosts the route is GPU → its NIC → fabric → peer's NIC → GPU with type
    /// NET. `None` when there is no route (or an endpoint is a fabric switch).
    pub fn path(&self, from: NodeId, to: NodeId) -> Option<Path> {
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
        let na = exit_nic(self, hpa, from, &c.local)?;
        let nb = exit_nic(self, hpb, to, &c.local)?;
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
        let fabric = self.fabric_route(c, na, nb, ha as usize + hb as usize)?;
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
    /// spine chosen by `salt` (ECMP-like spreading).
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
        c.host(self, h as usize).local_nic.get(&gpu).copied()
    }
}

/// The NIC traffic from `n` leaves its host through.
fn exit_nic(t: &Topology, hp: &HostPaths, n: NodeId, local: &[(u32, u32)]) -> Option<NodeId> {
    match &t.graph[n].kind {
        NodeKind::Nic(_) => Some(n),
        NodeKind::Gpu(_) => hp.local_nic.get(&n).copied(),
        _ => hp
            .nics
            .iter()
            .copied()
            .filter_map(|x| hp.get(n, x, local).map(|p| (x, p.bw_gbps, p.kind)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.2.cmp(&a.2)))
            .map(|x| x.0),
    }
}
