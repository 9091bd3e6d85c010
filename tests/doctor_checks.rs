//! `topoplan doctor`'s checks on the corpus in tests/data/doctor/: every check fires on the
//! input that plants its fault, with its evidence, cost and severity.

mod common;

use common::doctor::{doctor, finding, found, has, TOPO};

#[test]
fn p2p_disabled_is_found_with_its_evidence_and_pcie_cost() {
    let (code, v, _) = doctor(&["--nccl-log", "@/h200x2-p2p-disabled.log", "--topo", TOPO]);
    assert_eq!(code, 1);
    assert_eq!(
        found(&v),
        vec![
            ("p2p-disabled".into(), "error".into()),
            ("transport-downgrade".into(), "error".into()),
            ("rings-off-nvlink".into(), "error".into())
        ]
    );
    let f = finding(&v, "p2p-disabled");
    assert!(
        f["evidence"][0]
            .as_str()
            .unwrap()
            .ends_with("h200x2-p2p-disabled.log:9: NCCL_P2P_DISABLE set by environment to 1"),
        "{f}"
    );
    let cost = f["cost"].as_str().unwrap();
    assert!(
        cost.starts_with("rings through host memory over PCIe:") && cost.contains("over NVLink"),
        "{cost}"
    );
    let t = finding(&v, "transport-downgrade")["title"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(t.starts_with("48 of 48 channel connection(s)"), "{t}");
}

#[test]
fn p2p_disabled_from_the_environment_alone() {
    let env = std::env::temp_dir().join(format!("doctor-p2p-{}.env", std::process::id()));
    std::fs::write(&env, "NCCL_P2P_DISABLE=1\n").unwrap();
    let (code, v, _) = doctor(&["--env", env.to_str().unwrap(), "--topo", TOPO]);
    std::fs::remove_file(&env).ok();
    assert_eq!(code, 1);
    assert!(has(&v, "p2p-disabled", "error"), "{v}");
    assert!(finding(&v, "p2p-disabled")["evidence"][0]
        .as_str()
        .unwrap()
        .starts_with("NCCL_P2P_DISABLE=1 ("));
}

#[test]
fn p2p_level_below_nvlink() {
    let (code, v, _) = doctor(&[
        "--env",
        "@/p2p-level-loc.env",
        "--nccl-log",
        "@/h200x2-healthy.log",
    ]);
    assert_eq!(code, 1);
    assert_eq!(found(&v), vec![("p2p-level".into(), "error".into())]);
}

#[test]
fn shm_channels_from_a_public_issue_log() {
    // NVIDIA/nccl#1817: 8 GPUs whose channels all went over SHM.
    let (code, v, _) = doctor(&["--nccl-log", "@/public-nccl-1817-shm.log"]);
    assert_eq!(code, 1);
    assert_eq!(
        found(&v),
        vec![("transport-downgrade".into(), "warning".into())]
    );
}

#[test]
fn forced_algorithm_and_protocol_priced_by_planner_and_by_nccls_table() {
    for with_topo in [true, false] {
        let mut a = vec!["--nccl-log", "@/h200x2-forced-tree-ll.log"];
        if with_topo {
            a.extend(["--topo", TOPO]);
        }
        let (code, v, _) = doctor(&a);
        assert_eq!(code, 1);
        assert_eq!(
            found(&v),
            vec![("forced-algo-proto".into(), "error".into())],
            "topo {with_topo}"
        );
        let cost = finding(&v, "forced-algo-proto")["cost"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(cost.contains("forced, against"), "{cost}");
        assert!(
            cost.contains(if with_topo {
                "planner on"
            } else {
                "NCCL's tuning table"
            }),
            "{cost}"
        );
    }
}

#[test]
fn channel_cap_shows_as_fewer_channels() {
    let (code, v, _) = doctor(&["--nccl-log", "@/h200x2-max-nchannels-2.log", "--topo", TOPO]);
    assert_eq!(code, 1);
    assert_eq!(found(&v), vec![("fewer-channels".into(), "error".into())]);
    let f = finding(&v, "fewer-channels");
    assert!(
        f["title"]
            .as_str()
            .unwrap()
            .contains("2 collective channel(s) where the topology supports 24"),
        "{f}"
    );
    assert!(f["evidence"].as_array().unwrap().iter().any(|e| e
        .as_str()
        .unwrap()
        .contains("NCCL_MAX_NCHANNELS set by environment to 2")));
    // From the environment alone, priced by the planner.
    let env = std::env::temp_dir().join(format!("doctor-ch-{}.env", std::process::id()));
    std::fs::write(&env, "NCCL_MAX_NCHANNELS=1\n").unwrap();
    let (code, v, _) = doctor(&["--env", env.to_str().unwrap(), "--topo", TOPO]);
    std::fs::remove_file(&env).ok();
    assert_eq!(code, 1);
    assert!(has(&v, "channel-limit", "error"), "{v}");
}

#[test]
fn duplicate_gpus_from_init_lines_a_public_log_and_the_environment() {
    let (code, v, _) = doctor(&["--nccl-log", "@/h200x2-same-gpu.log"]);
    assert_eq!(
        (code, found(&v)),
        (1, vec![("duplicate-gpu".into(), "error".into())])
    );
    // horovod/horovod#3929.
    let (code, v, _) = doctor(&["--nccl-log", "@/public-horovod-3929-duplicate-gpu.log"]);
    assert_eq!(
        (code, found(&v)),
        (1, vec![("duplicate-gpu".into(), "error".into())])
    );
    assert_eq!(
        finding(&v, "duplicate-gpu")["evidence"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn launcher_numbering_mistakes() {
    let (code, v, _) = doctor(&["--env", "@/srun-mismatch.env"]);
    assert_eq!(code, 1);
    let rw: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "rank-world")
        .map(|f| f["title"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rw.len(), 2, "{rw:?}");
    assert!(rw.iter().any(|t| t.contains("SLURM_NTASKS=16")));
    assert!(rw.iter().any(|t| t.contains("SLURM_PROCID=3")));
    assert!(
        has(&v, "duplicate-gpu", "error"),
        "CUDA_VISIBLE_DEVICES lists GPU 3 twice"
    );
    let (_, v, _) = doctor(&["--env", "@/torchrun-slurm-nodes.env"]);
    assert_eq!(found(&v), vec![("rank-world".into(), "error".into())]);
    // Ranks claimed twice by two launchers.
    let (_, v, _) = doctor(&["--nccl-log", "@/two-nodes-ranks-twice.log"]);
    let t: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap().to_string())
        .collect();
    assert!(
        t.iter().any(|t| t.starts_with("rank 0 joined twice")),
        "{t:?}"
    );
    // WORLD_SIZE against NCCL's communicator size.
    let env = std::env::temp_dir().join(format!("doctor-ws-{}.env", std::process::id()));
    std::fs::write(&env, "WORLD_SIZE=4\n").unwrap();
    let (_, v, _) = doctor(&[
        "--env",
        env.to_str().unwrap(),
        "--nccl-log",
        "@/h200x2-healthy.log",
    ]);
    std::fs::remove_file(&env).ok();
    assert_eq!(found(&v), vec![("rank-world".into(), "error".into())]);
}

#[test]
fn master_addr_localhost_on_two_nodes() {
    let (code, v, _) = doctor(&["--env", "@/two-nodes-localhost.env"]);
    assert_eq!(
        (code, found(&v)),
        (1, vec![("master-addr".into(), "error".into())])
    );
}

#[test]
fn socket_interfaces_docker_down_and_ib_off() {
    let (code, v, _) = doctor(&["--nccl-log", "@/two-nodes-docker0.log"]);
    assert_eq!(code, 1);
    assert_eq!(
        found(&v),
        vec![
            ("socket-ifname".into(), "error".into()),
            ("nccl-warn".into(), "warning".into())
        ]
    );
    let (code, v, _) = doctor(&[
        "--env",
        "@/multi-node-ib-off.env",
        "--sysfs",
        "@/sysfs-degraded",
    ]);
    assert_eq!(code, 1);
    assert!(has(&v, "socket-ifname", "error"), "eth1 is down: {v}");
    assert!(finding(&v, "socket-ifname")["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e.as_str().unwrap().ends_with("eth1/operstate: down")));
    assert!(has(&v, "ib-disabled", "error"), "{v}");
}

#[test]
fn sysfs_link_acs_iommu_numa() {
    let (code, v, _) = doctor(&[
        "--sysfs",
        "@/sysfs-degraded",
        "--nccl-log",
        "@/h200x2-healthy.log",
    ]);
    assert_eq!(code, 1);
    let got = found(&v);
    for (c, s) in [
        ("link-width", "warning"),
        ("acs-redirect", "warning"),
        ("numa-nic", "warning"),
        ("link-speed", "info"),
        ("iommu-translated", "info"),
        // Sockets in use beside an RDMA NIC on one node: harmless, noted.
        ("ib-disabled", "info"),
    ] {
        assert!(
            got.contains(&(c.into(), s.into())),
            "{c} {s} missing from {got:?}"
        );
    }
    assert_eq!(got.len(), 6, "{got:?}");
    let w = finding(&v, "link-width");
    assert!(w["title"].as_str().unwrap().contains("x8 of x16"));
    assert!(w["evidence"][0]
        .as_str()
        .unwrap()
        .ends_with("0000:03:00.0/current_link_width: 8"));
    assert!(finding(&v, "acs-redirect")["evidence"][0]
        .as_str()
        .unwrap()
        .contains("0000:02:00.0/config: ACS control 0x001d"));
    // Most severe first.
    let sev: Vec<_> = got.iter().map(|g| g.1.as_str()).collect();
    assert_eq!(sev, {
        let mut s = sev.clone();
        s.sort_by_key(|x| match *x {
            "error" => 0,
            "warning" => 1,
            _ => 2,
        });
        s
    });
}

#[test]
fn info_notes_alone_exit_zero() {
    let (code, v, _) = doctor(&[
        "--sysfs",
        "@/sysfs-healthy",
        "--nccl-log",
        "@/h200x2-slow-init.log",
    ]);
    assert_eq!(
        (code, found(&v)),
        (1, vec![("slow-init".into(), "warning".into())])
    );
}

#[test]
fn measured_busbw_fraction_and_wrong_results() {
    for extra in [["--topo", TOPO], ["--nccl-log", "@/h200x2-healthy.log"]] {
        let mut a = vec!["--nccl-tests", "@/h200x2-all-reduce-45pct.txt"];
        a.extend(extra);
        let (code, v, _) = doctor(&a);
        assert_eq!(code, 1);
        assert_eq!(
            found(&v),
            vec![("busbw-fraction".into(), "warning".into())],
            "{extra:?}"
        );
        let t = finding(&v, "busbw-fraction")["title"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(t.starts_with("all_reduce reaches 4"), "{t}");
        assert!(t.contains("% of the") && t.contains("ceiling"), "{t}");
    }
    let (code, v, _) = doctor(&["--nccl-tests", "@/h200x2-all-reduce-wrong.txt"]);
    assert_eq!(
        (code, found(&v)),
        (1, vec![("wrong-results".into(), "error".into())])
    );
}

#[test]
fn nccl_graph_dump_off_nvlink() {
    let (code, v, _) = doctor(&["--nccl-graph", "@/h200x2-graph-phb.xml", "--topo", TOPO]);
    assert_eq!(code, 1);
    assert_eq!(found(&v), vec![("rings-off-nvlink".into(), "error".into())]);
    let e = finding(&v, "rings-off-nvlink")["evidence"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        e.ends_with("h200x2-graph-phb.xml:2: Pattern 4, nChannels 2, bw 24/24, type PHB/PIX"),
        "{e}"
    );
    let (code, v, _) = doctor(&["--nccl-graph", "@/h200x2-graph-healthy.xml", "--topo", TOPO]);
    assert_eq!((code, found(&v)), (0, vec![]));
    let (code, _, err) = doctor(&["--nccl-graph", TOPO]);
    assert_eq!(code, 2);
    assert!(err.contains("not an NCCL graph dump"), "{err}");
}
