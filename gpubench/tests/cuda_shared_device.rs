//! GPU tests of 3, 4, 6 and 8 ranks sharing GPU 0 in one process (`CudaGroup::new(&[0; n])`):
//! the n-rank paths (one-shot Simple, LL and LL128 on the direct path, pull mode, two-shot,
//! ring and tree through the generic lowering) on real hardware with one GPU. Every collective × type × operator, in place and out of place, counts
//! from 0 to more than 2^28 elements with odd ones, random never-zero data, every element
//! checked against `runtime::reference`, and CUDA graph replay. Machines without a CUDA driver,
//! NVRTC or a GPU (CI) skip with a message; the CPU test at the end runs everywhere.
//!
//! Timings of ranks sharing a GPU are not performance; these tests time nothing.
//! The device command: `bash scripts/device/check.sh shared` (see its header).

// Unsafe: the tests make device buffers and copies through the driver's raw API.
#![allow(unsafe_code)]

#[macro_use]
mod common;

use common::{assert_right, check_only, gpu, ops, GPU};
use cuda::{device, schedules, CudaGroup};
use gpubench::harness::{check_on, BenchConfig};
use planner::schedule::{Collective, CollectiveKind};
use runtime::{DataType, ReduceOp};

const KINDS: [CollectiveKind; 6] = [
    CollectiveKind::AllReduce,
    CollectiveKind::AllGather,
    CollectiveKind::ReduceScatter,
    CollectiveKind::Broadcast,
    CollectiveKind::Reduce,
    CollectiveKind::AllToAll,
];

fn root(kind: CollectiveKind, n: u32) -> u32 {
    // A root other than 0 exercises the roles' offsets.
    if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
        n - 1
    } else {
        0
    }
}

/// The algorithms that apply to `kind` on `n` ranks: every name `topoplan bench --algo` takes
/// whose builder makes a schedule of `n` ranks for it (the copy-engine pipeline, `ce`, is
/// built for 2 ranks only).
fn algos(kind: CollectiveKind, n: u32) -> Vec<&'static str> {
    let coll = coll(kind, n);
    schedules::ALGOS
        .iter()
        .copied()
        .filter(|a| {
            schedules::pick(&coll, n, 4096, a, planner::tuner::Profile::bundled())
                .is_ok_and(|(_, s)| s.nranks == n)
        })
        .collect()
}

fn coll(kind: CollectiveKind, n: u32) -> Collective {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => {
            Collective::rooted(kind, root(kind, n))
        }
        k => Collective::new(k),
    }
}

/// The check-only configuration of one collective, algorithm, type and operator of `c`.
fn config(
    ordinals: &[usize],
    kind: CollectiveKind,
    algo: &str,
    dtype: DataType,
    op: ReduceOp,
    c: &Case,
) -> BenchConfig {
    BenchConfig {
        ordinals: ordinals.to_vec(),
        root: root(kind, c.n),
        algo: algo.into(),
        cuda_graph: c.cuda_graph,
        ..check_only(kind, c.n, dtype, op, c.counts, c.seed)
    }
}

struct Case<'a> {
    n: u32,
    kinds: &'a [CollectiveKind],
    dtypes: &'a [DataType],
    all_ops: bool,
    counts: &'a [u64],
    cuda_graph: bool,
    seed: u64,
}

