//! The two 8-bit float formats of OCP FP8 (NCCL's `ncclFloat8e4m3`, `ncclFloat8e5m2`) and their
//! reduction arithmetic, bit for bit as NCCL 2.28 computes it on sm_90 and later.
//!
//! **Formats.** E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, one NaN
//! pattern per sign (`0x7F`, `0xFF`), largest finite 448, smallest subnormal 2^-9. E5M2: 1 sign,
//! 5 exponent (bias 15), 2 mantissa bits, IEEE-like (infinities `0x7C`/`0xFC`, NaNs above
//! them), largest finite 57344, smallest subnormal 2^-16.
//!
//! **NCCL's arithmetic** (`src/device/reduce_kernel.h`, sm_90 and later; NCCL builds no fp8
//! reduction kernels below sm_90): each operand is widened to half precision (exact), the
//! operation runs in half precision (`__hadd`, `__hmul`, `__hmin`, `__hmax`: one rounding to
//! half, to nearest even), and the half result is narrowed back with CUDA's saturating
//! conversion (`__NV_SATFINITE`, the hardware `cvt.rn.satfinite`): round to nearest even,
//! anything beyond the largest finite value (infinity included) becomes that value with its
//! sign, NaN becomes the canonical NaN `0x7F`. A result that rounds to zero keeps its sign.
//! Min and max return the other operand when one is NaN.
//!
//! Here the operation runs in f32 and rounds to half ([`half::f16::from_f32`], nearest even):
//! the same half as the half-precision instruction, because a sum or product of two half
//! values rounded to f32 (24 bits, at least 2 × 11 + 2) and then to half is the once-rounded
//! half result. The CUDA kernels (`cuda/kernels/common.cuh`) do the same steps. For two FP8
//! operands the half step never changes the result: NCCL's sum and product are the exact value
//! rounded once to FP8 (the tests check all 65,536 pairs of each format).
//!
//! **Average.** NCCL 2.28 runs `ncclAvg` on fp8 as a PreMulSum (`hostToDevRedOp` in
//! `src/enqueue.cc`): the scalar is 1/nranks converted to fp8 once (saturating, nearest even),
//! each rank's input is multiplied by it with the rounding above, and the products are summed.
//! The library does that ([`avg_scalar`]); the runtime's own `Avg` is its general rule, the
//! sum divided by the rank count, rounded as above.

use crate::types::ReduceOp;
use bytemuck::{Pod, Zeroable};
use half::f16;

/// One FP8 layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Mantissa bits.
    pub man: u32,
    /// Exponent bias.
    pub bias: i32,
    /// The largest finite code (positive).
    pub max_code: u8,
    /// Whether the all-ones exponent holds infinities and NaNs (E5M2) rather than values (E4M3).
    pub ieee: bool,
}

pub const E4M3: Format = Format {
    man: 3,
    bias: 7,
    max_code: 0x7E,
    ieee: false,
};

pub const E5M2: Format = Format {
    man: 2,
    bias: 15,
    max_code: 0x7B,
    ieee: true,
};

/// The NaN every conversion produces (PTX's canonical NaN for both formats).
pub const CANONICAL_NAN: u8 = 0x7F;

impl Format {
    fn exp_mask(self) -> u8 {
        (1u8 << (7 - self.man)) - 1
    }

    /// Whether `code` is a NaN.
    pub fn is_nan(self, code: u8) -> bool {
        let e = (code >> self.man) & self.exp_mask();
        let m = code & ((1 << self.man) - 1);
        if self.ieee {
            e == self.exp_mask() && m != 0
        } else {
            e == self.exp_mask() && m == (1 << self.man) - 1
        }
    }

    /// The exact value of `code` (every FP8 value is an f32, and an f16).
    pub fn decode(self, code: u8) -> f32 {
        let neg = code & 0x80 != 0;
        let e = i32::from((code >> self.man) & self.exp_mask());
        let m = i32::from(code & ((1 << self.man) - 1));
        let v = if self.is_nan(code) {
            f32::NAN
        } else if self.ieee && e == i32::from(self.exp_mask()) {
            f32::INFINITY
        } else if e == 0 {
            // Subnormal: m × 2^(1 - bias - man), exact in f32.
            m as f32 * pow2(1 - self.bias - self.man as i32)
        } else {
            ((1 << self.man) + m) as f32 * pow2(e - self.bias - self.man as i32)
        };
        if neg {
            -v
        } else {
            v
        }
    }

