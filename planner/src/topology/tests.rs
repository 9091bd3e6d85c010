//! Unit tests of the topology module: golden paths on real dumps, synthetic topologies, scaling.

use super::*;

fn fixture(name: &str) -> Loaded {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/topologies")
        .join(name);
    load_file(&p, &LoadOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn h200x2_golden() {
    let l = fixture("h200x2-topo.xml");
    let t = &l.topology;
    assert_eq!(t.n_ranks(), 2);
    let p = t.gpu_path(0, 1).unwrap();
    assert_eq!(p.kind, PathType::Nvl);
    assert!((p.bw_gbps - 370.8).abs() < 1e-9, "{}", p.bw_gbps);
    // Through the NVSwitch: GPU → NVS → GPU, 18 links on each hop.
    assert_eq!(p.hops(), 2);
    for l in &p.links {
        assert_eq!(t.graph[*l].count, 18);
        assert_eq!(t.graph[*l].kind, LinkKind::NvLink);
    }
    let cpu = t
        .graph
        .node_indices()
        .find(|n| matches!(t.graph[*n].kind, NodeKind::Cpu(_)))
        .unwrap();
    for r in 0..2 {
        let g = t.gpu_of_rank(r).unwrap();
        let p = t.path(g, cpu).unwrap();
        assert_eq!(p.kind, PathType::Phb);
        assert_eq!(p.bw_gbps, 48.0);
        // NCCL: GPU→NET (3/1.2/PHB) — the virtio NIC's 10 Gb/s is the bottleneck.
        let nic = t.nics_of_host(0)[0];
        let p = t.path(g, nic).unwrap();
        assert_eq!(p.kind, PathType::Phb);
        assert_eq!(p.bw_gbps, 1.25);
    }
}

#[test]
fn h800_nvswitch_and_nearest_nics() {
    let l = fixture("github-yccl-8xh800-nvswitch-topo.xml");
    let t = &l.topology;
    assert_eq!(t.n_ranks(), 8);
    for a in 0..8 {
        for b in 0..8 {
            if a != b {
                let p = t.gpu_path(a, b).unwrap();
                assert_eq!(p.kind, PathType::Nvl, "{a}->{b}");
                assert!((p.bw_gbps - 8.0 * 20.6).abs() < 1e-9);
                assert!(p.links.iter().any(|l| matches!(
                    t.graph[t.graph.edge_endpoints(*l).unwrap().1].kind,
                    NodeKind::NvSwitch
                )));
            }
        }
        let g = t.gpu_of_rank(a).unwrap();
        let best = t
            .nics_of_host(0)
            .into_iter()
            .map(|n| t.path(g, n).unwrap().kind)
            .min()
            .unwrap();
        assert!(
            best == PathType::Pix || best == PathType::Pxb,
            "GPU{a}: {best}"
        );
    }
}

#[test]
fn l20_pcie_types() {
    let l = fixture("github-yccl-16xl20-pcie-topo.xml");
    let t = &l.topology;
    assert_eq!(t.n_ranks(), 16);
    // Ranks 0,1 share a switch; 2,3 sit under a sibling switch of the same parent.
    assert_eq!(t.gpu_path(0, 1).unwrap().kind, PathType::Pix);
    assert_eq!(t.gpu_path(0, 2).unwrap().kind, PathType::Pxb);
    // Ranks 0..7 are on socket 0, 8..15 on socket 1.
    for b in 8..16 {
        assert_eq!(t.gpu_path(0, b).unwrap().kind, PathType::Sys);
    }
    assert_eq!(t.gpu_path(0, 8).unwrap().bw_gbps, 22.0);
}

#[test]
fn random_topologies_are_valid_and_connected() {
    for seed in 0..40 {
        let t = synth::random(seed);
        let n = t.n_ranks() as u32;
        assert!((2..=64).contains(&n), "seed {seed}: {n} GPUs");
        for a in 0..n {
            for b in 0..n {
                let p = t
                    .gpu_path(a, b)
                    .unwrap_or_else(|| panic!("seed {seed}: no path {a}->{b}"));
                assert!(p.bw_gbps > 0.0, "seed {seed}");
                if t.host_of_rank(a) != t.host_of_rank(b) {
                    assert_eq!(p.kind, PathType::Net, "seed {seed}");
                } else {
                    assert!(p.kind < PathType::Net, "seed {seed}");
                }
            }
        }
    }
}

#[test]
fn single_host_synth() {
    let t = synth::single_host(8, LinkKind::NvLink, 100.0);
    assert_eq!(t.gpu_path(0, 7).unwrap().kind, PathType::Nvl);
    assert_eq!(t.gpu_path(0, 7).unwrap().bw_gbps, 100.0);
    let t = synth::single_host(8, LinkKind::Pcie, 24.0);
    assert_eq!(t.gpu_path(0, 3).unwrap().kind, PathType::Pix);
    assert_eq!(t.gpu_path(0, 4).unwrap().kind, PathType::Phb);
}

#[test]
fn scale_rail_and_fat_tree() {
    let node = fixture("github-yccl-8xh800-nvswitch-topo.xml").topology;
    let rail = scale(
        &node,
        4,
        Fabric {
            kind: FabricKind::RailOptimized,
            port_gbps: 25.0,
            switch_lat_us: 0.5,
        },
    )
    .unwrap();
    assert_eq!(rail.n_ranks(), 32);
    assert_eq!(rail.host_of_rank(9), 1);
    assert_eq!(rail.gpus_of_host(2), (16..24).collect::<Vec<_>>());
    let p = rail.gpu_path(0, 8).unwrap();
    assert_eq!(p.kind, PathType::Net);
    assert_eq!(p.bw_gbps, 25.0);
    // Same rail: NIC → leaf → NIC, two network hops.
    let net_hops = p
        .links
        .iter()
        .filter(|l| rail.graph[**l].kind == LinkKind::Network)
        .count();
    assert_eq!(net_hops, 2);
    let fat = scale(
        &node,
        8,
        Fabric {
            kind: FabricKind::FatTree {
                hosts_per_leaf: 2,
                oversubscription: 4.0,
            },
            port_gbps: 25.0,
            switch_lat_us: 0.5,
        },
    )
    .unwrap();
    let far = fat.gpu_path(0, 8 * 7).unwrap();
    // leaf uplink: 2 hosts × 8 NICs × 25 / (4 × 8 spines) = 12.5 GB/s
    assert_eq!(far.bw_gbps, 12.5);
    assert!(far.lat_us > fat.gpu_path(0, 8).unwrap().lat_us);
    // Between two hosts on different leaves, GPUs leaving through different NICs take
    // different spines (ECMP spreads flows), not one spine per host pair.
    let spine_of = |a: u32, b: u32| {
        let p = fat.gpu_path(a, b).unwrap();
        p.links
            .iter()
            .map(|&l| fat.graph.edge_endpoints(l).unwrap().1)
            .find(|&n| matches!(fat.graph[n].kind, NodeKind::NetSwitch { level: 1, .. }))
            .unwrap()
    };
    let spines: std::collections::HashSet<_> = (0..8).map(|g| spine_of(g, 8 * 7 + g)).collect();
    assert_eq!(spines.len(), 8);
}

/// A GPU sending to a GPU of another rail leaves through the NIC of the peer's rail (PXN, as
/// NCCL's `ncclTopoGetNetDev` does), so the route stays on that rail's leaf; a leaf's spine
/// links each carry at least a whole port.
#[test]
fn cross_rail_traffic_stays_on_the_peers_rail() {
    let node = fixture("github-yccl-8xh800-nvswitch-topo.xml").topology;
    let rail = scale(
        &node,
        2,
        Fabric {
            kind: FabricKind::RailOptimized,
            port_gbps: 50.0,
            switch_lat_us: 0.5,
        },
    )
    .unwrap();
    let nics0 = rail.nics_of_host(0);
    let gpu0 = rail.gpu_of_rank(0).unwrap();
    let own = rail.local_nic(gpu0).unwrap();
    let peer_nic = rail.local_nic(rail.gpu_of_rank(9).unwrap()).unwrap();
    let rail_of = |n: NodeId| {
        rail.nics_of_host(rail.graph[n].host.unwrap())
            .iter()
            .position(|&x| x == n)
    };
    assert_ne!(
        rail_of(own),
        rail_of(peer_nic),
        "ranks 0 and 9 sit on different rails"
    );
    let p = rail.gpu_path(0, 9).unwrap();
    assert_eq!(p.kind, PathType::Net);
    let net: Vec<_> = p
        .links
        .iter()
        .filter(|l| rail.graph[**l].kind == LinkKind::Network)
        .collect();
    assert_eq!(net.len(), 2, "NIC -> leaf -> NIC, no spine");
    let (exit, _) = rail.graph.edge_endpoints(*net[0]).unwrap();
    assert!(nics0.contains(&exit));
    assert_eq!(rail_of(exit), rail_of(peer_nic));
    // The GPU's PCIe link (48 GB/s) bounds it, not a spine's share of the leaf's uplinks.
    assert_eq!(p.bw_gbps, 48.0);
    // Two nodes: two spines, each leaf's uplinks a whole port each.
    let spine_links: Vec<f64> = rail
        .graph
        .edge_indices()
        .filter(|&e| {
            let (a, b) = rail.graph.edge_endpoints(e).unwrap();
            matches!(rail.graph[a].kind, NodeKind::NetSwitch { level: 0, .. })
                && matches!(rail.graph[b].kind, NodeKind::NetSwitch { level: 1, .. })
        })
        .map(|e| rail.graph[e].bw_gbps)
        .collect();
    assert_eq!(spine_links.len(), 8 * 2);
    assert!(spine_links.iter().all(|&bw| bw == 50.0));
}

/// NDv4 puts two GPUs and two NICs under each PCIe switch. PXN reaches each NIC through the GPU
/// whose own NIC it is (NCCL's `ncclTopoGetLocalGpu`), so the two NICs of a switch are fed
/// through different GPUs; and a GPU's channels from another host spread over both NICs next
/// to it, the sender using the NIC of the same index on its host.
#[test]
fn nics_under_one_switch_have_their_own_proxy_and_take_turns() {
    let node = fixture("azure-ndv4-topo.xml").topology;
    let via = |t: &Topology, rank: u32, nic: NodeId| -> Vec<NodeId> {
        let p = t.path(t.gpu_of_rank(rank).unwrap(), nic).unwrap();
        p.links
            .iter()
            .map(|&l| t.graph.edge_endpoints(l).unwrap().1)
            .filter(|&n| matches!(t.graph[n].kind, NodeKind::Gpu(_)))
            .collect()
    };
    let nics = node.nics_of_host(0);
    let (g0, g1) = (node.gpu_of_rank(0).unwrap(), node.gpu_of_rank(1).unwrap());
    assert_eq!(node.local_nic(g0), Some(nics[0]));
    assert_eq!(node.local_nic(g1), Some(nics[1]));
    assert_eq!(via(&node, 7, nics[0]), [g0]);
    assert_eq!(via(&node, 7, nics[1]), [g1]);
    let pair = scale(
        &node,
        2,
        Fabric {
            kind: FabricKind::SingleSwitch,
            port_gbps: 25.0,
            switch_lat_us: 0.5,
        },
    )
    .unwrap();
    assert_eq!(pair.local_nic_count(8), 2);
    let ends = |spread| {
        let p = pair.gpu_path_via(7, 8, spread).unwrap();
        let net: Vec<_> = p
            .links
            .iter()
            .filter(|l| pair.graph[**l].kind == LinkKind::Network)
            .map(|&l| pair.graph.edge_endpoints(l).unwrap())
            .collect();
        (net[0].0, net[net.len() - 1].1)
    };
    let index = |n: NodeId| {
        let h = pair.graph[n].host.unwrap();
        pair.nics_of_host(h).iter().position(|&x| x == n).unwrap()
    };
    let (out0, in0) = ends(0);
    let (out1, in1) = ends(1);
    assert_eq!((index(out0), index(in0)), (0, 0));
    assert_eq!((index(out1), index(in1)), (1, 1));
    assert_eq!(ends(2), ends(0));
}

#[test]
fn single_switch_fabric_and_cluster_doc() {
    let mut doc = fixture("h200x2-topo.xml").doc;
    doc.cluster = Some(doc::ClusterDoc {
        nodes: 3,
        fabric: "switch".into(),
        nic_gbps: 200.0,
        oversubscription: 1.0,
        hosts_per_leaf: None,
        switch_lat_us: 1.0,
    });
    let mut w = Vec::new();
    let t = topology_of(&mut doc, "c.json", &LoadOptions::default(), &mut w).unwrap();
    assert_eq!(t.n_hosts, 3);
    assert_eq!(t.n_ranks(), 6);
    let p = t.gpu_path(1, 4).unwrap();
    assert_eq!(p.kind, PathType::Net);
    // The virtio NIC is set to the fabric's 200 Gb/s = 25 GB/s; PCIe is 48, NVLink 370.8.
    assert_eq!(p.bw_gbps, 25.0);
    // GPU → CPU → NIC → switch → NIC → CPU → GPU: 2 network hops of 1 µs each.
    let net: f64 = p
        .links
        .iter()
        .filter(|l| t.graph[**l].kind == LinkKind::Network)
        .map(|l| t.graph[*l].lat_us)
        .sum();
    assert_eq!(net, 2.0);
    // Same host stays NVLink.
    assert_eq!(t.gpu_path(2, 3).unwrap().kind, PathType::Nvl);
    // Oversubscription is a fat-tree notion.
    doc.cluster.as_mut().unwrap().oversubscription = 2.0;
    let e = topology_of(&mut doc, "c.json", &LoadOptions::default(), &mut w).unwrap_err();
    assert!(e.to_string().contains("fat-tree fabric only"), "{e}");
    // A cluster has no XML form.
    assert!(write_xml(&doc)
        .unwrap_err()
        .to_string()
        .contains("one machine"));
}

#[test]
fn nvb_needs_exactly_one_relay_gpu() {
    // A chain GPU0 -NVL- GPU1 -NVL- GPU2 -NVL- GPU3 on one PCIe switch: 0→2 is NVB through
    // GPU1, but 0→3 would need two relays, so it falls back to PCIe (PIX).
    let mut t = synth::single_host(4, LinkKind::Pcie, 24.0);
    let g: Vec<NodeId> = (0..4).map(|r| t.gpu_of_rank(r).unwrap()).collect();
    for i in 0..3 {
        t.add_duplex(
            g[i],
            g[i + 1],
            Link {
                kind: LinkKind::NvLink,
                bw_gbps: 100.0,
                lat_us: 0.2,
                count: 5,
            },
        );
    }
    t.validate().unwrap();
    assert_eq!(t.gpu_path(0, 1).unwrap().kind, PathType::Nvl);
    let p = t.gpu_path(0, 2).unwrap();
    assert_eq!((p.kind, p.bw_gbps, p.hops()), (PathType::Nvb, 100.0, 2));
    let p = t.gpu_path(0, 3).unwrap();
    assert_eq!((p.kind, p.bw_gbps), (PathType::Pix, 24.0));
}
