//! GPU tests of the planner's packed spanning-tree schedules (`Algorithm::Packed`;
//! docs/planner.md, "Packed trees") on 3 to 8 ranks sharing GPU 0 in one process
//! (`CudaGroup::new(&[0; n])`), through the CUDA backend's generic lowering. The packings are
//! those of shipped topologies and their subsets: the DGX-1 hybrid cube mesh of
//! `azure-ndv2-topo.xml` read as V100s, the 8-GPU NVSwitch machine, Azure NCv4 and 4×A6000.
//! All-reduce, all-gather and reduce-scatter: every type × operator at counts 0 … 65,537 with
//! odd ones, odd counts to 4,194,307, LL where the lowering takes it, CUDA graph replay; in
//! place and out of place, random never-zero data, every element checked against
//! `runtime::reference`. Machines without a CUDA driver, NVRTC or a GPU (CI) skip with a
//! message; the CPU test at the end runs everywhere.
//!
//! Each rank runs its part of the packed machine's trees; only the transfers stay inside one
//! GPU. These tests time nothing.
//! The device command: `bash scripts/device/check.sh packed` (see its header).

#[macro_use]
mod common;

use common::{assert_right, check_only, gpu, ops};
use cuda::CudaGroup;
use gpubench::harness::check_schedule_on;
use planner::plan::Planner;
use planner::schedule::{Algorithm, Collective, CollectiveKind, Protocol, Schedule};
use planner::topology::{load_str, LoadOptions};
use runtime::{DataType, ReduceOp};
use std::sync::Arc;

/// The collectives the planner packs trees for.
const KINDS: [CollectiveKind; 3] = [
    CollectiveKind::AllReduce,
    CollectiveKind::AllGather,
    CollectiveKind::ReduceScatter,
];

/// A shipped topology and the GPU subsets packed on it. The files are compiled in, so the test
/// binary runs from any directory (the device stages it alone).
struct Machine {
    file: &'static str,
    text: &'static str,
    /// `--gpu-model` for skeleton files.
    gpu_model: Option<&'static str>,
    subsets: &'static [&'static [u32]],
}

const MACHINES: [Machine; 4] = [
    // NVLink pairs and paths through the CPUs mixed: the irregular trees.
    Machine {
        file: "azure-ndv2-topo.xml",
        text: include_str!("../../tests/data/topologies/azure-ndv2-topo.xml"),
        gpu_model: Some("v100-sxm"),
        subsets: &[
            &[0, 2, 5],
            &[0, 1, 2, 3],
            &[0, 1, 4, 5],
            &[0, 1, 2, 3, 4],
            &[0, 1, 2, 4, 5, 6],
            &[0, 1, 2, 3, 4, 5, 6],
            &[0, 1, 2, 3, 4, 5, 6, 7],
        ],
    },
    // One NVSwitch: every subset of a size alike.
    Machine {
        file: "github-yccl-8xh800-nvswitch-topo.xml",
        text: include_str!("../../tests/data/topologies/github-yccl-8xh800-nvswitch-topo.xml"),
        gpu_model: None,
        subsets: &[
            &[0, 1, 2],
            &[0, 1, 2, 3],
            &[0, 1, 2, 3, 4],
            &[0, 1, 2, 3, 4, 5],
            &[0, 1, 2, 3, 4, 5, 6],
            &[0, 1, 2, 3, 4, 5, 6, 7],
        ],
    },
    // PCIe GPUs under the CPUs' root ports.
    Machine {
        file: "azure-ncv4-topo-2023.xml",
        text: include_str!("../../tests/data/topologies/azure-ncv4-topo-2023.xml"),
        gpu_model: None,
        subsets: &[&[0, 1, 3], &[0, 1, 2, 3]],
    },
    Machine {
        file: "github-yccl-4xa6000-topo.xml",
        text: include_str!("../../tests/data/topologies/github-yccl-4xa6000-topo.xml"),
        gpu_model: None,
        subsets: &[&[0, 2, 3], &[0, 1, 2, 3]],
    },
];

/// One packing: a machine's subset and the planner that packed it.
struct Packing {
    what: String,
    planner: Planner,
}

impl Packing {
    /// The packed schedule of `kind` in `proto`, checked to be packed trees.
    fn schedule(&self, kind: CollectiveKind, proto: Protocol) -> Schedule {
        let s = self
            .planner
            .schedule(&Collective::new(kind), &Algorithm::Packed, proto, None)
            .unwrap_or_else(|e| panic!("{}: packed {}: {e}", self.what, kind.name()));
        assert_eq!(s.algorithm, Algorithm::Packed, "{}", self.what);
        s
    }
}

