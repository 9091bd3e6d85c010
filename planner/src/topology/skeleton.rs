//! Completing cloud skeleton files (bare `<pci>` leaves, no `<gpu>`, no NVLink) with a GPU
//! model: which model, and the GPUs, NICs and NVLinks it implies (docs/topology.md, "Skeleton
//! files").

use super::build::Builder;
use super::doc::*;
use super::error::TopoError;
use super::gpus::{self, GpuModel, NvFabric};
use super::model::*;
use super::LoadOptions;

/// The skeleton completion in effect, and what was assumed (for warnings and `assume`).
pub(super) struct Skeleton {
    pub(super) model: &'static GpuModel,
    pub(super) nic_gbps: f64,
}

pub(super) fn any_gpu(doc: &TopoDoc) -> bool {
    fn pci_has(p: &PciDoc) -> bool {
        p.gpu.is_some() || p.pci.iter().any(pci_has)
    }
    doc.system.cpus.iter().any(|c| c.pci.iter().any(pci_has))
}

pub(super) fn gpu_class_leaves(doc: &TopoDoc) -> usize {
    fn walk(p: &PciDoc) -> usize {
        let me = usize::from(p.class.as_deref().is_some_and(|c| c.starts_with("0x03")));
        me + p.pci.iter().map(walk).sum::<usize>()
    }
    doc.system
        .cpus
        .iter()
        .flat_map(|c| c.pci.iter())
        .map(walk)
        .sum()
}

fn gpu_leaf_devices(doc: &TopoDoc) -> Vec<(String, u16)> {
    fn walk(p: &PciDoc, out: &mut Vec<(String, u16)>) {
        if let (Some(c), Some(d)) = (&p.class, &p.device) {
            if c.starts_with("0x03") {
                if let Some(x) = crate::topology::xml::parse_int(d) {
                    out.push((p.busid.clone(), x as u16));
                }
            }
        }
        p.pci.iter().for_each(|c| walk(c, out));
    }
    let mut out = Vec::new();
    for c in &doc.system.cpus {
        c.pci.iter().for_each(|p| walk(p, &mut out));
    }
    out
}

pub(super) fn unknown_model(g: &str) -> TopoError {
    TopoError::Unsupported(format!(
        "unknown GPU model `{g}`; known models: {}",
        gpus::model_names()
    ))
}

