//! Known GPU models and NCCL's per-generation bandwidth constants.
//!
//! NVLink bandwidths per link are NCCL 2.28's (`src/graph/topo.h`, `SM*_NVLINK_BW`;
//! `src/graph/topo.cc`, `ncclTopoNVLinkBw`): what NCCL's graph
//! search assumes, not the datasheet figure. Memory bandwidths are datasheet figures (GB/s) and
//! bound local reductions in the simulator.

/// How the GPUs of a skeleton machine are joined by NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvFabric {
    /// No NVLink (PCIe cards).
    None,
    /// Every GPU has `nvlinks` links to one NVSwitch plane (DGX/HGX A100, H100, H200, B200).
    NvSwitch,
    /// The DGX-1 / HGX-1 "hybrid cube mesh" of 8 V100s, 6 links each, no switch.
    CubeMesh,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuModel {
    pub name: &'static str,
    /// Compute capability × 10.
    pub sm: u32,
    pub mem_bw_gbps: f64,
    /// NVLinks per GPU that NCCL would count (0 for PCIe cards).
    pub nvlinks: u32,
    pub fabric: NvFabric,
    /// NIC speed assumed for skeleton files of machines with this GPU, Gbit/s.
    pub nic_gbps: f64,
    /// PCI device ids (vendor 0x10de) of this model.
    pub pci_devices: &'static [u16],
}

const fn m(
    name: &'static str,
    sm: u32,
    mem_bw_gbps: f64,
    nvlinks: u32,
    fabric: NvFabric,
    nic_gbps: f64,
    pci_devices: &'static [u16],
) -> GpuModel {
    GpuModel {
        name,
        sm,
        mem_bw_gbps,
        nvlinks,
        fabric,
        nic_gbps,
        pci_devices,
    }
}

/// Every model `--gpu` accepts.
pub const GPU_MODELS: &[GpuModel] = &[
    m(
        "v100-sxm",
        70,
        900.0,
        6,
        NvFabric::CubeMesh,
        100.0,
        &[0x1db1, 0x1db5, 0x1db8],
    ),
    m(
        "v100-pcie",
        70,
        900.0,
        0,
        NvFabric::None,
        100.0,
        &[0x1db4, 0x1db6],
    ),
    m(
        "a100-sxm",
        80,
        2039.0,
        12,
        NvFabric::NvSwitch,
        200.0,
        &[0x20b0, 0x20b2],
    ),
    m(
        "a100-pcie",
        80,
        1935.0,
        0,
        NvFabric::None,
        200.0,
        &[0x20b5, 0x20f1],
    ),
    m(
        "a800-sxm",
        80,
        2039.0,
        8,
        NvFabric::NvSwitch,
        200.0,
        &[0x20f3],
    ),
    m("a6000", 86, 768.0, 0, NvFabric::None, 100.0, &[0x2230]),
    m("rtx4090", 89, 1008.0, 0, NvFabric::None, 100.0, &[0x2684]),
    m("l20", 89, 864.0, 0, NvFabric::None, 200.0, &[0x26ba]),
    m("l40s", 89, 864.0, 0, NvFabric::None, 200.0, &[0x26b9]),
    m(
        "h100-sxm",
        90,
        3350.0,
        18,
        NvFabric::NvSwitch,
        400.0,
        &[0x2330],
    ),
    m("h100-pcie", 90, 2000.0, 0, NvFabric::None, 400.0, &[0x2331]),
    m("h800", 90, 3350.0, 8, NvFabric::NvSwitch, 400.0, &[0x2324]),
    m(
        "h200-sxm",
        90,
        4800.0,
        18,
        NvFabric::NvSwitch,
        400.0,
        &[0x2335],
    ),
    m(
        "b200",
        100,
        8000.0,
        18,
        NvFabric::NvSwitch,
        400.0,
        &[0x2901],
    ),
];

/// The model a skeleton file is completed with when neither `--gpu` nor the file says otherwise.
pub const DEFAULT_SKELETON_GPU: &str = "h100-sxm";

/// Looks a model up by name, accepting a few spellings (`H100`, `h100_sxm`, `h800-sxm`).
pub fn find_model(name: &str) -> Option<&'static GpuModel> {
    let norm = name.trim().to_ascii_lowercase().replace('_', "-");
    let alias = match norm.as_str() {
        "v100" => "v100-sxm",
        "a100" => "a100-sxm",
        "a800" => "a800-sxm",
        "h100" => "h100-sxm",
        "h200" => "h200-sxm",
        "h800-sxm" => "h800",
        "b200-sxm" => "b200",
        "rtx-4090" | "4090" => "rtx4090",
        "rtx-a6000" => "a6000",
        other => other,
    };
    GPU_MODELS.iter().find(|g| g.name == alias)
}

/// The model with this NVIDIA PCI device id, if known.
pub fn model_by_pci_device(device: u16) -> Option<&'static GpuModel> {
    GPU_MODELS.iter().find(|g| g.pci_devices.contains(&device))
}

