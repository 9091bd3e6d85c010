//! One host's paths: NCCL's breadth-first search towards every base node (GPU, CPU, NIC,
//! NVSwitch) and NCCL's post-processing (P2P fallback through the CPU, P2C, PXN, GDR).

use super::model::*;
use super::paths::{Path, PathType};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub(super) struct HostPaths {
    /// Base node → index into `paths`.
    pub(super) base_idx: HashMap<NodeId, usize>,
    pub(super) n_local: usize,
    /// `paths[base * n_local + src]`: path from local node `src` to `base`.
    pub(super) paths: Vec<Option<Path>>,
    /// Per GPU, every NIC tied for its best path, the one it uses for traffic leaving the host
    /// (its local NIC, [`HostPaths::local_nic`]) first, then the others in turn.
    pub(super) local_nics: HashMap<NodeId, Vec<NodeId>>,
    pub(super) nics: Vec<NodeId>,
}

fn is_base(k: &NodeKind) -> bool {
    matches!(
        k,
        NodeKind::Gpu(_) | NodeKind::Cpu(_) | NodeKind::Nic(_) | NodeKind::NvSwitch
    )
}

/// NCCL's BFS towards `base` over the nodes of one host. Returns, per local node, the path from
/// that node to `base`.
pub(super) fn bfs_to(
    t: &Topology,
    base: NodeId,
    nodes: &[NodeId],
    local: &[(u32, u32)],
) -> Vec<Option<Path>> {
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

/// One host as the post-processing passes see it: the topology, the local index of every node,
/// and the host's GPUs and CPUs.
struct HostNodes<'a> {
    t: &'a Topology,
    local: &'a [(u32, u32)],
    gpus: Vec<NodeId>,
    cpus: Vec<NodeId>,
}