/// Runs `case` on `n` ranks sharing GPU 0, every algorithm that applies (one group per
/// collective and algorithm). Returns how many configurations ran.
fn run_case(test: &str, c: &Case) -> usize {
    let n = c.n;
    let ordinals = vec![0usize; n as usize];
    let mut configs = 0;
    for &kind in c.kinds {
        for algo in algos(kind, n) {
            // The copy-engine counters live on the host: graphs cannot replay them.
            if c.cuda_graph && algo == "ce" {
                continue;
            }
            let g = CudaGroup::new(&ordinals).unwrap_or_else(|e| panic!("{test}: {n} ranks: {e}"));
            assert!(g.shares_devices());
            let ops = if c.all_ops {
                ops(kind)
            } else if kind.reduces() {
                vec![ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max]
            } else {
                vec![ReduceOp::Sum]
            };
            for &dtype in c.dtypes {
                for &op in &ops {
                    let cfg = config(&ordinals, kind, algo, dtype, op, c);
                    let what = format!(
                        "{test}: {n} ranks on GPU 0, {} {algo} {} {}{}",
                        kind.name(),
                        dtype.nccl_name(),
                        op.name(),
                        if c.cuda_graph { " (graph)" } else { "" }
                    );
                    let rows = check_on(&g, &cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(rows.len(), c.counts.len());
                    assert_right(&what, &rows);
                    configs += 1;
                }
            }
        }
    }
    eprintln!("{test}: {configs} configurations, 0 wrong elements");
    configs
}

/// Every collective × type × operator × algorithm at counts 0, 1 and odd ones (one element, a
/// partial vector, several CTAs' shares), in place and out of place.
fn every_type_and_op(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    run_case(
        test,
        &Case {
            n,
            kinds: &KINDS,
            dtypes: &DataType::ALL,
            all_ops: true,
            counts: &[0, 1, 7, 4099, 65537],
            cuda_graph: false,
            seed: 11 + n as u64,
        },
    );
}

/// Larger odd counts (several segments and slots, pull mode's range, the LL128 lines' tails) on
/// every algorithm, fewer types and operators.
fn large_counts(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    run_case(
        test,
        &Case {
            n,
            kinds: &KINDS,
            dtypes: &[DataType::F32, DataType::Bf16],
            all_ops: false,
            counts: &[262_147, 1_048_579],
            cuda_graph: false,
            seed: 23 + n as u64,
        },
    );
}

/// The checked call replayed from a captured CUDA graph (every algorithm but `ce`).
fn graph_replay(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    run_case(
        test,
        &Case {
            n,
            kinds: &KINDS,
            dtypes: &[DataType::F32, DataType::F16],
            all_ops: false,
            counts: &[1, 4099, 1_048_579],
            cuda_graph: true,
            seed: 37 + n as u64,
        },
    );
}

per_rank_count! {
    n3_every_type_and_op => every_type_and_op(3);
    n4_every_type_and_op => every_type_and_op(4);
    n6_every_type_and_op => every_type_and_op(6);
    n8_every_type_and_op => every_type_and_op(8);
    n3_large_counts => large_counts(3);
    n4_large_counts => large_counts(4);
    n6_large_counts => large_counts(6);
    n8_large_counts => large_counts(8);
    n3_graph_replay => graph_replay(3);
    n4_graph_replay => graph_replay(4);
    n6_graph_replay => graph_replay(6);
    n8_graph_replay => graph_replay(8);
}

/// More than 2^28 elements per rank: 2^28 + 3 floats (1 GiB + 12 B per rank) all-reduced by 4
/// ranks on GPU 0, the runtime's own pick and the ring, in place and out of place.
#[test]
fn n4_all_reduce_of_more_than_2_pow_28_elements() {
    let test = "n4_all_reduce_of_more_than_2_pow_28_elements";
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let count = (1u64 << 28) + 3;
    let g = CudaGroup::new(&[0; 4]).unwrap_or_else(|e| panic!("{test}: {e}"));
    for algo in ["auto", "ring"] {
        let cfg = BenchConfig {
            algo: algo.into(),
            ..check_only(
                CollectiveKind::AllReduce,
                4,
                DataType::F32,
                ReduceOp::Sum,
                &[count],
                5,
            )
        };
        let rows = check_on(&g, &cfg).unwrap_or_else(|e| panic!("{test} {algo}: {e}"));
        assert_eq!(rows[0].count, count);
        assert_right(&format!("{test} {algo}"), &rows);
    }
}

/// Two ranks on GPU 0: the copy-engine pair (`--algo ce`) and the hybrid's sizes fall back to
/// the one-shot direct path there (their copy engines would only copy within one GPU), and
/// are right; the rows' algo column says so.
#[test]
fn n2_copy_engine_paths_fall_back_on_one_gpu() {
    let test = "n2_copy_engine_paths_fall_back_on_one_gpu";
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let g = CudaGroup::new(&[0, 0]).unwrap_or_else(|e| panic!("{test}: {e}"));
    // 512 MiB + 16 KiB of floats: the hybrid's range on two GPUs.
    let counts = [1_048_579u64, (512 << 18) + 4096];
    for algo in ["auto", "ce"] {
        for op in [ReduceOp::Sum, ReduceOp::Avg] {
            let c = Case {
                n: 2,
                kinds: &[CollectiveKind::AllReduce],
                dtypes: &[DataType::F32],
                all_ops: false,
                counts: &counts,
                cuda_graph: false,
                seed: 3,
            };
            let cfg = config(
                &[0, 0],
                CollectiveKind::AllReduce,
                algo,
                DataType::F32,
                op,
                &c,
            );
            let rows = check_on(&g, &cfg).unwrap_or_else(|e| panic!("{test} {algo}: {e}"));
            assert_right(&format!("{test} {algo} {}", op.name()), &rows);
            for r in &rows {
                assert!(
                    !r.algo.contains("+ce"),
                    "no hybrid on a shared GPU: {}",
                    r.algo
                );
                if algo == "ce" {
                    assert_eq!(r.algo, "ce>one-shot");
                }
            }
        }
    }
}

/// Runs without a GPU: ranks sharing a GPU with fewer hardware queues than 32 are refused
/// before any device is opened, naming the variable; with 32 and no driver the group is the
/// driver error, not a panic.
#[test]
fn shared_groups_are_refused_without_every_hardware_queue() {
    let test = "shared_groups_are_refused_without_every_hardware_queue";
    if device::driver_present() {
        // The driver reads the variable once per process: changing it here proves nothing.
        eprintln!("SKIP {test}: a CUDA driver is present");
        return;
    }
    use cuda::CudaError;
    let _gpu = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let var = "CUDA_DEVICE_MAX_CONNECTIONS";
    let before = std::env::var_os(var);
    std::env::set_var(var, "4");
    let e = CudaGroup::new(&[0; 4]).expect_err("4 queues");
    let one = CudaGroup::new(&[0]).expect_err("no driver");
    std::env::set_var(var, "32");
    let e32 = CudaGroup::new(&[0; 4]).expect_err("no driver");
    match before {
        Some(v) => std::env::set_var(var, v),
        None => std::env::remove_var(var),
    }
    match &e {
        CudaError::Queues(q) => assert_eq!((q.device, q.ranks, q.queues), (0, 4, 4)),
        other => panic!("expected a queue error, got {other}"),
    }
    assert!(
        e.to_string().contains("CUDA_DEVICE_MAX_CONNECTIONS=32"),
        "{e}"
    );
    assert!(matches!(e32, CudaError::NoDriver), "{e32}");
    assert!(
        matches!(one, CudaError::NoDriver),
        "one rank per GPU needs no queues: {one}"
    );
}

/// Runs without a GPU: what the matrix above sends through the generic lowering (two-shot, ring,
/// tree, the copy-engine pipeline, and the one-shot variants as `TOPOPLAN_DIRECT=0` runs them)
/// on 3, 4, 6 and 8 ranks, lowered with the group's parameters and emulated (all reads of a
/// phase before its writes) against `runtime::reference`, in place and out of place. The
/// lowering's own tests stop at 4 ranks; a wrong phase boundary at 6 or 8 would otherwise only
/// show on the GPU. Every collective must have the direct path's algorithms and the ring (the
/// all-to-all: its direct schedules).
#[test]
fn the_matrix_lowerings_match_the_reference_on_3_to_8_ranks() {
    let mut cases = 0;
    for n in [3u32, 4, 6, 8] {
        for kind in KINDS {
            let a = algos(kind, n);
            eprintln!("{} on {n} ranks: {}", kind.name(), a.join(" "));
            let wanted: &[&str] = if kind == CollectiveKind::AllToAll {
                &["auto", "direct", "direct-ll"]
            } else {
                &["auto", "one-shot", "one-shot-ll", "one-shot-ll128", "ring"]
            };
            for &want in wanted {
                assert!(
                    a.contains(&want),
                    "{} on {n} ranks lacks {want}: {a:?}",
                    kind.name()
                );
            }
            let c = coll(kind, n);
            for algo in a.into_iter().filter(|&x| x != "auto") {
                for count in [1u64, 7, 4099] {
                    let (_, s) =
                        schedules::pick(&c, n, count * 8, algo, planner::tuner::Profile::bundled())
                            .unwrap();
                    let case = MatrixCase {
                        coll: &c,
                        n,
                        algo,
                        count,
                        sched: &s,
                    };
                    for (in_place, op) in [
                        (false, ReduceOp::Sum),
                        (true, ReduceOp::Sum),
                        (false, ReduceOp::Avg),
                        (true, ReduceOp::Max),
                    ] {
                        if case.emulate_and_check(in_place, op) {
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!("{cases} lowered cases emulated, 0 wrong elements");
    assert!(cases > 500, "{cases}");
}

/// One schedule of the matrix: `algo` for `coll` on `n` ranks, `count` elements per rank.
struct MatrixCase<'a> {
    coll: &'a Collective,
    n: u32,
    algo: &'a str,
    count: u64,
    sched: &'a planner::schedule::Schedule,
}

impl MatrixCase<'_> {
    /// Lowers the schedule with the group's parameters, emulates it on random data and asserts
    /// every rank's output is the reference's; false where the lowering refuses the case.
    fn emulate_and_check(&self, in_place: bool, op: ReduceOp) -> bool {
        use cuda::lower::{lower, LowerError};
        let (c, n, algo, count) = (self.coll, self.n, self.algo, self.count);
        let kind = c.kind;
        let what = format!(
            "{} {algo} on {n} ranks, {count} elements, {} in place {in_place}",
            kind.name(),
            op.name()
        );
        let l = match lower(self.sched, common::check_params(count, in_place, op, 8)) {
            // One-way LL flows (broadcast, reduce) are refused by the lowering;
            // the direct path runs them.
            Err(LowerError::Unsupported(_)) if algo == "one-shot-ll" => return false,
            r => r.unwrap_or_else(|e| panic!("{what}: {e}")),
        };
        let checked =
            cuda::lower::check_against_reference(self.sched, &l, count, in_place, op, 9 + count);
        assert_eq!(checked, Ok(()), "{what}");
        true
    }
}
