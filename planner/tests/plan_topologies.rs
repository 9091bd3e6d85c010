//! The planner on every shared topology and on clusters: channel structures checked by hand,
//! every collective planned, every chosen schedule valid (and, up to 16 ranks, computing the
//! right contributions).

use planner::plan::Planner;
use planner::schedule::*;
use planner::search::btree;
use planner::topology::*;
use std::path::Path as FsPath;

fn load(name: &str) -> Topology {
    load_file(
        FsPath::new(&format!("../tests/data/topologies/{name}")),
        &LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
    .topology
}

fn coll(kind: CollectiveKind, n: u32) -> Collective {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, n - 1),
        CollectiveKind::SendRecv => {
            let mut c = Collective::new(kind);
            c.send_peers = (0..n).map(|i| Some((i + 1) % n)).collect();
            c
        }
        _ => Collective::new(kind),
    }
}

/// Plans every collective at sizes 8 B .. 4 GiB (×64) and builds each distinct choice.
fn plan_all(p: &Planner, what: &str, symbolic_check: bool) {
    let n = p.nranks();
    for kind in CollectiveKind::ALL {
        let c = coll(kind, n);
        let mut seen = Vec::new();
        let mut b = 8u64;
        while b <= 4 << 30 {
            let ch = p.choose(&c, b);
            assert!(
                ch.est_us > 0.0 && ch.est_us.is_finite(),
                "{what} {kind:?} {b}: {ch:?}"
            );
            let key = (ch.algorithm.clone(), ch.protocol, ch.channels);
            if !seen.contains(&key) {
                let nch = matches!(ch.algorithm, Algorithm::Ring | Algorithm::Tree)
                    .then_some(ch.channels);
                let s = p
                    .schedule(&c, &ch.algorithm, ch.protocol, nch)
                    .unwrap_or_else(|e| panic!("{what} {kind:?} {b}: {e}"));
                s.validate().unwrap();
                if symbolic_check {
                    symbolic::check(&s).unwrap_or_else(|e| panic!("{what} {kind:?} {ch:?}: {e}"));
                }
                seen.push(key);
            }
            b *= 64;
        }
    }
}

#[test]
fn every_shared_topology_plans_every_collective() {
    let mut count = 0;
    for f in std::fs::read_dir("../tests/data/topologies").unwrap() {
        let path = f.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.contains("graph") {
            continue; // NCCL graph dumps, not topologies
        }
        let t = load(&name);
        let p = Planner::new(&t).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            !p.rings().is_empty() && p.channels().ring.bw_gbps > 0.0,
            "{name}"
        );
        for r in p.rings() {
            let mut s = r.clone();
            s.sort_unstable();
            assert_eq!(
                s,
                (0..p.nranks()).collect::<Vec<_>>(),
                "{name}: ring is not a permutation"
            );
        }
        plan_all(&p, &name, p.nranks() <= 16);
        count += 1;
    }
    assert!(count >= 12, "only {count} topologies found");
}

#[test]
fn h200x2_matches_nccls_rings() {
    // NCCL (graph.xml): 12 ring channels × 30 GB/s, every one 0 → 1 → 0.
    let t = load("h200x2-topo.xml");
    let p = Planner::new(&t).unwrap();
    let ch = p.channels();
    assert_eq!(ch.ring.count, 12);
    assert!((ch.ring.bw_gbps - 30.0).abs() < 1e-9);
    assert!(p.rings().iter().all(|r| r == &vec![0, 1]));
    // Trees: chains 0 → 1 and 1 → 0 alternate, like NCCL's channels 0–5 / 6–11.
    let roots: Vec<u32> = p.trees().iter().map(|t| t.check(2).unwrap()).collect();
    assert!(roots.contains(&0) && roots.contains(&1));
    assert!(ch.all_peers_nvlink_gbps.is_some());
}

#[test]
fn nvswitch_rings_are_index_ordered() {
    for name in [
        "azure-ndv5-topo.xml",
        "aws-p4d-24xl-topo.xml",
        "github-yccl-8xh800-nvswitch-topo.xml",
    ] {
        let p = Planner::new(&load(name)).unwrap();
        for r in p.rings() {
            assert_eq!(r, &(0..8).collect::<Vec<u32>>(), "{name}");
        }
        // Aggregate never exceeds one GPU's NVLink bandwidth.
        let ch = p.channels();
        let nv = ch.all_peers_nvlink_gbps.unwrap();
        assert!(
            ch.ring.count as f64 * ch.ring.bw_gbps <= nv + 1e-6,
            "{name}"
        );
    }
}

