// Vector copy and reduce over one CTA's range, shared by the direct kernels and the copy-engine
// pair's reduce (pair.cu): 16-byte vectors four in flight when every pointer is aligned, a
// scalar path otherwise and for the tail.
#pragma once
#include "common.cuh"

__device__ __forceinline__ bool td_aligned(const void* p) { return (((u64)p) & 15) == 0; }

// dst[0, cnt) = src[0, cnt): 16-byte vectors four in flight when both are aligned.
__device__ void td_copy(T* dst, const T* src, u64 cnt) {
  u64 done = 0;
  if (td_aligned(dst) && td_aligned(src)) {
    u64 nv = cnt / VEC, i = threadIdx.x;
    const u32 st = blockDim.x;
    for (; i + 3 * st < nv; i += 4 * st) {
      int4 v[4];
#pragma unroll
      for (int u = 0; u < 4; u++) v[u] = __ldcg(((const int4*)src) + i + u * st);
#pragma unroll
      for (int u = 0; u < 4; u++) __stcg(((int4*)dst) + i + u * st, v[u]);
    }
    for (; i < nv; i += st) __stcg(((int4*)dst) + i, __ldcg(((const int4*)src) + i));
    done = nv * VEC;
  }
  for (u64 e = done + threadIdx.x; e < cnt; e += blockDim.x) {
    volatile const T* s = src;
    dst[e] = s[e];
  }
}

// out[0, cnt) = own[0, cnt) (op) srcs[0][..] (op) ... ; scaled by 1/nranks for average.
template <typename OP>
__device__ void td_reduce(T* out, const T* own, const T* const* srcs, u32 ns, u64 cnt, bool avg, u32 nranks) {
  bool al = td_aligned(out) && td_aligned(own);
  for (u32 k = 0; k < ns; k++) al &= td_aligned(srcs[k]);
  u64 done = 0;
  if (al) {
    u64 nv = cnt / VEC, i = threadIdx.x;
    const u32 st = blockDim.x;
    for (; i + 3 * st < nv; i += 4 * st) {
      V16 acc[4], x[4];
#pragma unroll
      for (int u = 0; u < 4; u++) acc[u].v = __ldcg(((const int4*)own) + i + u * st);
      for (u32 k = 0; k < ns; k++) {
#pragma unroll
        for (int u = 0; u < 4; u++) x[u].v = __ldcg(((const int4*)srcs[k]) + i + u * st);
#pragma unroll
        for (int u = 0; u < 4; u++) tp_combine<OP>(acc[u], x[u]);
      }
      if (avg) {
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
          for (int e = 0; e < (int)VEC; e++) acc[u].e[e] = tstore(tp_div(tload(acc[u].e[e]), nranks));
      }
#pragma unroll
      for (int u = 0; u < 4; u++) __stcg(((int4*)out) + i + u * st, acc[u].v);
    }
    for (; i < nv; i += st) {
      V16 acc, x;
      acc.v = __ldcg(((const int4*)own) + i);
      for (u32 k = 0; k < ns; k++) { x.v = __ldcg(((const int4*)srcs[k]) + i); tp_combine<OP>(acc, x); }
      if (avg)
#pragma unroll
        for (int e = 0; e < (int)VEC; e++) acc.e[e] = tstore(tp_div(tload(acc.e[e]), nranks));
      __stcg(((int4*)out) + i, acc.v);
    }
    done = nv * VEC;
  }
  for (u64 e = done + threadIdx.x; e < cnt; e += blockDim.x) {
    volatile const T* o = own;
    C v = tload(o[e]);
    for (u32 k = 0; k < ns; k++) { volatile const T* s = srcs[k]; v = tp_round(OP::f(v, tload(s[e]))); }
    if (avg) v = tp_div(v, nranks);
    out[e] = tstore(v);
  }
}
