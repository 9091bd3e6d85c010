//! The bounds against brute force: every node subset of small random graphs enumerated.

use super::*;
use crate::topology::synth::Rng;
use crate::topology::{Gpu, Link, NodeKind, PciSwitch};

fn gpu(rank: u32) -> NodeKind {
    NodeKind::Gpu(Gpu {
        rank,
        dev: rank,
        busid: format!("0000:{rank:02x}:00.0"),
        sm: 90,
        gdr: true,
        mem_bw_gbps: 3000.0,
        model: None,
    })
}

/// `g` GPUs and `s` switches, links random in presence, direction and capacity (so the graph
/// is irregular and asymmetric), plus a cycle through every node so it stays connected.
fn random_graph(seed: u64, g: u32, s: u32) -> Topology {
    let mut rng = Rng::new(seed);
    let mut t = Topology::new();
    let mut nodes = Vec::new();
    for r in 0..g {
        nodes.push(t.add_node(Some(0), gpu(r)));
    }
    for i in 0..s {
        nodes.push(t.add_node(
            Some(0),
            NodeKind::PciSwitch(PciSwitch {
                busid: format!("0000:{:02x}:00.0", 0x80 + i),
            }),
        ));
    }
    let link = |bw: u64| Link {
        kind: LinkKind::Pcie,
        bw_gbps: bw as f64,
        lat_us: 0.0,
        count: 1,
    };
    let m = nodes.len();
    for i in 0..m {
        let bw = rng.range(1, 20);
        t.add_link(nodes[i], nodes[(i + 1) % m], link(bw));
    }
    for a in 0..m {
        for b in 0..m {
            if a != b && rng.chance(30) {
                let bw = rng.range(1, 20);
                t.add_link(nodes[a], nodes[b], link(bw));
            }
        }
    }
    t.validate().unwrap();
    t
}

/// Capacity of the links leaving `mask` (bit i = node i), forwards or reversed.
fn out_cap(t: &Topology, mask: u32, reversed: bool) -> f64 {
    t.graph
        .edge_references()
        .filter(|e| {
            let (a, b) = (e.source().index(), e.target().index());
            let (u, v) = if reversed { (b, a) } else { (a, b) };
            mask >> u & 1 == 1 && mask >> v & 1 == 0
        })
        .map(|e| e.weight().bw_gbps)
        .sum()
}

fn gpus_in(t: &Topology, mask: u32) -> usize {
    (0..t.n_ranks() as u32)
        .filter(|&r| mask >> t.gpu_of_rank(r).unwrap().index() & 1 == 1)
        .count()
}

/// The smallest capacity per sending GPU over every cut holding some GPUs but not all.
fn brute_ratio(t: &Topology, reversed: bool) -> f64 {
    let (m, n) = (t.graph.node_count(), t.n_ranks());
    (1..(1u32 << m) - 1)
        .filter_map(|mask| {
            let k = gpus_in(t, mask);
            (k > 0 && k < n).then(|| out_cap(t, mask, reversed) / k as f64)
        })
        .fold(f64::INFINITY, f64::min)
}

/// The smallest cut with the root inside and some GPU outside.
fn brute_rooted(t: &Topology, root: u32, reversed: bool) -> f64 {
    let m = t.graph.node_count();
    let r = t.gpu_of_rank(root).unwrap().index();
    (1..(1u32 << m) - 1)
        .filter(|mask| mask >> r & 1 == 1 && gpus_in(t, *mask) < t.n_ranks())
        .map(|mask| out_cap(t, mask, reversed))
        .fold(f64::INFINITY, f64::min)
}

/// The smallest cut with GPUs on both sides.
fn brute_pair(t: &Topology) -> f64 {
    let (m, n) = (t.graph.node_count(), t.n_ranks());
    (1..(1u32 << m) - 1)
        .filter(|mask| (1..n).contains(&gpus_in(t, *mask)))
        .map(|mask| out_cap(t, mask, false))
        .fold(f64::INFINITY, f64::min)
}

