//! GPU test of the split experiments (`direct::split`: push and pull halves of one all-reduce
//! in one grid; `TOPOPLAN_HYBRID_SIDE=pull`: the hybrid's side range pulled on a second stream),
//! checked element by element against `runtime::reference` on random data, in and out of place.
//! Their knobs are read once per process, so this file (its own test binary) sets them before
//! anything reads them and holds one test. Machines without a CUDA driver or with fewer than 2
//! GPUs (CI) skip with a message. Written in session 12 after its device time: not yet run on a
//! GPU.

use planner::schedule::CollectiveKind;
use runtime::cuda::harness::{run, BenchConfig};
use runtime::{DataType, ReduceOp};

mod common;
use common::two_gpus;

#[test]
fn split_calls_match_the_reference_on_gpus() {
    // Split calls from 32 MiB to 256 MiB per rank, the pull-side hybrid from 512 MiB.
    std::env::set_var("TOPOPLAN_SPLIT_PCT", "30");
    std::env::set_var("TOPOPLAN_HYBRID_SIDE", "pull");
    if !two_gpus("split_calls_match_the_reference_on_gpus") {
        return;
    }
    for (dtype, op) in [
        (DataType::F32, ReduceOp::Sum),
        (DataType::F32, ReduceOp::Avg),
        (DataType::F16, ReduceOp::Max),
    ] {
        let elem = dtype.size() as u64;
        let cfg = BenchConfig {
            ordinals: vec![0, 1],
            kind: CollectiveKind::AllReduce,
            root: 0,
            dtype,
            op,
            algo: "auto".into(),
            // An odd count past 32 MiB, 64 MiB, and a hybrid size with an odd tail.
            sizes: vec![(32 << 20) + 3 * elem, 64 << 20, (512 << 20) + 5 * elem],
            warmup: 1,
            iters: 2,
            check: true,
            vs_nccl: false,
            cuda_graph: false,
            runs: 1,
            seed: 11,
        };
        let (rows, _) = run(&cfg, |_| {}).unwrap_or_else(|e| panic!("{dtype:?} {op:?}: {e}"));
        let algos: Vec<&str> = rows.iter().map(|r| r.algo.as_str()).collect();
        assert_eq!(
            algos,
            ["one-shot-split", "one-shot-split", "one-shot+pull"],
            "{dtype:?} {op:?}"
        );
        for r in rows {
            assert_eq!(
                (r.oop.wrong, r.ip.wrong),
                (0, 0),
                "{dtype:?} {op:?} size {}",
                r.size
            );
        }
    }
}
