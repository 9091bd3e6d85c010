//! [`TopoDoc`] → [`Topology`] with NCCL's semantics (NCCL's `src/graph/topo.cc`,
//! `ncclTopoGetSystemFromXml`). The PCI tree's devices are in `devices.rs`, skeleton
//! completion is in `skeleton.rs`, NCCL's constant tables in `nccl.rs`.

use super::doc::*;
use super::error::TopoError;
use super::gpus;
use super::model::*;
use super::nccl::{default_lat, inter_cpu_bw, LOC_BW};
use super::skeleton::{any_gpu, gpu_class_leaves, skeleton_choice, unknown_model, Skeleton};
use super::LoadOptions;
use std::collections::HashMap;

pub(super) fn link(kind: LinkKind, bw: f64, count: u32) -> Link {
    Link {
        kind,
        bw_gbps: bw,
        lat_us: default_lat(kind),
        count,
    }
}

/// Where an element is, for errors: XML line/column when known, else its JSON path.
pub(super) fn elem(tag: &str, key: &str, val: &str, at: &At, path: &str) -> String {
    let mut s = format!("<{tag}");
    if !val.is_empty() {
        s.push_str(&format!(" {key}=\"{val}\""));
    }
    s.push('>');
    if at.line > 0 {
        s.push_str(&format!(" at line {}, column {}", at.line, at.col));
    } else {
        s.push_str(&format!(" ({path})"));
    }
    s
}

