// topoplan direct executor, pull mode (`TdArgs.ll == TD_PROTO_PULL`, included by direct.cu). One process only: it needs every sender's input pointer, which
// the host passes in `TdArgs.scratch` (pull mode has no slots).
//
// Each rank's CTA b reads its share [lo, hi) of every sender's input straight from the sender's
// memory over NVLink, combines it with its own and stores the result. No slots, no per-segment
// fence, no ready words: two per-CTA handshakes with the peers' CTA b replace them.
//   arrive (sender -> reader): the sender's stream reached this call, so its input is final.
//   done   (reader -> sender): the reader's loads of that input returned. The sender may then
//          end the call (its caller may overwrite the input afterwards) or, in place,
//          overwrite the input with its result.
// In place (all-reduce), a rank's result lands on the input its peers read, so results wait
// pass by pass for the peers' done word; out of place, a rank stores at once and waits only
// at the end. Words only grow (arrive: the call; done: call << 24 | passes read, or
// TD_PULL_ALL), so a captured graph replays correctly. The rules are `direct::protocol`'s
// pull functions, model-checked by `cuda/tests/loom_pull.rs`.

#pragma once
#include "direct.cuh"
#include "reduce.cuh"

#define TD_PULL_ARRIVE(peer, cta) (TD_FLAG_WORDS + (peer) * TD_PULL_MAXCTA + (cta))
#define TD_PULL_DONE(peer, cta) (TD_FLAG_WORDS + (TP_MAXR + (peer)) * TD_PULL_MAXCTA + (cta))
#define TD_PULL_CALLS(cta) (TD_FLAG_WORDS + 2 * TP_MAXR * TD_PULL_MAXCTA + (cta))
#define TD_PULL_U 8                 // 16-byte vectors per thread and source in one pass
#define TD_PULL_ALL 0xffffffull     // done: every pass of the call read

template <typename OP>
__device__ __forceinline__ void td_pull_combine(V16& acc, const V16& x, bool avg, u32 nranks, bool last) {
  tp_combine<OP>(acc, x);
  if (avg && last)
#pragma unroll
    for (int e = 0; e < (int)VEC; e++) acc.e[e] = tstore(tp_div(tload(acc.e[e]), nranks));
}

// Reduce, 16-byte aligned: passes of TD_PULL_U vectors per thread; in place, a pass's results
// wait for every reader's done word of that pass (false, on every thread, when the call
// stops). `all` holds the `n` contributions in rank
// order, this rank's own at its place, so every rank sums in the same order (the same bits).
template <typename OP>
__device__ bool td_pull_reduce(const TdArgs& a, u32 b, u64 call, const T* const* all, u32 n, T* out,
                               u64 lo, u64 hi, bool inplace) {
  u64* my = (u64*)a.flags[a.rank];
  const u32 t = threadIdx.x, st = blockDim.x;
  const bool avg = (a.opts & TD_AVG) != 0;
  const u64 v0 = lo / VEC, vend = v0 + (hi - lo) / VEC;  // lo is a whole number of vectors
  const u64 tail = vend * VEC;                           // [tail, hi): fewer than VEC elements
  const u64 per = (u64)TD_PULL_U * st;
  u64 npass = (vend - v0 + per - 1) / per;
  if (npass == 0 && tail < hi) npass = 1;
  for (u64 p = 0; p < npass; p++) {
    const u64 base = v0 + p * per + t;
    V16 acc[TD_PULL_U];
    u32 dep = 0;  // depends on every load of this pass, peers' included (see the barrier)
#pragma unroll
    for (int u = 0; u < TD_PULL_U; u++)
      if (base + u * st < vend) {
        acc[u].v = __ldcg(((const int4*)all[0]) + base + u * st);
        dep ^= (u32)acc[u].v.x;
      }
    for (u32 k = 1; k < n; k++) {
      V16 x[TD_PULL_U];
#pragma unroll
      for (int u = 0; u < TD_PULL_U; u++)
        if (base + u * st < vend) x[u].v = __ldcg(((const int4*)all[k]) + base + u * st);
#pragma unroll
      for (int u = 0; u < TD_PULL_U; u++)
        if (base + u * st < vend) {
          dep ^= (u32)x[u].v.x;
          td_pull_combine<OP>(acc[u], x[u], avg, a.nranks, k + 1 == n);
        }
    }
    const bool has_tail = p + 1 == npass && tail + t < hi;
    C tv = 0;
    if (has_tail) {
      tv = tload(all[0][tail + t]);
      dep ^= (u32)tv;
      for (u32 k = 1; k < n; k++) {
        T x = all[k][tail + t];
        dep ^= (u32)tload(x);
        tv = tp_round(OP::f(tv, tload(x)));  // each step rounds, as the vector lanes do
      }
      if (avg) tv = tp_div(tv, a.nranks);
    }
    if (inplace) {
      // The barrier's predicate operand is computed from every peer value this thread loaded
      // in this pass, so no thread reaches the barrier before its peer loads returned, and a
      // relaxed done word after it cannot let a reader overwrite what is still being read. (A
      // release store here cost 1.2 µs per call at 1 MiB in place on 2×H200.) The barrier's
      // result is unused.
      (void)__syncthreads_or(dep == a.pad);
      const u64 mark = (call << 24) | (p + 1);
      if (t < a.nranks && ((a.recv_mask >> t) & 1))
        st_relaxed_sys(((u64*)a.flags[t]) + TD_PULL_DONE(a.rank, b), mark);
      bool stop = false;
      if (t < a.nranks && ((a.send_mask >> t) & 1)) {
        const u64* w = my + TD_PULL_DONE(t, b);
        stop = !tp_wait_geq(a.ab, w, mark, TP_WAIT_DONE, t);
      }
      if (__syncthreads_or(stop)) return false;
    }
#pragma unroll
    for (int u = 0; u < TD_PULL_U; u++)
      if (base + u * st < vend) __stcg(((int4*)out) + base + u * st, acc[u].v);
    if (has_tail) out[tail + t] = tstore(tv);
  }
  return true;
}