/// The smallest partition bound (`partition.rs`): every labelling of the GPUs with groups and
/// of the switches with a group or none, `(N−1)/N · C/(k−1)` with `C` the links leaving (or
/// entering) the groups; NaN where there are too many labellings to try here.
fn brute_groups(t: &Topology) -> f64 {
    let (m, g) = (t.graph.node_count(), t.n_ranks());
    if g < 3 {
        return f64::INFINITY;
    }
    let gpu_at: Vec<Option<usize>> = (0..m)
        .map(|i| (0..g).find(|&r| t.gpu_of_rank(r as u32).unwrap().index() == i))
        .collect();
    let mut best = f64::INFINITY;
    // GPU labels: every function into 0..g (duplicated groupings give the same value); other
    // nodes: 0..=g, g meaning in no group.
    let total = g.pow(g as u32) * (g + 1).pow((m - g) as u32);
    if total > 100_000 {
        return f64::NAN;
    }
    for code in 0..total {
        let mut x = code;
        let mut label = vec![0; m];
        for i in 0..m {
            let base = if gpu_at[i].is_some() { g } else { g + 1 };
            label[i] = x % base;
            x /= base;
        }
        let used: std::collections::BTreeSet<usize> = (0..m)
            .filter(|&i| gpu_at[i].is_some())
            .map(|i| label[i])
            .collect();
        let k = used.len();
        if k < 2 || (0..m).any(|i| gpu_at[i].is_none() && label[i] < g && !used.contains(&label[i]))
        {
            continue;
        }
        let grouped = |i: usize| label[i] < g;
        let (mut out, mut inn) = (0.0, 0.0);
        for e in t.graph.edge_references() {
            let (a, b) = (e.source().index(), e.target().index());
            if label[a] != label[b] {
                out += if grouped(a) { e.weight().bw_gbps } else { 0.0 };
                inn += if grouped(b) { e.weight().bw_gbps } else { 0.0 };
            }
        }
        best = best.min((g - 1) as f64 / g as f64 * f64::min(out, inn) / (k - 1) as f64);
    }
    best
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn bounds_match_every_cut_enumerated() {
    let (mut grouped, mut checked) = (0, 0);
    for seed in 0..60u64 {
        let g = 2 + (seed % 5) as u32;
        let s = (seed % 4) as u32;
        let t = random_graph(seed, g, s);
        let b = Bounds::every_link(&t);
        let nf = (g - 1) as f64;
        let (ag, rs) = (brute_ratio(&t, false), brute_ratio(&t, true));
        let got = |k| b.of(&t, k, 0).unwrap().unwrap();
        let x = got(CollectiveKind::AllGather);
        assert!(close(x.busbw_gbps, nf * ag), "seed {seed}: {x:?} vs {ag}");
        // The reported cut is one that attains it.
        assert!(close(x.cut.capacity_gbps / x.cut.ranks.len() as f64, ag));
        let y = got(CollectiveKind::ReduceScatter);
        assert!(close(y.busbw_gbps, nf * rs), "seed {seed}: {y:?} vs {rs}");
        let z = got(CollectiveKind::AllReduce);
        assert!(close(
            z.rs_ag_busbw_gbps.unwrap(),
            2.0 * nf / (1.0 / ag + 1.0 / rs)
        ));
        let gf = g as f64;
        let own = |rev| {
            (0..g)
                .map(|r| out_cap(&t, 1 << t.gpu_of_rank(r).unwrap().index(), rev))
                .sum::<f64>()
        };
        let volume = own(false).min(own(true)) / gf;
        let pair = 2.0 * nf / gf * brute_pair(&t);
        let groups = brute_groups(&t);
        let want = if groups.is_nan() {
            assert!(z.busbw_gbps <= pair.min(volume) * (1.0 + 1e-9));
            z.busbw_gbps
        } else {
            pair.min(volume).min(groups)
        };
        assert!(
            close(z.busbw_gbps, want),
            "seed {seed}: {z:?} vs pair {pair} volume {volume} groups {groups}"
        );
        assert!(z.rs_ag_busbw_gbps.unwrap() <= z.busbw_gbps * (1.0 + 1e-9));
        checked += usize::from(!groups.is_nan());
        if z.limit == Limit::Partition {
            grouped += 1;
            let k = z.groups.len() as f64;
            assert!(close(
                z.busbw_gbps,
                nf / gf * z.cut.capacity_gbps / (k - 1.0)
            ));
        }
        let root = (seed % g as u64) as u32;
        let bc = b.of(&t, CollectiveKind::Broadcast, root).unwrap().unwrap();
        assert!(close(bc.busbw_gbps, brute_rooted(&t, root, false)));
        assert!(close(bc.cut.capacity_gbps, bc.busbw_gbps));
        // Counting only the links paths use can only lower it.
        let routed = bound(&t, CollectiveKind::AllReduce, 0).unwrap().unwrap();
        assert!(routed.busbw_gbps <= z.busbw_gbps * (1.0 + 1e-12));
        let rd = b.of(&t, CollectiveKind::Reduce, root).unwrap().unwrap();
        assert!(close(rd.busbw_gbps, brute_rooted(&t, root, true)));
    }
    // Random graphs are rarely limited by groups (`four_cycle_is_limited_by_groups` is).
    assert!(checked >= 40, "{grouped} grouped, {checked} checked");
}

#[test]
fn four_cycle_is_limited_by_groups_and_packed_trees_reach_it() {
    // GPUs a, b, d, c in a cycle, a-c a double link (the cube-mesh GPUs 0,2,6,4): the GPUs'
    // own links allow 200/4 = 50 GB/s, the groups {a,c}, {b}, {d} 3/4 x 120/2 = 45, which
    // packed trees reach (every spanning tree of the cycle uses two of its single links).
    let mut t = Topology::new();
    let g: Vec<_> = (0..4).map(|r| t.add_node(Some(0), gpu(r))).collect();
    let link = |bw: f64| Link {
        kind: LinkKind::NvLink,
        bw_gbps: bw,
        lat_us: 0.0,
        count: 1,
    };
    for (a, b, bw) in [(0, 1, 20.0), (1, 3, 20.0), (3, 2, 20.0), (2, 0, 40.0)] {
        t.add_link(g[a], g[b], link(bw));
        t.add_link(g[b], g[a], link(bw));
    }
    t.validate().unwrap();
    let z = bound(&t, CollectiveKind::AllReduce, 0).unwrap().unwrap();
    assert_eq!(z.limit, Limit::Partition, "{z:?}");
    assert!(close(z.busbw_gbps, 45.0), "{z:?}");
    assert!(close(z.busbw_gbps, brute_groups(&t)));
    assert_eq!(z.groups, vec![vec![0, 2], vec![1], vec![3]]);
    assert!(close(z.cut.capacity_gbps, 120.0));
    let p = pack::pack(&t, 1e9).unwrap();
    assert!(close(p.ar_busbw_gbps, 45.0), "{p:?}");
}

#[test]
fn ring_of_equal_links_is_one_link() {
    // Four GPUs in a bidirectional ring of 10 GB/s links.
    let mut t = Topology::new();
    let g: Vec<_> = (0..4).map(|r| t.add_node(Some(0), gpu(r))).collect();
    for i in 0..4 {
        t.add_duplex(
            g[i],
            g[(i + 1) % 4],
            Link {
                kind: LinkKind::NvLink,
                bw_gbps: 10.0,
                lat_us: 0.0,
                count: 1,
            },
        );
    }
    t.validate().unwrap();
    let b = bound(&t, CollectiveKind::AllGather, 0).unwrap().unwrap();
    // Cut {two adjacent GPUs}: 2 links out, 2 GPUs: ratio 10; three GPUs: 20/3. Min 20/3.
    assert!(close(b.busbw_gbps, 20.0), "{b:?}");
    assert!(bound(&t, CollectiveKind::AllToAll, 0).unwrap().is_none());
    assert_eq!(
        bound(&t, CollectiveKind::Broadcast, 7),
        Err(BoundError::Root { root: 7, n: 4 })
    );
}

#[test]
fn clusters_merged_by_symmetry_match_the_whole_graph() {
    use crate::topology::{scale, Fabric, FabricKind};
    let kinds = [
        FabricKind::SingleSwitch,
        FabricKind::RailOptimized,
        FabricKind::FatTree {
            hosts_per_leaf: 2,
            oversubscription: 2.0,
        },
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        let link = if i == 1 {
            LinkKind::NvLink
        } else {
            LinkKind::Pcie
        };
        let node = crate::topology::synth::single_host(4, link, 20.0);
        let fabric = Fabric {
            kind,
            port_gbps: 5.0 + i as f64,
            switch_lat_us: 1.0,
        };
        let c = scale(&node, 5, fabric).unwrap();
        let mut whole = c.clone();
        // Without a fabric nothing is merged and every GPU is a sink.
        whole.fabric = None;
        for k in [
            CollectiveKind::AllGather,
            CollectiveKind::ReduceScatter,
            CollectiveKind::AllReduce,
            CollectiveKind::Broadcast,
            CollectiveKind::Reduce,
        ] {
            for root in [0, 6] {
                let a = bound(&c, k, root).unwrap().unwrap();
                let b = bound(&whole, k, root).unwrap().unwrap();
                assert!(
                    close(a.busbw_gbps, b.busbw_gbps),
                    "{i} {k:?}: {a:?} vs {b:?}"
                );
            }
        }
    }
}
