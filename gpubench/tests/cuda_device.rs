//! GPU test of the CUDA backend: all-reduce, all-gather, reduce-scatter, broadcast and reduce on
//! every GPU pair present, checked element by element against `runtime::reference`, and average
//! on arbitrary floats bit for bit. Machines without a CUDA driver or with fewer than 2 GPUs (CI)
//! skip with a message.

// Unsafe: the tests make device buffers and copies through the driver's raw API.
#![allow(unsafe_code)]

use gpubench::harness::{run, BenchConfig};
use planner::schedule::CollectiveKind;
use runtime::{DataType, ReduceOp};

mod common;
use common::two_gpus;

/// The schedule `auto` runs for a 2-GPU float all-reduce of `bytes` per rank, checked to be the
/// Simple one-shot (which pulls from 512 KiB when the inputs allow it).
fn one_shot_all_reduce(bytes: usize) -> std::sync::Arc<planner::schedule::Schedule> {
    let coll = planner::schedule::Collective::new(CollectiveKind::AllReduce);
    let (algo, sched) = cuda::schedules::pick(
        &coll,
        2,
        bytes as u64,
        "auto",
        planner::tuner::Profile::bundled(),
    )
    .unwrap();
    assert_eq!(algo, "one-shot");
    std::sync::Arc::new(sched)
}

/// Waits for rank `r`'s `stream`, copies its float output back and counts the elements that are
/// not the sum of both ranks' inputs (`host`).
fn wrong_sums(
    g: &cuda::CudaGroup,
    r: usize,
    stream: cudarc::driver::sys::CUstream,
    out: cudarc::driver::sys::CUdeviceptr,
    host: &[Vec<f32>],
) -> usize {
    use cudarc::driver::sys;
    let count = host[0].len();
    g.context(r).bind_to_thread().unwrap();
    let mut got = vec![0f32; count];
    // SAFETY: stream and buffer live; the copy's size matches `got`.
    unsafe {
        sys::cuStreamSynchronize(stream)
            .result()
            .unwrap_or_else(|e| panic!("rank {r}: {e:?}"));
        sys::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut _, out, count * 4)
            .result()
            .unwrap();
    }
    (0..count)
        .filter(|&k| got[k] != host[0][k] + host[1][k])
        .count()
}

#[test]
fn collectives_match_the_reference_on_gpus() {
    if !two_gpus("collectives_match_the_reference_on_gpus") {
        return;
    }
    for kind in [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast,
        CollectiveKind::Reduce,
    ] {
        // `ce`: the copy-engine pair all-reduce (two ranks, all-reduce only).
        let algos: &[&str] = if kind == CollectiveKind::AllReduce {
            &["one-shot", "auto", "ce"]
        } else {
            &["one-shot", "auto"]
        };
        for &algo in algos {
            let cfg = BenchConfig {
                ordinals: vec![0, 1],
                kind,
                root: 1,
                dtype: DataType::F32,
                op: ReduceOp::Sum,
                algo: algo.into(),
                // 130 MiB spans several copy-engine chunks and an odd tail; 512 MiB all-reduce
                // runs the hybrid (direct path and copy engines on one call).
                sizes: if kind == CollectiveKind::AllReduce {
                    vec![8, 4104, 1 << 20, (130 << 20) + 12, (512 << 20) + 4096 * 4]
                } else {
                    vec![8, 4104, 1 << 20, (130 << 20) + 12]
                },
                warmup: 1,
                iters: 2,
                check: true,
                vs_nccl: false,
                cuda_graph: false,
                runs: 1,
                seed: 7,
            };
            let (rows, _) =
                run(&cfg, |_| {}).unwrap_or_else(|e| panic!("{} {algo}: {e}", kind.name()));
            for r in rows {
                assert_eq!(
                    (r.oop.wrong, r.ip.wrong),
                    (0, 0),
                    "{} {algo} size {}",
                    kind.name(),
                    r.size
                );
            }
        }
    }
}

