// topoplan device executor: one kernel runs a lowered schedule (phases of work items) on one GPU.
//
// Compiled at run time by NVRTC once per element type (TP_TYPE selects it, `cuda::kernels`); the
// element types, operators and memory-order helpers come from common.cuh, the layout constants
// (TP_MAXR, the flag words, TP_LL_HALF) from the host as -D options (`cuda::layout`).
//
// A work item computes  dst[j] = src[0] (op) src[1] (op) ... (op) src[nsrc-1]  for j < ndst over
// `n` elements. Sources and destinations are references (rank, buffer, element offset) resolved
// against the base-pointer table passed by value, so a rank's item may read or write a peer's
// memory directly over NVLink (P2P load / P2P store). One item with nsrc = 1 is a copy.
//
// Phases run in order. Before a phase the kernel may synchronise with the other ranks:
//   barrier 1 (per-CTA): CTA b of every rank meets CTA b of every other rank. Valid because the
//     host-side lowering proved that every item reading another rank's data reads exactly the
//     element range that the same-numbered CTA produced (same item length, same split).
//   barrier 2 (full): every CTA of every rank meets (local grid barrier, then one cross-rank flag
//     exchange by the last CTA to arrive, then a local release).
// Counters live in device memory and only grow, so no host-side epoch is needed and a captured
// CUDA graph can replay the kernel. All CTAs must be co-resident: the host caps the grid.

#include "common.cuh"

struct TpItem {
  u32 kind;   // 0: reduce/copy, 1: scale (dst = src / nranks)
  u32 nsrc;
  u32 ndst;
  u32 pad;
  u64 n;
  u64 src[TP_MAXSRC];
  u64 dst[2];
};

struct TpPhase {
  u32 first;
  u32 count;
  u32 barrier;
  u32 pad;
};

// A rank's flag region (u64 words, reachable by peers) holds the barrier arrivals and counters
// at TP_PC_FLAGS ... TP_LL_COUNT (`cuda::layout` lays them out).
// Low-latency (LL) buffers: each 16-byte line carries 8 data bytes and the epoch twice, so a
// receiver knows data arrived by looking at the data itself: no barrier, no separate flag.
// Two halves of TP_LL_HALF bytes alternate by epoch parity; a half is rewritten two calls
// later, after the receiver provably read it (it had to, to finish the call in between).
struct TpCtx {
  u64 base[TP_MAXR * 4];  // [rank][buffer: 0 input, 1 output, 2 scratch, 3 LL lines]
  u64 flags[TP_MAXR];     // flag region of each rank (peer-mapped)
  u32 rank;
  u32 nranks;
  u32 ll;                 // nonzero: this plan uses LL buffers (advance the epoch)
  u32 pad;
  TpAbort ab;             // the abort word, status word, timeout and call (common.cuh)
};

__device__ __forceinline__ T* tp_ptr(const TpCtx& c, u64 ref) {
  u32 r = (u32)(ref >> 60);
  u32 b = (u32)((ref >> 56) & 15);
  u64 off = ref & ((1ull << 56) - 1);
  return (T*)(c.base[r * 4 + b]) + off;
}

__device__ __forceinline__ bool tp_is_ll(u64 ref) { return ((ref >> 56) & 15) == 3; }

// LL line address of element offset `off` (a multiple of 8 bytes) of an LL reference.
__device__ __forceinline__ uint4* tp_ll_line(const TpCtx& c, u64 ref, u64 epoch) {
  u32 r = (u32)(ref >> 60);
  u64 off = ref & ((1ull << 56) - 1);
  char* b = (char*)c.base[r * 4 + 3] + (epoch & 1) * (u64)TP_LL_HALF;
  return (uint4*)(b + (off * sizeof(T) / 8) * 16);
}

