//! Helpers of the GPU tests: whether the GPUs they need are present (else they print `SKIP` and
//! pass), the lock that keeps one group on the GPU at a time, the check-only configuration of
//! `gpubench::harness::check_on` and the assertion on its rows.

// Every test binary compiles this whole module and uses part of it.
#![allow(dead_code)]

/// One `#[test]` per line `name => f(n);`, calling `f("name", n)`: the same test at each rank
/// count, each its own test so a device run can pick and time them one by one.
#[allow(unused_macros)]
macro_rules! per_rank_count {
    ($($name:ident => $f:ident($n:expr);)*) => {
        $(
            #[test]
            fn $name() {
                $f(stringify!($name), $n);
            }
        )*
    };
}

use cuda::device;
use gpubench::harness::{BenchConfig, Row};
use planner::schedule::CollectiveKind;
use runtime::{DataType, ReduceOp};

/// CUDA devices present: 0 without a driver (CI).
fn gpus() -> usize {
    if !device::driver_present() {
        return 0;
    }
    cudarc::driver::CudaContext::device_count()
        .map(|n| n as usize)
        .unwrap_or(0)
}

/// Whether 2 GPUs and a CUDA driver are present; otherwise prints why `test` skips (CI).
pub fn two_gpus(test: &str) -> bool {
    let n = gpus();
    if n < 2 {
        eprintln!("SKIP {test}: needs 2 GPUs and a CUDA driver, found {n} GPU(s)");
    }
    n >= 2
}

/// Held by every test of ranks sharing a GPU while it runs: each group's grids assume its ranks
/// are alone on the GPU, so two groups of this process must not run at once (`cargo test` runs
/// tests on several threads).
pub static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The GPU, held until the guard drops, when it is present (see [`one_gpu`]).
pub fn gpu(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    one_gpu(test).then(|| GPU.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Whether a GPU, its driver and NVRTC are present; otherwise prints why `test` skips. Before
/// the first CUDA call it gives the process every hardware queue, which ranks sharing a GPU
/// need (`cuda::residency::check_queues`).
pub fn one_gpu(test: &str) -> bool {
    static QUEUES: std::sync::Once = std::sync::Once::new();
    QUEUES.call_once(|| {
        if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
            std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", "32");
        }
    });
    let gpus = gpus();
    let ok = gpus >= 1 && device::nvrtc_present();
    if !ok {
        eprintln!(
            "SKIP {test}: needs a GPU, its CUDA driver and NVRTC (found {gpus} GPU(s), NVRTC {})",
            if device::nvrtc_present() {
                "present"
            } else {
                "missing"
            }
        );
    }
    ok
}

/// nccl-tests sizes in bytes for per-rank element `counts` (all-gather, reduce-scatter,
/// all-to-all: the whole gathered, scattered or exchanged buffer).
pub fn sizes(kind: CollectiveKind, n: u32, dtype: DataType, counts: &[u64]) -> Vec<u64> {
    let per = match kind {
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            n as u64
        }
        _ => 1,
    };
    counts
        .iter()
        .map(|c| c * per * dtype.size() as u64)
        .collect()
}

/// Every operator where `kind` reduces, else sum alone (the others would repeat it).
pub fn ops(kind: CollectiveKind) -> Vec<ReduceOp> {
    if kind.reduces() {
        ReduceOp::ALL.to_vec()
    } else {
        vec![ReduceOp::Sum]
    }
}

/// One checked call per size of `counts` (elements per rank), out of place and in place, no
/// timing and no NCCL; `algo`, `root`, `cuda_graph` and `ordinals` as the caller sets them.
pub fn check_only(
    kind: CollectiveKind,
    n: u32,
    dtype: DataType,
    op: ReduceOp,
    counts: &[u64],
    seed: u64,
) -> BenchConfig {
    BenchConfig {
        ordinals: vec![0; n as usize],
        kind,
        root: 0,
        dtype,
        op,
        algo: "auto".into(),
        sizes: sizes(kind, n, dtype, counts),
        warmup: 0,
        iters: 1,
        check: true,
        vs_nccl: false,
        cuda_graph: false,
        runs: 1,
        seed,
    }
}

/// Checks every row of one configuration: zero wrong elements in place and out of place.
pub fn assert_right(what: &str, rows: &[Row]) {
    for r in rows {
        assert_eq!(
            (r.oop.wrong, r.ip.wrong),
            (0, 0),
            "{what} size {} B ({}): wrong elements (out of place, in place)",
            r.size,
            r.algo
        );
    }
}

/// The lowering parameters the emulated checks use: a 64 Ki-element scratch ring (the group's
/// is 64 MiB; these counts need far less), loops flattened, copies elided, copy engines pushing.
pub fn check_params(
    count: u64,
    in_place: bool,
    op: ReduceOp,
    elem_bytes: u64,
) -> cuda::lower::LowerParams {
    cuda::lower::LowerParams {
        count,
        in_place,
        average: op == ReduceOp::Avg,
        scratch_cap: 1 << 16,
        flatten_loops: true,
        elide_copies: true,
        ce_push: true,
        elem_bytes,
    }
}