/// Every packing of `n` ranks the tests run, in [`MACHINES`] order.
fn packings(n: u32) -> Vec<Packing> {
    let mut v = Vec::new();
    for m in &MACHINES {
        let opts = LoadOptions {
            gpu_model: m.gpu_model.map(String::from),
            nic_gbps: None,
        };
        let t = load_str(m.text, m.file, &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", m.file))
            .topology;
        for gpus in m.subsets.iter().filter(|g| g.len() == n as usize) {
            let what = format!("{} GPUs {gpus:?}", m.file);
            let sub = t.subset(gpus).unwrap_or_else(|e| panic!("{what}: {e}"));
            let planner = Planner::new(&sub).unwrap_or_else(|e| panic!("{what}: {e}"));
            v.push(Packing { what, planner });
        }
    }
    assert!(v.len() >= 2, "{n} ranks: {} packings", v.len());
    v
}

/// Whether the generic lowering takes `s`: LL needs traffic both ways between every pair of
/// ranks that talk (its flags travel with the data), which some packed trees lack; such
/// schedules are refused with `LowerError::Unsupported` whatever the count.
fn lowers(s: &Schedule) -> bool {
    use cuda::lower::{lower, LowerError};
    match lower(s, common::check_params(1, false, ReduceOp::Sum, 4)) {
        Ok(_) => true,
        Err(LowerError::Unsupported(_)) if s.protocol == Protocol::LL => false,
        Err(e) => panic!("{} {:?}: {e}", s.collective.kind.name(), s.protocol),
    }
}

/// What one GPU test runs on every packing of its rank count.
struct Case<'a> {
    proto: Protocol,
    dtypes: &'a [DataType],
    /// The operators of the reducing collectives; `None`: every one.
    ops: Option<&'a [ReduceOp]>,
    counts: &'a [u64],
    cuda_graph: bool,
    seed: u64,
}

/// Runs `c` on `n` ranks sharing GPU 0: every packing of `n`, every collective whose packed
/// schedule in `c.proto` the lowering takes, one group for them all. Returns how many
/// configurations ran.
fn run_case(test: &str, n: u32, c: &Case) -> usize {
    let g = CudaGroup::new(&vec![0; n as usize]).unwrap_or_else(|e| panic!("{test}: {e}"));
    assert!(g.shares_devices());
    let (mut configs, mut refused) = (0, Vec::new());
    for p in packings(n) {
        for kind in KINDS {
            let sched = Arc::new(p.schedule(kind, c.proto));
            if !lowers(&sched) {
                refused.push(format!("{} {}", p.what, kind.name()));
                continue;
            }
            let ops = match c.ops {
                Some(list) if kind.reduces() => list.to_vec(),
                _ => ops(kind),
            };
            for &dtype in c.dtypes {
                for &op in &ops {
                    let cfg = gpubench::harness::BenchConfig {
                        algo: format!("packed {:?}", c.proto),
                        cuda_graph: c.cuda_graph,
                        ..check_only(kind, n, dtype, op, c.counts, c.seed + configs as u64)
                    };
                    let what = format!(
                        "{test}: {}, {n} ranks on GPU 0, {} {:?} {} {}{}",
                        p.what,
                        kind.name(),
                        c.proto,
                        dtype.nccl_name(),
                        op.name(),
                        if c.cuda_graph { " (graph)" } else { "" }
                    );
                    let rows = check_schedule_on(&g, &cfg, &sched)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(rows.len(), c.counts.len());
                    assert_right(&what, &rows);
                    configs += 1;
                }
            }
        }
    }
    if !refused.is_empty() {
        eprintln!(
            "{test}: the lowering refuses {:?} for {}",
            c.proto,
            refused.join(", ")
        );
    }
    eprintln!("{test}: {configs} configurations, 0 wrong elements");
    assert!(configs > 0, "{test}: nothing ran");
    configs
}

/// Every type × operator at counts 0, 1 and odd ones: most of the trees' chunks empty or one
/// element, then partial vectors and several CTAs' shares.
fn every_type_and_op(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let c = Case {
        proto: Protocol::Simple,
        dtypes: &DataType::ALL,
        ops: None,
        counts: &[0, 1, 7, 4099, 65537],
        cuda_graph: false,
        seed: 101 + n as u64,
    };
    run_case(test, n, &c);
}

/// Larger odd counts: chunks of many vectors and CTAs, 16 MiB of floats per rank.
fn large_counts(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let c = Case {
        proto: Protocol::Simple,
        dtypes: &[DataType::F32, DataType::Bf16],
        ops: Some(&[ReduceOp::Sum]),
        counts: &[262_147, 4_194_307],
        cuda_graph: false,
        seed: 203 + n as u64,
    };
    run_case(test, n, &c);
}

/// Counts of the LL test: up to what every rank's LL buffers hold in 8-byte elements (the CPU
/// test checks that every packing lowers at the largest).
const LL_COUNTS: [u64; 5] = [0, 1, 7, 4099, 16411];

/// The packed trees in LL (what the planner offers at small sizes), where the lowering takes
/// them: elements of 1, 2, 4 and 8 bytes in the flagged lines.
fn ll(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let c = Case {
        proto: Protocol::LL,
        dtypes: &[DataType::I8, DataType::F16, DataType::F32, DataType::F64],
        ops: Some(&[ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max]),
        counts: &LL_COUNTS,
        cuda_graph: false,
        seed: 409 + n as u64,
    };
    run_case(test, n, &c);
}

