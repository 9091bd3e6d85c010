// The LL128 protocol of the push path (td_stream_send / td_stream_recv, direct_stream.cuh).
#pragma once
#include "direct.cuh"
// A 128-byte line carries 120 data bytes and, in its last 8 bytes, the sequence number. Eight
// lanes write a line with one 16-byte store each; NVLink delivers a warp's 128-byte line whole
// (the property NCCL's LL128 rests on), so a reader that sees the sequence number in the flag
// lane's 16 bytes, loaded in the same warp-wide load as the other lanes' data, saw the whole
// line. No fence, no ready flag: receivers consume as lines land.
#define TD_L128_E (TD_L128_DATA / sizeof(T))  // elements per line

// Loads `nb` bytes (a multiple of the element size, at most 16) of data at element `e` of
// `src` (valid up to `cnt` elements) into two words; missing elements read as zero.
__device__ __forceinline__ void td_l128_load(const T* src, u64 e, u64 cnt, u32 nb, u64& w0, u64& w1) {
  U8B a, b; a.u = 0; b.u = 0;
  const u32 per = 8 / sizeof(T);
  u32 ne = nb / sizeof(T);
  if (e + ne <= cnt && (((u64)(src + e)) & 7) == 0) {
    a.u = *(const unsigned long long*)(src + e);
    if (nb == 16) b.u = *(const unsigned long long*)(src + e + per);
  } else {
    for (u32 k = 0; k < ne && e + k < cnt; k++) {
      if (k < per) a.e[k] = src[e + k]; else b.e[k - per] = src[e + k];
    }
  }
  w0 = a.u; w1 = b.u;
}

__device__ __forceinline__ void td_l128_store(T* dst, u64 e, u64 cnt, u32 nb, u64 w0, u64 w1) {
  U8B a, b; a.u = w0; b.u = w1;
  const u32 per = 8 / sizeof(T);
  u32 ne = nb / sizeof(T);
  if (e + ne <= cnt && (((u64)(dst + e)) & 7) == 0) {
    *(unsigned long long*)(dst + e) = a.u;
    if (nb == 16) *(unsigned long long*)(dst + e + per) = b.u;
  } else {
    for (u32 k = 0; k < ne && e + k < cnt; k++) {
      if (k < per) dst[e + k] = a.e[k]; else dst[e + k] = b.e[k - per];
    }
  }
}

template <typename OP>
__device__ __forceinline__ u64 td_l128_op(u64 x, u64 y) {
  U8B a, b; a.u = x; b.u = y;
#pragma unroll
  for (u32 k = 0; k < 8 / sizeof(T); k++) a.e[k] = tstore(OP::f(tload(a.e[k]), tload(b.e[k])));
  return a.u;
}

__device__ __forceinline__ u64 td_l128_div(u64 x, u32 n) {
  U8B a; a.u = x;
#pragma unroll
  for (u32 k = 0; k < 8 / sizeof(T); k++) a.e[k] = tstore(tp_div(tload(a.e[k]), n));
  return a.u;
}

// Stream b's share in whole lines.
__device__ __forceinline__ void td_l128_share(const TdArgs& a, u32 b, u32 G, u64& lo, u64& hi) {
  u64 nl = (a.n + TD_L128_E - 1) / TD_L128_E;
  lo = (nl * b / G) * TD_L128_E;
  hi = (nl * (b + 1) / G) * TD_L128_E;
  if (hi > a.n) hi = a.n;
  if (lo > a.n) lo = a.n;
}

struct TdLl128 {
  static constexpr u32 PROTO = TD_PROTO_LL128;

  static __device__ __forceinline__ void share(const TdArgs& a, u32 b, u32 S, u64& lo, u64& hi) {
    td_l128_share(a, b, S, lo, hi);
  }

