//! The FP8 arithmetic against a reference written from the OCP FP8 definition: values from the
//! field formulas, rounding by searching the value table for the nearest finite value.

use super::*;

/// Which layout a reference describes: (exponent bits, mantissa bits, bias, has infinities).
struct Spec {
    ebits: u32,
    mbits: u32,
    bias: i32,
    ieee: bool,
}

const SPEC_E4M3: Spec = Spec {
    ebits: 4,
    mbits: 3,
    bias: 7,
    ieee: false,
};
const SPEC_E5M2: Spec = Spec {
    ebits: 5,
    mbits: 2,
    bias: 15,
    ieee: true,
};

/// Value of `code` by the definition: (-1)^s × 2^(E - bias) × (1 + M / 2^m), or
/// 2^(1 - bias) × M / 2^m for E = 0; E4M3's S.1111.111 is NaN, E5M2's all-ones exponent is
/// infinity (M = 0) or NaN.
fn ref_value(s: &Spec, code: u8) -> f64 {
    let c = u32::from(code);
    let mden = 1u32 << s.mbits;
    let m = c % mden;
    let e = (c / mden) % (1 << s.ebits);
    let top = (1 << s.ebits) - 1;
    let neg = c >= 128;
    let mag = if s.ieee && e == top {
        if m == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else if !s.ieee && e == top && m == mden - 1 {
        f64::NAN
    } else if e == 0 {
        (f64::from(m) / f64::from(mden)) * 2f64.powf(f64::from(1 - s.bias))
    } else {
        (1.0 + f64::from(m) / f64::from(mden)) * 2f64.powf(f64::from(e as i32 - s.bias))
    };
    if neg {
        -mag
    } else {
        mag
    }
}

/// Round `x` by the definition: NaN to 0x7F; beyond the largest finite value to it; else the
/// nearest finite value, a tie to the even code; the sign kept (zero included).
fn ref_round(s: &Spec, x: f64) -> u8 {
    if x.is_nan() {
        return 0x7F;
    }
    let finite: Vec<(f64, u8)> = (0u8..128)
        .map(|c| (ref_value(s, c), c))
        .filter(|(v, _)| v.is_finite())
        .collect();
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = x.abs();
    let (max, max_code) = *finite.last().expect("finite values");
    if a >= max {
        return sign | max_code;
    }
    let hi = finite.iter().position(|(v, _)| *v > a).expect("below max");
    let (lo_v, lo_c) = finite[hi - 1];
    let (hi_v, hi_c) = finite[hi];
    let pick = if a - lo_v < hi_v - a {
        lo_c
    } else if a - lo_v > hi_v - a {
        hi_c
    } else if lo_c % 2 == 0 {
        lo_c
    } else {
        hi_c
    };
    sign | pick
}

fn both() -> [(Format, Spec); 2] {
    [(E4M3, SPEC_E4M3), (E5M2, SPEC_E5M2)]
}

#[test]
fn every_code_decodes_to_its_defined_value() {
    for (f, s) in both() {
        for c in 0..=255u8 {
            let (got, want) = (f64::from(f.decode(c)), ref_value(&s, c));
            if want.is_nan() {
                assert!(got.is_nan() && f.is_nan(c), "{f:?} {c:#04x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{f:?} {c:#04x}");
                assert!(!f.is_nan(c));
            }
        }
    }
    assert_eq!(E4M3.decode(0x7E), 448.0);
    assert_eq!(E4M3.decode(0x01), 2f32.powi(-9));
    assert_eq!(E5M2.decode(0x7B), 57344.0);
    assert_eq!(E5M2.decode(0x7C), f32::INFINITY);
    assert_eq!(E5M2.decode(0x01), 2f32.powi(-16));
    assert_eq!((0..=255u8).filter(|c| E4M3.is_nan(*c)).count(), 2);
    assert_eq!((0..=255u8).filter(|c| E5M2.is_nan(*c)).count(), 6);
}

#[test]
fn every_code_round_trips() {
    for (f, _) in both() {
        for c in 0..=255u8 {
            let back = f.encode(f64::from(f.decode(c)));
            let want = if f.is_nan(c) {
                CANONICAL_NAN
            } else if f.decode(c).is_infinite() {
                // Saturating conversion: infinity becomes the largest finite value.
                (c & 0x80) | f.max_code
            } else {
                c
            };
            assert_eq!(back, want, "{f:?} {c:#04x}");
        }
    }
}

/// Every half value (ties between FP8 neighbours, subnormals and overflow among them: every
/// FP8 midpoint is a half value) rounds as the definition says.
#[test]
fn every_half_value_rounds_as_defined() {
    for (f, s) in both() {
        for bits in 0..=u16::MAX {
            let x = f16::from_bits(bits).to_f64();
            assert_eq!(f.encode(x), ref_round(&s, x), "{f:?} {x} ({bits:#06x})");
        }
    }
}

#[test]
fn ties_go_to_even_and_overflow_saturates() {
    let e = |x: f64| E4M3.decode(E4M3.encode(x));
    assert_eq!(e(17.0), 16.0); // 16 = 1.000b × 2^4 is even
    assert_eq!(e(19.0), 20.0); // 18 = 1.001b × 2^4 is odd
    assert_eq!(e(464.0), 448.0); // the tie past the largest value stays on it
    assert_eq!(e(1e9), 448.0);
    assert_eq!(E4M3.encode(f64::NEG_INFINITY), 0xFE);
    assert_eq!(E5M2.encode(61440.0), 0x7B);
    assert_eq!(E5M2.encode(f64::INFINITY), 0x7B);
    // Half of the smallest subnormal is a tie with zero, which is even; the sign stays.
    assert_eq!(E4M3.encode(2f64.powi(-10)), 0x00);
    assert_eq!(E4M3.encode(-(2f64.powi(-10))), 0x80);
    assert_eq!(E4M3.encode(1.5 * 2f64.powi(-10)), 0x01);
    assert_eq!(E5M2.encode(f64::NAN), CANONICAL_NAN);
}

/// The reference of NCCL's `a ⊕ b`: the exact result in f64, rounded once to half
/// (nearest even), then by the definition.
fn ref_combine(s: &Spec, a: u8, b: u8, op: ReduceOp) -> u8 {
    let (x, y) = (ref_value(s, a), ref_value(s, b));
    let exact = match op {
        ReduceOp::Sum | ReduceOp::Avg => x + y,
        ReduceOp::Prod => x * y,
        ReduceOp::Min | ReduceOp::Max => {
            let max = op == ReduceOp::Max;
            if x.is_nan() {
                y
            } else if y.is_nan() || x == y && (x.is_sign_negative() != max) {
                x
            } else if x == y {
                y
            } else if (x < y) != max {
                x
            } else {
                y
            }
        }
    };
    ref_round(s, f16::from_f64(exact).to_f64())
}

#[test]
fn every_pair_combines_as_nccl() {
    for (f, s) in both() {
        // The definition's rounding of every half value, looked up by its bits.
        let table: Vec<u8> = (0..=u16::MAX)
            .map(|b| ref_round(&s, f16::from_bits(b).to_f64()))
            .collect();
        let round = |x: f64| {
            if x.is_nan() {
                0x7F
            } else {
                table[f16::from_f64(x).to_bits() as usize]
            }
        };
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
            for a in 0..=255u8 {
                for b in 0..=255u8 {
                    let got = f.from_f32_via_half(apply(f.decode(a), f.decode(b), op));
                    let want = ref_combine(&s, a, b, op);
                    assert_eq!(got, want, "{f:?} {a:#04x} {op:?} {b:#04x}");
                    if matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
                        let (x, y) = (ref_value(&s, a), ref_value(&s, b));
                        let exact = if op == ReduceOp::Sum { x + y } else { x * y };
                        assert_eq!(round(exact), want);
                        // The half step never changes a result of two FP8 operands: NCCL's
                        // sum and product are the exact value rounded once.
                        assert_eq!(ref_round(&s, exact), want, "{f:?} {a:#04x} {op:?} {b:#04x}");
                    }
                }
            }
        }
    }
}

