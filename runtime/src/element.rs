//! Typed elements and the byte-level reduction kernels every CPU code path uses.
//!
//! The executor moves bytes; only reductions need the type. [`Element`] ties a Rust type to its
//! [`DataType`]; [`reduce_into`] and [`reduce_to`] dispatch on the `DataType` at run time.
//!
//! Arithmetic conventions (the serial reference in [`crate::reference`] uses the same ones, so a
//! correct schedule reproduces it exactly on integer-valued data):
//! - integers wrap (sum and prod are then associative and commutative, so any order agrees);
//! - f16 and bf16 combine in f32 and round back after every step, as a GPU kernel does;
//! - FP8 combines in f32, rounds to half and then to FP8 after every step (NCCL's arithmetic:
//!   [`crate::fp8`]);
//! - `avg` reduces with sum and divides the final result by the rank count ([`finish_avg`]);
//!   integer averages truncate toward zero, unsigned ones divide unsigned (NCCL's `ncclAvg` on
//!   integers: a wrapping sum, then one integer division).

use crate::fp8::{F8E4M3, F8E5M2};
use crate::types::{DataType, ReduceOp};
use bytemuck::Pod;
use half::{bf16, f16};

/// A type the runtime can reduce and move. Implemented for every [`DataType`].
pub trait Element: Pod + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    const DTYPE: DataType;
    /// `self ⊕ other`; `Avg` combines like `Sum`.
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    /// Final step of `avg`: the sum divided by `n`.
    fn div_ranks(self, n: u32) -> Self;
    /// Conversion of a small integer (test data generation).
    fn from_i64(v: i64) -> Self;
    /// Value as f64 (comparison with a tolerance).
    fn to_f64(self) -> f64;
    /// True for floating-point types.
    const FLOAT: bool;
}

macro_rules! int_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DataType = $d;
            const FLOAT: bool = false;
            #[inline(always)]
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.wrapping_add(o),
                    ReduceOp::Prod => self.wrapping_mul(o),
                    ReduceOp::Min => self.min(o),
                    ReduceOp::Max => self.max(o),
                }
            }
            fn div_ranks(self, n: u32) -> Self {
                // Divide in i128 so that n never overflows the type (u8 with 300 ranks).
                ((self as i128) / (n.max(1) as i128)) as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

int_element!(i32, DataType::I32);
int_element!(i64, DataType::I64);
int_element!(u8, DataType::U8);
int_element!(i8, DataType::I8);
int_element!(u32, DataType::U32);
int_element!(u64, DataType::U64);

macro_rules! float_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DataType = $d;
            const FLOAT: bool = true;
            #[inline(always)]
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self + o,
                    ReduceOp::Prod => self * o,
                    ReduceOp::Min => {
                        if o < self {
                            o
                        } else {
                            self
                        }
                    }
                    ReduceOp::Max => {
                        if o > self {
                            o
                        } else {
                            self
                        }
                    }
                }
            }
            fn div_ranks(self, n: u32) -> Self {
                self / (n.max(1) as $t)
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

float_element!(f32, DataType::F32);
float_element!(f64, DataType::F64);

macro_rules! half_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DataType = $d;
            const FLOAT: bool = true;
            #[inline(always)]
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                let (a, b) = (self.to_f32(), o.to_f32());
                <$t>::from_f32(f32::combine(a, b, op))
            }
            fn div_ranks(self, n: u32) -> Self {
                <$t>::from_f32(self.to_f32() / n.max(1) as f32)
            }
            fn from_i64(v: i64) -> Self {
                <$t>::from_f32(v as f32)
            }
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
        }
    };
}

half_element!(f16, DataType::F16);
half_element!(bf16, DataType::Bf16);

macro_rules! fp8_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DataType = $d;
            const FLOAT: bool = true;
            #[inline(always)]
            fn combine(self, o: Self, op: ReduceOp) -> Self {
                <$t>::combine(self, o, op)
            }
            fn div_ranks(self, n: u32) -> Self {
                Self(<$t>::FORMAT.from_f32_via_half(self.to_f32() / n.max(1) as f32))
            }
            fn from_i64(v: i64) -> Self {
                Self(<$t>::FORMAT.from_f32_via_half(v as f32))
            }
            fn to_f64(self) -> f64 {
                f64::from(self.to_f32())
            }
        }
    };
}

fp8_element!(F8E4M3, DataType::F8E4M3);
fp8_element!(F8E5M2, DataType::F8E5M2);

