//! What a misconfiguration costs, predicted by the planner's tuner on the machine's topology:
//! the busbw NCCL's algorithms (ring, tree) reach as configured against as they should.

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol};
use planner::topology::{LinkKind, NodeKind, Topology};
use planner::tuner::{self, Filter};

/// The size costs are quoted at: large enough for bandwidth to dominate.
pub const LARGE: u64 = 256 << 20;
/// Sizes a forced choice is compared at (latency-, mid- and bandwidth-bound).
pub const SIZES: [u64; 4] = [64 << 10, 1 << 20, 16 << 20, LARGE];

/// The machine as the planner sees it.
pub struct Machine {
    pub source: String,
    pub topo: Topology,
    pub planner: Planner,
}

impl Machine {
    pub fn new(source: String, topo: Topology) -> Result<Machine, String> {
        let planner = Planner::new(&topo).map_err(|e| format!("{source}: {e}"))?;
        Ok(Machine {
            source,
            topo,
            planner,
        })
    }

    pub fn nranks(&self) -> u32 {
        self.planner.nranks()
    }

    /// Some GPU has an NVLink (to a peer or to an NVSwitch).
    pub fn has_nvlink(&self) -> bool {
        self.topo.graph.edge_indices().any(|e| {
            let (a, _) = self.topo.graph.edge_endpoints(e).unwrap_or_default();
            self.topo.graph[e].kind == LinkKind::NvLink
                && matches!(self.topo.graph[a].kind, NodeKind::Gpu(_))
        })
    }

    /// One GPU's NVLink bandwidth out, summed (GB/s): the physical ceiling of a ring's busbw.
    pub fn nvlink_gbps(&self) -> f64 {
        let Some(g) = self.topo.gpu_of_rank(0) else {
            return 0.0;
        };
        self.topo
            .graph
            .edges(g)
            .filter(|e| e.weight().kind == LinkKind::NvLink)
            .map(|e| e.weight().bw_gbps)
            .sum()
    }

    /// One GPU's PCIe link bandwidth to its parent (GB/s).
    #[cfg(test)]
    pub fn pcie_gbps(&self) -> f64 {
        let Some(g) = self.topo.gpu_of_rank(0) else {
            return 0.0;
        };
        self.topo
            .graph
            .edges(g)
            .filter(|e| e.weight().kind == LinkKind::Pcie)
            .map(|e| e.weight().bw_gbps)
            .fold(0.0, f64::max)
    }

    /// The busbw the planner predicts with NCCL's own algorithms for `kind` at `bytes`.
    pub fn nccl_busbw(&self, kind: CollectiveKind, bytes: u64, f: &Filter) -> Option<f64> {
        let f = Filter {
            algorithms: Some(
                f.algorithms
                    .clone()
                    .unwrap_or_else(|| vec![Algorithm::Ring, Algorithm::Tree]),
            ),
            protocols: f.protocols.clone(),
            channels: f.channels,
        };
        self.planner
            .choose_filtered(&Collective::new(kind), bytes, &f)
            .map(|c| c.busbw_gbps)
    }

    /// Like [`Machine::nccl_busbw`] with NCCL's collective channels capped at `max`
    /// (NCCL_MAX_NCHANNELS). The model's ring set counts the channels NCCL runs; its tree set
    /// counts search channels, each of which NCCL runs twice.
    pub fn nccl_busbw_capped(
        &self,
        kind: CollectiveKind,
        bytes: u64,
        f: &Filter,
        max: u32,
    ) -> Option<f64> {
        let mut m = self.planner.model().clone();
        if let Some(r) = &mut m.ring {
            r.count = r.count.min(max.max(1));
        }
        if let Some(t) = &mut m.tree {
            t.count = t.count.min(max.div_ceil(2).max(1));
        }
        let f = Filter {
            algorithms: Some(
                f.algorithms
                    .clone()
                    .unwrap_or_else(|| vec![Algorithm::Ring, Algorithm::Tree]),
            ),
            protocols: f.protocols.clone(),
            channels: f.channels,
        };
        let e = tuner::best(&m, kind, bytes, &f)?;
        Some(bytes as f64 / 1000.0 / e.time_us * kind.busbw_factor(m.nranks))
    }

    /// The same machine with P2P between GPUs off: NVLinks unusable, so rings go through host
    /// memory over PCIe (NCCL's SHM transport). `None` when nothing changes or it cannot plan.
    pub fn without_p2p(&self) -> Option<Machine> {
        let mut t = self.topo.clone();
        let before = t.graph.edge_count();
        t.graph.retain_edges(|g, e| g[e].kind != LinkKind::NvLink);
        if t.graph.edge_count() == before {
            return None;
        }
        t.validate().ok()?;
        Machine::new(format!("{} without P2P", self.source), t).ok()
    }

    /// The collective channels NCCL runs on this machine as the planner models them (the ring
    /// search's channels times NCCL's post-search duplication).
    pub fn coll_channels(&self) -> u32 {
        self.planner
            .model()
            .ring
            .as_ref()
            .map(|r| r.count)
            .unwrap_or(0)
    }
}