#[test]
fn min_max_take_the_number_over_nan_and_order_zeros() {
    let (nan, one) = (F8E4M3(0x7F), F8E4M3(0x38));
    assert_eq!(nan.combine(one, ReduceOp::Min), one);
    assert_eq!(one.combine(nan, ReduceOp::Max), one);
    assert_eq!(nan.combine(nan, ReduceOp::Max), nan);
    let (pz, nz) = (F8E5M2(0x00), F8E5M2(0x80));
    assert_eq!(pz.combine(nz, ReduceOp::Min), nz);
    assert_eq!(nz.combine(pz, ReduceOp::Max), pz);
    // e5m2: inf + -inf is NaN, canonical.
    assert_eq!(
        F8E5M2(0x7C).combine(F8E5M2(0xFC), ReduceOp::Sum),
        F8E5M2(0x7F)
    );
    // e4m3 saturates: 448 + 448 is 448.
    assert_eq!(
        F8E4M3(0x7E).combine(F8E4M3(0x7E), ReduceOp::Sum),
        F8E4M3(0x7E)
    );
}

#[test]
fn avg_scalar_is_one_over_n_in_the_format() {
    let v = |f: Format, n| f.decode(avg_scalar(f, n));
    assert_eq!(v(E4M3, 1), 1.0);
    assert_eq!(v(E4M3, 2), 0.5);
    assert_eq!(v(E4M3, 8), 0.125);
    // 1/3 is not an FP8 value: NCCL's average is biased where nranks is no power of two.
    assert_eq!(v(E4M3, 3), 0.34375);
    assert_eq!(v(E5M2, 3), 0.3125);
    assert_eq!(v(E4M3, 7), 0.140625);
    // Premultiplying 3.0 by e4m3's 1/3: 1.03125 rounds to 1.0 (3 mantissa bits).
    assert_eq!(
        E4M3.decode(premul(E4M3, E4M3.encode(3.0), avg_scalar(E4M3, 3))),
        1.0
    );
}