/// `dst[i] = dst[i] ⊕ src[i]` over typed values.
#[inline]
fn reduce_into_t<T: Element>(op: ReduceOp, dst: &mut [u8], src: &[u8]) {
    // Fast path: both sides aligned for T (the usual case: buffers come from typed slices).
    if let (Ok(d), Ok(s)) = (
        bytemuck::try_cast_slice_mut::<u8, T>(dst),
        bytemuck::try_cast_slice::<u8, T>(src),
    ) {
        match op {
            ReduceOp::Sum | ReduceOp::Avg => d
                .iter_mut()
                .zip(s)
                .for_each(|(a, b)| *a = a.combine(*b, ReduceOp::Sum)),
            ReduceOp::Prod => d
                .iter_mut()
                .zip(s)
                .for_each(|(a, b)| *a = a.combine(*b, ReduceOp::Prod)),
            ReduceOp::Min => d
                .iter_mut()
                .zip(s)
                .for_each(|(a, b)| *a = a.combine(*b, ReduceOp::Min)),
            ReduceOp::Max => d
                .iter_mut()
                .zip(s)
                .for_each(|(a, b)| *a = a.combine(*b, ReduceOp::Max)),
        }
        return;
    }
    let sz = std::mem::size_of::<T>();
    for (d, s) in dst.chunks_exact_mut(sz).zip(src.chunks_exact(sz)) {
        let a: T = bytemuck::pod_read_unaligned(d);
        let b: T = bytemuck::pod_read_unaligned(s);
        d.copy_from_slice(bytemuck::bytes_of(&a.combine(b, op)));
    }
}

/// `out[i] = a[i] ⊕ b[i]` over typed values.
#[inline]
fn reduce_to_t<T: Element>(op: ReduceOp, out: &mut [u8], a: &[u8], b: &[u8]) {
    if let (Ok(o), Ok(x), Ok(y)) = (
        bytemuck::try_cast_slice_mut::<u8, T>(out),
        bytemuck::try_cast_slice::<u8, T>(a),
        bytemuck::try_cast_slice::<u8, T>(b),
    ) {
        match op {
            ReduceOp::Sum | ReduceOp::Avg => o
                .iter_mut()
                .zip(x.iter().zip(y))
                .for_each(|(o, (x, y))| *o = x.combine(*y, ReduceOp::Sum)),
            ReduceOp::Prod => o
                .iter_mut()
                .zip(x.iter().zip(y))
                .for_each(|(o, (x, y))| *o = x.combine(*y, ReduceOp::Prod)),
            ReduceOp::Min => o
                .iter_mut()
                .zip(x.iter().zip(y))
                .for_each(|(o, (x, y))| *o = x.combine(*y, ReduceOp::Min)),
            ReduceOp::Max => o
                .iter_mut()
                .zip(x.iter().zip(y))
                .for_each(|(o, (x, y))| *o = x.combine(*y, ReduceOp::Max)),
        }
        return;
    }
    let sz = std::mem::size_of::<T>();
    for ((o, x), y) in out
        .chunks_exact_mut(sz)
        .zip(a.chunks_exact(sz))
        .zip(b.chunks_exact(sz))
    {
        let x: T = bytemuck::pod_read_unaligned(x);
        let y: T = bytemuck::pod_read_unaligned(y);
        o.copy_from_slice(bytemuck::bytes_of(&x.combine(y, op)));
    }
}

fn finish_avg_t<T: Element>(buf: &mut [u8], n: u32) {
    let sz = std::mem::size_of::<T>();
    for d in buf.chunks_exact_mut(sz) {
        let a: T = bytemuck::pod_read_unaligned(d);
        d.copy_from_slice(bytemuck::bytes_of(&a.div_ranks(n)));
    }
}

macro_rules! dispatch {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DataType::F32 => $f::<f32>($($arg),*),
            DataType::F64 => $f::<f64>($($arg),*),
            DataType::F16 => $f::<f16>($($arg),*),
            DataType::Bf16 => $f::<bf16>($($arg),*),
            DataType::I32 => $f::<i32>($($arg),*),
            DataType::I64 => $f::<i64>($($arg),*),
            DataType::U8 => $f::<u8>($($arg),*),
            DataType::I8 => $f::<i8>($($arg),*),
            DataType::F8E4M3 => $f::<$crate::fp8::F8E4M3>($($arg),*),
            DataType::F8E5M2 => $f::<$crate::fp8::F8E5M2>($($arg),*),
            DataType::U32 => $f::<u32>($($arg),*),
            DataType::U64 => $f::<u64>($($arg),*),
        }
    };
}
pub(crate) use dispatch;

/// `dst = dst ⊕ src`, elementwise, for byte buffers holding `dtype` values (equal lengths).
pub fn reduce_into(dtype: DataType, op: ReduceOp, dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    dispatch!(dtype, reduce_into_t, op, dst, src)
}

/// `out = a ⊕ b`, elementwise (equal lengths).
pub fn reduce_to(dtype: DataType, op: ReduceOp, out: &mut [u8], a: &[u8], b: &[u8]) {
    debug_assert!(out.len() == a.len() && a.len() == b.len());
    dispatch!(dtype, reduce_to_t, op, out, a, b)
}