template <typename OP>
__device__ void td_pull(const TdArgs& a, u32 b, u32 G) {
  __shared__ u64 s_call;
  u64* my = (u64*)a.flags[a.rank];
  const u32 t = threadIdx.x;
  if (t == 0) s_call = my[TD_PULL_CALLS(b)] + 1;
  __syncthreads();
  const u64 call = s_call;
  // Arrive, a relaxed store. The input was written by work that finished before this kernel
  // passed griddepcontrol.wait, so it already sits in this GPU's memory, where the peer's
  // loads (L1-bypassing) are served. A release store (the PTX model's fence) measured
  // 1.9 µs more per call at 1 MiB on 2×H200 and changed nothing else.
  if (t < a.nranks && ((a.send_mask >> t) & 1))
    st_relaxed_sys(((u64*)a.flags[t]) + TD_PULL_ARRIVE(a.rank, b), call);
  bool stop = false;
  if (t < a.nranks && ((a.recv_mask >> t) & 1)) {
    const u64* w = my + TD_PULL_ARRIVE(t, b);
    stop = !tp_wait_geq(a.ab, w, call, TP_WAIT_ARRIVE, t);
  }
  if (__syncthreads_or(stop)) return;
  u64 lo, hi;
  td_share(a, b, G, lo, hi);
  const bool inplace = (a.opts & TD_INPLACE) != 0;
  if (a.recv_mask && lo < hi) {
    const T* srcs[TP_MAXR];
    u32 ns = 0;
    for (u32 s = 0; s < a.nranks; s++)
      if ((a.recv_mask >> s) & 1) srcs[ns++] = (const T*)a.scratch[s] + (u64)a.rank * a.send_stride;
    const T* own = (const T*)a.in + a.local_off;
    T* out = (T*)a.out;
    if (a.mode == 0) {
      // Every contribution in rank order, this rank's own at its place.
      const T* all[TP_MAXR];
      u32 n = 0;
      for (u32 s = 0; s < a.nranks; s++) {
        if (s == a.rank) all[n++] = own;
        else if ((a.recv_mask >> s) & 1) all[n++] = (const T*)a.scratch[s] + (u64)a.rank * a.send_stride;
      }
      bool al = td_aligned(out);
      for (u32 k = 0; k < n; k++) al &= td_aligned(all[k]);
      if (al) {
        if (!td_pull_reduce<OP>(a, b, call, all, n, out, lo, hi, inplace)) return;
      } else {
        // The host never asks for an unaligned in-place pull (it pushes instead).
        const T* s_lo[TP_MAXR];
        for (u32 k = 0; k < n; k++) s_lo[k] = all[k] + lo;
        td_reduce<OP>(out + lo, s_lo[0], s_lo + 1, n - 1, hi - lo, (a.opts & TD_AVG) != 0, a.nranks);
      }
    } else {
      if (a.opts & TD_COPY) td_copy(out + a.copy_dst + lo, (const T*)a.in + a.copy_src + lo, hi - lo);
      u32 k = 0;
      for (u32 s = 0; s < a.nranks; s++)
        if ((a.recv_mask >> s) & 1) td_copy(out + s * a.gather_stride + lo, srcs[k++] + lo, hi - lo);
    }
  } else if ((a.opts & TD_COPY) && lo < hi) {
    td_copy((T*)a.out + a.copy_dst + lo, (const T*)a.in + a.copy_src + lo, hi - lo);
  }
  // Every load of a peer's input returned before the barrier (its value was stored), so a
  // relaxed done word is enough, as with the push path's credits.
  __syncthreads();
  if (t < a.nranks && ((a.recv_mask >> t) & 1))
    st_relaxed_sys(((u64*)a.flags[t]) + TD_PULL_DONE(a.rank, b), (call << 24) | TD_PULL_ALL);
  // Out of place, the caller may overwrite the input once the call ends: wait for its readers.
  // In place, every pass already waited for them.
  // (A stop here leaves the call with its status recorded: nothing follows but the count.)
  if (!inplace && t < a.nranks && ((a.send_mask >> t) & 1)) {
    const u64* w = my + TD_PULL_DONE(t, b);
    tp_wait_geq(a.ab, w, (call << 24) | TD_PULL_ALL, TP_WAIT_DONE, t);
  }
  if (t == 0) my[TD_PULL_CALLS(b)] = call;
}
