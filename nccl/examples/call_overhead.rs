//! What the C entry point costs over the Rust API it wraps: the same one-rank all-reduce of
//! `count` floats on host buffers, called `iters` times through `ncclAllReduce` and through
//! `runtime::Communicator::all_reduce`, in alternating runs of one process; prints the median
//! time per call of each and their difference.
//!
//! `cargo run --release -p topoplan-nccl --example call_overhead [count] [iters] [runs]`

use nccl::abi::SUCCESS;
use runtime::{Communicator, Config, ReduceOp};
use std::ffi::c_void;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let (count, iters, runs) = (arg(1, 2), arg(2, 100_000), arg(3, 11));
    let send: Vec<f32> = (0..count).map(|i| i as f32 + 0.5).collect();
    let mut recv = vec![0f32; count];

    let mut rust = Communicator::init_all(1, Config::from_env().expect("config"))
        .expect("one rank")
        .remove(0);

    let mut id = std::mem::MaybeUninit::uninit();
    assert_eq!(nccl::api::ncclGetUniqueId(id.as_mut_ptr()), SUCCESS);
    // SAFETY: written by ncclGetUniqueId.
    let id = unsafe { id.assume_init() };
    let mut comm: *mut c_void = std::ptr::null_mut();
    assert_eq!(nccl::api::ncclCommInitRank(&mut comm, 1, id, 0), SUCCESS);

    let (mut c_times, mut rust_times) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..iters {
            let r = nccl::api::ncclAllReduce(
                send.as_ptr() as *const c_void,
                recv.as_mut_ptr() as *mut c_void,
                count,
                7, // ncclFloat32
                0, // ncclSum
                comm,
                std::ptr::null_mut(),
            );
            assert_eq!(r, SUCCESS);
        }
        c_times.push(t.elapsed().as_secs_f64() * 1e6 / iters as f64);
        let t = Instant::now();
        for _ in 0..iters {
            rust.all_reduce(&send, &mut recv, ReduceOp::Sum)
                .expect("all-reduce");
        }
        rust_times.push(t.elapsed().as_secs_f64() * 1e6 / iters as f64);
    }
    assert_eq!(recv, send, "a one-rank all-reduce copies");
    let (c, r) = (median(c_times), median(rust_times));
    println!("# one-rank all-reduce of {count} float32 on host buffers, {iters} calls x {runs} alternating runs");
    println!("# path            median us/call");
    println!("  ncclAllReduce   {c:>10.3}");
    println!("  Rust API        {r:>10.3}");
    println!(
        "  C entry costs   {:>10.3} us per call ({:.2}x the Rust API)",
        c - r,
        c / r
    );
    assert_eq!(nccl::api::ncclCommDestroy(comm), SUCCESS);
}