/// Pull mode reads the peers' inputs, so it must only run on memory every GPU may read. Inputs
/// from a stream-ordered pool without peer access (PyTorch-style allocators) must fall back to
/// the push path: a pulled load from them would fault the context. The 1 MiB all-reduce below is
/// pulled when the inputs are readable (`auto`: pull from 512 KiB); here it must push, and the
/// result must still be right. Then granting the peers read access makes them pullable.
#[test]
#[allow(clippy::needless_range_loop)] // ranks index several parallel vectors
fn pull_mode_only_reads_memory_the_peers_may_read() {
    use cuda::direct::pull::readable_from;
    use cuda::{CudaGroup, Request};
    if !two_gpus("pull_mode_only_reads_memory_the_peers_may_read") {
        return;
    }
    let g = CudaGroup::new(&[0, 1]).unwrap();
    let count = 262_147usize; // 1 MiB + 12 B of f32: pull mode's range, an odd tail
    let bytes = count * 4;
    let PoolBuffers {
        streams,
        pools,
        ins,
        outs,
        host,
    } = pool_buffers(&g, count);
    assert!(
        !readable_from(ins[0], 1) && !readable_from(ins[1], 0),
        "pool memory without peer access"
    );
    assert_mem_alloc_is_peer_readable(&g);
    let sched = one_shot_all_reduce(bytes);
    let run_once = |label: &str| {
        for r in 0..2 {
            let req = Request {
                schedule: &sched,
                count: count as u64,
                dtype: DataType::F32,
                op: ReduceOp::Sum,
                inputs: &ins,
                outputs: &outs,
            };
            g.enqueue(r, &req, streams[r])
                .unwrap_or_else(|e| panic!("{label}: rank {r}: {e}"));
        }
        for r in 0..2 {
            let wrong = wrong_sums(&g, r, streams[r], outs[r], &host);
            assert_eq!(wrong, 0, "{label}: rank {r}: {wrong} wrong elements");
        }
    };
    run_once("pool memory without peer access (push path)");
    grant_peers_pool_access(&g, &pools);
    assert!(
        readable_from(ins[0], 1) && readable_from(ins[1], 0),
        "after cuMemPoolSetAccess"
    );
    run_once("pool memory with peer access (pull mode)");
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        // SAFETY: allocated above on this stream; the stream is idle.
        unsafe {
            use cudarc::driver::sys;
            sys::cuMemFreeAsync(ins[r], streams[r]).result().unwrap();
            sys::cuMemFreeAsync(outs[r], streams[r]).result().unwrap();
            sys::cuStreamSynchronize(streams[r]).result().unwrap();
            sys::cuStreamDestroy_v2(streams[r]).result().unwrap();
        }
    }
}

/// Per rank of a two-GPU group: a stream, its device's default memory pool, and an input
/// (`host[r]` uploaded) and a poisoned output allocated from that pool on the stream.
struct PoolBuffers {
    streams: Vec<cudarc::driver::sys::CUstream>,
    pools: Vec<cudarc::driver::sys::CUmemoryPool>,
    ins: Vec<cudarc::driver::sys::CUdeviceptr>,
    outs: Vec<cudarc::driver::sys::CUdeviceptr>,
    host: Vec<Vec<f32>>,
}