// LL path of one CTA's share [lo, hi) of an item: one 8-byte group per thread step. False on a
// thread whose wait for a line stopped (it waits for no later line).
template <typename OP>
__device__ bool tp_item_ll(const TpCtx& c, const TpItem& it, u64 lo, u64 hi, u64 epoch) {
  bool stop = false;
  const u32 PER = 8 / sizeof(T);
  u64 first = lo / PER, last = (hi + PER - 1) / PER;  // line indexes, relative to the item
  for (u64 ln = first + threadIdx.x; ln < last; ln += blockDim.x) {
    u64 e0 = ln * PER;
    u32 m = (u32)((hi - e0) < PER ? (hi - e0) : PER);
    U8B acc; acc.u = 0;
    for (u32 k = 0; k < it.nsrc; k++) {
      U8B x; x.u = 0;
      if (tp_is_ll(it.src[k])) {
        const uint4* l = tp_ll_line(c, it.src[k], epoch) + ln;
        uint4 v;
        auto ready = [&] {
          asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(l) : "memory");
          return v.y == (u32)epoch && v.w == (u32)epoch;
        };
        if (stop) ready();
        else stop = !tp_spin(c.ab, TP_WAIT_EXEC_LL, (u32)(it.src[k] >> 60), ready);
        x.u = ((unsigned long long)v.z << 32) | v.x;
      } else {
        volatile T* p = tp_ptr(c, it.src[k]) + e0;
        for (u32 j = 0; j < m; j++) x.e[j] = p[j];
      }
      if (k == 0) acc = x;
      else for (u32 j = 0; j < m; j++) acc.e[j] = tstore(OP::f(tload(acc.e[j]), tload(x.e[j])));
    }
    if (it.kind == 1) for (u32 j = 0; j < m; j++) acc.e[j] = tstore(tp_div(tload(acc.e[j]), c.nranks));
    for (u32 d = 0; d < it.ndst; d++) {
      if (tp_is_ll(it.dst[d])) {
        uint4 v = make_uint4((u32)acc.u, (u32)epoch, (u32)(acc.u >> 32), (u32)epoch);
        asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(tp_ll_line(c, it.dst[d], epoch) + ln), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
      } else {
        volatile T* p = tp_ptr(c, it.dst[d]) + e0;
        for (u32 j = 0; j < m; j++) p[j] = acc.e[j];
      }
    }
  }
  return !stop;
}

// One CTA's share of one item: elements [lo, hi) of the item.
template <typename OP>
__device__ void tp_item(const TpCtx& c, const TpItem& it, u64 lo, u64 hi) {
  if (lo >= hi) return;
  T* s[TP_MAXSRC];
  T* d[2];
  u32 ns = it.nsrc, nd = it.ndst;
  bool aligned = true;
  for (u32 i = 0; i < ns; i++) { s[i] = tp_ptr(c, it.src[i]) + lo; aligned &= (((u64)s[i]) & 15) == 0; }
  for (u32 j = 0; j < nd; j++) { d[j] = tp_ptr(c, it.dst[j]) + lo; aligned &= (((u64)d[j]) & 15) == 0; }
  u64 n = hi - lo;
  u64 done = 0;
  if (aligned && it.kind == 0) {
    u64 nv = n / VEC;
    const u32 stride = blockDim.x;
    // Four vectors in flight per thread and source: enough loads outstanding to cover NVLink latency.
    u64 i = threadIdx.x;
    for (; i + 3 * stride < nv; i += 4 * stride) {
      V16 a[4], x[4];
#pragma unroll
      for (int u = 0; u < 4; u++) a[u].v = __ldcg(((const int4*)s[0]) + i + u * stride);
      for (u32 k = 1; k < ns; k++) {
#pragma unroll
        for (int u = 0; u < 4; u++) x[u].v = __ldcg(((const int4*)s[k]) + i + u * stride);
#pragma unroll
        for (int u = 0; u < 4; u++) tp_combine<OP>(a[u], x[u]);
      }
      for (u32 j = 0; j < nd; j++) {
#pragma unroll
        for (int u = 0; u < 4; u++) __stcg(((int4*)d[j]) + i + u * stride, a[u].v);
      }
    }
    for (; i < nv; i += stride) {
      V16 a, x;
      a.v = __ldcg(((const int4*)s[0]) + i);
      for (u32 k = 1; k < ns; k++) { x.v = __ldcg(((const int4*)s[k]) + i); tp_combine<OP>(a, x); }
      for (u32 j = 0; j < nd; j++) __stcg(((int4*)d[j]) + i, a.v);
    }
    done = nv * VEC;
  }
  // Scalar path: unaligned pointers, the tail, and the scale kind.
  for (u64 e = done + threadIdx.x; e < n; e += blockDim.x) {
    volatile T* s0 = s[0];
    C a = tload(s0[e]);
    if (it.kind == 1) {
      a = tp_div(a, c.nranks);
    } else {
      for (u32 k = 1; k < ns; k++) { volatile T* sk = s[k]; a = tp_round(OP::f(a, tload(sk[e]))); }
    }
    T v = tstore(a);
    for (u32 j = 0; j < nd; j++) { volatile T* dj = d[j]; dj[e] = v; }
  }
}