/// NCCL_ALGO / NCCL_PROTO as a filter over the algorithms topoplan models (Ring, Tree);
/// `Err` names what it cannot model.
pub fn nccl_filter(algo: Option<&str>, proto: Option<&str>) -> Result<Filter, String> {
    let list = |s: &str| -> Vec<String> {
        // "^a,b" excludes; "func:a,b;..." per function: take the AllReduce or global part.
        let part = s
            .split(';')
            .find(|p| p.to_ascii_lowercase().starts_with("allreduce:"))
            .map(|p| p.split_once(':').map(|x| x.1).unwrap_or(p))
            .unwrap_or_else(|| s.split(';').find(|p| !p.contains(':')).unwrap_or(""));
        part.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    let mut f = Filter::default();
    if let Some(a) = algo {
        let exclude = a.trim_start().starts_with('^');
        let names = list(a.trim_start().trim_start_matches('^'));
        let mut chosen = Vec::new();
        for n in &names {
            match n.to_ascii_lowercase().as_str() {
                "ring" => chosen.push(Algorithm::Ring),
                "tree" => chosen.push(Algorithm::Tree),
                _ => {}
            }
        }
        let all = [Algorithm::Ring, Algorithm::Tree];
        let set: Vec<Algorithm> = if exclude {
            all.into_iter().filter(|x| !chosen.contains(x)).collect()
        } else {
            chosen
        };
        if set.is_empty() {
            return Err(format!("NCCL_ALGO={a} leaves no ring or tree to model"));
        }
        f.algorithms = Some(set);
    }
    if let Some(p) = proto {
        let exclude = p.trim_start().starts_with('^');
        let names = list(p.trim_start().trim_start_matches('^'));
        let chosen: Vec<Protocol> = names.iter().filter_map(|n| Protocol::parse(n)).collect();
        let set: Vec<Protocol> = if exclude {
            Protocol::ALL
                .into_iter()
                .filter(|x| !chosen.contains(x))
                .collect()
        } else {
            chosen
        };
        if set.is_empty() {
            return Err(format!(
                "NCCL_PROTO={p} names no protocol (LL, LL128, Simple)"
            ));
        }
        f.protocols = Some(set);
    }
    Ok(f)
}

/// Human size: 64K, 1M, 256M.
pub fn size_name(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{}G", b >> 30)
    } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}M", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{}K", b >> 10)
    } else {
        format!("{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use planner::topology::{load_file, LoadOptions};

    pub fn h200x2() -> Machine {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/topologies/h200x2-topo.xml"
        );
        let t = load_file(std::path::Path::new(p), &LoadOptions::default())
            .unwrap()
            .topology;
        Machine::new("h200x2-topo.xml".into(), t).unwrap()
    }

    #[test]
    fn p2p_off_moves_rings_to_pcie_and_costs_most_of_the_bandwidth() {
        let m = h200x2();
        assert!(m.has_nvlink());
        assert!((m.nvlink_gbps() - 370.8).abs() < 0.5, "{}", m.nvlink_gbps());
        let on = m
            .nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default())
            .unwrap();
        let off = m.without_p2p().unwrap();
        assert!(!off.has_nvlink());
        let off_bw = off
            .nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default())
            .unwrap();
        assert!(on > 250.0, "NVLink ring {on}");
        assert!(
            off_bw < m.pcie_gbps() + 1e-9,
            "PCIe ring {off_bw} above the PCIe link"
        );
        assert!(off_bw < on / 5.0, "{off_bw} vs {on}");
    }

    #[test]
    fn capping_channels_and_forcing_protocols_cost_bandwidth() {
        let m = h200x2();
        let free = m
            .nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default())
            .unwrap();
        let one = m
            .nccl_busbw_capped(CollectiveKind::AllReduce, LARGE, &Filter::default(), 1)
            .unwrap();
        assert!(one < free / 4.0, "{one} vs {free}");
        let ll = nccl_filter(None, Some("LL")).unwrap();
        let ll_bw = m.nccl_busbw(CollectiveKind::AllReduce, LARGE, &ll).unwrap();
        assert!(ll_bw < free * 0.6, "{ll_bw} vs {free}");
        // NCCL's log on this machine: "24 coll channels".
        assert_eq!(m.coll_channels(), 24);
        let two = m
            .nccl_busbw_capped(CollectiveKind::AllReduce, LARGE, &Filter::default(), 2)
            .unwrap();
        assert!(one < two && two < free, "{one} {two} {free}");
    }

    #[test]
    fn nccl_algo_and_proto_syntax() {
        let f = nccl_filter(Some("^tree"), Some("LL128,Simple")).unwrap();
        assert_eq!(f.algorithms, Some(vec![Algorithm::Ring]));
        assert_eq!(f.protocols, Some(vec![Protocol::LL128, Protocol::Simple]));
        let f = nccl_filter(Some("allreduce:tree;broadcast:ring"), None).unwrap();
        assert_eq!(f.algorithms, Some(vec![Algorithm::Tree]));
        assert!(nccl_filter(Some("NVLS"), None).is_err());
        assert!(nccl_filter(None, Some("fast")).is_err());
        assert_eq!(size_name(256 << 20), "256M");
        assert_eq!(size_name(64 << 10), "64K");
    }
}
