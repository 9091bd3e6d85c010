//! The per-rank measurement loop behind `topoplan run`: one checked run, then warm-up and timed
//! iterations, nccl-tests style. Every rank runs it; rank 0's view is what gets printed.

use crate::check::Case;
use crate::comm::Communicator;
use crate::error::CommError;
use crate::types::ReduceOp;
use std::time::Instant;

/// One size's result on one rank.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Average time of one collective, µs (slowest rank's, after [`Communicator::all_reduce`]).
    pub time_us: f64,
    /// Wrong elements summed over all ranks (0 when unchecked).
    pub wrong: u64,
}

/// Runs `case` once checked (if `check`), then `warmup` + `iters` timed times. Collective:
/// every rank must call it with the same arguments. `expected` is this rank's reference output.
pub fn measure(
    comm: &mut Communicator,
    case: &Case,
    expected: Option<&[u8]>,
    check: bool,
    warmup: u32,
    iters: u32,
) -> Result<Sample, CommError> {
    let (n, r) = (comm.nranks(), comm.rank());
    let (send, mut recv) = case.buffers(n, r);
    let mut wrong = 0u64;
    if check {
        case.run(comm, send.as_deref(), &mut recv)?;
        wrong = case.wrong(r, &recv, expected);
    }
    for _ in 0..warmup {
        case.run(comm, send.as_deref(), &mut recv)?;
    }
    barrier(comm)?;
    let t = Instant::now();
    for _ in 0..iters {
        case.run(comm, send.as_deref(), &mut recv)?;
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / iters.max(1) as f64;
    // The slowest rank's time and the total of wrong elements, as every rank sees them.
    let mut t = [us];
    comm.all_reduce_in_place(&mut t, ReduceOp::Max)?;
    let mut w = [wrong as i64];
    comm.all_reduce_in_place(&mut w, ReduceOp::Sum)?;
    Ok(Sample {
        time_us: t[0],
        wrong: w[0] as u64,
    })
}

/// A barrier: an all-reduce of one element.
pub fn barrier(comm: &mut Communicator) -> Result<(), CommError> {
    let mut x = [0u8];
    comm.all_reduce_in_place(&mut x, ReduceOp::Max)
}

/// Memory-copy bandwidth in GB/s for `bytes` bytes: the ceiling of a backend that moves every
/// byte through memory at least once. Measured like the collectives (warm-up, then the average).
pub fn memcpy_gbps(bytes: usize, iters: u32) -> f64 {
    let src = vec![1u8; bytes.max(1)];
    let mut dst = vec![0u8; bytes.max(1)];
    dst.copy_from_slice(&src);
    let t = Instant::now();
    for _ in 0..iters.max(1) {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    let s = t.elapsed().as_secs_f64() / iters.max(1) as f64;
    bytes as f64 / s / 1e9
}