/// Allocates [`PoolBuffers`] of `count` floats per rank (stream-ordered, without peer access).
fn pool_buffers(g: &cuda::CudaGroup, count: usize) -> PoolBuffers {
    use cudarc::driver::sys;
    let bytes = count * 4;
    let mut streams = Vec::new();
    let mut pools = Vec::new();
    let (mut ins, mut outs, mut host) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..2 {
        let ctx = g.context(r);
        ctx.bind_to_thread().unwrap();
        let mut s: sys::CUstream = std::ptr::null_mut();
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let (mut i, mut o): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
        let data: Vec<f32> = (0..count)
            .map(|k| ((k * 7 + r * 13) % 1000) as f32 * 0.25 - 100.0)
            .collect();
        // SAFETY: out-pointers valid; the context is bound; sizes match the host vector.
        unsafe {
            sys::cuStreamCreate(&mut s, 0).result().unwrap();
            sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device())
                .result()
                .unwrap();
            sys::cuMemAllocFromPoolAsync(&mut i, bytes, pool, s)
                .result()
                .unwrap();
            sys::cuMemAllocFromPoolAsync(&mut o, bytes, pool, s)
                .result()
                .unwrap();
            sys::cuMemcpyHtoDAsync_v2(i, data.as_ptr() as *const _, bytes, s)
                .result()
                .unwrap();
            sys::cuMemsetD8Async(o, 0xff, bytes, s).result().unwrap();
            sys::cuStreamSynchronize(s).result().unwrap();
        }
        streams.push(s);
        pools.push(pool);
        ins.push(i);
        outs.push(o);
        host.push(data);
    }
    PoolBuffers {
        streams,
        pools,
        ins,
        outs,
        host,
    }
}

/// Positive control: `cuMemAlloc` memory is covered by the group's peer access.
fn assert_mem_alloc_is_peer_readable(g: &cuda::CudaGroup) {
    use cudarc::driver::sys;
    g.context(0).bind_to_thread().unwrap();
    let mut legacy: sys::CUdeviceptr = 0;
    // SAFETY: out-pointer valid; context bound.
    unsafe { sys::cuMemAlloc_v2(&mut legacy, 4096) }
        .result()
        .unwrap();
    assert!(
        cuda::direct::pull::readable_from(legacy, 1),
        "cuMemAlloc memory under peer access"
    );
    // SAFETY: allocated just above, unused.
    unsafe { sys::cuMemFree_v2(legacy) }.result().unwrap();
}

/// Grants each peer read-write access to the other's pool: pull mode may then read it.
fn grant_peers_pool_access(g: &cuda::CudaGroup, pools: &[cudarc::driver::sys::CUmemoryPool]) {
    use cudarc::driver::sys;
    for (r, &pool) in pools.iter().enumerate() {
        g.context(r).bind_to_thread().unwrap();
        let desc = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: (1 - r) as i32,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the pool belongs to rank r's device; one valid descriptor.
        unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) }
            .result()
            .unwrap();
    }
}

