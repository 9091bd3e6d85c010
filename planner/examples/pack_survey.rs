//! Packs spanning trees on a topology (and optionally every subset of its GPUs of given sizes)
//! and prints, per case, the bound, what the packing reaches and how long it took.
//! `cargo run --release -p planner --example pack_survey -- FILE [MIN MAX]`

use planner::bound::{pack::pack, Bounds};
use planner::schedule::CollectiveKind;
use planner::topology::{load_file, LoadOptions, Topology};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t = load_file(args[1].as_ref(), &LoadOptions::default())
        .expect("topology")
        .topology;
    let n = t.n_ranks() as u32;
    let (lo, hi) = match (args.get(2), args.get(3)) {
        (Some(a), Some(b)) => (a.parse().unwrap(), b.parse().unwrap()),
        _ => (n, n),
    };
    let mut worst = (f64::INFINITY, String::new());
    for mask in 1u32..(1 << n) {
        let k = mask.count_ones();
        if k < lo || k > hi {
            continue;
        }
        let gpus: Vec<u32> = (0..n).filter(|g| mask >> g & 1 == 1).collect();
        let s: Topology = t.subset(&gpus).expect("subset");
        let t0 = Instant::now();
        let p = pack(&s, 16.0).expect("packing");
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        let b = Bounds::new(&s);
        let ar = b.of(&s, CollectiveKind::AllReduce, 0).unwrap().unwrap();
        let ag = b.of(&s, CollectiveKind::AllGather, 0).unwrap().unwrap();
        let r = p.ar_busbw_gbps / ar.rs_ag_busbw_gbps.unwrap();
        println!(
            "{gpus:?}: AG bound {:.1} packed {:.1} | AR bound {:.1} rs+ag {:.1} packed {:.1} ({:.1}% of rs+ag, {:.1}% of bound) copies {} depth {} {:.1} ms",
            ag.busbw_gbps, p.ag_busbw_gbps, ar.busbw_gbps, ar.rs_ag_busbw_gbps.unwrap(), p.ar_busbw_gbps,
            100.0 * r, 100.0 * p.ar_busbw_gbps / ar.busbw_gbps, p.copies, p.depth, dt
        );
        if r < worst.0 {
            worst = (r, format!("{gpus:?}"));
        }
    }
    println!("worst packed/rs+ag: {:.1}% at {}", 100.0 * worst.0, worst.1);
}
