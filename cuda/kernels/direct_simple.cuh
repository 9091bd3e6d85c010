// The Simple protocol of the push path (td_stream_send / td_stream_recv, direct_stream.cuh):
// a segment is plain data in the slot, then a fence and a ready word per peer.
#pragma once
#include "direct.cuh"
#include "reduce.cuh"

struct TdSimple {
  static constexpr u32 PROTO = TD_PROTO_SIMPLE;

  static __device__ __forceinline__ void share(const TdArgs& a, u32 b, u32 S, u64& lo, u64& hi) {
    td_share(a, b, S, lo, hi);
  }

  static __device__ __forceinline__ void push(const TdArgs& a, char* slot, const T* src, u64 cnt, u64 q,
                                              u32 p, u32 b) {
    td_copy((T*)slot, src, cnt);
    // Only thread 0 fences, after the barrier (fences are cumulative: the barrier orders
    // the other threads' stores before it), and the other warps go on to the next segment's
    // stores while it waits; a fence in every thread would stall them all.
    __syncthreads();
    if (threadIdx.x == 0) {
      // Every thread's stores are fenced before the flag, so a relaxed store publishes them
      // (the barrier-fence-flag pattern); a release store would fence again.
      __threadfence_system();
      st_relaxed_sys(((u64*)a.flags[p]) + TD_FLAG(PROTO, TD_READY, a.rank, b), q);
    }
  }

  // Each peer's push already ended at a barrier.
  static __device__ __forceinline__ void pushed() {}

  static __device__ __forceinline__ bool wait(const TdArgs& a, u32 b, u64 j, const u64* recvd, u64 call) {
    u32 t = threadIdx.x;
    u64* my = (u64*)a.flags[a.rank];
    bool stop = false;
    if (t < a.nranks && ((a.recv_mask >> t) & 1)) {
      const u64* rf = my + TD_FLAG(PROTO, TD_READY, t, b);
      u64 q = recvd[t] + j + 1;
      stop = !tp_wait_geq(a.ab, rf, q, TP_WAIT_READY, t);
    }
    if ((a.opts & TD_INPLACE) && t == TP_MAXR) {
      u64 want = (call << 32) | (j + 1);
      stop = !tp_wait_geq(a.ab, my + TD_PROGRESS + b, want, TP_WAIT_PROGRESS, a.rank);
    }
    return !__syncthreads_or(stop);
  }

  // Waits for nothing (wait did): always true.
  template <typename OP>
  static __device__ __forceinline__ bool consume(const TdArgs& a, u32 b, u64 off, u64 cnt, const u64* recvd,
                                                 u64 j, bool avg) {
    if (a.mode == 0) {
      // Every contribution in rank order, this rank's own at its place: every rank sums in the
      // same order, so floating-point results are the same bits on every rank.
      const T* all[TP_MAXR];
      u32 n = 0;
      for (u32 s = 0; s < a.nranks; s++) {
        if (s == a.rank) all[n++] = (const T*)a.in + a.local_off + off;
        else if ((a.recv_mask >> s) & 1) all[n++] = (const T*)td_slot(a, a.rank, s, b, recvd[s] + j + 1);
      }
      td_reduce<OP>((T*)a.out + off, all[0], all + 1, n - 1, cnt, avg, a.nranks);
    } else {
      for (u32 s = 0; s < a.nranks; s++)
        if ((a.recv_mask >> s) & 1)
          td_copy((T*)a.out + s * a.gather_stride + off, (const T*)td_slot(a, a.rank, s, b, recvd[s] + j + 1), cnt);
    }
    return true;
  }

  // Every thread's slot loads returned before the barrier (their values were stored), so a
  // relaxed credit is safe, as in td_ll (2xH200: 1 MiB 13.8 -> 12.2 us).
  static __device__ __forceinline__ void credit(u64* w, u64 v) { st_relaxed_sys(w, v); }
};