  // Lane l of each group of 8 threads writes 16 bytes of a line; lane 7's last 8 are q.
  static __device__ __forceinline__ void push(const TdArgs& a, char* slot, const T* src, u64 cnt, u64 q,
                                              u32 p, u32 b) {
    u32 t = threadIdx.x, lane = t & 7;
    u32 nb = lane < 7 ? 16 : 8;
    u64 nl = (cnt + TD_L128_E - 1) / TD_L128_E;
    for (u64 ln = t / 8; ln < nl; ln += blockDim.x / 8) {
      u64 w0, w1;
      td_l128_load(src, ln * TD_L128_E + lane * (16 / sizeof(T)), cnt, nb, w0, w1);
      if (lane == 7) w1 = q;
      asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(slot + ln * TD_L128_LINE + lane * 16), "l"(w0), "l"(w1) : "memory");
    }
  }

  // Every thread's loads of the segment are done (for the in-place progress word).
  static __device__ __forceinline__ void pushed() { __syncthreads(); }

  // Lines carry their sequence number, so only an in-place receiver waits up front (for the
  // sender's progress); the data is awaited line by line in consume.
  static __device__ __forceinline__ bool wait(const TdArgs& a, u32 b, u64 j, const u64* recvd, u64 call) {
    if (a.opts & TD_INPLACE) {
      bool stop = false;
      if (threadIdx.x == 0) {
        u64 want = (call << 32) | (j + 1);
        const u64* my = (const u64*)a.flags[a.rank];
        stop = !tp_wait_geq(a.ab, my + TD_PROGRESS + b, want, TP_WAIT_PROGRESS, a.rank);
      }
      return !__syncthreads_or(stop);
    }
    return true;
  }

  // Lines are handed out per warp (4 lines of 8 lanes) so the warp-wide reload vote is uniform.
  // False on a thread whose wait for a line stopped (it waits for no later line).
  template <typename OP>
  static __device__ __forceinline__ bool consume(const TdArgs& a, u32 b, u64 off, u64 cnt, const u64* recvd,
                                                 u64 j, bool avg) {
    const u32 t = threadIdx.x, lane = t & 7;
    const u32 nb = lane < 7 ? 16 : 8;
    const u32 nwarps = blockDim.x / 32, warp = t / 32, sub = (t & 31) / 8;
    u64 nl = (cnt + TD_L128_E - 1) / TD_L128_E;
    bool stop = false;
    for (u64 base = (u64)warp * 4; base < nl; base += (u64)nwarps * 4) {
      u64 ln = base + sub;
      bool valid = ln < nl;
      u64 e = ln * TD_L128_E + lane * (16 / sizeof(T));
      // Reduce: contributions in rank order, this rank's own at its place (the same bits on
      // every rank).
      u64 own0 = 0, own1 = 0, acc0 = 0, acc1 = 0;
      bool first = true;
      if (a.mode == 0 && valid) td_l128_load((const T*)a.in + a.local_off + off, e, cnt, nb, own0, own1);
      for (u32 s = 0; s < a.nranks; s++) {
        if (a.mode == 0 && s == a.rank) {
          if (first) { acc0 = own0; acc1 = own1; first = false; }
          else { acc0 = td_l128_op<OP>(acc0, own0); if (nb == 16) acc1 = td_l128_op<OP>(acc1, own1); }
          continue;
        }
        if (!((a.recv_mask >> s) & 1)) continue;
        u64 q = recvd[s] + j + 1;
        const char* line = td_slot(a, a.rank, s, b, q) + ln * TD_L128_LINE + lane * 16;
        u64 v0 = 0, v1 = 0, start = 0;
        bool again;
        u32 n = 0;
        do {
          if (valid)
            asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(v0), "=l"(v1) : "l"(line) : "memory");
          again = valid && lane == 7 && v1 != q && !stop;
          if (again && ++n % TP_CHECK_EVERY == 0 && tp_stop(a.ab, start, TP_WAIT_LL128, s)) {
            stop = true;
            again = false;
          }
        } while (__any_sync(0xffffffffu, again));
        if (!valid) continue;
        if (a.mode == 0 && first) {
          acc0 = v0;
          acc1 = v1;
          first = false;
        } else if (a.mode == 0) {
          acc0 = td_l128_op<OP>(acc0, v0);
          if (nb == 16) acc1 = td_l128_op<OP>(acc1, v1);
        } else {
          td_l128_store((T*)a.out + s * a.gather_stride + off, e, cnt, nb, v0, v1);
        }
      }
      if (a.mode == 0 && valid) {
        if (avg) { acc0 = td_l128_div(acc0, a.nranks); acc1 = td_l128_div(acc1, a.nranks); }
        td_l128_store((T*)a.out + off, e, cnt, nb, acc0, acc1);
      }
    }
    return !stop;
  }

  static __device__ __forceinline__ void credit(u64* w, u64 v) { st_release(w, v); }
};
