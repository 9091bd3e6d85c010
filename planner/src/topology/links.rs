//! The links NCCL adds after creating nodes: NVLink, C2C and Broadcom `pcilink`s.

use super::build::{link, Builder};
use super::error::TopoError;
use super::gpus;
use super::model::*;
use super::nccl::LOC_BW;

/// Largest `count` accepted on an `<nvlink>` or `<c2c>`.
const MAX_LINKS: i64 = 1024;

impl Builder<'_> {
    pub(super) fn nvswitch(&mut self) -> NodeId {
        if let Some(n) = self.nvs {
            return n;
        }
        let n = self.topo.add_node(Some(self.host), NodeKind::NvSwitch);
        self.nvs = Some(n);
        n
    }

    /// Adds `bw` to an existing link of the same kind a→b (NCCL aggregates NVLinks), or a new one.
    pub(super) fn connect(&mut self, a: NodeId, b: NodeId, kind: LinkKind, bw: f64, count: u32) {
        if let Some(&e) = self.aggregated.get(&(a, b, kind)) {
            let l = &mut self.topo.graph[e];
            l.bw_gbps += bw;
            l.count = l.count.saturating_add(count);
        } else {
            let e = self.topo.add_link(a, b, link(kind, bw, count));
            self.aggregated.insert((a, b, kind), e);
        }
    }

    pub(super) fn wire_gpus(&mut self, _cpus: &[NodeId]) -> Result<(), TopoError> {
        let docs = std::mem::take(&mut self.gpu_docs);
        for (id, g, cpu, name) in &docs {
            let sm = self.topo.gpu(*id).map(|g| g.sm).unwrap_or(0);
            for (i, l) in g.nvlinks.iter().enumerate() {
                let lname = if l.at.line > 0 {
                    format!(
                        "<nvlink target=\"{}\"> at line {}, column {} (in {name})",
                        l.target, l.at.line, l.at.col
                    )
                } else {
                    format!("{name} → <nvlink target=\"{}\"> #{i}", l.target)
                };
                if l.count <= 0 {
                    return Err(TopoError::semantic(
                        self.file,
                        lname,
                        format!(
                            "count {} gives zero bandwidth: an <nvlink> needs count >= 1",
                            l.count
                        ),
                    ));
                }
                // NVML reports at most 18 links per GPU (NVLink 5: 18); anything far above is a
                // typo, not hardware.
                if l.count > MAX_LINKS {
                    return Err(TopoError::semantic(
                        self.file,
                        lname,
                        format!(
                            "count {} is not a plausible number of NVLinks (at most {MAX_LINKS})",
                            l.count
                        ),
                    ));
                }
                let count = l.count as u32;
                let bw = count as f64 * gpus::nvlink_bw(sm);
                let tclass = l
                    .tclass
                    .as_deref()
                    .unwrap_or("0x068000")
                    .to_ascii_lowercase();
                let target = l.target.to_ascii_lowercase();
                if tclass.starts_with("0x03") {
                    match self.gpu_by_bus.get(&target).copied() {
                        Some(t) if t == *id => self
                            .warnings
                            .push(format!("{}: {lname}: NVLink to itself ignored", self.file)),
                        Some(t) => self.connect(*id, t, LinkKind::NvLink, bw, count),
                        None => self.warnings.push(format!(
                            "{}: {lname}: target GPU is not in the file; link ignored",
                            self.file
                        )),
                    }
                } else if tclass.starts_with("0x068001") {
                    self.connect(*id, *cpu, LinkKind::NvLink, bw, count);
                    self.connect(*cpu, *id, LinkKind::NvLink, bw, count);
                } else {
                    // NVSwitch (or the hidden target fffffff:ff:ff.0): every switch collapses
                    // into one NVSwitch node, link counts aggregate.
                    let nvs = self.nvswitch();
                    self.connect(*id, nvs, LinkKind::NvLink, bw, count);
                    self.connect(nvs, *id, LinkKind::NvLink, bw, count);
                }
            }
            for (i, c) in g.c2c.iter().enumerate() {
                let cname = format!("{name} → <c2c> #{i}");
                if c.bw <= 0 || c.count <= 0 || c.count > MAX_LINKS || c.bw > 1 << 40 {
                    return Err(TopoError::semantic(
                        self.file,
                        cname,
                        format!(
                            "bw {} MB/s × count {} must be > 0 (and count at most {MAX_LINKS})",
                            c.bw, c.count
                        ),
                    ));
                }
                let bw = c.bw as f64 * c.count as f64 / 1000.0;
                self.connect(*id, *cpu, LinkKind::C2c, bw, c.count as u32);
                self.connect(*cpu, *id, LinkKind::C2c, bw, c.count as u32);
            }
        }
        self.gpu_docs = docs;
        self.skeleton_nvlinks();
        self.warn_one_way_nvlinks();
        Ok(())
    }

    /// NCCL takes each GPU's `<nvlink>` as written, so GPU-to-GPU NVLinks listed on one side
    /// only (or with other counts) are used one way: the other direction goes over PCIe. That is
    /// kept, and said, since it is most often a truncated or hand-edited dump.
    fn warn_one_way_nvlinks(&mut self) {
        let mut pairs: Vec<(NodeId, NodeId, u32, u32)> = Vec::new();
        for (&(a, b, kind), &e) in &self.aggregated {
            let both_gpus = self.topo.gpu(a).is_some() && self.topo.gpu(b).is_some();
            if kind != LinkKind::NvLink || !both_gpus {
                continue;
            }
            let back = self
                .aggregated
                .get(&(b, a, kind))
                .map(|&r| self.topo.graph[r].count)
                .unwrap_or(0);
            let count = self.topo.graph[e].count;
            // Each unequal pair once: from the side with more links.
            if count > back {
                pairs.push((a, b, count, back));
            }
        }
        pairs.sort();
        for (a, b, count, back) in pairs {
            let (ga, gb) = (self.topo.gpu(a), self.topo.gpu(b));
            let (Some(ga), Some(gb)) = (ga, gb) else {
                continue;
            };
            self.warnings.push(format!(
                "{}: NVLinks are asymmetric: GPU {} ({}) lists {count} to GPU {} ({}), which lists {back} back; each direction is used as written{}",
                self.file,
                ga.rank,
                ga.busid,
                gb.rank,
                gb.busid,
                if back == 0 {
                    format!(", so GPU {} reaches GPU {} over PCIe", gb.rank, ga.rank)
                } else {
                    String::new()
                }
            ));
        }
    }

    pub(super) fn wire_pcilinks(&mut self) -> Result<(), TopoError> {
        let links = std::mem::take(&mut self.pcilinks);
        for (from, l, name) in links {
            match self.switch_by_bus.get(&l.target.to_ascii_lowercase()).copied() {
                Some(to) => {
                    self.topo.add_link(from, to, link(LinkKind::Local, LOC_BW, 1));
                }
                None => self.warnings.push(format!(
                    "{}: {name} → <pcilink target=\"{}\">: target is not a PCI switch in the file; ignored",
                    self.file, l.target
                )),
            }
        }
        Ok(())
    }
}
