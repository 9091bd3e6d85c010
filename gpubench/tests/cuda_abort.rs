//! GPU test of aborts: a rank whose peer never enters the call spins in its kernel until the
//! group is aborted; its stream then completes within a second, `check` names the wait (aborted,
//! from rank 1, the rank's first call), later calls are refused, and a new group on the same
//! GPUs runs an all-reduce correctly. Machines without a CUDA driver or with fewer than 2 GPUs
//! (CI) skip with a message.

// Unsafe: the test makes device buffers and streams through the driver's raw API.
#![allow(unsafe_code)]

use cudarc::driver::sys;
use planner::schedule::{Collective, CollectiveKind};
use runtime::{DataType, ReduceOp};
use std::time::{Duration, Instant};

mod common;
use common::two_gpus;

const COUNT: usize = 65_536; // 256 KiB of f32 per rank

/// Every rank's input (filled with `rank + 1`), output and a non-blocking stream.
struct Bufs {
    ins: Vec<u64>,
    outs: Vec<u64>,
    streams: Vec<sys::CUstream>,
}

fn bufs(g: &cuda::CudaGroup) -> Bufs {
    let mut b = Bufs {
        ins: Vec::new(),
        outs: Vec::new(),
        streams: Vec::new(),
    };
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        let host = vec![(r + 1) as f32; COUNT];
        let (mut i, mut o, mut s) = (0, 0, std::ptr::null_mut());
        // SAFETY: out-pointers valid; the copy's size matches `host`.
        unsafe {
            sys::cuMemAlloc_v2(&mut i, COUNT * 4).result().unwrap();
            sys::cuMemAlloc_v2(&mut o, COUNT * 4).result().unwrap();
            sys::cuMemcpyHtoD_v2(i, host.as_ptr() as *const _, COUNT * 4)
                .result()
                .unwrap();
            let nb = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
            sys::cuStreamCreate(&mut s, nb).result().unwrap();
        }
        b.ins.push(i);
        b.outs.push(o);
        b.streams.push(s);
    }
    b
}

fn free(g: &cuda::CudaGroup, b: &Bufs) {
    for r in 0..2 {
        g.context(r).bind_to_thread().unwrap();
        // SAFETY: allocated in `bufs`; the streams are idle.
        unsafe {
            sys::cuStreamSynchronize(b.streams[r]).result().unwrap();
            sys::cuMemFree_v2(b.ins[r]).result().unwrap();
            sys::cuMemFree_v2(b.outs[r]).result().unwrap();
            sys::cuStreamDestroy_v2(b.streams[r]).result().unwrap();
        }
    }
}

fn schedule() -> std::sync::Arc<planner::schedule::Schedule> {
    let coll = Collective::new(CollectiveKind::AllReduce);
    let (_, s) = cuda::schedules::pick(
        &coll,
        2,
        (COUNT * 4) as u64,
        "one-shot",
        planner::tuner::Profile::bundled(),
    )
    .unwrap();
    std::sync::Arc::new(s)
}

fn request<'a>(
    s: &'a std::sync::Arc<planner::schedule::Schedule>,
    b: &'a Bufs,
) -> cuda::Request<'a> {
    cuda::Request {
        schedule: s,
        count: COUNT as u64,
        dtype: DataType::F32,
        op: ReduceOp::Sum,
        inputs: &b.ins,
        outputs: &b.outs,
    }
}

/// Whether `stream` completed within `limit`.
fn completes(g: &cuda::CudaGroup, r: usize, stream: sys::CUstream, limit: Duration) -> bool {
    g.context(r).bind_to_thread().unwrap();
    let t = Instant::now();
    while t.elapsed() < limit {
        // SAFETY: a live stream of this context.
        match unsafe { sys::cuStreamQuery(stream) } {
            sys::CUresult::CUDA_SUCCESS => return true,
            sys::CUresult::CUDA_ERROR_NOT_READY => std::thread::sleep(Duration::from_millis(1)),
            e => panic!("rank {r}: {e:?}"),
        }
    }
    false
}

#[test]
fn an_abort_releases_a_rank_whose_peer_never_came() {
    if !two_gpus("an_abort_releases_a_rank_whose_peer_never_came") {
        return;
    }
    let s = schedule();
    {
        let g = cuda::CudaGroup::new(&[0, 1]).unwrap();
        let b = bufs(&g);
        // Rank 1 never enqueues: rank 0's kernel waits for its data.
        g.enqueue(0, &request(&s, &b), b.streams[0]).unwrap();
        assert!(
            !completes(&g, 0, b.streams[0], Duration::from_millis(300)),
            "rank 0 finished without its peer"
        );
        let t = Instant::now();
        g.abort().unwrap();
        assert!(
            completes(&g, 0, b.streams[0], Duration::from_secs(5)),
            "rank 0 still waits 5 s after the abort"
        );
        let took = t.elapsed();
        assert!(took < Duration::from_secs(1), "the abort took {took:?}");
        let e = g.check(0).unwrap_err().to_string();
        assert!(
            e.contains("aborted") && e.contains("from rank 1") && e.contains("call 1 "),
            "{e}"
        );
        assert!(g.check(1).is_ok(), "rank 1 never ran");
        assert!(matches!(
            g.enqueue(0, &request(&s, &b), b.streams[0]),
            Err(cuda::CudaError::Aborted)
        ));
        free(&g, &b);
    }
    // The GPUs stay usable: a new group's all-reduce is right (1 + 2 everywhere).
    let g = cuda::CudaGroup::new(&[0, 1]).unwrap();
    let b = bufs(&g);
    for r in 0..2 {
        g.enqueue(r, &request(&s, &b), b.streams[r]).unwrap();
    }
    for r in 0..2 {
        assert!(completes(&g, r, b.streams[r], Duration::from_secs(10)));
        g.check(r).unwrap();
        let mut got = vec![0f32; COUNT];
        // SAFETY: the stream completed; the copy's size matches `got`.
        unsafe {
            sys::cuMemcpyDtoH_v2(got.as_mut_ptr() as *mut _, b.outs[r], COUNT * 4)
                .result()
                .unwrap();
        }
        let wrong = got.iter().filter(|&&v| v != 3.0).count();
        assert_eq!(wrong, 0, "rank {r}: {wrong} wrong elements after the abort");
    }
    free(&g, &b);
}