/// A pulled call captured in a CUDA graph in **global** capture mode (PyTorch's default), where
/// "potentially unsafe" driver calls invalidate the capture: pull mode's pointer queries run with
/// the thread's capture mode exchanged to relaxed and restored (`RelaxedCapture` in
/// `direct/pull.rs`), so the capture must succeed and its replay be right.
#[test]
#[allow(clippy::needless_range_loop)] // ranks index several parallel vectors
fn pulled_call_captures_in_global_mode() {
    use cuda::{CudaGroup, Request};
    use cudarc::driver::sys;
    if !two_gpus("pulled_call_captures_in_global_mode") {
        return;
    }
    let g = CudaGroup::new(&[0, 1]).unwrap();
    let count = 262_147usize;
    let bytes = count * 4;
    let (mut streams, mut ins, mut outs, mut host) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        let mut s: sys::CUstream = std::ptr::null_mut();
        let (mut i, mut o): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
        let data: Vec<f32> = (0..count)
            .map(|k| ((k * 11 + r * 5) % 997) as f32 * 0.5 - 200.0)
            .collect();
        // SAFETY: out-pointers valid; the context is bound; sizes match the host vector.
        unsafe {
            sys::cuStreamCreate(&mut s, 0).result().unwrap();
            sys::cuMemAlloc_v2(&mut i, bytes).result().unwrap();
            sys::cuMemAlloc_v2(&mut o, bytes).result().unwrap();
            sys::cuMemcpyHtoD_v2(i, data.as_ptr() as *const _, bytes)
                .result()
                .unwrap();
        }
        streams.push(s);
        ins.push(i);
        outs.push(o);
        host.push(data);
    }
    let sched = one_shot_all_reduce(bytes);
    let req = Request {
        schedule: &sched,
        count: count as u64,
        dtype: DataType::F32,
        op: ReduceOp::Sum,
        inputs: &ins,
        outputs: &outs,
    };
    // One eager call first: module loading is not a capturable operation.
    for r in 0..2 {
        g.enqueue(r, &req, streams[r]).unwrap();
    }
    let mut graphs = Vec::new();
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        // SAFETY: a live stream of the bound context; outputs poisoned before the capture.
        unsafe {
            sys::cuStreamSynchronize(streams[r]).result().unwrap();
            sys::cuMemsetD8_v2(outs[r], 0xff, bytes).result().unwrap();
            sys::cuStreamBeginCapture_v2(
                streams[r],
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
            )
            .result()
            .unwrap();
        }
        let enq = g.enqueue(r, &req, streams[r]);
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: the stream is capturing; out-pointers valid.
        let end = unsafe { sys::cuStreamEndCapture(streams[r], &mut graph) }.result();
        enq.unwrap_or_else(|e| panic!("rank {r}: enqueue under global capture: {e}"));
        end.unwrap_or_else(|e| panic!("rank {r}: capture invalidated: {e:?}"));
        // SAFETY: `graph` came from the capture.
        unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) }
            .result()
            .unwrap();
        graphs.push((graph, exec));
    }
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        // SAFETY: instantiated above for this stream's context.
        unsafe { sys::cuGraphLaunch(graphs[r].1, streams[r]) }
            .result()
            .unwrap();
    }
    for r in 0..2 {
        let wrong = wrong_sums(&g, r, streams[r], outs[r], &host);
        // SAFETY: the stream is idle (`wrong_sums` waited for it); each object destroyed once.
        unsafe {
            let _ = sys::cuGraphExecDestroy(graphs[r].1);
            let _ = sys::cuGraphDestroy(graphs[r].0);
            let _ = sys::cuMemFree_v2(ins[r]);
            let _ = sys::cuMemFree_v2(outs[r]);
            let _ = sys::cuStreamDestroy_v2(streams[r]);
        }
        assert_eq!(
            wrong, 0,
            "rank {r}: {wrong} wrong elements after the replay"
        );
    }
}

/// Arbitrary values (not the checks' small integers, whose averages are exact whatever the
/// rounding): every sign, exponents 2^-30 … 2^30 with random mantissas, and every 97th element
/// an f32 subnormal (its average rounds). Little-endian bytes of `count` elements of `dtype`.
fn arbitrary_floats(dtype: DataType, count: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = Vec::with_capacity(count * dtype.size());
    for k in 0..count {
        let r = next();
        let f = if k % 97 == 0 {
            f32::from_bits((r as u32) & 0x807F_FFFF) // subnormal (or zero), either sign
        } else {
            let mant = 1.0 + (r >> 11 & 0xF_FFFF) as f32 / (1u32 << 20) as f32;
            let exp = ((r >> 40) % 61) as i32 - 30;
            let sign = if r >> 63 == 1 { -1.0 } else { 1.0 };
            sign * mant * 2f32.powi(exp)
        };
        match dtype {
            DataType::F32 => out.extend_from_slice(&f.to_le_bytes()),
            DataType::F64 => {
                let d = f as f64 * (1.0 + (r & 0x7FF) as f64 / 4096.0); // more mantissa than f32
                out.extend_from_slice(&d.to_le_bytes());
            }
            DataType::Bf16 => out.extend_from_slice(&half::bf16::from_f32(f).to_le_bytes()),
            _ => unreachable!("float types only"),
        }
    }
    out
}

