//! Clusters as `topoplan topo scale` builds them from the shipped topologies, and the planner's
//! and the engine's view of them (`clusters.rs`).

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol};
use planner::topology::{scale, Fabric, FabricKind, Topology};
use planner::tuner::Filter;
use sim::nccl::Model;
use sim::price::Agreement;
use sim::SimConfig;

/// Two hosts of the shipped topology `file`, joined by `kind` with `port_gbps` ports.
pub fn pair(file: &str, kind: FabricKind, port_gbps: f64) -> Topology {
    hosts(&format!("tests/data/topologies/{file}"), 2, kind, port_gbps)
}

/// `nodes` hosts of the topology at `file` (from the repository's root), joined by `kind` with
/// `port_gbps` ports.
pub fn hosts(file: &str, nodes: u32, kind: FabricKind, port_gbps: f64) -> Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(file);
    let node = planner::topology::load_file(&path, &Default::default())
        .unwrap()
        .topology;
    let fabric = Fabric {
        kind,
        port_gbps,
        switch_lat_us: 0.6,
    };
    scale(&node, nodes, fabric).unwrap()
}

/// Two 8×H800 hosts, NIC i of each on rail i, 400 Gbit/s ports.
pub fn h800_rail_pair() -> Topology {
    pair(
        "github-yccl-8xh800-nvswitch-topo.xml",
        FabricKind::RailOptimized,
        50.0,
    )
}

/// `nodes` NDv4 hosts on a fat tree of 4 hosts per leaf, 200 Gbit/s ports, the leaves' uplinks
/// `oversubscription`:1.
pub fn ndv4_fat_tree(nodes: u32, oversubscription: f64) -> Topology {
    let fat_tree = FabricKind::FatTree {
        hosts_per_leaf: 4,
        oversubscription,
    };
    hosts(
        "tests/data/topologies/azure-ndv4-topo.xml",
        nodes,
        fat_tree,
        25.0,
    )
}

/// Two 8×A100 NDv4 hosts on one switch, 200 Gbit/s ports: two GPUs and two NICs under each
/// PCIe switch.
pub fn ndv4_pair() -> Topology {
    pair("azure-ndv4-topo.xml", FabricKind::SingleSwitch, 25.0)
}

/// Two 4×A6000 hosts on one switch, 100 Gbit/s ports: PCIe hosts with every NIC on one CPU.
pub fn a6000_pair() -> Topology {
    pair(
        "github-yccl-4xa6000-topo.xml",
        FabricKind::SingleSwitch,
        12.5,
    )
}

/// The planner of `t` and the engine's configuration from its profile.
pub fn planned(t: &Topology) -> (Planner, SimConfig) {
    let p = Planner::new(t).unwrap();
    let cfg = SimConfig::from_profile(&p.profile().profile, "derived").unwrap();
    (p, cfg)
}

/// A forced candidate on `t` (planned as `p`, the engine's configuration `cfg`): the tuner's
/// `algo`/`proto` candidate for `coll` at `bytes`, its schedule's channels, and the engine's time
/// for that schedule (µs), run in `mode`.
pub fn forced(
    (t, p, cfg): (&Topology, &Planner, &SimConfig),
    coll: &Collective,
    (algo, proto): (Algorithm, Protocol),
    bytes: u64,
    mode: sim::Mode,
) -> (planner::plan::Candidate, u32, f64) {
    let cache = sim::price::Schedules::default();
    let pricer = sim::price::EnginePricer::with_cache(t, p, cfg, &cache);
    let c = p.candidates_filtered(coll, bytes, &Filter::only(algo, proto))[0].clone();
    let s = pricer.schedule(coll, &c, None).unwrap();
    let run = SimConfig {
        mode,
        ..pricer.config(&s, bytes)
    };
    let e = sim::simulate(t, &s, bytes, &run).unwrap().time_us;
    (c, s.channels, e)
}

/// The tuner's `tuner_us` is within `bound` (a fraction) of the engine's `engine_us` for `what`.
pub fn assert_near(tuner_us: f64, engine_us: f64, bound: f64, what: &str) {
    assert!(
        (tuner_us / engine_us - 1.0).abs() <= bound,
        "{what}: tuner {tuner_us:.0} µs, engine {engine_us:.0}"
    );
}

/// `coll` at `bytes` as NCCL runs it in ring Simple on `t`: its busbw (nccl-tests' factor
/// `busf`) over the searched rings' bandwidth (channels × per-channel rate), and the channels.
pub fn ring_simple_share(t: &Topology, coll: &Collective, bytes: u64, busf: f64) -> (f64, String) {
    let (p, cfg) = planned(t);
    let f = Filter::only(Algorithm::Ring, Protocol::Simple);
    let r = Model::new(t, &p).run(t, &p, coll, bytes, &f, &cfg).unwrap();
    let ring = p.channels().ring_run();
    let searched_gbps = ring.count as f64 * ring.bw_gbps;
    let busbw = bytes as f64 / 1000.0 / r.time_us * busf;
    let why = format!(
        "{busbw:.1} GB/s busbw, rings {searched_gbps:.1} GB/s ({} channels)",
        r.choice.channels
    );
    (busbw / searched_gbps, why)
}

/// The planner's pick of `kind` at `bytes` on `t` with the tuner's and the engine's price.
pub fn row(t: &Topology, kind: CollectiveKind, bytes: u64) -> Agreement {
    let (p, cfg) = planned(t);
    let rows = sim::price::agreement(t, &p, &cfg, &[bytes]);
    rows.into_iter().find(|r| r.kind == kind).unwrap()
}

/// The engine priced `r`'s pick and the tuner is within `bound` (a fraction) of it.
pub fn assert_agrees(r: &Agreement, bound: f64) {
    assert!(
        r.by_engine && r.tuner_error().abs() < bound,
        "{} {} B {} {:?}: tuner {:.2} us, engine {:.2} us",
        r.kind.name(),
        r.bytes,
        r.algorithm,
        r.protocol,
        r.tuner_us,
        r.picked_us
    );
}

/// The clusters of `docs/fidelity.md`'s table, built as `topoplan topo scale` builds them.
pub fn table_clusters() -> Vec<(&'static str, u32, Topology)> {
    use planner::topology::doc::ClusterDoc;
    use planner::topology::{scale_doc, topology_of};
    let cases = [
        (
            "tests/data/topologies/github-yccl-4xa6000-topo.xml",
            2,
            "switch",
            100.0,
        ),
        ("examples/h200x2-topo.json", 4, "switch", 400.0),
        (
            "tests/data/topologies/github-yccl-8xh800-nvswitch-topo.xml",
            2,
            "rail",
            400.0,
        ),
        (
            "tests/data/topologies/azure-ndv4-topo.xml",
            4,
            "fat-tree",
            200.0,
        ),
        (
            "tests/data/topologies/aws-p5-48xl-topo-2023.xml",
            2,
            "rail",
            400.0,
        ),
    ];
    let mut out = Vec::new();
    for (file, nodes, fabric, nic_gbps) in cases {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(file);
        let node = planner::topology::load_file(&path, &Default::default()).unwrap();
        let cluster = ClusterDoc {
            nodes,
            fabric: fabric.into(),
            nic_gbps,
            oversubscription: 1.0,
            hosts_per_leaf: None,
            switch_lat_us: planner::topology::doc::DEFAULT_SWITCH_LAT_US,
        };
        let mut doc = scale_doc(&node.doc, cluster).unwrap();
        let t = topology_of(&mut doc, file, &Default::default(), &mut Vec::new()).unwrap();
        out.push((file, nodes, t));
    }
    out
}
