// The direct path's shared pieces: the launch argument (TdArgs, mirrored by the host's
// `direct::TdArgs`), the flag words' layout, slots, LL lines, shares and the credit waits. The
// sizes and option bits (TD_*, TP_MAXR) come from the host as -D options (`cuda::layout`).
//
// Each sender CTA b pushes its share of the message, segment by segment, into a slot of the
// receiver's scratch reserved for (sender, b); the receiver's CTA b combines the slot with its
// own data. Slots are reused under credits: per (peer, CTA) sequence numbers that only grow
// and live in device memory (so a captured graph replays correctly):
//   sent  (own)     segments this CTA pushed to the peer so far
//   recvd (own)     segments this CTA consumed from the peer so far
//   ready (peer's)  the peer's `sent`, published after its data (Simple only: LL carries the
//                   sequence number inside every 16-byte line next to 8 data bytes)
//   credit(peer's)  the peer's `recvd`, published after it read the slot
// A sender writes segment q into slot (q-1) % nslots only once credit >= q - nslots, so it can
// never overwrite a slot the receiver has not read, whatever the call pattern (one-way flows
// such as broadcast included). No rank ever waits for a peer to *enter* a call: that is the
// barrier the generic executor pays and this path does not.
#pragma once
#include "common.cuh"

// Flag word of (protocol, role, peer, cta) in a rank's direct flag region; after the per-peer
// words come the in-place guard's per-CTA words (TD_SCALLS, TD_RCALLS, TD_PROGRESS: calls run
// by sender CTA b and by receiver CTA b, equal between calls, and the sender's progress,
// call << 32 | segments pushed to every peer, which an in-place receiver waits for before it
// overwrites the input the sender still has to push), then pull mode's (direct_pull.cuh).
#define TD_FLAG(proto, role, peer, cta) \
  (((((u64)(proto)) * TD_ROLES + (role)) * TP_MAXR + (peer)) * TD_MAXCTA + (cta))
#define TD_SENT 0
#define TD_RECVD 1
#define TD_READY 2
#define TD_CREDIT 3

struct TdArgs {
  u64 in, out;              // this rank's buffers (T*)
  u64 scratch[TP_MAXR];     // every rank's slot region for this protocol
  u64 flags[TP_MAXR];       // every rank's direct flag region
  u64 n;                    // elements per pushed message
  u64 seg;                  // elements per segment (a multiple of 16 bytes' worth)
  u64 slot_bytes;           // bytes per slot
  u64 send_stride;          // the message for peer p starts at in + p * send_stride
  u64 local_off;            // reduce mode: own contribution at in + local_off
  u64 gather_stride;        // gather mode: sender s's message goes to out + s * gather_stride
  u64 copy_dst;             // local copy in + copy_src [0, n) -> out + copy_dst (when TD_COPY)
  u64 copy_src;
  u32 rank, nranks;
  u32 send_mask, recv_mask; // peers this rank pushes to / receives from
  u32 mode;                 // 0 reduce: out = own (op) received; 1 gather: out slot = received
  u32 ll;                   // protocol: 0 Simple (data, fence, ready flag), 1 LL, 2 LL128
  u32 nslots;
  u32 opts;                 // TD_AVG | TD_COPY | TD_INPLACE | TD_LL_IMPLIED
  u32 senders;              // Simple: sender CTAs S (streams); the other CTAs receive
  u32 pad;
  TpAbort ab;               // the abort word, status word, timeout and call (common.cuh)
};
// Simple and LL128 run S sender CTAs [0, S) and R receiver CTAs [S, S + R): sender CTA b pushes stream b,
// receiver CTA r consumes streams r, r + R, ... (R <= S <= 4R), so NVLink stores never pause
// while a CTA reduces, and more SMs push than reduce. LL runs G CTAs that push, then consume.
// Simple and LL128 run S sender CTAs [0, S) and R receiver CTAs [S, S + R): sender CTA b pushes stream b,
// receiver CTA r consumes streams r, r + R, ... (R <= S <= 4R), so NVLink stores never pause
// while a CTA reduces, and more SMs push than reduce. LL runs G CTAs that push, then consume.

__device__ __forceinline__ void td_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void td_pdl_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Index of `sender` among the receiver's peers: slot regions exist for peers only.
__device__ __forceinline__ u32 td_pidx(u32 sender, u32 receiver) {
  return sender < receiver ? sender : sender - 1;
}

// Slot of sequence number q for (sender, receiver, CTA b) in the receiver's scratch.
__device__ __forceinline__ char* td_slot(const TdArgs& a, u32 receiver, u32 sender, u32 b, u64 q) {
  u64 slot = (q - 1) % a.nslots;
  return (char*)a.scratch[receiver] +
         ((u64)(td_pidx(sender, receiver) * TD_MAXCTA + b) * a.nslots + slot) * a.slot_bytes;
}

#define TD_PER (8 / sizeof(T))