/// Average on arbitrary floats must match the CPU reference bit for bit. The kernels multiply by
/// 2^-k for a power-of-two rank count where the reference divides (`tp_div` in `exec.cu`); this
/// holds only if both round the same value once. Sizes cover each path `auto` runs: LL, pull,
/// push (Simple), and the hybrid (direct path + copy engines), out of and in place.
#[test]
#[allow(clippy::needless_range_loop)] // ranks index several parallel vectors
fn average_matches_the_reference_bit_for_bit() {
    use cuda::{CudaGroup, Request};
    use cudarc::driver::sys;
    if !two_gpus("average_matches_the_reference_bit_for_bit") {
        return;
    }
    let g = CudaGroup::new(&[0, 1]).unwrap();
    let coll = planner::schedule::Collective::new(CollectiveKind::AllReduce);
    let cases: &[(DataType, usize)] = &[
        (DataType::F32, 1_027),
        (DataType::F32, 262_147),
        (DataType::F32, 8_388_611),
        (DataType::F32, (512 << 20) / 4 + 3),
        (DataType::Bf16, 262_147),
        (DataType::Bf16, 16_777_219),
        (DataType::F64, 65_539),
        (DataType::F64, 4_194_307),
    ];
    for &(dtype, count) in cases {
        let bytes = count * dtype.size();
        let inputs: Vec<Vec<u8>> = (0..2)
            .map(|r| arbitrary_floats(dtype, count, 11 + r as u64))
            .collect();
        let want = runtime::reference::expected_bytes(dtype, &coll, ReduceOp::Avg, count, &inputs);
        let (algo, sched) = cuda::schedules::pick(
            &coll,
            2,
            bytes as u64,
            "auto",
            planner::tuner::Profile::bundled(),
        )
        .unwrap();
        let sched = std::sync::Arc::new(sched);
        for in_place in [false, true] {
            let label = format!("{dtype:?} × {count} ({algo}, in place {in_place})");
            let (mut ins, mut outs, mut streams) = (Vec::new(), Vec::new(), Vec::new());
            for r in 0..2 {
                g.context(r).bind_to_thread().unwrap();
                let mut s: sys::CUstream = std::ptr::null_mut();
                let (mut i, mut o): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
                // SAFETY: out-pointers valid; context bound; sizes match the host vectors.
                unsafe {
                    sys::cuStreamCreate(&mut s, 0).result().unwrap();
                    sys::cuMemAlloc_v2(&mut i, bytes).result().unwrap();
                    sys::cuMemcpyHtoD_v2(i, inputs[r].as_ptr() as *const _, bytes)
                        .result()
                        .unwrap();
                    if in_place {
                        o = i;
                    } else {
                        sys::cuMemAlloc_v2(&mut o, bytes).result().unwrap();
                        sys::cuMemsetD8_v2(o, 0x7B, bytes).result().unwrap();
                    }
                }
                ins.push(i);
                outs.push(o);
                streams.push(s);
            }
            for r in 0..2 {
                let req = Request {
                    schedule: &sched,
                    count: count as u64,
                    dtype,
                    op: ReduceOp::Avg,
                    inputs: &ins,
                    outputs: &outs,
                };
                g.enqueue(r, &req, streams[r])
                    .unwrap_or_else(|e| panic!("{label}: rank {r}: {e}"));
            }
            for r in 0..2 {
                g.context(r).bind_to_thread().unwrap();
                let mut got = vec![0u8; bytes];
                // SAFETY: stream and buffers live; the copy's size matches `got`; freed once.
                unsafe {
                    sys::cuStreamSynchronize(streams[r])
                        .result()
                        .unwrap_or_else(|e| panic!("{label}: rank {r}: {e:?}"));
                    sys::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut _, outs[r], bytes)
                        .result()
                        .unwrap();
                    sys::cuMemFree_v2(ins[r]).result().unwrap();
                    if !in_place {
                        sys::cuMemFree_v2(outs[r]).result().unwrap();
                    }
                    sys::cuStreamDestroy_v2(streams[r]).result().unwrap();
                }
                let w = want[r].as_ref().expect("all-reduce output");
                let wrong = runtime::reference::count_wrong(dtype, &got, w, 0.0);
                let first = got
                    .chunks_exact(dtype.size())
                    .zip(w.chunks_exact(dtype.size()))
                    .position(|(a, b)| a != b);
                assert!(
                    got == *w,
                    "{label}: rank {r}: {wrong} elements differ from the reference (bits); first at {first:?}"
                );
            }
        }
    }
}
