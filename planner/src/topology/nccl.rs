//! NCCL 2.28's constant tables that turn XML attributes into bandwidths and node kinds
//! (NCCL's `src/graph/topo.h` and `src/graph/topo.cc`: `kvDictPciGen`, `kvDictPciClass`,
//! `ncclTopoGetInterCpuBw`). Per-GPU tables are in `gpus.rs`.

use super::model::{CpuArch, CpuVendor, LinkKind};

/// NCCL's LOC_BW (GB/s): self paths, CPU-attached NICs, Broadcom `pcilink`s.
pub const LOC_BW: f64 = 5000.0;

/// Default one-way latencies per link kind (µs). NCCL has none per link; these are typical
/// figures so that path latencies are not zero. Documented in docs/topology.md.
pub fn default_lat(kind: LinkKind) -> f64 {
    match kind {
        LinkKind::NvLink | LinkKind::C2c => 0.2,
        LinkKind::Pcie => 0.3,
        LinkKind::InterCpu => 0.3,
        LinkKind::Network => 0.0,
        LinkKind::Local => 0.0,
    }
}

/// What a `<pci class>` means to NCCL (prefix dictionary, default PCI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PciClass {
    Bridge,
    NvSwitch,
    Cpu,
    Gpu,
    Nic,
}

pub(super) fn pci_class(class: &str) -> Option<(PciClass, bool)> {
    let c = class.trim().to_ascii_lowercase();
    let hex = c.strip_prefix("0x")?;
    if hex.is_empty() || hex.len() > 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(if c.starts_with("0x060400") || c.starts_with("0x080100") {
        (PciClass::Bridge, true)
    } else if c.starts_with("0x068000") {
        (PciClass::NvSwitch, true)
    } else if c.starts_with("0x068001") {
        (PciClass::Cpu, true)
    } else if c.starts_with("0x03") {
        (PciClass::Gpu, true)
    } else if c.starts_with("0x02") {
        (PciClass::Nic, true)
    } else {
        (PciClass::Bridge, false)
    })
}

pub(super) fn inter_cpu_bw(arch: CpuArch, vendor: CpuVendor, family: u32, model: u32) -> f64 {
    match (arch, vendor) {
        (CpuArch::X86_64, CpuVendor::Intel) => {
            if family == 6 && model >= 0xCF {
                40.0
            } else if family == 6 && model >= 0x8F {
                22.0
            } else if family == 6 && model >= 0x55 {
                10.0
            } else {
                6.0
            }
        }
        (CpuArch::X86_64, CpuVendor::Amd) => 16.0,
        (CpuArch::X86_64, CpuVendor::Zhaoxin) => {
            if family == 7 && model == 0x5B {
                9.0
            } else {
                6.0
            }
        }
        (CpuArch::Ppc64, _) => 32.0,
        (CpuArch::Arm64, _) => 6.0,
        _ => LOC_BW,
    }
}
