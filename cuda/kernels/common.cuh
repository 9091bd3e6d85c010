// Shared by every kernel unit: the element type (TP_TYPE, passed by the host per build), the
// reduction operators, vector unions and the memory-order helpers. The host passes every
// layout constant (TP_*, TD_*) as a -D option (`cuda::layout`); no file defines them.
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;

// ---------------------------------------------------------------- element types
#if TP_TYPE == 0
typedef float T; typedef float C;
__device__ __forceinline__ C tload(T v) { return v; }
__device__ __forceinline__ T tstore(C v) { return v; }
#define TP_FLOAT 1
#elif TP_TYPE == 1
typedef double T; typedef double C;
__device__ __forceinline__ C tload(T v) { return v; }
__device__ __forceinline__ T tstore(C v) { return v; }
#define TP_FLOAT 1
#elif TP_TYPE == 2
typedef unsigned short T; typedef float C;  // IEEE half
__device__ __forceinline__ C tload(T v) { float f; asm("{ .reg .b16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(v)); return f; }
__device__ __forceinline__ T tstore(C f) { T v; asm("{ .reg .b16 h; cvt.rn.f16.f32 h, %1; mov.b16 %0, h; }" : "=h"(v) : "f"(f)); return v; }
#define TP_FLOAT 1
#elif TP_TYPE == 3
typedef unsigned short T; typedef float C;  // bfloat16
__device__ __forceinline__ C tload(T v) { return __uint_as_float(((u32)v) << 16); }
__device__ __forceinline__ T tstore(C f) { T v; asm("{ .reg .b16 h; cvt.rn.bf16.f32 h, %1; mov.b16 %0, h; }" : "=h"(v) : "f"(f)); return v; }
#define TP_FLOAT 1
#elif TP_TYPE == 4
typedef int T; typedef int C;
#define TP_SIGNED 1
#elif TP_TYPE == 5
typedef long long T; typedef long long C;
#define TP_SIGNED 1
#elif TP_TYPE == 6
typedef unsigned char T; typedef unsigned int C;
#elif TP_TYPE == 7
typedef signed char T; typedef int C;
#define TP_SIGNED 1
#elif TP_TYPE == 8  // OCP FP8 E4M3 (below)
#define TP_F8_MAN 3
#define TP_F8_BIAS 7
#define TP_F8_MAX 0x7E
#define TP_F8_IEEE 0
#elif TP_TYPE == 9  // OCP FP8 E5M2
#define TP_F8_MAN 2
#define TP_F8_BIAS 15
#define TP_F8_MAX 0x7B
#define TP_F8_IEEE 1
#elif TP_TYPE == 10
typedef unsigned int T; typedef unsigned int C;
#elif TP_TYPE == 11
typedef unsigned long long T; typedef unsigned long long C;
#endif
#ifdef TP_F8_MAN
// OCP FP8, E4M3 (8) or E5M2 (9), as `runtime::fp8` defines it: computed in f32, rounded to half
// and then to FP8 after every operation (NCCL 2.28's arithmetic: each step in half precision,
// narrowed with CUDA's saturating conversion). FP8 to half is exact, and so is half to f32.
typedef unsigned char T; typedef float C;
#if __CUDA_ARCH__ >= 890
// The hardware conversions NCCL's `__nv_cvt_halfraw_to_fp8(.., __NV_SATFINITE, ..)` compiles to
// (PTX ISA 7.8, sm_89): nearest even, beyond the largest finite value to it, NaN to NaN. The
// value rides in the low half of the pair, its result in the low byte.
#if TP_TYPE == 8
#define TP_F8X2 "e4m3x2"
#else
#define TP_F8X2 "e5m2x2"
#endif
__device__ __forceinline__ C tload(T v) {
  float f;
  asm("{ .reg .b16 lo, hi; .reg .b32 w; cvt.rn.f16x2." TP_F8X2 " w, %1; mov.b32 {lo, hi}, w; "
      "cvt.f32.f16 %0, lo; }" : "=f"(f) : "h"((unsigned short)v));
  return f;
}
__device__ __forceinline__ T tstore(C f) {
  unsigned short v;
  asm("{ .reg .b16 h, z; .reg .b32 w; cvt.rn.f16.f32 h, %1; mov.b16 z, 0; mov.b32 w, {h, z}; "
      "cvt.rn.satfinite." TP_F8X2 ".f16x2 %0, w; }" : "=h"(v) : "f"(f));
  return (T)(v & 0xFF);
}
#else
// Older architectures: the same bits in plain arithmetic (the host's algorithm), each conversion
// one out-of-line function: inlined into every lane of every unrolled vector loop, they made a
// unit take minutes to compile and assemble.
__device__ __noinline__ float tp_f8_decode(u32 v) {
  const u32 emask = (1u << (7 - TP_F8_MAN)) - 1, mmask = (1u << TP_F8_MAN) - 1;
  const u32 e = (v >> TP_F8_MAN) & emask, m = v & mmask;
  float mag;
  if (e == emask && (TP_F8_IEEE || m == mmask)) {
    mag = __int_as_float((TP_F8_IEEE && m == 0) ? 0x7f800000 : 0x7fffffff);  // inf or NaN
  } else if (e == 0) {
    mag = (float)m * __int_as_float((127 + 1 - TP_F8_BIAS - TP_F8_MAN) << 23);  // m x 2^(1-bias-man)
  } else {
    mag = __int_as_float(((e + 127 - TP_F8_BIAS) << 23) | (m << (23 - TP_F8_MAN)));
  }
  return (v & 0x80) ? -mag : mag;
}
// `f` rounded to half, then to FP8: nearest even, saturated to the largest finite value
// (infinity too), NaN to the canonical 0x7F, a zero result keeping the sign.
__device__ __noinline__ u32 tp_f8_encode(float f) {
  float x;
  asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; cvt.f32.f16 %0, t; }" : "=f"(x) : "f"(f));
  const u32 b = __float_as_uint(x), a = b & 0x7fffffffu, sign = (b >> 24) & 0x80u;
  if (a > 0x7f800000u) return 0x7F;
  if (a == 0) return sign;
  if (a == 0x7f800000u) return sign | TP_F8_MAX;
  const int ea = (int)(a >> 23) - 127;  // a half value is a normal f32
  const int e = ea < 1 - TP_F8_BIAS ? 1 - TP_F8_BIAS : ea;  // subnormals share the smallest quantum
  const u32 sig = (a & 0x7fffffu) | 0x800000u;                 // value = sig x 2^(ea - 23)
  const int sh = 23 + e - TP_F8_MAN - ea;                       // value / quantum = sig >> sh
  u32 r = 0;
  if (sh < 32) {
    const u32 q = sig >> sh, rem = sig & ((1u << sh) - 1), half = 1u << (sh - 1);
    r = q + ((rem > half || (rem == half && (q & 1))) ? 1u : 0u);
  }
  // A carry out of the mantissa lands in the exponent, as it must.
  int code = ((e + TP_F8_BIAS - 1) << TP_F8_MAN) + (int)r;
  if (code > TP_F8_MAX) code = TP_F8_MAX;
  return sign | (u32)code;
}
__device__ __forceinline__ C tload(T v) { return tp_f8_decode(v); }
__device__ __forceinline__ T tstore(C f) { return (T)tp_f8_encode(f); }
#endif
#define TP_FLOAT 1
#endif
#ifndef TP_FLOAT
__device__ __forceinline__ C tload(T v) { return (C)v; }
__device__ __forceinline__ T tstore(C v) { return (T)v; }
#endif

// Reductions. Integer sum/prod wrap (two's complement), done in unsigned arithmetic to avoid UB.
struct OpSum { static __device__ __forceinline__ C f(C a, C b) {
#ifdef TP_FLOAT
  return a + b;
#else
  return (C)((unsigned long long)a + (unsigned long long)b);
#endif
} };
struct OpProd { static __device__ __forceinline__ C f(C a, C b) {
#ifdef TP_FLOAT
  return a * b;
#else
  return (C)((unsigned long long)a * (unsigned long long)b);
#endif
} };
struct OpMin { static __device__ __forceinline__ C f(C a, C b) {
#ifdef TP_FLOAT
  return fmin(a, b);
#else
  return a < b ? a : b;
#endif
} };
struct OpMax { static __device__ __forceinline__ C f(C a, C b) {
#ifdef TP_FLOAT
  return fmax(a, b);
#else
  return a > b ? a : b;
#endif
} };

#define VEC (16 / sizeof(T))

// Average: a / n, as the CPU reference divides. For a power-of-two n (2, 4, 8 ranks) the same
// bits come cheaper: a float times the exact 2^-k rounds the same real value once, as the
// division does; an integer shifts, biased for negatives so it truncates towards zero as `/`
// does. The IEEE division's slow-path call also kept the vector loops from overlapping their
// loads (average ran 20-44 % behind sum on 2xH200; 0-5 % with the multiply).
__device__ __forceinline__ C tp_div(C a, u32 n) {
  const bool pow2 = (n & (n - 1)) == 0;
#ifdef TP_FLOAT
  if (pow2) {
    const int k = __ffs(n) - 1;  // n = 2^k, k <= 31: 2^-k is a normal float and double
    if (sizeof(C) == 4) return a * (C)__int_as_float((127 - k) << 23);
    return a * (C)__longlong_as_double((long long)(1023 - k) << 52);
  }
  return a / (C)n;
#else
  if (pow2) {
    const int k = __ffs(n) - 1;
#ifdef TP_SIGNED
    const C bias = (a < 0) ? (C)(n - 1) : (C)0;  // a < 0: a + n - 1 cannot overflow
    return (C)((a + bias) >> k);
#else
    return (C)(a >> k);
#endif
  }
  return (C)(a / (C)n);
#endif
}

// `v` rounded to T and back: a step of a reduction that keeps its running value in C rounds
// like one that stores it (f16, bf16 and FP8 round after every operation, as NCCL does).
__device__ __forceinline__ C tp_round(C v) { return tload(tstore(v)); }

union U8B { unsigned long long u; T e[8 / sizeof(T)]; };

union V16 { int4 v; T e[16 / sizeof(T)]; };

template <typename OP>
__device__ __forceinline__ void tp_combine(V16& acc, const V16& x) {
#pragma unroll
  for (int k = 0; k < (int)VEC; k++) acc.e[k] = tstore(OP::f(tload(acc.e[k]), tload(x.e[k])));
}

__device__ __forceinline__ u64 ld_acquire(const u64* p) {
  u64 v; asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ void st_release(u64* p, u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(u64* p, u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release_gpu(u64* p, u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ---------------------------------------------------------------- aborts
// Every wait on a peer can stop (`cuda::abort`): the host sets the abort word, or the wait lasts
// longer than the timeout. The first wait of a rank to stop records why in the rank's status
// word (reason TP_STOP_*, what TP_WAIT_*, peer, call); later waits of the rank then stop at
// their next check, and the CTAs leave their call at the next barrier (each barrier after a
// wait ORs the threads' stops, so every thread of a CTA takes the same way out).
struct TpAbort {
  u64 abort;       // the host-mapped abort word (0: none)
  u64 status;      // this rank's status word in device memory: 0 until a wait stops
  u64 timeout_ns;  // a wait longer than this stops the call (0: never)
  u32 seq;         // this call's sequence number on the rank
  u32 pad;
};

__device__ __forceinline__ u64 tp_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Whether an unsatisfied wait must give up: the rank already stopped, the host set the abort
// word, or the wait began (`start`, 0 until its first check) more than the timeout ago.
__device__ __noinline__ bool tp_stop(const TpAbort& ab, u64& start, u32 what, u32 peer) {
  if (ab.status != 0 && *(const volatile u64*)ab.status != 0) return true;
  u64 code = 0;
  if (ab.abort != 0 && *(const volatile u32*)ab.abort != 0) {
    code = TP_STOP_ABORTED;
  } else {
    const u64 now = tp_now();
    if (start == 0) start = now;
    else if (ab.timeout_ns != 0 && now - start > ab.timeout_ns) code = TP_STOP_TIMEOUT;
  }
  if (code == 0) return false;
  const u64 word = code | ((u64)what << 8) | ((u64)(peer & 255) << 16) | ((u64)ab.seq << 32);
  if (ab.status != 0) atomicCAS((unsigned long long*)ab.status, 0ull, (unsigned long long)word);
  return true;
}

// Spins until `ready()`; false when the call stops instead. The abort word and the clock are
// checked every TP_CHECK_EVERY misses: a satisfied wait pays nothing, a long one a read of
// host memory now and then.
template <class Ready>
__device__ __forceinline__ bool tp_spin(const TpAbort& ab, u32 what, u32 peer, Ready ready) {
  u64 start = 0;
  for (u32 n = 1; !ready(); n++)
    if (n % TP_CHECK_EVERY == 0 && tp_stop(ab, start, what, peer)) return false;
  return true;
}

// Spins until *w >= v (acquire); false when the call stops instead.
__device__ __forceinline__ bool tp_wait_geq(const TpAbort& ab, const u64* w, u64 v, u32 what, u32 peer) {
  return tp_spin(ab, what, peer, [&] { return ld_acquire(w) >= v; });
}