// The barriers return false, on every thread, when the call stops.
__device__ bool tp_barrier_cta(const TpCtx& c, u64& cnt) {
  __syncthreads();
  cnt++;
  bool stop = false;
  if (threadIdx.x == 0) {
    __threadfence_system();
    for (u32 p = 0; p < c.nranks; p++)
      if (p != c.rank) st_release(((u64*)c.flags[p]) + TP_PC_FLAGS + blockIdx.x * TP_MAXR + c.rank, cnt);
    const u64* mine = ((const u64*)c.flags[c.rank]) + TP_PC_FLAGS + blockIdx.x * TP_MAXR;
    for (u32 p = 0; p < c.nranks; p++)
      if (p != c.rank && !stop) stop = !tp_wait_geq(c.ab, mine + p, cnt, TP_WAIT_BARRIER, p);
    __threadfence_system();
  }
  return !__syncthreads_or(stop);
}

__device__ bool tp_barrier_full(const TpCtx& c, u64& cnt) {
  __syncthreads();
  cnt++;
  bool stop = false;
  if (threadIdx.x == 0) {
    u64* f = (u64*)c.flags[c.rank];
    u64 gen = ld_acquire(f + TP_RELEASE);
    __threadfence_system();
    u64 old = atomicAdd(f + TP_ARRIVE, 1ull);
    if (old == gridDim.x - 1) {
      // Last CTA of this rank: exchange with the other ranks, then release the local CTAs.
      *(volatile u64*)(f + TP_ARRIVE) = 0;
      __threadfence_system();
      for (u32 p = 0; p < c.nranks; p++)
        if (p != c.rank) st_release(((u64*)c.flags[p]) + TP_FULL_FLAGS + c.rank, cnt);
      for (u32 p = 0; p < c.nranks; p++)
        if (p != c.rank && !stop) stop = !tp_wait_geq(c.ab, f + TP_FULL_FLAGS + p, cnt, TP_WAIT_FULL_BARRIER, p);
      __threadfence_system();
      // Stopped: no release, so no local CTA goes on to touch peers' memory; they stop at
      // their next check, on the status this wait recorded.
      if (!stop) st_release(f + TP_RELEASE, gen + 1);
    } else {
      stop = !tp_spin(c.ab, TP_WAIT_GRID, c.rank, [&] { return ld_acquire(f + TP_RELEASE) != gen; });
    }
    __threadfence_system();
  }
  return !__syncthreads_or(stop);
}