/// Divides every element by `n` (the last step of `avg`).
pub fn finish_avg(dtype: DataType, buf: &mut [u8], n: u32) {
    dispatch!(dtype, finish_avg_t, buf, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::from_bytes;
    use planner::topology::synth::Rng;

    #[test]
    fn unaligned_and_aligned_paths_agree() {
        let a: Vec<f32> = (1..=33).map(|v| v as f32 * 1.5).collect();
        let b: Vec<f32> = (1..=33).map(|v| 100.0 - v as f32).collect();
        let ab: &[u8] = bytemuck::cast_slice(&a);
        let bb: &[u8] = bytemuck::cast_slice(&b);
        // Shift by one byte to force the unaligned path.
        let mut store = vec![0u8; ab.len() + 1];
        store[1..].copy_from_slice(ab);
        let mut bstore = vec![0u8; bb.len() + 1];
        bstore[1..].copy_from_slice(bb);
        for op in ReduceOp::ALL {
            let mut d1 = ab.to_vec();
            reduce_into(DataType::F32, op, &mut d1, bb);
            let mut d2 = store.clone();
            reduce_into(DataType::F32, op, &mut d2[1..], &bstore[1..]);
            assert_eq!(d1, &d2[1..], "{op:?}");
            let mut o = vec![0u8; ab.len() + 1];
            reduce_to(DataType::F32, op, &mut o[1..], &store[1..], &bstore[1..]);
            assert_eq!(d1, &o[1..], "{op:?}");
            let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x.combine(*y, op)).collect();
            assert_eq!(d1, bytemuck::cast_slice::<f32, u8>(&want));
        }
    }

    /// `reduce_into`, `reduce_to` and `finish_avg` on `T` against `want` (plain Rust
    /// arithmetic) over random values of every magnitude, so half of them have the top bit set.
    fn unsigned_matches<T: Element + Copy>(
        random: impl Fn(&mut Rng) -> T,
        want: impl Fn(ReduceOp, T, T) -> T,
        div: impl Fn(T, u32) -> T,
    ) {
        let mut rng = Rng::new(0x5EED);
        let nranks = [1u32, 2, 3, 7, 8];
        for op in ReduceOp::ALL {
            for n in nranks {
                let ranks: Vec<Vec<T>> = (0..n)
                    .map(|_| (0..67).map(|_| random(&mut rng)).collect())
                    .collect();
                let mut acc: Vec<u8> = bytemuck::cast_slice(&ranks[0]).to_vec();
                let mut expect = ranks[0].clone();
                for r in &ranks[1..] {
                    let mut out = vec![0u8; acc.len()];
                    reduce_to(T::DTYPE, op, &mut out, &acc, bytemuck::cast_slice(r));
                    reduce_into(T::DTYPE, op, &mut acc, bytemuck::cast_slice(r));
                    assert_eq!(out, acc, "{op:?}");
                    for (e, v) in expect.iter_mut().zip(r) {
                        *e = want(op, *e, *v);
                    }
                }
                if op == ReduceOp::Avg {
                    finish_avg(T::DTYPE, &mut acc, n);
                    expect.iter_mut().for_each(|e| *e = div(*e, n));
                }
                assert_eq!(from_bytes::<T>(&acc), expect, "{:?} {op:?} n={n}", T::DTYPE);
            }
        }
    }

    #[test]
    fn unsigned_32_and_64_bit_reduce_as_rust_does() {
        unsigned_matches(
            |r| (r.next_u64() >> (r.next_u64() % 32)) as u32,
            |op, a: u32, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                ReduceOp::Prod => a.wrapping_mul(b),
                ReduceOp::Min => a.min(b),
                ReduceOp::Max => a.max(b),
            },
            |a, n| a / n,
        );
        unsigned_matches(
            |r| r.next_u64() >> (r.next_u64() % 64),
            |op, a: u64, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                ReduceOp::Prod => a.wrapping_mul(b),
                ReduceOp::Min => a.min(b),
                ReduceOp::Max => a.max(b),
            },
            |a, n| a / u64::from(n),
        );
        // Where a signed reading differs: above i64::MAX is larger, and divides unsigned.
        let big = u64::MAX - 1;
        assert_eq!(big.combine(1, ReduceOp::Max), big);
        assert_eq!(big.combine(1, ReduceOp::Min), 1);
        assert_eq!(big.div_ranks(2), u64::MAX / 2);
        assert_eq!(0x8000_0001u32.combine(7, ReduceOp::Max), 0x8000_0001);
        assert_eq!(0xFFFF_FFFEu32.div_ranks(3), 0x5555_5554);
        assert_eq!(DataType::parse("uint64"), Some(DataType::U64));
        assert_eq!(DataType::parse("u32"), Some(DataType::U32));
    }

    #[test]
    fn integer_semantics() {
        assert_eq!(250u8.combine(10, ReduceOp::Sum), 4);
        assert_eq!((-7i32).div_ranks(2), -3);
        assert_eq!(200u8.div_ranks(300), 0);
        assert_eq!(
            f16::from_f32(3.0).combine(f16::from_f32(4.0), ReduceOp::Prod),
            f16::from_f32(12.0)
        );
        assert_eq!(
            bf16::from_f32(-2.0).combine(bf16::from_f32(5.0), ReduceOp::Min),
            bf16::from_f32(-2.0)
        );
    }
}
