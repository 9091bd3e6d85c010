//! `--measure`: a short all-reduce bench with NCCL on the local GPUs (the `bench --vs-nccl`
//! harness), returned as an nccl-tests run so that the busbw checks judge it like a file.

use super::nccl_tests::{Half, Row, Run};
use super::Args;

pub fn run(a: &Args) -> Result<Run, String> {
    if !cuda::device::driver_present() {
        return Err(
            "no CUDA driver on this machine (libcuda.so not found): nothing measured".into(),
        );
    }
    let n = gpubench::detect::probe()
        .map_err(|e| format!("cannot list the GPUs: {e}"))?
        .gpus
        .len();
    let ngpus = a.ngpus.unwrap_or(n.min(8));
    if ngpus < 2 || ngpus > n {
        return Err(format!(
            "needs 2 or more GPUs ({n} visible, {ngpus} asked): nothing measured"
        ));
    }
    let cfg = gpubench::harness::BenchConfig {
        ordinals: (0..ngpus).collect(),
        kind: planner::schedule::CollectiveKind::AllReduce,
        root: 0,
        dtype: runtime::DataType::F32,
        op: runtime::ReduceOp::Sum,
        algo: "auto".into(),
        sizes: vec![1 << 20, 16 << 20, 256 << 20],
        warmup: 3,
        iters: 10,
        check: false,
        vs_nccl: true,
        cuda_graph: false,
        runs: 1,
        seed: 1,
    };
    let (rows, _) = gpubench::harness::run(&cfg, |_| {}).map_err(|e| e.to_string())?;
    let half = |c: &gpubench::harness::Cell| -> Option<Half> {
        Some(Half {
            time_us: c.nccl_time_us?,
            algbw: c.nccl_busbw? / (2.0 * (ngpus as f64 - 1.0) / ngpus as f64),
            busbw: c.nccl_busbw?,
            wrong: None,
        })
    };
    let rows = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            Some(Row {
                line: i + 1,
                size: r.size,
                count: r.count,
                dtype: "float".into(),
                redop: "sum".into(),
                root: -1,
                oop: half(&r.oop)?,
                ip: half(&r.ip)?,
            })
        })
        .collect::<Vec<_>>();
    if rows.is_empty() {
        return Err("the bench returned no NCCL numbers".into());
    }
    Ok(Run {
        file: format!("--measure (NCCL all-reduce on {ngpus} GPUs)"),
        collective: Some("all_reduce".into()),
        nranks: ngpus as u32,
        rows,
        avg_busbw: None,
        not_understood: vec![],
    })
}