template <typename OP>
__device__ void tp_exec(const TpPhase* phases, u32 nphases, const TpItem* items, const TpCtx& c) {
  __shared__ TpItem sh;
  __shared__ u64 pc, fc, lle;
  u64* f = (u64*)c.flags[c.rank];
  if (threadIdx.x == 0) {
    pc = f[TP_PC_COUNT + blockIdx.x];
    fc = f[TP_FULL_COUNT];
    lle = f[TP_LL_COUNT + blockIdx.x] + (c.ll ? 1 : 0);
    if (c.ll) f[TP_LL_COUNT + blockIdx.x] = lle;
  }
  __syncthreads();
  u64 my_pc = pc, my_fc = fc, epoch = lle;
  for (u32 p = 0; p < nphases; p++) {
    TpPhase ph = phases[p];
    if (ph.barrier == 1 && !tp_barrier_cta(c, my_pc)) return;
    if (ph.barrier == 2 && !tp_barrier_full(c, my_fc)) return;
    for (u32 k = 0; k < ph.count; k++) {
      if (threadIdx.x == 0) sh = items[ph.first + k];
      __syncthreads();
      // Split in whole 16-byte vectors so that every rank cuts an item of equal length alike.
      u64 nv = (sh.n + VEC - 1) / VEC;
      u64 lo = (nv * blockIdx.x / gridDim.x) * VEC;
      u64 hi = (nv * (blockIdx.x + 1) / gridDim.x) * VEC;
      if (hi > sh.n) hi = sh.n;
      if (lo > sh.n) lo = sh.n;
      bool ll = false;
      for (u32 k = 0; k < sh.nsrc; k++) ll |= tp_is_ll(sh.src[k]);
      for (u32 k = 0; k < sh.ndst; k++) ll |= tp_is_ll(sh.dst[k]);
      bool ok = true;
      if (ll) ok = tp_item_ll<OP>(c, sh, lo, hi, epoch);
      else tp_item<OP>(c, sh, lo, hi);
      if (__syncthreads_or(!ok)) return;
    }
  }
  if (threadIdx.x == 0) {
    f[TP_PC_COUNT + blockIdx.x] = my_pc;
    if (blockIdx.x == 0) f[TP_FULL_COUNT] = my_fc;
  }
}

#define TP_KERNEL(name, OP) \
  extern "C" __global__ void __launch_bounds__(512, 1) name(const TpPhase* phases, u32 nphases, const TpItem* items, TpCtx c) { \
    tp_exec<OP>(phases, nphases, items, c); }

TP_KERNEL(tp_exec_sum, OpSum)
TP_KERNEL(tp_exec_prod, OpProd)
TP_KERNEL(tp_exec_min, OpMin)
TP_KERNEL(tp_exec_max, OpMax)

// Fill with a byte pattern (poisoning outputs in checks) is done with cuMemsetD8; nothing else here.

// Cross-GPU stream ordering for the copy-engine path: a one-thread kernel that publishes a
// counter value into a (possibly peer) flag word, and one that waits until a local flag word
// reaches a value. Both run in stream order, so they order copies and kernels around them.
extern "C" __global__ void tp_signal(u64* addr, u64 v) {
  __threadfence_system();
  st_release(addr, v);
}
// The wait gives up when the call stops (`peer`: the rank whose signal it awaits).
extern "C" __global__ void tp_wait(const u64* addr, u64 v, TpAbort ab, u32 peer) {
  tp_wait_geq(ab, addr, v, TP_WAIT_SIGNAL, peer);
  __threadfence_system();
}

// The first step of a PreMulSum reduction (ncclRedOpCreatePreMulSum): dst[i] = src[i] * scalar,
// multiplied in the computation type C and rounded once to T, as NCCL scales each input before
// summing. The scalar is one T: its bits passed by value (`imm`), or read from device memory at
// run time (`dev`, when not 0; NCCL's device residence).
extern "C" __global__ void tp_scale(T* dst, const T* src, u64 n, u64 imm, const T* dev) {
  union { u64 u; T t; } b;
  b.u = imm;
  const C s = tload(dev != 0 ? *dev : b.t);
  const u64 step = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = tstore(tload(src[i]) * s);
}