    /// `x` rounded to nearest even, saturated to the largest finite value (CUDA's
    /// `__NV_SATFINITE`); NaN gives [`CANONICAL_NAN`]; a zero result keeps `x`'s sign.
    pub fn encode(self, x: f64) -> u8 {
        if x.is_nan() {
            return CANONICAL_NAN;
        }
        let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
        let a = x.abs();
        if a.is_infinite() {
            return sign | self.max_code;
        }
        if a == 0.0 {
            return sign;
        }
        // a's binary exponent (a is a normal f64: it came from an f32 or f16), clamped to the
        // format's smallest normal exponent so that subnormals share its quantum.
        let emin = 1 - self.bias;
        let e = (((a.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(emin);
        // The quantum at a's binade: a / q is exact (a power-of-two scaling).
        let r = (a / pow2_f64(e - self.man as i32)).round_ties_even() as i64;
        // Biased exponent e + bias - 1 plus r's leading bit makes the code; a carry out of the
        // mantissa (r = 2^(man + 1)) lands in the exponent, as it must.
        let code = ((i64::from(e + self.bias - 1)) << self.man) + r;
        sign | code.min(i64::from(self.max_code)) as u8
    }

    /// NCCL's narrowing of an operation's f32 result: through half (nearest even), then
    /// [`Format::encode`].
    pub fn from_f32_via_half(self, x: f32) -> u8 {
        self.encode(f16::from_f32(x).to_f64())
    }
}

fn pow2(k: i32) -> f32 {
    pow2_f64(k) as f32
}

fn pow2_f64(k: i32) -> f64 {
    2f64.powi(k)
}

/// f32's minimum and maximum as the GPU's `min`/`max` instructions compute them: a NaN
/// operand gives the other one, and -0 orders below +0.
fn min_max(a: f32, b: f32, max: bool) -> f32 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    let b_first = if a == b {
        // Equal values differ only in a zero's sign.
        b.is_sign_negative() != max
    } else {
        (b < a) != max
    };
    if b_first {
        b
    } else {
        a
    }
}

/// `a ⊕ b` on f32 values with NCCL's operators (`Avg` combines as `Sum`).
pub fn apply(a: f32, b: f32, op: ReduceOp) -> f32 {
    match op {
        ReduceOp::Sum | ReduceOp::Avg => a + b,
        ReduceOp::Prod => a * b,
        ReduceOp::Min => min_max(a, b, false),
        ReduceOp::Max => min_max(a, b, true),
    }
}

macro_rules! fp8_type {
    ($name:ident, $fmt:expr, $doc:literal) => {
        #[doc = $doc]
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $name(pub u8);

        impl $name {
            pub const FORMAT: Format = $fmt;

            pub fn to_f32(self) -> f32 {
                Self::FORMAT.decode(self.0)
            }

            /// `x` rounded once (nearest even, saturating).
            pub fn from_f64(x: f64) -> Self {
                Self(Self::FORMAT.encode(x))
            }

            /// NCCL's `a ⊕ b`.
            pub fn combine(self, other: Self, op: ReduceOp) -> Self {
                let r = apply(self.to_f32(), other.to_f32(), op);
                Self(Self::FORMAT.from_f32_via_half(r))
            }
        }
    };
}

fp8_type!(F8E4M3, E4M3, "An OCP FP8 E4M3 value (its bits).");
fp8_type!(F8E5M2, E5M2, "An OCP FP8 E5M2 value (its bits).");

/// The PreMulSum scalar NCCL 2.28 uses for `ncclAvg` over `nranks` ranks: 1/nranks rounded
/// to f32 and then to the format (saturating, nearest even), as its bits.
pub fn avg_scalar(format: Format, nranks: u32) -> u8 {
    // NCCL converts `float(1.0 / nRanks)` on the host: a double quotient rounded to f32.
    format.encode(f64::from((1.0 / f64::from(nranks.max(1))) as f32))
}

/// NCCL's PreMulSum step on one element: `x × scalar`, rounded through half to the format.
pub fn premul(format: Format, x: u8, scalar: u8) -> u8 {
    format.from_f32_via_half(format.decode(x) * format.decode(scalar))
}

#[cfg(test)]
#[path = "fp8_tests.rs"]
mod tests;
