//! Serial reference implementations of every collective, the oracle every backend (CPU and CUDA)
//! is checked against, plus the random test data that makes the check exact.
//!
//! **Buffers.** `inputs[r]` is rank `r`'s input buffer and the result is, per rank, the output
//! buffer the collective must produce (`None` where the collective leaves it unspecified: the
//! non-root ranks of `reduce`, a rank nobody sends to in `sendrecv`). Sizes follow
//! [`Collective::blocks`]: with per-rank count `count`, all-gather's output and reduce-scatter's
//! and all-to-all's input/output hold `nranks * count` elements, everything else `count`.
//!
//! **Order and exactness.** The reference reduces rank 0, 1, 2, ... in order; a schedule may use
//! any order. Integers wrap, so every order agrees exactly. Floats round differently in different
//! orders, so [`random_input`] generates *integer-valued* data (small integers for sum/avg/min/max,
//! ±1 and ±2 for prod) on which every order is exact in the 16- to 64-bit float types for up to
//! 32 ranks and in FP8 for up to 8 (its sums and averages draw from ±1, ±2 in E4M3 and ±1 in E5M2,
//! whose sums of 8 are exact; its products saturate alike in every order), and results are
//! compared exactly ([`count_wrong`] with `tol = 0`). For arbitrary float data use
//! [`default_tolerance`]: `|got - want| <= tol * max(1, |want|)` with `tol = nranks * eps(type)`.
//! Random data never contains zeros, so a missing contribution or an untouched output shows up.

use crate::element::{dispatch, Element};
use crate::types::{DataType, ReduceOp};
use half::{bf16, f16};
use planner::schedule::{Collective, CollectiveKind};
// The planner's SplitMix64: test data must not depend on a crate's version.
use planner::topology::synth::Rng;

/// Element counts of the (input, output) buffers of `coll` for `nranks` ranks.
pub fn buffer_lens(coll: &Collective, nranks: u32, count: usize) -> (usize, usize) {
    let (i, o) = coll.blocks(nranks);
    (i as usize * count, o as usize * count)
}

/// Expected outputs of `coll` with operator `op` (ignored by non-reducing collectives).
/// Panics if `inputs` has the wrong shape (a caller bug, not bad user input).
pub fn expected<T: Element>(
    coll: &Collective,
    op: ReduceOp,
    count: usize,
    inputs: &[Vec<T>],
) -> Vec<Option<Vec<T>>> {
    let n = inputs.len();
    let (in_len, _) = buffer_lens(coll, n as u32, count);
    for (r, i) in inputs.iter().enumerate() {
        assert_eq!(
            i.len(),
            in_len,
            "rank {r}: input has {} elements, {} expected",
            i.len(),
            in_len
        );
    }
    // Reduce the ranks' `len`-element slices starting at `off`, in rank order.
    let reduce_all = |off: usize, len: usize| -> Vec<T> {
        let mut acc: Vec<T> = inputs[0][off..off + len].to_vec();
        for inp in &inputs[1..] {
            for (a, b) in acc.iter_mut().zip(&inp[off..off + len]) {
                *a = a.combine(*b, op);
            }
        }
        if op == ReduceOp::Avg {
            acc.iter_mut().for_each(|a| *a = a.div_ranks(n as u32));
        }
        acc
    };
    let root = coll.root.unwrap_or(0) as usize;
    match coll.kind {
        CollectiveKind::AllReduce => {
            let r = reduce_all(0, count);
            (0..n).map(|_| Some(r.clone())).collect()
        }
        CollectiveKind::Reduce => {
            let r = reduce_all(0, count);
            (0..n).map(|i| (i == root).then(|| r.clone())).collect()
        }
        CollectiveKind::ReduceScatter => {
            (0..n).map(|i| Some(reduce_all(i * count, count))).collect()
        }
        CollectiveKind::AllGather => {
            let all: Vec<T> = inputs.iter().flat_map(|v| v.iter().copied()).collect();
            (0..n).map(|_| Some(all.clone())).collect()
        }
        CollectiveKind::Broadcast => (0..n).map(|_| Some(inputs[root].clone())).collect(),
        CollectiveKind::AllToAll => (0..n)
            .map(|r| {
                Some(
                    (0..n)
                        .flat_map(|s| inputs[s][r * count..(r + 1) * count].iter().copied())
                        .collect(),
                )
            })
            .collect(),
        CollectiveKind::SendRecv => {
            let mut out: Vec<Option<Vec<T>>> = vec![None; n];
            for (s, peer) in coll.send_peers.iter().enumerate() {
                if let Some(p) = peer {
                    if (*p as usize) < n && s < n {
                        out[*p as usize] = Some(inputs[s].clone());
                    }
                }
            }
            out
        }
    }
}

