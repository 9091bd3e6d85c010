//! The devices of a `<cpu>`'s PCI tree: a `<pci>` element by its class, and the GPUs, NICs and
//! PCI switches it becomes.

use super::build::{elem, link, Builder};
use super::doc::*;
use super::error::TopoError;
use super::gpus;
use super::model::*;
use super::nccl::{pci_class, PciClass};

impl<'a> Builder<'a> {
    pub(super) fn pci(
        &mut self,
        p: &'a PciDoc,
        parent: NodeId,
        cpu: NodeId,
        path: &str,
    ) -> Result<(), TopoError> {
        let name = elem("pci", "busid", &p.busid, &p.at, path);
        let class = match &p.class {
            Some(c) => Some(pci_class(c).ok_or_else(|| {
                TopoError::semantic(
                    self.file,
                    &name,
                    format!(
                        "unknown PCI class \"{c}\": expected a hex class code such as 0x060400 \
                         (bridge), 0x030200 (GPU), 0x020700 (InfiniBand NIC), 0x068000 (NVSwitch)"
                    ),
                )
            })?),
            None => None,
        };
        self.check_bus(&p.busid, &name)?;
        if let Some(g) = &p.gpu {
            let up = self.pci_link(p, &name)?;
            return self.gpu(p, g, parent, cpu, up, &format!("{path}.gpu"));
        }
        if let Some(nic) = &p.nic {
            let up = self.pci_link(p, &name)?;
            return self.nic(nic, parent, Some(&p.busid), up, &format!("{path}.nic"));
        }
        let is_leaf = p.pci.is_empty();
        let kind = match class {
            Some((k, known)) => {
                if !known {
                    self.warnings.push(format!(
                        "{}: {name}: class {} is not one NCCL distinguishes; treated as a PCI bridge, as NCCL does",
                        self.file,
                        p.class.as_deref().unwrap_or("")
                    ));
                }
                k
            }
            None if self.skeleton.is_some() => {
                if is_leaf {
                    PciClass::Nic
                } else {
                    PciClass::Bridge
                }
            }
            None => {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    "required attribute `class` is missing",
                ))
            }
        };
        match kind {
            PciClass::Bridge => self.bridge(p, parent, cpu, &name, path),
            PciClass::Gpu => {
                if self.skeleton.is_some() {
                    let up = self.pci_link(p, &name)?;
                    self.synth_gpu(&p.busid, parent, up);
                } else {
                    self.warnings.push(format!(
                        "{}: {name}: GPU-class PCI device without a <gpu> element is ignored (as NCCL does)",
                        self.file
                    ));
                }
                Ok(())
            }
            PciClass::Nic => {
                if self.skeleton.is_some() {
                    let up = self.pci_link(p, &name)?;
                    self.synth_nic(&p.busid, parent, up);
                } else {
                    self.warnings.push(format!(
                        "{}: {name}: NIC-class PCI device without a <nic> element is ignored (as NCCL does)",
                        self.file
                    ));
                }
                Ok(())
            }
            // NCCL creates no node for these without a <gpu>/<nic> child.
            PciClass::NvSwitch | PciClass::Cpu => Ok(()),
        }
    }

    fn gpu(
        &mut self,
        p: &PciDoc,
        g: &'a GpuDoc,
        parent: NodeId,
        cpu: NodeId,
        up: Link,
        path: &str,
    ) -> Result<(), TopoError> {
        let name = elem("gpu", "busid", &p.busid, &g.at, path);
        let Some(rank) = g.rank else {
            self.warnings.push(format!(
                "{}: {name}: <gpu> without `rank` is skipped entirely (as NCCL does)",
                self.file
            ));
            return Ok(());
        };
        let req = |v: Option<i64>, key: &str| {
            v.ok_or_else(|| {
                TopoError::semantic(
                    self.file,
                    &name,
                    format!("required attribute `{key}` is missing"),
                )
            })
        };
        let sm = req(g.sm, "sm")?;
        let dev = req(g.dev, "dev")?;
        let gdr = req(g.gdr, "gdr")?;
        self.check_gpu(&name, sm, dev)?;
        // Bounds well beyond any real machine, so sums and casts downstream stay exact.
        if !(0..=1 << 24).contains(&rank)
            || !(0..=1 << 16).contains(&dev)
            || !(0..=10_000).contains(&sm)
        {
            return Err(TopoError::semantic(
                self.file,
                &name,
                format!("rank {rank}, dev {dev} or sm {sm} is out of range (rank 0..2^24, dev 0..65536, sm 0..10000)"),
            ));
        }
        let device = p
            .device
            .as_deref()
            .and_then(super::xml::parse_int)
            .and_then(|d| gpus::model_by_pci_device(d as u16));
        let sm = sm as u32;
        let id = self.topo.add_node(
            Some(self.host),
            NodeKind::Gpu(Gpu {
                rank: rank as u32,
                dev: dev as u32,
                busid: p.busid.to_ascii_lowercase(),
                sm,
                gdr: gdr != 0,
                mem_bw_gbps: device
                    .map(|m| m.mem_bw_gbps)
                    .unwrap_or(gpus::default_mem_bw(sm)),
                model: device.map(|m| m.name.to_string()),
            }),
        );
        self.topo.add_duplex(parent, id, up);
        self.gpu_by_bus.insert(p.busid.to_ascii_lowercase(), id);
        self.ranks.push((rank, name.clone(), id));
        self.gpu_docs.push((id, g, cpu, name));
        Ok(())
    }

    pub(super) fn nic(
        &mut self,
        nic: &NicDoc,
        parent: NodeId,
        busid: Option<&str>,
        up: Link,
        path: &str,
    ) -> Result<(), TopoError> {
        for (i, net) in nic.nets.iter().enumerate() {
            let npath = format!("{path}.nets[{i}]");
            let name = elem(
                "net",
                "name",
                net.name.as_deref().unwrap_or(""),
                &net.at,
                &npath,
            );
            let Some(dev) = net.dev else {
                self.warnings.push(format!(
                    "{}: {name}: <net> without `dev` is ignored (as NCCL does)",
                    self.file
                ));
                continue;
            };
            let speed_mbps = match net.speed {
                Some(s) if s < 0 => {
                    return Err(TopoError::semantic(
                        self.file,
                        name,
                        format!("speed {s} Mb/s is negative: bandwidth must be > 0"),
                    ))
                }
                Some(0) | None => {
                    self.warnings.push(format!(
                        "{}: {name}: no speed; NCCL's default 10000 Mb/s (1.25 GB/s) used",
                        self.file
                    ));
                    10000
                }
                Some(s) if s > 1_000_000_000 => {
                    return Err(TopoError::semantic(
                        self.file,
                        name,
                        format!("speed {s} Mb/s is not plausible (at most 10^9 Mb/s)"),
                    ))
                }
                Some(s) => s,
            };
            let latency = net.latency.unwrap_or(0.0);
            if !(0.0..=1e6).contains(&latency) {
                return Err(TopoError::semantic(
                    self.file,
                    name,
                    "latency must be between 0 and 10^6 µs",
                ));
            }
            let guid = net
                .guid
                .as_deref()
                .and_then(super::xml::parse_int)
                .map(|g| g as u64)
                .unwrap_or(dev as u64);
            let id = self.topo.add_node(
                Some(self.host),
                NodeKind::Nic(Nic {
                    busid: busid.map(|b| b.to_ascii_lowercase()),
                    name: net.name.clone().unwrap_or_else(|| format!("net{dev}")),
                    dev: dev.max(0) as u32,
                    speed_gbps: speed_mbps as f64 / 8000.0,
                    port: net.port.unwrap_or(0).max(0) as u32,
                    guid,
                    max_conn: net.maxconn.unwrap_or(64).clamp(0, u32::MAX as i64) as u32,
                    gdr: net.gdr.unwrap_or(0) != 0,
                    coll: net.coll.unwrap_or(0) != 0,
                    latency_us: latency,
                }),
            );
            self.topo.add_duplex(parent, id, up.clone());
        }
        Ok(())
    }

    /// A PCI switch and everything below it.
    fn bridge(
        &mut self,
        p: &'a PciDoc,
        parent: NodeId,
        cpu: NodeId,
        name: &str,
        path: &str,
    ) -> Result<(), TopoError> {
        let up = self.pci_link(p, name)?;
        let id = self.topo.add_node(
            Some(self.host),
            NodeKind::PciSwitch(PciSwitch {
                busid: p.busid.to_ascii_lowercase(),
            }),
        );
        self.topo.add_duplex(parent, id, up);
        self.switch_by_bus.insert(p.busid.to_ascii_lowercase(), id);
        for l in &p.pcilinks {
            self.pcilinks.push((id, l, name.to_string()));
        }
        for (i, c) in p.pci.iter().enumerate() {
            self.pci(c, id, cpu, &format!("{path}.pci[{i}]"))?;
        }
        // Skeletons that list no GPU at all (AWS p5): one GPU behind every PCIe switch
        // whose children are all leaves, as the vendor's file comment describes.
        if self.gpu_per_switch && !p.pci.is_empty() && p.pci.iter().all(|c| c.pci.is_empty()) {
            let busid = self.synth_busid(&p.busid);
            let gl = match p.pci.first() {
                Some(c) => self.pci_link(c, name)?,
                None => link(LinkKind::Pcie, gpus::pci_bw("", 16), 1),
            };
            self.synth_gpu(&busid, id, gl);
            self.synthesized_bus.push(busid);
        }
        Ok(())
    }
}