impl HostNodes<'_> {
    fn get(&self, hp: &HostPaths, a: NodeId, b: NodeId) -> Option<Path> {
        hp.get(a, b, self.local).cloned()
    }

    fn set(&self, hp: &mut HostPaths, a: NodeId, b: NodeId, p: Path) {
        let bi = hp.base_idx[&b];
        hp.paths[bi * hp.n_local + self.local[a.index()].1 as usize] = Some(p);
    }

    /// The CPU with the fewest hops from a node (NCCL's local CPU).
    fn local_cpu(&self, hp: &HostPaths, n: NodeId) -> Option<NodeId> {
        self.cpus
            .iter()
            .copied()
            .filter_map(|c| self.get(hp, n, c).map(|p| (p.hops(), c)))
            .min_by_key(|(h, c)| (*h, c.index()))
            .map(|(_, c)| c)
    }

    /// Step 1: GPU pairs beyond the P2P level go through the destination's CPU.
    fn route_distant_gpu_pairs_via_cpu(&self, hp: &mut HostPaths) {
        let g = &self.t.graph;
        let gpus = &self.gpus;
        let amd = self.cpus.iter().any(|c| {
            matches!(&g[*c].kind, NodeKind::Cpu(cpu) if cpu.arch == CpuArch::X86_64 && cpu.vendor == CpuVendor::Amd)
        });
        let p2p_level = if amd && gpus.len() <= 2 {
            PathType::Sys
        } else {
            PathType::Pxb
        };
        for &a in gpus {
            for &b in gpus {
                if a == b {
                    continue;
                }
                let Some(p) = self.get(hp, a, b) else {
                    continue;
                };
                if p.kind <= p2p_level {
                    continue;
                }
                if let Some(c) = self.local_cpu(hp, b) {
                    if let (Some(p1), Some(p2)) = (self.get(hp, a, c), self.get(hp, c, b)) {
                        let kind = merge_via_cpu(p1.kind, p2.kind);
                        self.set(hp, a, b, p1.join(&p2, kind));
                    }
                }
            }
        }
    }

    /// Step 2: Grace-style machines: GPU –C2C– CPU –PCIe– NIC is P2C.
    fn mark_c2c_nic_paths_p2c(&self, hp: &mut HostPaths) {
        for &gp in &self.gpus {
            let Some(c) = self.local_cpu(hp, gp) else {
                continue;
            };
            let gc = self.get(hp, gp, c).map(|p| p.kind);
            for &n in &hp.nics.clone() {
                let nc = self.get(hp, n, c).map(|p| p.kind);
                if gc == Some(PathType::C2c) && nc == Some(PathType::Phb) {
                    for (x, y) in [(gp, n), (n, gp)] {
                        if let Some(mut p) = self.get(hp, x, y) {
                            p.kind = p.kind.min(PathType::P2c);
                            self.set(hp, x, y, p);
                        }
                    }
                }
            }
        }
    }

    /// Step 3, PXN: reach a NIC through the NVLink peer that sits next to it. Returns the proxy GPU
    /// of every (GPU, NIC) pair rerouted this way.
    fn route_nics_via_nvlink_peers(&self, hp: &mut HostPaths) -> HashMap<(NodeId, NodeId), NodeId> {
        let gpus = &self.gpus;
        let mut proxy: HashMap<(NodeId, NodeId), NodeId> = HashMap::new();
        for &n in &hp.nics.clone() {
            let Some(p) = self.local_gpu(hp, n) else {
                continue;
            };
            let Some(pn) = self.get(hp, p, n) else {
                continue;
            };
            if pn.kind > PathType::Pxb {
                continue;
            }
            for &gp in gpus {
                if gp == p {
                    continue;
                }
                let (Some(gpp), Some(gn)) = (self.get(hp, gp, p), self.get(hp, gp, n)) else {
                    continue;
                };
                if gpp.kind <= PathType::Nvl && (pn.bw_gbps > gn.bw_gbps || gn.kind > PathType::Pxn)
                {
                    self.set(hp, gp, n, gpp.join(&pn, PathType::Pxn));
                    proxy.insert((gp, n), p);
                }
            }
        }
        proxy
    }

    /// Step 4: without GPUDirect RDMA, GPU ↔ NIC traffic bounces through the GPU's CPU.
    fn route_non_gdr_nic_paths_via_cpu(
        &self,
        hp: &mut HostPaths,
        proxy: &HashMap<(NodeId, NodeId), NodeId>,
    ) {
        let t = self.t;
        let g = &t.graph;
        for &gp in &self.gpus {
            for &n in &hp.nics.clone() {
                let Some(p) = self.get(hp, gp, n) else {
                    continue;
                };
                if p.kind >= PathType::Phb {
                    continue;
                }
                let via = proxy.get(&(gp, n)).copied().unwrap_or(gp);
                let dist = if via == gp {
                    p.kind
                } else {
                    self.get(hp, via, n)
                        .map(|q| q.kind)
                        .unwrap_or(PathType::Sys)
                };
                let gdr_gpu = t.gpu(via).is_some_and(|x| x.gdr);
                let gdr_nic = matches!(&g[n].kind, NodeKind::Nic(x) if x.gdr);
                if gdr_gpu && gdr_nic && dist <= PathType::Pxb {
                    continue;
                }
                let Some(c) = self.local_cpu(hp, gp) else {
                    continue;
                };
                for (x, y) in [(gp, n), (n, gp)] {
                    if let (Some(p1), Some(p2)) = (self.get(hp, x, c), self.get(hp, c, y)) {
                        let kind = merge_via_cpu(p1.kind, p2.kind);
                        self.set(hp, x, y, p1.join(&p2, kind));
                    }
                }
            }
        }
    }

    /// The NIC each GPU sends through: best bandwidth, then best type; ties are spread by
    /// device index so GPUs sharing a switch use different NICs.
    fn choose_local_nics(&self, hp: &mut HostPaths) {
        for &gp in &self.gpus {
            let ties = self.nic_ties(hp, gp);
            if !ties.is_empty() {
                hp.local_nics.insert(gp, ties);
            }
        }
    }

    /// The NICs tied for `gp`'s best path (bandwidth, then type), its local NIC first: the tie
    /// at its device index, then the rest in turn (NCCL's `ncclTopoGetLocalNet` over channels).
    fn nic_ties(&self, hp: &HostPaths, gp: NodeId) -> Vec<NodeId> {
        let best = self.best_ends(hp, &hp.nics, |n| (gp, n));
        if best.is_empty() {
            return best;
        }
        let dev = self.t.gpu(gp).map(|x| x.dev).unwrap_or(0) as usize;
        let first = dev % best.len();
        (0..best.len())
            .map(|i| best[(first + i) % best.len()])
            .collect()
    }

    /// Those of `ends` whose path `ends_of(end)` (from, to) is best: the highest bandwidth, then
    /// the best type; in `ends`' order.
    fn best_ends(
        &self,
        hp: &HostPaths,
        ends: &[NodeId],
        ends_of: impl Fn(NodeId) -> (NodeId, NodeId),
    ) -> Vec<NodeId> {
        let mut best: Vec<(NodeId, f64, PathType)> = Vec::new();
        for &n in ends {
            let (a, b) = ends_of(n);
            if let Some(p) = self.get(hp, a, b) {
                best.push((n, p.bw_gbps, p.kind));
            }
        }
        let Some(max_bw) = best.iter().map(|b| b.1).reduce(f64::max) else {
            return Vec::new();
        };
        best.retain(|b| b.1 >= max_bw - 1e-9);
        let min_ty = best.iter().map(|b| b.2).min().expect("non-empty");
        best.retain(|b| b.2 == min_ty);
        best.into_iter().map(|b| b.0).collect()
    }

    /// The GPU next to `nic` that proxies other GPUs' traffic to it (PXN): of the GPUs with the
    /// best path to it, the one that ranks it first among its own tied NICs, then graph order
    /// (NCCL's `ncclTopoGetLocalGpu`: the GPU whose local NIC it is at the lowest channel), so
    /// NICs under one switch get different proxies.
    fn local_gpu(&self, hp: &HostPaths, nic: NodeId) -> Option<NodeId> {
        let tied = self.best_ends(hp, &self.gpus, |g| (g, nic));
        tied.into_iter()
            .enumerate()
            .min_by_key(|&(i, g)| {
                let rank = self.nic_ties(hp, g).iter().position(|&n| n == nic);
                (rank.unwrap_or(usize::MAX), i)
            })
            .map(|(_, g)| g)
    }
}