pub(super) fn skeleton_choice(
    doc: &TopoDoc,
    file: &str,
    opts: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<Skeleton, TopoError> {
    let from_doc = doc.assume.as_ref().and_then(|a| a.gpu.clone());
    let (model, how) = if let Some(g) = &opts.gpu_model {
        (
            gpus::find_model(g).ok_or_else(|| unknown_model(g))?,
            "--gpu".to_string(),
        )
    } else if let Some(g) = &from_doc {
        (
            gpus::find_model(g).ok_or_else(|| unknown_model(g))?,
            "the file's `assume.gpu`".to_string(),
        )
    } else {
        let devs = gpu_leaf_devices(doc);
        match devs
            .iter()
            .find_map(|(b, d)| gpus::model_by_pci_device(*d).map(|m| (b, d, m)))
        {
            Some((bus, d, m)) => (
                m,
                format!("PCI device id {d:#06x} of <pci busid=\"{bus}\">"),
            ),
            None => (
                gpus::find_model(gpus::DEFAULT_SKELETON_GPU).expect("default model exists"),
                "the default (pass --gpu-model MODEL to choose)".to_string(),
            ),
        }
    };
    let nic_gbps = opts
        .nic_gbps
        .or_else(|| doc.assume.as_ref().and_then(|a| a.nic_gbps))
        .unwrap_or(model.nic_gbps);
    if !(nic_gbps.is_finite() && nic_gbps > 0.0) {
        return Err(TopoError::Unsupported(format!(
            "NIC speed {nic_gbps} Gbit/s must be finite and > 0"
        )));
    }
    let fabric = match model.fabric {
        NvFabric::NvSwitch => format!(
            "{} NVLinks per GPU to one NVSwitch ({:.1} GB/s per GPU)",
            model.nvlinks,
            model.nvlinks as f64 * gpus::nvlink_bw(model.sm)
        ),
        NvFabric::CubeMesh => "the DGX-1 hybrid cube mesh (6 NVLinks per GPU, 8 GPUs)".to_string(),
        NvFabric::None => "no NVLink".to_string(),
    };
    warnings.push(format!(
        "{file}: skeleton file (no <gpu> elements): assumed GPU model {} (sm {}) from {how}, {fabric}; \
         skeleton NICs at {nic_gbps} Gbit/s with GPUDirect RDMA; ranks in file order",
        model.name, model.sm
    ));
    Ok(Skeleton { model, nic_gbps })
}

impl Builder<'_> {
    /// A bus id for a GPU the file does not list: device 0x1f, function 7 on the switch's bus
    /// (bumped until unused), so it cannot collide with a listed device.
    pub(super) fn synth_busid(&mut self, switch: &str) -> String {
        let base = switch.rsplit_once(':').map(|(a, _)| a).unwrap_or("0000:00");
        for f in (0..8).rev() {
            for d in (0..0x20).rev() {
                let b = format!("{base}:{d:02x}.{f}");
                if !self.seen_bus.contains_key(&b) {
                    self.seen_bus.insert(b.clone(), "a synthesized GPU".into());
                    return b;
                }
            }
        }
        format!("{base}:ff.f")
    }

    pub(super) fn synth_gpu(&mut self, busid: &str, parent: NodeId, up: Link) {
        let sk = self.skeleton.as_ref().expect("skeleton mode");
        let k = self.synth_gpus.len() as u32;
        let id = self.topo.add_node(
            Some(self.host),
            NodeKind::Gpu(Gpu {
                rank: k,
                dev: k,
                busid: busid.to_ascii_lowercase(),
                sm: sk.model.sm,
                gdr: true,
                mem_bw_gbps: sk.model.mem_bw_gbps,
                model: Some(sk.model.name.to_string()),
            }),
        );
        self.topo.add_duplex(parent, id, up);
        self.gpu_by_bus.insert(busid.to_ascii_lowercase(), id);
        self.synth_gpus.push(id);
    }

    pub(super) fn synth_nic(&mut self, busid: &str, parent: NodeId, up: Link) {
        let sk = self.skeleton.as_ref().expect("skeleton mode");
        let k = self.next_synth_nic;
        self.next_synth_nic += 1;
        let id = self.topo.add_node(
            Some(self.host),
            NodeKind::Nic(Nic {
                busid: Some(busid.to_ascii_lowercase()),
                name: format!("nic{k}"),
                dev: k,
                speed_gbps: sk.nic_gbps / 8.0,
                port: 1,
                guid: k as u64,
                max_conn: 64,
                gdr: true,
                coll: false,
                latency_us: 0.0,
            }),
        );
        self.topo.add_duplex(parent, id, up);
    }

    /// NVLinks of the skeleton's GPUs, per the model's fabric.
    pub(super) fn skeleton_nvlinks(&mut self) {
        if let Some(sk) = &self.skeleton {
            let (model, gpus_) = (sk.model, self.synth_gpus.clone());
            let per = gpus::nvlink_bw(model.sm);
            match model.fabric {
                NvFabric::NvSwitch if !gpus_.is_empty() => {
                    let nvs = self.nvswitch();
                    for g in gpus_ {
                        let bw = model.nvlinks as f64 * per;
                        self.connect(g, nvs, LinkKind::NvLink, bw, model.nvlinks);
                        self.connect(nvs, g, LinkKind::NvLink, bw, model.nvlinks);
                    }
                }
                NvFabric::CubeMesh if gpus_.len() == 8 => {
                    for i in 0..8 {
                        for j in 0..8 {
                            let c = gpus::CUBE_MESH[i][j];
                            if c > 0 {
                                self.connect(gpus_[i], gpus_[j], LinkKind::NvLink, c as f64 * per, c);
                            }
                        }
                    }
                }
                NvFabric::CubeMesh => self.warnings.push(format!(
                    "{}: the hybrid cube mesh needs exactly 8 GPUs, the file has {}; no NVLink assumed",
                    self.file,
                    gpus_.len()
                )),
                _ => {}
            }
        }
    }
}
