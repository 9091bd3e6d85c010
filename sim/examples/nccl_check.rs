//! Prints `--as nccl` against the shipped 2×H200 nccl-tests curves (a development aid:
//! `cargo run --release -p sim --example nccl_check`).
use planner::schedule::CollectiveKind;
use planner::topology::{load_file, LoadOptions};
use sim::fidelity::{compare, compare_as_nccl, markdown, parse_nccl_tests};

fn main() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/measurements/h200x2");
    let t = load_file(&dir.join("topo.xml"), &LoadOptions::default())
        .unwrap()
        .topology;
    let p = planner::plan::Planner::new(&t).unwrap();
    let cfg = sim::SimConfig::default();
    for (k, f) in [
        (CollectiveKind::AllReduce, "all_reduce_g2.txt"),
        (CollectiveKind::AllGather, "all_gather_g2.txt"),
    ] {
        let m = parse_nccl_tests(&std::fs::read_to_string(dir.join(f)).unwrap());
        let r = compare_as_nccl(&t, &p, k, &m, &Default::default(), &cfg).unwrap();
        println!("{} as nccl\n{}", k.name(), markdown(&r));
        let r = compare(&t, k, &m, &cfg).unwrap();
        println!("{} reference\n{}", k.name(), markdown(&r));
    }
}