/// The checked call replayed from a captured CUDA graph.
fn graph_replay(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let c = Case {
        proto: Protocol::Simple,
        dtypes: &[DataType::F32, DataType::F16],
        ops: Some(&[ReduceOp::Sum, ReduceOp::Avg]),
        counts: &[1, 4099, 1_048_579],
        cuda_graph: true,
        seed: 307 + n as u64,
    };
    run_case(test, n, &c);
}

per_rank_count! {
    n3_every_type_and_op => every_type_and_op(3);
    n4_every_type_and_op => every_type_and_op(4);
    n5_every_type_and_op => every_type_and_op(5);
    n6_every_type_and_op => every_type_and_op(6);
    n7_every_type_and_op => every_type_and_op(7);
    n8_every_type_and_op => every_type_and_op(8);
    n3_large_counts => large_counts(3);
    n4_large_counts => large_counts(4);
    n5_large_counts => large_counts(5);
    n6_large_counts => large_counts(6);
    n7_large_counts => large_counts(7);
    n8_large_counts => large_counts(8);
    n3_ll => ll(3);
    n4_ll => ll(4);
    n5_ll => ll(5);
    n6_ll => ll(6);
    n7_ll => ll(7);
    n8_ll => ll(8);
    n3_graph_replay => graph_replay(3);
    n4_graph_replay => graph_replay(4);
    n5_graph_replay => graph_replay(5);
    n6_graph_replay => graph_replay(6);
    n7_graph_replay => graph_replay(7);
    n8_graph_replay => graph_replay(8);
}

/// Runs without a GPU: every packing the GPU tests run (3 to 8 ranks on the shipped machines,
/// where `tests/plan_bound_lower.rs` lowers synthetic PCIe machines of 3, 4 and 6), in Simple
/// and in LL where the lowering takes it, lowered as the group lowers (loops flattened, copies
/// elided; a small scratch ring, so that its reuse is exercised) and emulated against
/// `runtime::reference`, in place and out of place: a wrong phase boundary would otherwise
/// only show on the GPU. The lowering must take every packed schedule in Simple, packed
/// all-reduce in LL (its trees carry data both ways), and every LL one at the LL test's
/// largest count.
#[test]
fn every_packing_lowers_to_the_reference_result() {
    let (mut cases, mut ll_refused, mut seen) = (0, 0, 0);
    for n in 3..=8u32 {
        for p in packings(n) {
            seen += 1;
            for kind in KINDS {
                for proto in [Protocol::Simple, Protocol::LL] {
                    let s = p.schedule(kind, proto);
                    if !lowers(&s) {
                        assert_ne!(kind, CollectiveKind::AllReduce, "{} {proto:?}", p.what);
                        ll_refused += 1;
                        continue;
                    }
                    for count in [1u64, 7, 4099] {
                        cases += emulate(&p.what, &s, count);
                    }
                    if proto == Protocol::LL {
                        fits_ll(&p.what, &s);
                    }
                }
            }
        }
    }
    eprintln!(
        "{cases} lowered packed cases emulated, 0 wrong elements; \
         {ll_refused} packed all-gather or reduce-scatter schedules refused in LL"
    );
    // Every subset listed has 3 to 8 GPUs, so each ran above.
    let listed: usize = MACHINES.iter().map(|m| m.subsets.len()).sum();
    assert_eq!(seen, listed);
}

/// Asserts the LL test's largest count of 8-byte elements lowers: the LL buffers take it.
fn fits_ll(what: &str, s: &Schedule) {
    use cuda::lower::{lower, LowerParams};
    let count = LL_COUNTS[LL_COUNTS.len() - 1];
    for in_place in [false, true] {
        let p = LowerParams {
            count,
            in_place,
            average: false,
            scratch_cap: (64 << 20) / 8,
            flatten_loops: true,
            elide_copies: true,
            ce_push: true,
            elem_bytes: 8,
        };
        if let Err(e) = lower(s, p) {
            panic!(
                "{what}: {} LL, {count} elements, in place {in_place}: {e}",
                s.collective.kind.name()
            );
        }
    }
}

/// Lowers `s` for `count` elements in place and not, with sum, average and max, emulates each
/// and asserts every rank's output is the reference's. Returns how many cases ran.
fn emulate(what: &str, s: &Schedule, count: u64) -> usize {
    use cuda::lower::{check_against_reference, lower};
    let cases = [
        (false, ReduceOp::Sum),
        (true, ReduceOp::Sum),
        (false, ReduceOp::Avg),
        (true, ReduceOp::Max),
    ];
    for (in_place, op) in cases {
        let what = format!(
            "{what}: {} {:?} on {} ranks, {count} elements, {} in place {in_place}",
            s.collective.kind.name(),
            s.protocol,
            s.nranks,
            op.name()
        );
        let l = lower(s, common::check_params(count, in_place, op, 8))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let checked = check_against_reference(s, &l, count, in_place, op, count ^ 0x5eed);
        assert_eq!(checked, Ok(()), "{what}");
    }
    cases.len()
}
