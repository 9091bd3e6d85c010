//! Planning speed on a 1024-node × 8-GPU cluster (8192 ranks): the channel search, the tuner for
//! every collective at 15 sizes, and building + validating the chosen all-reduce schedules.
//! `cargo bench -p planner --bench plan8192` (one thread; prints medians of 5 runs).

use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind};
use planner::topology::*;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let machine = load_file(
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/topologies/azure-ndv5-topo.xml"
        )),
        &LoadOptions::default(),
    )
    .expect("fixture");
    let fabric = Fabric {
        kind: FabricKind::RailOptimized,
        port_gbps: 50.0,
        switch_lat_us: 0.6,
    };
    let t = scale(&machine.topology, 1024, fabric).expect("scale");
    let sizes: Vec<u64> = (0..15).map(|i| 8u64 << (2 * i)).collect();
    let (mut search, mut tune, mut small, mut large) = (vec![], vec![], vec![], vec![]);
    for _ in 0..5 {
        let t0 = Instant::now();
        let p = Planner::new(&t).expect("plan");
        search.push(t0.elapsed().as_secs_f64() * 1e3);
        let t1 = Instant::now();
        for kind in CollectiveKind::ALL {
            let mut c = Collective::new(kind);
            c.root = Some(0);
            c.send_peers = (0..8192).map(|i| Some((i + 1) % 8192)).collect();
            for &b in &sizes {
                std::hint::black_box(p.choose(&c, b));
            }
        }
        tune.push(t1.elapsed().as_secs_f64() * 1e3);
        let ar = Collective::new(CollectiveKind::AllReduce);
        for (bytes, out) in [(1u64 << 20, &mut small), (1 << 30, &mut large)] {
            let ch = p.choose(&ar, bytes);
            let nch =
                matches!(ch.algorithm, Algorithm::Ring | Algorithm::Tree).then_some(ch.channels);
            let t2 = Instant::now();
            let s = p
                .schedule(&ar, &ch.algorithm, ch.protocol, nch)
                .expect("schedule");
            out.push(t2.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(s);
        }
    }
    println!("plan8192: {} ranks, {} hosts", t.n_ranks(), t.n_hosts);
    println!(
        "  channel search (Planner::new)            {:8.1} ms",
        median(search.clone())
    );
    println!(
        "  tuner, 7 collectives x 15 sizes          {:8.1} ms",
        median(tune.clone())
    );
    println!(
        "  all-reduce 1 MiB schedule (build+validate) {:6.1} ms",
        median(small.clone())
    );
    println!(
        "  all-reduce 1 GiB schedule (build+validate) {:6.1} ms",
        median(large.clone())
    );
    println!(
        "  plan (search + tuner + one schedule)     {:8.1} ms",
        median(search) + median(tune) + median(large)
    );
}