#[test]
fn l20_rings_keep_pcie_switch_pairs_adjacent() {
    let t = load("github-yccl-16xl20-pcie-topo.xml");
    let p = Planner::new(&t).unwrap();
    let n = p.nranks();
    let pix: Vec<(u32, u32)> = (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .filter(|&(a, b)| t.gpu_path(a, b).unwrap().kind == PathType::Pix)
        .collect();
    assert!(!pix.is_empty());
    for r in p.rings() {
        let pos: Vec<usize> = (0..n)
            .map(|x| r.iter().position(|y| *y == x).unwrap())
            .collect();
        for &(a, b) in &pix {
            let d = (pos[a as usize] as i64 - pos[b as usize] as i64).rem_euclid(n as i64);
            assert!(
                d == 1 || d == n as i64 - 1,
                "ring {r:?} separates GPUs {a} and {b} under one switch"
            );
        }
    }
}

#[test]
fn btree_matches_nccl_example() {
    // NCCL's `ncclGetBtree` (`src/graph/trees.cc`) on 14 nodes: 0→8, 8→{4,12}, 4→{2,6}, 12→{10,13}, odd nodes are leaves.
    assert_eq!(btree(14, 0), (None, None, Some(8)));
    assert_eq!(btree(14, 8), (Some(0), Some(4), Some(12)));
    assert_eq!(btree(14, 4), (Some(8), Some(2), Some(6)));
    assert_eq!(btree(14, 12), (Some(8), Some(10), Some(13)));
    for odd in (1..14).step_by(2) {
        let (_, d0, d1) = btree(14, odd);
        assert_eq!((d0, d1), (None, None));
    }
}

fn cluster(nodes: u32) -> Topology {
    let t = load("azure-ndv5-topo.xml");
    let fab = Fabric {
        kind: FabricKind::RailOptimized,
        port_gbps: 50.0,
        switch_lat_us: 0.5,
    };
    scale(&t, nodes, fab).unwrap()
}

#[test]
fn multi_node_rings_are_rail_aligned_and_trees_are_double() {
    let t = cluster(4);
    let p = Planner::new(&t).unwrap();
    let ch = p.channels();
    assert_eq!(ch.hosts.len(), 4);
    for (c, ring) in p.rings().iter().enumerate() {
        // Each host appears as one contiguous run of its 8 GPUs.
        for h in 0..4u32 {
            let run: Vec<u32> = ring[(h * 8) as usize..(h * 8 + 8) as usize].to_vec();
            assert!(
                run.iter().all(|r| r / 8 == h),
                "ring {c} interleaves hosts: {ring:?}"
            );
        }
        // The chain enters each host at the GPU whose own NIC the channel uses.
        let nic = ch.ring_nics[c].clone().unwrap();
        let first = t.gpu_of_rank(ring[0]).unwrap();
        let local = t.local_nic(first).unwrap();
        match &t.graph[local].kind {
            NodeKind::Nic(x) => assert_eq!(x.name, nic, "ring {c} enters through a foreign NIC"),
            _ => panic!(),
        }
    }
    // NIC bandwidth caps the rings: 8 NICs × 50 GB/s.
    assert!(ch.ring.count as f64 * ch.ring.bw_gbps <= 8.0 * 50.0 + 1e-6);
    // Trees come in pairs; in every pair each host head is interior in at most one tree.
    assert_eq!(p.trees().len() % 2, 0);
    for pair in p.trees().chunks(2) {
        for h in 0..4u32 {
            let head_kids = |t: &TreeChannel| {
                let g = &ch.hosts[h as usize];
                let head = g[ch.tree_chains[0][0] as usize];
                t.children[head as usize]
                    .iter()
                    .filter(|k| **k / 8 != h)
                    .count()
            };
            assert!(head_kids(&pair[0]) == 0 || head_kids(&pair[1]) == 0 || h == 0);
        }
        for t in pair {
            t.check(32).unwrap();
        }
    }
    plan_all(&p, "4 hosts", false);
    // The hierarchical all-reduce (reduce-scatter in hosts, rails across, all-gather in hosts).
    let ar = Collective::new(CollectiveKind::AllReduce);
    let s = p
        .schedule(&ar, &Algorithm::Hierarchical, Protocol::Simple, Some(2))
        .unwrap();
    symbolic::check(&s).unwrap();
    assert!(p
        .candidates(&ar, 1 << 20)
        .iter()
        .any(|c| c.algorithm == Algorithm::Hierarchical));
    assert!(p
        .schedule(&ar, &Algorithm::Hierarchical, Protocol::Simple, Some(99))
        .is_err());
}

#[test]
fn transports_follow_the_topology() {
    let p = Planner::new(&cluster(2)).unwrap();
    let s = p
        .schedule(
            &Collective::new(CollectiveKind::AllReduce),
            &Algorithm::Ring,
            Protocol::Simple,
            Some(1),
        )
        .unwrap();
    let ring = &p.rings()[0];
    for rp in &s.ranks {
        for op in &rp.channels[0].ops {
            if let Some(to) = op.send_to {
                let want = if rp.rank / 8 != to / 8 {
                    Transport::Network
                } else {
                    Transport::P2pStore
                };
                assert_eq!(
                    op.transport, want,
                    "rank {} -> {to} in ring {ring:?}",
                    rp.rank
                );
            }
        }
    }
}

/// Ring orders of graph id 0 (pattern 4, rings) in an NCCL_GRAPH_DUMP_FILE.
fn nccl_rings(path: &str) -> Vec<Vec<u32>> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let g = doc
        .descendants()
        .find(|n| n.has_tag_name("graph") && n.attribute("id") == Some("0"))
        .unwrap();
    g.children()
        .filter(|c| c.has_tag_name("channel"))
        .map(|ch| {
            ch.children()
                .filter(|x| x.has_tag_name("gpu"))
                .map(|x| {
                    let d = x.attribute("dev").unwrap();
                    match d.strip_prefix("0x") {
                        Some(h) => u32::from_str_radix(h, 16).unwrap(),
                        None => d.parse().unwrap(),
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn rings_match_nccls_graph_dumps() {
    // Azure NCv4 (4×A100 PCIe, two NVLink pairs across sockets): NCCL found 2 rings × 12 GB/s,
    // 0 1 2 3 and 0 3 2 1 (azure-ncv4-graph.xml). We search the same machine's topology dump.
    let p = Planner::new(&load("azure-ncv4-topo-2023.xml")).unwrap();
    let ours: Vec<Vec<u32>> = p.channels().ring_chains.clone();
    assert_eq!(
        ours,
        nccl_rings("../tests/data/topologies/azure-ncv4-graph.xml")
    );
    assert!((p.channels().ring.bw_gbps - 12.0).abs() < 1e-9);
    // 2×H200: 12 rings, all 0 1.
    let p = Planner::new(&load("h200x2-topo.xml")).unwrap();
    assert_eq!(
        p.channels().ring_chains,
        nccl_rings("../tests/data/measurements/h200x2/graph.xml")
    );
}

#[test]
fn pcie_switch_groups_stay_contiguous_on_a_synthetic_host() {
    // 8 GPUs, four per PCIe switch, every PCIe link 24 GB/s: a ring crosses between the switches
    // once each way, so the switch uplinks carry one ring hop per direction per channel.
    let t = synth::single_host(8, LinkKind::Pcie, 24.0);
    let p = Planner::new(&t).unwrap();
    for r in p.rings() {
        let crossings = (0..8).filter(|&i| r[i] / 4 != r[(i + 1) % 8] / 4).count();
        assert_eq!(
            crossings, 2,
            "ring {r:?} crosses between the switches {crossings} times"
        );
    }
    // Capacity: channels × speed cannot exceed one GPU's 24 GB/s link.
    let ch = p.channels();
    assert!(ch.ring.count as f64 * ch.ring.bw_gbps <= 24.0 + 1e-9);
    assert!(ch.all_peers_nvlink_gbps.is_none());
    // NVSwitch variant: all peers, index-ordered ring.
    let p = Planner::new(&synth::single_host(4, LinkKind::NvLink, 100.0)).unwrap();
    assert_eq!(p.rings()[0], vec![0, 1, 2, 3]);
    assert_eq!(p.channels().all_peers_nvlink_gbps, Some(100.0));
}