/// Names of all models, for help texts and errors.
pub fn model_names() -> String {
    GPU_MODELS
        .iter()
        .map(|g| g.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Compute capabilities of the GPU generations NVIDIA has shipped (`sm` = major × 10 + minor).
/// An `sm` outside this list is a typo or a forged file: its NVLink and memory bandwidths would
/// be invented, so the reader refuses it.
pub const KNOWN_SM: &[u32] = &[
    30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110,
    120, 121,
];

/// Most GPUs one machine may hold: NCCL's topology holds at most `NCCL_TOPO_MAX_NODES` (640)
/// nodes of a kind, and its all-pairs paths make planning quadratic in this number.
pub const MAX_GPUS_PER_HOST: usize = 640;

/// NCCL's bandwidth of one NVLink for a GPU of compute capability `sm` (GB/s).
pub fn nvlink_bw(sm: u32) -> f64 {
    match sm {
        60..=69 => 18.0,
        70..=79 => 20.0,
        86 => 12.0,
        90..=99 => 20.6,
        s if s >= 100 => 40.1,
        // 80..=85, 87..=89, and NCCL's fallback for anything older than sm60.
        _ => 20.0,
    }
}

/// Device memory bandwidth assumed when the model is unknown, by generation (GB/s).
pub fn default_mem_bw(sm: u32) -> f64 {
    match sm {
        0..=69 => 700.0,
        70..=79 => 900.0,
        80..=85 => 2039.0,
        86..=89 => 864.0,
        90..=99 => 3350.0,
        _ => 8000.0,
    }
}

/// NCCL's PCIe generation dictionary (`link_speed` → ×100 Mb/s per lane), matched by prefix in
/// NCCL's order; anything else (including "") maps to 60, Gen3.
pub fn pci_speed(link_speed: &str) -> (u32, bool) {
    const DICT: &[(&str, u32)] = &[
        ("2.5 GT/s", 15),
        ("5 GT/s", 30),
        ("8 GT/s", 60),
        ("16 GT/s", 120),
        ("32 GT/s", 240),
        ("2.5 GT/s PCIe", 15),
        ("5.0 GT/s PCIe", 30),
        ("8.0 GT/s PCIe", 60),
        ("16.0 GT/s PCIe", 120),
        ("32.0 GT/s PCIe", 240),
        ("64.0 GT/s PCIe", 480),
    ];
    for (k, v) in DICT {
        if link_speed.starts_with(k) {
            return (*v, true);
        }
    }
    (60, false)
}

/// NCCL's PCIe link bandwidth in GB/s: width (0 means 16) × per-lane speed / 80.
pub fn pci_bw(link_speed: &str, link_width: i64) -> f64 {
    let w = if link_width == 0 { 16 } else { link_width };
    w as f64 * pci_speed(link_speed).0 as f64 / 80.0
}

/// The DGX-1 V100 hybrid cube mesh: NVLink count between GPU i and j (each row sums to 6).
pub const CUBE_MESH: [[u32; 8]; 8] = [
    [0, 1, 1, 2, 2, 0, 0, 0],
    [1, 0, 2, 1, 0, 2, 0, 0],
    [1, 2, 0, 2, 0, 0, 1, 0],
    [2, 1, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 1, 1, 2],
    [0, 2, 0, 0, 1, 0, 2, 1],
    [0, 0, 1, 0, 1, 2, 0, 2],
    [0, 0, 0, 1, 2, 1, 2, 0],
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bandwidths_match_nccl() {
        assert_eq!(pci_bw("32.0 GT/s PCIe", 0), 48.0);
        assert_eq!(pci_bw("16 GT/s", 16), 24.0);
        assert_eq!(pci_bw("8 GT/s", 16), 12.0);
        // AWS p5 spelling: prefix "32 GT/s" matches.
        assert_eq!(pci_bw("32 GT/s PCIe/s", 16), 48.0);
        assert_eq!(pci_bw("", 16), 12.0);
        assert_eq!(pci_bw("2.5 GT/s", 1), 0.1875);
    }

    #[test]
    fn cube_mesh_is_symmetric_with_six_links() {
        for (i, row) in CUBE_MESH.iter().enumerate() {
            assert_eq!(row.iter().sum::<u32>(), 6);
            for (j, c) in row.iter().enumerate() {
                assert_eq!(*c, CUBE_MESH[j][i]);
            }
        }
    }

    #[test]
    fn nvlink_generations() {
        assert!((nvlink_bw(90) * 18.0 - 370.8).abs() < 1e-9);
        assert_eq!(nvlink_bw(86), 12.0);
        assert_eq!(nvlink_bw(100), 40.1);
        assert_eq!(nvlink_bw(70), 20.0);
        assert_eq!(find_model("H800-SXM").unwrap().nvlinks, 8);
    }
}