pub(super) struct Builder<'a> {
    pub(super) file: &'a str,
    pub(super) topo: Topology,
    pub(super) warnings: &'a mut Vec<String>,
    pub(super) skeleton: Option<Skeleton>,
    /// busid (lower case) → node, for GPUs and PCI switches.
    pub(super) gpu_by_bus: HashMap<String, NodeId>,
    pub(super) switch_by_bus: HashMap<String, NodeId>,
    pub(super) seen_bus: HashMap<String, String>,
    pub(super) nvs: Option<NodeId>,
    pub(super) virt_nic_cpu: Option<NodeId>,
    /// (gpu node, its doc, element name) to wire NVLinks/C2C after every GPU exists.
    pub(super) gpu_docs: Vec<(NodeId, &'a GpuDoc, NodeId, String)>,
    /// Skeleton GPUs created (node), in document order, for NVLink synthesis.
    pub(super) synth_gpus: Vec<NodeId>,
    pub(super) pcilinks: Vec<(NodeId, &'a PciLinkDoc, String)>,
    /// (rank as written, element name) to check duplicates.
    pub(super) ranks: Vec<(i64, String, NodeId)>,
    pub(super) next_synth_nic: u32,
    pub(super) host: u32,
    /// Skeleton without any GPU-class device: put one GPU under each leaf-level switch.
    pub(super) gpu_per_switch: bool,
    pub(super) synthesized_bus: Vec<String>,
    /// NVLink and C2C links made by `connect`, so aggregating one is a lookup, not a walk over
    /// an NVSwitch's every edge.
    /// CUDA device index → the `<gpu>` that has it, to refuse duplicates.
    pub(super) devs: HashMap<i64, String>,
    pub(super) aggregated: HashMap<(NodeId, NodeId, LinkKind), LinkId>,
}

/// Builds the single-machine topology of `doc.system` (host 0). Returns the assumptions applied
/// if the file was a skeleton.
pub fn build_system(
    doc: &TopoDoc,
    file: &str,
    opts: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<(Topology, Option<Assume>), TopoError> {
    let skeleton = if any_gpu(doc) {
        if let Some(g) = &opts.gpu_model {
            let model = gpus::find_model(g).ok_or_else(|| unknown_model(g))?;
            warnings.push(format!(
                "{file}: --gpu-model {} ignored for NVLink/SM: the file has <gpu> elements, which win \
                 (memory bandwidth of {} used)",
                model.name, model.name
            ));
        }
        None
    } else {
        Some(skeleton_choice(doc, file, opts, warnings)?)
    };
    let assume = skeleton.as_ref().map(|s| Assume {
        gpu: Some(s.model.name.to_string()),
        nic_gbps: Some(s.nic_gbps),
    });
    let mut b = Builder {
        file,
        topo: Topology::new(),
        warnings,
        skeleton,
        gpu_by_bus: HashMap::new(),
        switch_by_bus: HashMap::new(),
        seen_bus: HashMap::new(),
        nvs: None,
        virt_nic_cpu: None,
        gpu_docs: Vec::new(),
        synth_gpus: Vec::new(),
        pcilinks: Vec::new(),
        ranks: Vec::new(),
        next_synth_nic: 0,
        host: 0,
        gpu_per_switch: false,
        synthesized_bus: Vec::new(),
        aggregated: HashMap::new(),
        devs: HashMap::new(),
    };
    b.gpu_per_switch = b.skeleton.is_some() && gpu_class_leaves(doc) == 0;
    b.run(doc, opts)?;
    let mut topo = b.topo;
    topo.validate().map_err(|source| TopoError::Model {
        file: file.to_string(),
        source,
    })?;
    Ok((topo, assume))
}

impl<'a> Builder<'a> {
    fn run(&mut self, doc: &'a TopoDoc, opts: &LoadOptions) -> Result<(), TopoError> {
        if doc.version != JSON_VERSION {
            return Err(TopoError::semantic(
                self.file,
                "\"version\"",
                format!(
                    "version {} is not supported; this topoplan reads version 1",
                    doc.version
                ),
            ));
        }
        let mut cpus = Vec::new();
        let mut numa_seen: HashMap<i64, String> = HashMap::new();
        for (ci, cpu) in doc.system.cpus.iter().enumerate() {
            let path = format!("system.cpus[{ci}]");
            let numa = cpu.numaid.map(|n| n.to_string()).unwrap_or_default();
            let name = elem("cpu", "numaid", &numa, &cpu.at, &path);
            let numa_id = match cpu.numaid {
                Some(n) => n,
                None if self.skeleton.is_some() => ci as i64,
                None => {
                    return Err(TopoError::semantic(
                        self.file,
                        name,
                        "required attribute `numaid` is missing",
                    ))
                }
            };
            if let Some(prev) = numa_seen.insert(numa_id, name.clone()) {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    format!("numaid {numa_id} already used by {prev}"),
                ));
            }
            let id = self.cpu_node(cpu, numa_id);
            cpus.push(id);
            for (pi, p) in cpu.pci.iter().enumerate() {
                self.pci(p, id, id, &format!("{path}.pci[{pi}]"))?;
            }
            for (ni, nic) in cpu.nics.iter().enumerate() {
                // NCCL gives every CPU-attached <nic> the same id, so they all land on one NIC
                // node under the first CPU that has one.
                let parent = *self.virt_nic_cpu.get_or_insert(id);
                // NCCL joins it to the CPU with a PCI link of LOC_BW (so paths to it are PHB).
                let l = link(LinkKind::Pcie, LOC_BW, 1);
                self.nic(nic, parent, None, l, &format!("{path}.nics[{ni}]"))?;
            }
        }
        self.wire_gpus(&cpus)?;
        self.wire_pcilinks()?;
        // Every pair of NUMA domains is joined by the SMP interconnect.
        for &a in &cpus {
            for &b in &cpus {
                if a != b {
                    let bw = match &self.topo.graph[a].kind {
                        NodeKind::Cpu(c) => inter_cpu_bw(c.arch, c.vendor, c.family_id, c.model_id),
                        _ => LOC_BW,
                    };
                    self.topo.add_link(a, b, link(LinkKind::InterCpu, bw, 1));
                }
            }
        }
        self.finish_ranks()?;
        if !self.synthesized_bus.is_empty() {
            self.warnings.push(format!(
                "{}: the skeleton lists no GPUs: assumed one GPU behind each of the {} leaf PCIe \
                 switches, with made-up bus ids {} (leaf devices without a class taken as NICs)",
                self.file,
                self.synthesized_bus.len(),
                self.synthesized_bus.join(", ")
            ));
        }
        if let Some(g) = &opts.gpu_model {
            if self.skeleton.is_none() {
                let m = gpus::find_model(g).ok_or_else(|| unknown_model(g))?;
                for n in self.topo.graph.node_indices() {
                    if let NodeKind::Gpu(gpu) = &mut self.topo.graph[n].kind {
                        gpu.mem_bw_gbps = m.mem_bw_gbps;
                        gpu.model = Some(m.name.to_string());
                    }
                }
            }
        }
        if self.topo.gpus().next().is_none() {
            self.warnings
                .push(format!("{}: the topology has no GPUs", self.file));
        }
        Ok(())
    }

    pub(super) fn check_bus(&mut self, busid: &str, name: &str) -> Result<(), TopoError> {
        let key = busid.to_ascii_lowercase();
        if let Some(prev) = self.seen_bus.insert(key, name.to_string()) {
            return Err(TopoError::semantic(
                self.file,
                name,
                format!("duplicate bus id {busid}: already used by {prev}"),
            ));
        }
        Ok(())
    }

    pub(super) fn pci_link(&mut self, p: &PciDoc, name: &str) -> Result<Link, TopoError> {
        let width = match p.link_width {
            Some(w) if w < 0 => {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    format!("link_width {w} is negative: PCIe bandwidth must be > 0"),
                ))
            }
            Some(w) if w > 1024 => {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    format!("link_width {w} is not a plausible PCIe width (at most 1024 lanes)"),
                ))
            }
            Some(w) => w,
            None if self.skeleton.is_some() => 16,
            None => {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    "required attribute `link_width` is missing",
                ))
            }
        };
        let speed = match &p.link_speed {
            Some(s) => s.as_str(),
            None if self.skeleton.is_some() => "",
            None => {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    "required attribute `link_speed` is missing",
                ))
            }
        };
        if !speed.is_empty() && !gpus::pci_speed(speed).1 {
            self.warnings.push(format!(
                "{}: {name}: link_speed \"{speed}\" is not in NCCL's table; NCCL's default (8 GT/s, Gen3) used",
                self.file
            ));
        }
        Ok(link(LinkKind::Pcie, gpus::pci_bw(speed, width), 1))
    }

    /// The CPU (NUMA domain) node of a `<cpu>`: NCCL's arch and vendor by prefix.
    fn cpu_node(&mut self, cpu: &CpuDoc, numa_id: i64) -> NodeId {
        let arch = match cpu.arch.as_deref() {
            Some(a) if a.starts_with("x86_64") => CpuArch::X86_64,
            Some(a) if a.starts_with("arm64") => CpuArch::Arm64,
            Some(a) if a.starts_with("ppc64") => CpuArch::Ppc64,
            _ => CpuArch::Unknown,
        };
        let vendor = match cpu.vendor.as_deref() {
            Some(v) if v.starts_with("GenuineIntel") => CpuVendor::Intel,
            Some(v) if v.starts_with("AuthenticAMD") => CpuVendor::Amd,
            Some(v) if v.starts_with("CentaurHauls") || v.starts_with("  Shanghai  ") => {
                CpuVendor::Zhaoxin
            }
            _ => CpuVendor::Other,
        };
        self.topo.add_node(
            Some(self.host),
            NodeKind::Cpu(Cpu {
                numa_id: numa_id.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                arch,
                vendor,
                family_id: cpu.familyid.unwrap_or(0).max(0) as u32,
                model_id: cpu.modelid.unwrap_or(0).max(0) as u32,
            }),
        )
    }

    /// What one `<gpu>` may not be: of an unknown generation, a CUDA device index already
    /// taken, or one GPU more than a machine holds.
    pub(super) fn check_gpu(&mut self, name: &str, sm: i64, dev: i64) -> Result<(), TopoError> {
        if !gpus::KNOWN_SM.contains(&u32::try_from(sm).unwrap_or(0)) {
            return Err(TopoError::semantic(
                self.file,
                name,
                format!(
                    "sm {sm} is not the compute capability of a known GPU generation ({})",
                    gpus::KNOWN_SM
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if let Some(first) = self.devs.insert(dev, name.to_string()) {
            return Err(TopoError::semantic(
                self.file,
                name,
                format!("duplicate dev {dev}: already used by {first}"),
            ));
        }
        if self.devs.len() > gpus::MAX_GPUS_PER_HOST {
            return Err(TopoError::semantic(
                self.file,
                name,
                format!(
                    "more than {} GPUs in one machine (NCCL's limit per machine)",
                    gpus::MAX_GPUS_PER_HOST
                ),
            ));
        }
        Ok(())
    }

    fn finish_ranks(&mut self) -> Result<(), TopoError> {
        let mut sorted: Vec<_> = self.ranks.clone();
        sorted.sort_by_key(|r| r.0);
        for w in sorted.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(TopoError::semantic(
                    self.file,
                    &w[1].1,
                    format!("duplicate rank {}: already used by {}", w[1].0, w[0].1),
                ));
            }
        }
        // A dump taken on node k of a job holds ranks k*n..; topoplan's model is dense from 0.
        let dense = sorted.iter().enumerate().all(|(i, r)| r.0 == i as i64);
        if !dense && !sorted.is_empty() {
            self.warnings.push(format!(
                "{}: GPU ranks {} are not 0..{}; renumbered in rank order",
                self.file,
                sorted
                    .iter()
                    .map(|r| r.0.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                sorted.len() - 1
            ));
            for (i, (_, _, id)) in sorted.iter().enumerate() {
                if let NodeKind::Gpu(g) = &mut self.topo.graph[*id].kind {
                    g.rank = i as u32;
                }
            }
        }
        Ok(())
    }
}