impl HostPaths {
    pub(super) fn compute(t: &Topology, nodes: &[NodeId], local: &[(u32, u32)]) -> HostPaths {
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
            local_nics: HashMap::new(),
            nics: Vec::new(),
        };
        for &b in &bases {
            hp.paths.extend(bfs_to(t, b, nodes, local));
        }
        let of_kind = |want: fn(&NodeKind) -> bool| -> Vec<NodeId> {
            bases
                .iter()
                .copied()
                .filter(|n| want(&g[*n].kind))
                .collect()
        };
        let host = HostNodes {
            t,
            local,
            gpus: of_kind(|k| matches!(k, NodeKind::Gpu(_))),
            cpus: of_kind(|k| matches!(k, NodeKind::Cpu(_))),
        };
        hp.nics = of_kind(|k| matches!(k, NodeKind::Nic(_)));
        host.route_distant_gpu_pairs_via_cpu(&mut hp);
        host.mark_c2c_nic_paths_p2c(&mut hp);
        let proxy = host.route_nics_via_nvlink_peers(&mut hp);
        host.route_non_gdr_nic_paths_via_cpu(&mut hp, &proxy);
        host.choose_local_nics(&mut hp);
        hp
    }

    /// The NIC `gpu` uses for traffic leaving the host.
    pub(super) fn local_nic(&self, gpu: NodeId) -> Option<NodeId> {
        self.local_nics.get(&gpu).and_then(|v| v.first().copied())
    }

    pub(super) fn get(&self, a: NodeId, b: NodeId, local: &[(u32, u32)]) -> Option<&Path> {
        let bi = *self.base_idx.get(&b)?;
        self.paths[bi * self.n_local + local[a.index()].1 as usize].as_ref()
    }
}

/// Type of a path stitched at a CPU: PHB + C2C is P2C, otherwise the worse of the two.
fn merge_via_cpu(a: PathType, b: PathType) -> PathType {
    match (a, b) {
        (PathType::C2c, PathType::Phb) | (PathType::Phb, PathType::C2c) => PathType::P2c,
        _ => a.max(b),
    }
}
