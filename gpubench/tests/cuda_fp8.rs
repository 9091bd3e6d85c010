//! FP8 reductions on the GPU against `runtime::fp8`, ranks sharing GPU 0: every pair of codes
//! (NaN, infinities, saturation, subnormals, signed zeros) through a two-rank all-reduce of
//! each operator, every byte compared; then random data through all-reduce, reduce-scatter and
//! reduce of every operator on 2 and 5 ranks, every algorithm the runtime offers, each element
//! checked against the CPU reference. Machines without a CUDA driver, NVRTC or a GPU (CI) skip
//! with a message. The device command: `bash scripts/device/check.sh quick` (it runs every
//! staged `cuda_*` binary).

// Unsafe: the test makes device buffers and copies through the driver's raw API.
#![allow(unsafe_code)]

#[macro_use]
mod common;

use common::{assert_right, check_only, gpu};
use cuda::{schedules, CudaGroup, Request};
use cudarc::driver::sys;
use gpubench::harness::{check_on, BenchConfig};
use planner::schedule::{Collective, CollectiveKind};
use runtime::{DataType, ReduceOp};

const FP8: [DataType; 2] = [DataType::F8E4M3, DataType::F8E5M2];
const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

/// Rank `r`'s input of the all-pairs check: element `256 a + b` is `a` on rank 0, `b` on rank 1.
fn pairs_input(r: usize) -> Vec<u8> {
    (0..=255u8)
        .flat_map(|a| (0..=255u8).map(move |b| if r == 0 { a } else { b }))
        .collect()
}

/// Runs `dtype`/`op` all-reduce of the two pair inputs on ranks sharing GPU 0 and returns
/// each rank's output.
#[allow(clippy::needless_range_loop)] // ranks index several parallel vectors
fn all_reduce_pairs(g: &CudaGroup, dtype: DataType, op: ReduceOp) -> Vec<Vec<u8>> {
    let coll = Collective::new(CollectiveKind::AllReduce);
    let bytes = 1usize << 16;
    let profile = planner::tuner::Profile::bundled();
    let (_, sched) = schedules::pick(&coll, 2, bytes as u64, "auto", profile).unwrap();
    let sched = std::sync::Arc::new(sched);
    let (mut ins, mut outs, mut streams) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        let input = pairs_input(r);
        let mut s: sys::CUstream = std::ptr::null_mut();
        let (mut i, mut o): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
        // SAFETY: out-pointers valid; context bound; sizes match the host vector.
        unsafe {
            sys::cuStreamCreate(&mut s, 0).result().unwrap();
            sys::cuMemAlloc_v2(&mut i, bytes).result().unwrap();
            sys::cuMemAlloc_v2(&mut o, bytes).result().unwrap();
            sys::cuMemcpyHtoD_v2(i, input.as_ptr() as *const _, bytes)
                .result()
                .unwrap();
            sys::cuMemsetD8_v2(o, 0x5A, bytes).result().unwrap();
        }
        ins.push(i);
        outs.push(o);
        streams.push(s);
    }
    for r in 0..2 {
        let req = Request {
            schedule: &sched,
            count: bytes as u64,
            dtype,
            op,
            inputs: &ins,
            outputs: &outs,
        };
        g.enqueue(r, &req, streams[r])
            .unwrap_or_else(|e| panic!("{dtype:?} {op:?}: rank {r}: {e}"));
    }
    (0..2)
        .map(|r| {
            g.context(r).bind_to_thread().unwrap();
            let mut got = vec![0u8; bytes];
            // SAFETY: stream and buffers live; the copy's size matches `got`; freed once.
            unsafe {
                sys::cuStreamSynchronize(streams[r]).result().unwrap();
                sys::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut _, outs[r], bytes)
                    .result()
                    .unwrap();
                let _ = sys::cuMemFree_v2(ins[r]);
                let _ = sys::cuMemFree_v2(outs[r]);
                let _ = sys::cuStreamDestroy_v2(streams[r]);
            }
            got
        })
        .collect()
}

/// Every pair of codes of both formats under every operator: the GPU's bytes are the CPU's.
#[test]
fn every_pair_of_codes_reduces_as_on_the_cpu() {
    let test = "every_pair_of_codes_reduces_as_on_the_cpu";
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let g = CudaGroup::new(&[0, 0]).unwrap_or_else(|e| panic!("{test}: {e}"));
    let coll = Collective::new(CollectiveKind::AllReduce);
    let inputs = [pairs_input(0), pairs_input(1)];
    for dtype in FP8 {
        for op in OPS {
            let want = runtime::reference::expected_bytes(dtype, &coll, op, 1 << 16, &inputs);
            for (r, got) in all_reduce_pairs(&g, dtype, op).iter().enumerate() {
                let want = want[r].as_ref().expect("every rank has an output");
                let wrong: Vec<String> = (0..got.len())
                    .filter(|&i| got[i] != want[i])
                    .take(8)
                    .map(|i| {
                        format!(
                            "{:#04x} {} {:#04x} = {:#04x}, CPU {:#04x}",
                            i >> 8,
                            op.name(),
                            i & 255,
                            got[i],
                            want[i]
                        )
                    })
                    .collect();
                assert!(wrong.is_empty(), "{dtype:?} rank {r}: {wrong:#?}");
            }
        }
    }
    eprintln!("{test}: 2 formats x 4 operators x 65536 pairs, 0 wrong");
}

fn random(test: &str, n: u32) {
    let Some(_gpu) = gpu(test) else {
        return;
    };
    let ordinals = vec![0usize; n as usize];
    let kinds = [
        CollectiveKind::AllReduce,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Reduce,
    ];
    let mut configs = 0;
    for kind in kinds {
        let root = if kind == CollectiveKind::Reduce {
            n - 1
        } else {
            0
        };
        let g = CudaGroup::new(&ordinals).unwrap_or_else(|e| panic!("{test}: {e}"));
        for dtype in FP8 {
            for op in ReduceOp::ALL {
                let cfg = BenchConfig {
                    ordinals: ordinals.clone(),
                    root,
                    ..check_only(kind, n, dtype, op, &[1, 4099, 1_048_579], 17 + n as u64)
                };
                let what = format!(
                    "{test}: {} {} {}",
                    kind.name(),
                    dtype.nccl_name(),
                    op.name()
                );
                let rows = check_on(&g, &cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_right(&what, &rows);
                configs += 1;
            }
        }
    }
    eprintln!("{test}: {configs} configurations, 0 wrong elements");
}

per_rank_count! {
    n2_random_reductions => random(2);
    n5_random_reductions => random(5);
}
