//! Every bundled topology fixture loads, shows (library and CLI), and keeps NCCL's paths.

use planner::topology::{self, report, LoadOptions, PathType};
use std::path::PathBuf;
use std::process::Command;

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// Every topology file in tests/data (the NCCL graph file is checked separately).
pub fn topology_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data("topologies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with("-graph.xml"))
        .collect();
    v.push(data("measurements/h200x2/topo.xml"));
    v.sort();
    v
}

#[test]
fn every_fixture_loads_and_every_gpu_pair_has_a_path() {
    let fixtures = topology_fixtures();
    assert!(fixtures.len() >= 13, "{fixtures:?}");
    for f in fixtures {
        let l = topology::load_file(&f, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let t = &l.topology;
        let n = t.n_ranks() as u32;
        assert!(n >= 2, "{}: {n} GPUs", f.display());
        for a in 0..n {
            for b in 0..n {
                let p = t.gpu_path(a, b).unwrap();
                assert!(
                    p.kind <= PathType::Sys,
                    "{}: {a}->{b} {}",
                    f.display(),
                    p.kind
                );
                assert!(p.bw_gbps > 0.0);
            }
        }
        let r = report::report(t);
        let text = report::render(&r, "x");
        assert!(text.contains("GPU × GPU"), "{}", f.display());
        assert_eq!(r.gpu_gpu.len(), n as usize);
    }
}

#[test]
fn skeletons_say_what_was_assumed() {
    let l = topology::load_file(
        &data("topologies/azure-ndv5-topo.xml"),
        &LoadOptions::default(),
    )
    .unwrap();
    let w = l.warnings.join("\n");
    assert!(w.contains("assumed GPU model h100-sxm"), "{w}");
    assert!(w.contains("18 NVLinks per GPU to one NVSwitch"), "{w}");
    assert_eq!(l.topology.n_ranks(), 8);
    // p4d names its GPUs' PCI device id: A100 SXM, 12 NVLinks.
    let l = topology::load_file(
        &data("topologies/aws-p4d-24xl-topo.xml"),
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(l.warnings[0].contains("a100-sxm"), "{:?}", l.warnings);
    let p = l.topology.gpu_path(0, 5).unwrap();
    assert_eq!((p.kind, p.bw_gbps), (PathType::Nvl, 240.0));
    // --gpu v100-sxm on NDv2: the DGX-1 hybrid cube mesh; GPU0–GPU5 has no direct link (NVB).
    let opts = LoadOptions {
        gpu_model: Some("v100-sxm".into()),
        nic_gbps: None,
    };
    let l = topology::load_file(&data("topologies/azure-ndv2-topo.xml"), &opts).unwrap();
    let t = &l.topology;
    assert_eq!(t.gpu_path(0, 3).unwrap().kind, PathType::Nvl);
    assert_eq!(t.gpu_path(0, 3).unwrap().bw_gbps, 40.0);
    assert_eq!(t.gpu_path(0, 5).unwrap().kind, PathType::Nvb);
    // AWS p5 lists no GPUs at all: one per leaf switch.
    let l = topology::load_file(
        &data("topologies/aws-p5-48xl-topo-2023.xml"),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(l.topology.n_ranks(), 8);
    assert_eq!(l.topology.nics_of_host(0).len(), 32);
}

#[test]
fn cli_shows_every_fixture() {
    for f in topology_fixtures() {
        let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
            .args(["topo", "show"])
            .arg(&f)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("GPU × GPU"), "{}", f.display());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["topo", "show", "--json"])
        .arg(data("topologies/h200x2-topo.xml"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpu_gpu"][0][1]["type"], "NVL");
    assert_eq!(v["gpu_gpu"][0][1]["bw_gbps"], 370.8);
    let text = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["topo", "show"])
        .arg(data("topologies/h200x2-topo.xml"))
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(s.contains("NVL 370.8"), "{s}");
    assert!(s.contains("18 links 370.8 GB/s"), "{s}");
}

#[test]
fn scale_cli_writes_a_cluster_that_reads_back() {
    let dir = std::env::temp_dir().join(format!("topoplan-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("c.json");
    let st = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["topo", "scale"])
        .arg(data("topologies/github-yccl-8xh800-nvswitch-topo.xml"))
        .args([
            "--nodes",
            "1024",
            "--fabric",
            "rail",
            "--nic-gbps",
            "400",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let t0 = std::time::Instant::now();
    let l = topology::load_file(&out, &LoadOptions::default()).unwrap();
    let t = &l.topology;
    assert_eq!(t.n_ranks(), 8192);
    // A ring over every rank plus every pair inside host 0: what a planner asks first.
    for r in 0..8192u32 {
        let p = t.gpu_path(r, (r + 1) % 8192).unwrap();
        let same = t.host_of_rank(r) == t.host_of_rank((r + 1) % 8192);
        assert_eq!(p.kind == PathType::Net, !same);
    }
    let far = t.gpu_path(3, 8191).unwrap();
    assert_eq!(far.kind, PathType::Net);
    assert_eq!(far.bw_gbps, 48.0); // PCIe Gen5 x16 to the NIC is the bottleneck, not 50 GB/s
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("1024-node cluster: load + 8192 ring paths in {secs:.3} s");
    // Generous for debug builds on a loaded 2-core machine; release takes a few ms.
    assert!(secs < 20.0, "load + 8192 paths took {secs:.2} s");
    // A cluster has no NCCL XML form.
    let st = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["topo", "convert"])
        .arg(&out)
        .arg("-o")
        .arg(dir.join("c.xml"))
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&st.stderr).contains("describes one machine"));
    std::fs::remove_dir_all(&dir).ok();
}