/// [`expected`] over byte buffers holding `dtype` values.
pub fn expected_bytes(
    dtype: DataType,
    coll: &Collective,
    op: ReduceOp,
    count: usize,
    inputs: &[Vec<u8>],
) -> Vec<Option<Vec<u8>>> {
    fn go<T: Element>(
        coll: &Collective,
        op: ReduceOp,
        count: usize,
        inputs: &[Vec<u8>],
    ) -> Vec<Option<Vec<u8>>> {
        let typed: Vec<Vec<T>> = inputs.iter().map(|b| from_bytes(b)).collect();
        expected(coll, op, count, &typed)
            .into_iter()
            .map(|o| o.map(|v| bytemuck::cast_slice(&v).to_vec()))
            .collect()
    }
    dispatch!(dtype, go, coll, op, count, inputs)
}

/// Typed copy of a byte buffer (any alignment).
pub fn from_bytes<T: Element>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}

/// Integer-valued, never-zero random input for rank `rank` (see the module docs for why).
pub fn random_input<T: Element>(seed: u64, rank: u32, len: usize, op: ReduceOp) -> Vec<T> {
    let mut rng = Rng::new(seed ^ (rank as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    // u32 and u64 draw from the signed ranges too: a negative draw becomes a value above
    // i32::MAX or i64::MAX, where unsigned order and division differ from the signed ones.
    let unsigned = matches!(T::DTYPE, DataType::U8);
    (0..len)
        .map(|_| {
            let v = match op {
                // Powers of two keep float products exact; integers wrap anyway.
                ReduceOp::Prod => {
                    let m = if rng.next_u64() & 1 == 0 { 1 } else { 2 };
                    if !unsigned && rng.next_u64() & 1 == 0 {
                        -m
                    } else {
                        m
                    }
                }
                // |v| <= 7: sums of up to 32 ranks stay below 256, exact even in bf16.
                ReduceOp::Sum | ReduceOp::Avg => {
                    let m = fp8_sum_bound(T::DTYPE).unwrap_or(7);
                    nonzero(&mut rng, if unsigned { 1 } else { -m }, m)
                }
                ReduceOp::Min | ReduceOp::Max => {
                    nonzero(&mut rng, if unsigned { 1 } else { -100 }, 100)
                }
            };
            T::from_i64(v)
        })
        .collect()
}

/// FP8's largest summand for exact sums of 8 ranks (integers are exact up to 16 in E4M3, 8 in
/// E5M2); `None` for the other types.
fn fp8_sum_bound(t: DataType) -> Option<i64> {
    match t {
        DataType::F8E4M3 => Some(2),
        DataType::F8E5M2 => Some(1),
        _ => None,
    }
}

/// Uniform in `lo..=hi`, skipping zero. Drawn as an offset from `lo`, so the values are the
/// ones a signed `lo + next % (hi - lo + 1)` gives (the tests' data depends on it).
fn nonzero(rng: &mut Rng, lo: i64, hi: i64) -> i64 {
    loop {
        let v = lo + rng.range(0, (hi - lo) as u64) as i64;
        if v != 0 {
            return v;
        }
    }
}

/// [`random_input`] as bytes.
pub fn random_input_bytes(
    dtype: DataType,
    seed: u64,
    rank: u32,
    len: usize,
    op: ReduceOp,
) -> Vec<u8> {
    fn go<T: Element>(seed: u64, rank: u32, len: usize, op: ReduceOp) -> Vec<u8> {
        bytemuck::cast_slice(&random_input::<T>(seed, rank, len, op)).to_vec()
    }
    dispatch!(dtype, go, seed, rank, len, op)
}

/// [`random_input_bytes`] of ranks `0..n`, one thread per rank (a 512 MiB input takes ~3 s to
/// make on one core); a rank `wanted` rejects gets an empty vector.
pub fn random_inputs_bytes(
    dtype: DataType,
    seed: u64,
    n: u32,
    len: usize,
    op: ReduceOp,
    wanted: impl Fn(u32) -> bool + Sync,
) -> Vec<Vec<u8>> {
    std::thread::scope(|s| {
        let wanted = &wanted;
        let makers: Vec<_> = (0..n)
            .map(|r| {
                s.spawn(move || {
                    if wanted(r) {
                        random_input_bytes(dtype, seed, r, len, op)
                    } else {
                        Vec::new()
                    }
                })
            })
            .collect();
        makers
            .into_iter()
            .map(|m| m.join().expect("making random input panicked"))
            .collect()
    })
}

/// Machine epsilon of a float type (0 for integers).
pub fn epsilon(dtype: DataType) -> f64 {
    match dtype {
        DataType::F32 => f32::EPSILON as f64,
        DataType::F64 => f64::EPSILON,
        DataType::F16 => f16::EPSILON.to_f64(),
        DataType::Bf16 => bf16::EPSILON.to_f64(),
        // 2^-mantissa bits.
        DataType::F8E4M3 => 0.125,
        DataType::F8E5M2 => 0.25,
        _ => 0.0,
    }
}

/// Relative tolerance for comparing float results computed in a different reduction order on
/// arbitrary (not integer-valued) data: `nranks * eps`. Integers: 0.
pub fn default_tolerance(dtype: DataType, nranks: u32) -> f64 {
    nranks as f64 * epsilon(dtype)
}

/// Number of elements of `got` that differ from `want`: exactly (`tol == 0`) or beyond
/// `tol * max(1, |want|)`. Extra or missing elements count as wrong.
pub fn count_wrong(dtype: DataType, got: &[u8], want: &[u8], tol: f64) -> u64 {
    fn go<T: Element>(got: &[u8], want: &[u8], tol: f64) -> u64 {
        let sz = std::mem::size_of::<T>();
        let mut wrong = (got.len().abs_diff(want.len()) / sz) as u64;
        for (g, w) in got.chunks_exact(sz).zip(want.chunks_exact(sz)) {
            let (g, w): (T, T) = (
                bytemuck::pod_read_unaligned(g),
                bytemuck::pod_read_unaligned(w),
            );
            let ok = if tol == 0.0 || !T::FLOAT {
                g == w
            } else {
                let (g, w) = (g.to_f64(), w.to_f64());
                (g - w).abs() <= tol * w.abs().max(1.0)
            };
            wrong += u64::from(!ok);
        }
        wrong
    }
    dispatch!(dtype, go, got, want, tol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_reduce_and_avg() {
        let inputs = vec![vec![1i32, 2, 3], vec![10, 20, 30], vec![100, 200, 301]];
        let c = Collective::new(CollectiveKind::AllReduce);
        let out = expected(&c, ReduceOp::Sum, 3, &inputs);
        assert_eq!(out[2], Some(vec![111, 222, 334]));
        let avg = expected(&c, ReduceOp::Avg, 3, &inputs);
        assert_eq!(avg[0], Some(vec![37, 74, 111]));
    }

    #[test]
    fn layouts() {
        let inputs = vec![vec![1u8, 2, 3, 4], vec![5, 6, 7, 8]];
        let rs = expected(
            &Collective::new(CollectiveKind::ReduceScatter),
            ReduceOp::Max,
            2,
            &inputs,
        );
        assert_eq!(rs, vec![Some(vec![5, 6]), Some(vec![7, 8])]);
        let a2a = expected(
            &Collective::new(CollectiveKind::AllToAll),
            ReduceOp::Sum,
            2,
            &inputs,
        );
        assert_eq!(a2a, vec![Some(vec![1, 2, 5, 6]), Some(vec![3, 4, 7, 8])]);
        let ag = expected(
            &Collective::new(CollectiveKind::AllGather),
            ReduceOp::Sum,
            4,
            &inputs,
        );
        assert_eq!(ag[1], Some(vec![1, 2, 3, 4, 5, 6, 7, 8]));
        let red = expected(
            &Collective::rooted(CollectiveKind::Reduce, 1),
            ReduceOp::Prod,
            4,
            &inputs,
        );
        assert_eq!(red, vec![None, Some(vec![5, 12, 21, 32])]);
        let mut sr = Collective::new(CollectiveKind::SendRecv);
        sr.send_peers = vec![Some(1), None];
        let out = expected(&sr, ReduceOp::Sum, 4, &inputs);
        assert_eq!(out, vec![None, Some(vec![1, 2, 3, 4])]);
    }

    #[test]
    fn random_data_is_nonzero_and_exact_in_bf16() {
        for op in ReduceOp::ALL {
            for dt in DataType::ALL {
                let b = random_input_bytes(dt, 7, 3, 257, op);
                assert_eq!(b.len(), 257 * dt.size());
                let zero = vec![0u8; dt.size()];
                assert!(
                    b.chunks_exact(dt.size()).all(|c| c != zero.as_slice()),
                    "{dt:?} {op:?} has a zero"
                );
            }
        }
        // 32 ranks of bf16 sums: the reference in two different orders agrees exactly.
        let inputs: Vec<Vec<bf16>> = (0..32)
            .map(|r| random_input(1, r, 64, ReduceOp::Sum))
            .collect();
        let fwd = expected(
            &Collective::new(CollectiveKind::AllReduce),
            ReduceOp::Sum,
            64,
            &inputs,
        );
        let mut rev = inputs.clone();
        rev.reverse();
        let bwd = expected(
            &Collective::new(CollectiveKind::AllReduce),
            ReduceOp::Sum,
            64,
            &rev,
        );
        assert_eq!(fwd[0], bwd[0]);
    }

    #[test]
    fn inputs_of_all_ranks_are_each_ranks_input() {
        for dt in [DataType::F32, DataType::Bf16, DataType::I8] {
            let all = random_inputs_bytes(dt, 9, 4, 1001, ReduceOp::Sum, |r| r != 2);
            assert_eq!(all.len(), 4);
            for (r, v) in all.iter().enumerate() {
                if r == 2 {
                    assert!(v.is_empty());
                } else {
                    assert_eq!(*v, random_input_bytes(dt, 9, r as u32, 1001, ReduceOp::Sum));
                }
            }
        }
    }

    #[test]
    fn compare_with_tolerance() {
        let w: Vec<u8> = bytemuck::cast_slice(&[1.0f32, 2.0, 1000.0]).to_vec();
        let g: Vec<u8> = bytemuck::cast_slice(&[1.0f32, 2.000001, 1000.0005]).to_vec();
        assert_eq!(count_wrong(DataType::F32, &g, &w, 0.0), 2);
        assert_eq!(
            count_wrong(DataType::F32, &g, &w, default_tolerance(DataType::F32, 8)),
            0
        );
        assert_eq!(count_wrong(DataType::F32, &w[..8], &w, 0.0), 1);
    }
}