// The 8 data bytes of LL line `ln` of a message of `cnt` elements at `src`.
__device__ __forceinline__ unsigned long long td_pack(const T* src, u64 ln, u64 cnt) {
  U8B x; x.u = 0;
  u64 e0 = ln * TD_PER;
  if (e0 + TD_PER <= cnt && (((u64)(src + e0)) & 7) == 0) {
    x.u = *(const unsigned long long*)(src + e0);
  } else {
    for (u32 j = 0; j < TD_PER && e0 + j < cnt; j++) x.e[j] = src[e0 + j];
  }
  return x.u;
}

__device__ __forceinline__ void td_unpack(T* dst, u64 ln, u64 cnt, unsigned long long v) {
  U8B x; x.u = v;
  u64 e0 = ln * TD_PER;
  if (e0 + TD_PER <= cnt && (((u64)(dst + e0)) & 7) == 0) {
    *(unsigned long long*)(dst + e0) = v;
  } else {
    for (u32 j = 0; j < TD_PER && e0 + j < cnt; j++) dst[e0 + j] = x.e[j];
  }
}

// The 32-bit flag an LL line carries for sequence number q: never 0, so lines never written
// (zeroed at allocation) cannot pass for data when the count wraps (`direct::protocol::ll_flag`).
__device__ __forceinline__ u32 td_ll_flag(u64 q) { return (u32)(q % 0xffffffffull) + 1; }

// The data of LL line `line` once it carries flag q (from `peer`); once `stop` is set (this
// thread's earlier wait stopped) it waits no more and returns what is there.
__device__ __forceinline__ unsigned long long td_ll_wait(const TpAbort& ab, u32 peer, const uint4* line, u32 q,
                                                         bool& stop) {
  uint4 v;
  auto ready = [&] {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(line) : "memory");
    return v.y == q && v.w == q;
  };
  if (stop) ready();
  else stop = !tp_spin(ab, TP_WAIT_LL, peer, ready);
  return ((unsigned long long)v.z << 32) | v.x;
}

// This CTA's share [lo, hi) of the message, cut in whole 16-byte vectors so that every rank
// cuts alike.
__device__ __forceinline__ void td_share(const TdArgs& a, u32 b, u32 G, u64& lo, u64& hi) {
  u64 nv = (a.n + VEC - 1) / VEC;
  lo = (nv * b / G) * VEC;
  hi = (nv * (b + 1) / G) * VEC;
  if (hi > a.n) hi = a.n;
  if (lo > a.n) lo = a.n;
}

// Waits (thread 0) until the peer's credit lets sequence number q into its slot; false, on
// every thread of the CTA, when the call stops instead.
__device__ __forceinline__ bool td_credit(const TdArgs& a, u64* s_credit, u32 proto, u32 p, u32 b, u64 q) {
  if (s_credit[p] + a.nslots < q) {  // uniform: every thread reads it before the barrier
    __syncthreads();
    bool stop = false;
    if (threadIdx.x == 0) {
      u64 c = 0;
      const u64* w = ((const u64*)a.flags[a.rank]) + TD_FLAG(proto, TD_CREDIT, p, b);
      stop = !tp_spin(a.ab, TP_WAIT_CREDIT, p, [&] { c = ld_acquire(w); return c + a.nslots >= q; });
      s_credit[p] = c;
    }
    if (__syncthreads_or(stop)) return false;
  }
  return true;
}

// Whether every peer's credit already lets segment `seg` (of this call) into its slot, reloading
// the credit words once if the cached ones do not. Uniform: every thread reads the same shared
// values between barriers.
__device__ __forceinline__ bool td_credit_ready(const TdArgs& a, const u64* s_sent, u64* s_credit, u32 proto, u32 b, u64 seg) {
  bool ok = true;
  for (u32 p = 0; p < a.nranks; p++)
    if (((a.send_mask >> p) & 1) && s_credit[p] + a.nslots < s_sent[p] + seg + 1) ok = false;
  if (ok) return true;
  __syncthreads();
  if (threadIdx.x < a.nranks && ((a.send_mask >> threadIdx.x) & 1))
    s_credit[threadIdx.x] = ld_acquire(((const u64*)a.flags[a.rank]) + TD_FLAG(proto, TD_CREDIT, threadIdx.x, b));
  __syncthreads();
  ok = true;
  for (u32 p = 0; p < a.nranks; p++)
    if (((a.send_mask >> p) & 1) && s_credit[p] + a.nslots < s_sent[p] + seg + 1) ok = false;
  return ok;
}

// Loads this CTA's per-peer sequence numbers into shared memory.
__device__ __forceinline__ void td_load_seq(const TdArgs& a, u32 proto, u32 b, u64* s_sent, u64* s_recvd, u64* s_credit) {
  const u64* my = (const u64*)a.flags[a.rank];
  u32 t = threadIdx.x;
  if (t < TP_MAXR) s_sent[t] = my[TD_FLAG(proto, TD_SENT, t, b)];
  else if (t < 2 * TP_MAXR) s_recvd[t - TP_MAXR] = my[TD_FLAG(proto, TD_RECVD, t - TP_MAXR, b)];
  else if (t < 3 * TP_MAXR) {
    s_credit[t - 2 * TP_MAXR] = ld_acquire(my + TD_FLAG(proto, TD_CREDIT, t - 2 * TP_MAXR, b));
  }
  __syncthreads();
}
