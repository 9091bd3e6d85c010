//! `topoplan plan` prints the topology's throughput bound (planner::bound) on every shipped
//! topology, each row's percentage of it, the limiting cut under --explain and in --json.

mod common;
use common::shipped;

/// `topoplan plan ARGS`: (exit code, stdout, stderr).
fn plan(args: &[&str]) -> (i32, String, String) {
    common::topoplan(&[&["plan"], args].concat())
}

#[test]
fn every_shipped_topology_gets_a_bound_and_percentages() {
    for f in shipped() {
        let (code, out, err) = plan(&[
            &f,
            "-c",
            "all-reduce,all-gather,broadcast",
            "-b",
            "1G",
            "-e",
            "1G",
        ]);
        assert_eq!(code, 0, "{f}: {err}");
        for coll in ["all-reduce", "all-gather", "broadcast"] {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("# {coll} bound: ")))
                .unwrap_or_else(|| panic!("{f}: no {coll} bound in\n{out}"));
            let bw: f64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
            assert!(bw > 0.0 && bw.is_finite(), "{f}: {line}");
            // The row's last column is busbw as a percentage of it.
            let start = out.find(&format!("# {coll} on")).unwrap();
            let row: Vec<&str> = out[start..]
                .lines()
                .nth(2)
                .unwrap()
                .split_whitespace()
                .collect();
            let busbw: f64 = row[row.len() - 2].parse().unwrap();
            let pct: f64 = row[row.len() - 1].parse().unwrap();
            assert!(
                (pct - 100.0 * busbw / bw).abs() < 0.1,
                "{f}: {row:?} vs {bw}"
            );
        }
    }
}

#[test]
fn explain_names_the_cut_and_json_carries_it() {
    // Two NVLink pairs joined over PCIe and the CPUs: the pairs' PCIe links limit all-gather.
    let f = "tests/data/topologies/azure-ncv4-topo-2023.xml";
    let (code, out, err) = plan(&[f, "-c", "all-gather", "--explain", "1G"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# bound: 36.0 GB/s busbw"), "{out}");
    let cut = out
        .lines()
        .find(|l| l.starts_with("# limiting cut:"))
        .unwrap();
    assert!(cut.contains("x Pcie 12.0 GB/s"), "{cut}");
    let (code, out, err) = plan(&[f, "-c", "all-gather", "-b", "1G", "-e", "1G", "--json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = &j["collectives"][0]["bound"];
    assert!(
        (b["busbw_gbps"].as_f64().unwrap() - 36.0).abs() < 1e-6,
        "{b}"
    );
    let links = b["cut"]["links"].as_array().unwrap();
    let cap: f64 = links.iter().map(|l| l["bw_gbps"].as_f64().unwrap()).sum();
    assert!((cap - b["cut"]["capacity_gbps"].as_f64().unwrap()).abs() < 1e-9);
    let pct = j["collectives"][0]["rows"][0]["pct_of_bound"]
        .as_f64()
        .unwrap();
    assert!(pct > 0.0 && pct <= 100.0, "{pct}");
}

#[test]
fn gpus_plans_a_subset_and_refuses_bad_lists() {
    let f = "tests/data/topologies/github-yccl-8xh800-nvswitch-topo.xml";
    let (code, out, err) = plan(&[
        f,
        "--gpus",
        "0,2,5",
        "-c",
        "all-reduce",
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# all-reduce on 3 ranks"), "{out}");
    assert!(out.contains("# Communicator: GPUs 0,2,5"), "{out}");
    for (bad, says) in [
        ("0,9", "GPU 9 does not exist"),
        ("1,1", "listed twice"),
        (",", "empty"),
        ("0,x", "not a GPU index"),
    ] {
        let (code, _, err) = plan(&[f, "--gpus", bad]);
        assert_eq!(code, 2, "--gpus {bad}: {err}");
        assert!(err.contains("--gpus") && err.contains(says), "{err}");
    }
    for cmd in ["sim", "verify"] {
        let mut args = vec![cmd, f, "--gpus", "1,3", "-c", "all-gather"];
        if cmd == "sim" {
            args.extend(["-b", "1M", "-e", "1M"]);
        }
        let (code, out, err) = common::topoplan(&args);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert!(out.contains("2 ranks") || cmd == "verify");
    }
}

#[test]
fn verify_proves_the_packed_schedules_of_every_shipped_topology() {
    for f in shipped() {
        let (code, text, _) =
            common::topoplan(&["verify", &f, "-c", "all-reduce,all-gather,reduce-scatter"]);
        assert_eq!(code, 0, "{f}: {text}");
        let packed: Vec<&str> = text.lines().filter(|l| l.contains(" packed ")).collect();
        assert!(
            packed.iter().all(|l| l.starts_with("ok")),
            "{f}: {packed:?}"
        );
        // Packed trees are planned on one host of 3 to 16 GPUs (`PACK_MAX_RANKS`): 3
        // collectives x 3 protocols.
        let (code, plan_out, _) = plan(&[&f, "-c", "all-gather", "-b", "1K", "-e", "1K"]);
        assert_eq!(code, 0);
        let ranks: u32 = plan_out
            .split("# all-gather on ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|x| x.parse().ok())
            .unwrap();
        let want = if (3..=planner::plan::PACK_MAX_RANKS).contains(&ranks) {
            9
        } else {
            0
        };
        assert_eq!(packed.len(), want, "{f}: {ranks} ranks: {packed:?}");
    }
}

#[test]
fn explain_names_what_keeps_the_choice_under_the_bound() {
    // Seven of the cube mesh's V100s at 256 MiB: the trees' own channels allow 94% of the
    // bound, and the packed trees, whose links reach it, lose more than that to their protocol
    // steps and fill (at 1 GiB the packed trees are the choice, at 93% of the bound).
    let f = "tests/data/topologies/azure-ndv2-topo.xml";
    let (code, out, err) = plan(&[
        f,
        "--gpu-model",
        "v100-sxm",
        "--gpus",
        "0,1,2,3,5,6,7",
        "-c",
        "all-reduce",
        "--explain",
        "256M",
    ]);
    assert_eq!(code, 0, "{err}");
    let why: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("# plan's choice"))
        .take_while(|l| l.starts_with('#'))
        .collect();
    assert!(
        why.iter()
            .any(|l| l.contains("bandwidth: at most") && l.contains("tree channels")),
        "{why:?}"
    );
    assert!(
        why.iter()
            .any(|l| l.starts_with("#   the bound's schedule: packed Simple")
                && l.contains("protocol overhead")),
        "{why:?}"
    );
    // A choice within 95% of the bound gets no such lines.
    let (_, out, _) = plan(&[
        "examples/h200x2-topo.json",
        "-c",
        "all-reduce",
        "--explain",
        "1G",
    ]);
    assert!(!out.contains("# plan's choice"), "{out}");
}
