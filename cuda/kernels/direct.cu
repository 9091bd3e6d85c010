// topoplan direct-push executor: the planner's one-shot schedules (every sender writes its block
// straight to each receiver) without barriers. Compiled in the same NVRTC unit as exec.cu
// (types, operators, ld_acquire/st_release come from there).
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

#define TD_MAXCTA 64  // streams: sender CTAs per (sender, receiver) pair
#define TD_RECV_STREAMS 4  // at most this many streams per Simple receiver CTA
#define TD_ROLES 4
#define TD_PROTOS 3  // 0 Simple, 1 LL, 2 LL128 (3, pull, has its own words: direct_pull.cu)
// Flag word of (protocol, role, peer, cta) in a rank's direct flag region.
#define TD_FLAG(proto, role, peer, cta) \
  (((((u64)(proto)) * TD_ROLES + (role)) * TP_MAXR + (peer)) * TD_MAXCTA + (cta))
#define TD_SENT 0
#define TD_RECVD 1
#define TD_READY 2
#define TD_CREDIT 3
// Per-CTA words of the Simple path's in-place guard (after the per-peer words): calls run by
// the sender CTA b and by the receiver CTA b (equal between calls), and the sender's progress
// (call << 32 | segments pushed to every peer), which an in-place receiver waits for before it
// overwrites the input the sender still has to push.
#define TD_SCALLS (TD_PROTOS * TD_ROLES * TP_MAXR * TD_MAXCTA)
#define TD_RCALLS (TD_SCALLS + TD_MAXCTA)
#define TD_PROGRESS (TD_RCALLS + TD_MAXCTA)
#define TD_FLAG_WORDS (TD_PROGRESS + TD_MAXCTA)

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
  u64 copy_dst;             // local copy in[0, n) -> out + copy_dst (when TD_COPY)
  u32 rank, nranks;
  u32 send_mask, recv_mask; // peers this rank pushes to / receives from
  u32 mode;                 // 0 reduce: out = own (op) received; 1 gather: out slot = received
  u32 ll;                   // protocol: 0 Simple (data, fence, ready flag), 1 LL, 2 LL128
  u32 nslots;
  u32 opts;                 // TD_AVG | TD_COPY | TD_INPLACE | TD_LL_IMPLIED
  u32 senders;              // Simple: sender CTAs S (streams); the other CTAs receive
  u32 pad;
};
// Simple and LL128 run S sender CTAs [0, S) and R receiver CTAs [S, S + R): sender CTA b pushes stream b,
// receiver CTA r consumes streams r, r + R, ... (R <= S <= 4R), so NVLink stores never pause
// while a CTA reduces, and more SMs push than reduce. LL runs G CTAs that push, then consume.
#define TD_AVG 1u
#define TD_COPY 2u
#define TD_INPLACE 4u  // the receiver overwrites what this rank's sender CTAs still push
#define TD_LL_IMPLIED 256u    // LL: credits implied by the peer's data (see td_ll's end)

__device__ __forceinline__ void st_relaxed_sys(u64* p, u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_release_gpu(u64* p, u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

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
    for (u32 k = 0; k < ns; k++) { volatile const T* s = srcs[k]; v = OP::f(v, tload(s[e])); }
    if (avg) v = tp_div(v, nranks);
    out[e] = tstore(v);
  }
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

__device__ __forceinline__ unsigned long long td_ll_wait(const uint4* line, u32 q) {
  uint4 v;
  do {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(line) : "memory");
  } while (v.y != q || v.w != q);
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

// Waits (thread 0) until the peer's credit lets sequence number q into its slot.
__device__ __forceinline__ void td_credit(const TdArgs& a, u64* s_credit, u32 proto, u32 p, u32 b, u64 q) {
  if (s_credit[p] + a.nslots < q) {  // uniform: every thread reads it before the barrier
    __syncthreads();
    if (threadIdx.x == 0) {
      u64 c;
      const u64* w = ((const u64*)a.flags[a.rank]) + TD_FLAG(proto, TD_CREDIT, p, b);
      while ((c = ld_acquire(w)) + a.nslots < q) {}
      s_credit[p] = c;
    }
    __syncthreads();
  }
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

// Simple, sender CTA b: push every segment to every peer (credit, data, fence, ready flag).
template <typename OP>
__device__ void td_simple_send(const TdArgs& a, u32 b, u32 G) {
  __shared__ u64 s_sent[TP_MAXR], s_recvd[TP_MAXR], s_credit[TP_MAXR], s_call;
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x;
  if (t == 0) s_call = my[TD_SCALLS + b] + 1;
  td_load_seq(a, 0, b, s_sent, s_recvd, s_credit);
  u64 lo, hi;
  td_share(a, b, G, lo, hi);
  u64 len = hi - lo, nseg = (len + a.seg - 1) / a.seg;
  for (u64 j = 0; j < nseg; j++) {
    u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
    for (u32 p = 0; p < a.nranks; p++) {
      if (!((a.send_mask >> p) & 1)) continue;
      u64 q = s_sent[p] + j + 1;
      td_credit(a, s_credit, 0, p, b, q);
      td_copy((T*)td_slot(a, p, a.rank, b, q), (const T*)a.in + p * a.send_stride + off, cnt);
      // Only thread 0 fences, after the barrier (fences are cumulative: the barrier orders
      // the other threads' stores before it), and the other warps go on to the next segment's
      // stores while it waits; a fence in every thread would stall them all.
      __syncthreads();
      if (t == 0) {
        // Every thread's stores are fenced before the flag, so a relaxed store publishes them
        // (the barrier-fence-flag pattern); a release store would fence again.
        __threadfence_system();
        st_relaxed_sys(((u64*)a.flags[p]) + TD_FLAG(0, TD_READY, a.rank, b), q);
      }
    }
    // Past the last barrier every thread's loads of segment j are done (its stores used them).
    // The word's only reader is this GPU's receiver CTA b, so a GPU-scope release orders them
    // (the barrier carries the other threads' loads to thread 0); a system-scope one fenced
    // again across NVLink once per segment.
    if ((a.opts & TD_INPLACE) && t == 0) {
      u64 v = (s_call << 32) | (j + 1);
      st_release_gpu(my + TD_PROGRESS + b, v);
    }
  }
  __syncthreads();
  if (t < a.nranks && ((a.send_mask >> t) & 1)) my[TD_FLAG(0, TD_SENT, t, b)] = s_sent[t] + nseg;
  if (t == 0) my[TD_SCALLS + b] = s_call;
}

// Simple, receiver CTA r of R: for every owned stream b (r, r + R, ...), wait for every peer's
// segment, combine, hand the slot back; segments of the streams interleave so that no sender
// waits for credits while its receiver serves another stream.
template <typename OP>
__device__ void td_simple_recv(const TdArgs& a, u32 r, u32 R, u32 S) {
  __shared__ u64 s_recvd[TD_RECV_STREAMS][TP_MAXR], s_call[TD_RECV_STREAMS];
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x;
  u32 k = (S - r + R - 1) / R;
  if (k > TD_RECV_STREAMS) k = TD_RECV_STREAMS;  // the host keeps S <= 4R
  bool avg = (a.opts & TD_AVG) != 0;
  u64 maxseg = 0;
  for (u32 i = 0; i < k; i++) {
    u32 b = r + i * R;
    if (t < TP_MAXR) s_recvd[i][t] = my[TD_FLAG(0, TD_RECVD, t, b)];
    if (t == TP_MAXR) s_call[i] = my[TD_RCALLS + b] + 1;
    u64 lo, hi;
    td_share(a, b, S, lo, hi);
    u64 nseg = (hi - lo + a.seg - 1) / a.seg;
    if (nseg > maxseg) maxseg = nseg;
    // The local part of all-gather / broadcast: here, off the senders' critical path.
    if (a.opts & TD_COPY) td_copy((T*)a.out + a.copy_dst + lo, (const T*)a.in + lo, hi - lo);
  }
  __syncthreads();
  for (u64 j = 0; j < maxseg && a.recv_mask; j++) {
    for (u32 i = 0; i < k; i++) {
      u32 b = r + i * R;
      u64 lo, hi;
      td_share(a, b, S, lo, hi);
      u64 nseg = (hi - lo + a.seg - 1) / a.seg;
      if (j >= nseg) continue;
      u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
      if (t < a.nranks && ((a.recv_mask >> t) & 1)) {
        const u64* rf = my + TD_FLAG(0, TD_READY, t, b);
        u64 q = s_recvd[i][t] + j + 1;
        while (ld_acquire(rf) < q) {}
      }
      if ((a.opts & TD_INPLACE) && t == TP_MAXR) {
        u64 want = (s_call[i] << 32) | (j + 1);
        while (ld_acquire(my + TD_PROGRESS + b) < want) {}
      }
      __syncthreads();
      if (a.mode == 0) {
        const T* srcs[TP_MAXR];
        u32 ns = 0;
        for (u32 s = 0; s < a.nranks; s++)
          if ((a.recv_mask >> s) & 1) srcs[ns++] = (const T*)td_slot(a, a.rank, s, b, s_recvd[i][s] + j + 1);
        td_reduce<OP>((T*)a.out + off, (const T*)a.in + a.local_off + off, srcs, ns, cnt, avg, a.nranks);
      } else {
        for (u32 s = 0; s < a.nranks; s++)
          if ((a.recv_mask >> s) & 1)
            td_copy((T*)a.out + s * a.gather_stride + off, (const T*)td_slot(a, a.rank, s, b, s_recvd[i][s] + j + 1), cnt);
      }
      __syncthreads();
      // Every thread's slot loads returned before the barrier (their values were stored), so
      // a relaxed credit is safe, as in td_ll (2xH200: 1 MiB 13.8 -> 12.2 us).
      if (t < a.nranks && ((a.recv_mask >> t) & 1))
        st_relaxed_sys(((u64*)a.flags[t]) + TD_FLAG(0, TD_CREDIT, a.rank, b), s_recvd[i][t] + j + 1);
    }
  }
  __syncthreads();
  for (u32 i = 0; i < k; i++) {
    u32 b = r + i * R;
    u64 lo, hi;
    td_share(a, b, S, lo, hi);
    u64 nseg = (hi - lo + a.seg - 1) / a.seg;
    if (t < a.nranks && ((a.recv_mask >> t) & 1)) my[TD_FLAG(0, TD_RECVD, t, b)] = s_recvd[i][t] + nseg;
    if (t == TP_MAXR) my[TD_RCALLS + b] = s_call[i];
  }
}

// LL, CTA b: push as far as the slots allow, then consume segment j (lines carry the sequence
// number, so there is no ready flag and no fence).
template <typename OP>
__device__ void td_ll(const TdArgs& a, u32 b, u32 G) {
  __shared__ u64 s_sent[TP_MAXR], s_recvd[TP_MAXR], s_credit[TP_MAXR];
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x;
  u64 lo, hi;
  td_share(a, b, G, lo, hi);
  u64 len = hi - lo, nseg = (len + a.seg - 1) / a.seg;
  // This thread's first line, loaded while the sequence numbers load (the two loads overlap
  // instead of following each other). With send_stride 0 every peer gets these bytes, and a
  // reducing receiver with local_off 0 (all-reduce) starts its sum from them.
  const bool pre_ok = a.send_stride == 0 && nseg > 0;
  const u64 cnt0 = min(a.seg, len);
  unsigned long long pre = 0;
  if (pre_ok && (u64)t * TD_PER < cnt0) pre = td_pack((const T*)a.in + lo, t, cnt0);
  td_load_seq(a, 1, b, s_sent, s_recvd, s_credit);
  bool avg = (a.opts & TD_AVG) != 0;
  if (a.opts & TD_COPY) td_copy((T*)a.out + a.copy_dst + lo, (const T*)a.in + lo, len);
  u64 sent = 0;
  for (u64 j = 0; j < nseg || sent < nseg; j++) {
    for (; sent < nseg && sent < j + a.nslots; sent++) {
      // Segment j must be out before segment j is awaited (td_credit may wait for it); later
      // ones go ahead only if their credits are already there. Waiting for them here could
      // deadlock after calls that left their credits implied (TD_LL_IMPLIED): the peer hands
      // the last one back only by consuming this call's first segment.
      if (sent > j && !td_credit_ready(a, s_sent, s_credit, 1, b, sent)) break;
      u64 off = lo + sent * a.seg, cnt = min(a.seg, hi - off);
      for (u32 p = 0; p < a.nranks; p++) {
        if (!((a.send_mask >> p) & 1)) continue;
        u64 q = s_sent[p] + sent + 1;
        td_credit(a, s_credit, 1, p, b, q);
        const T* src = (const T*)a.in + p * a.send_stride + off;
        uint4* lines = (uint4*)td_slot(a, p, a.rank, b, q);
        u64 nl = (cnt + TD_PER - 1) / TD_PER;
        for (u64 ln = t; ln < nl; ln += blockDim.x) {
          unsigned long long v = (pre_ok && sent == 0 && ln == t) ? pre : td_pack(src, ln, cnt);
          asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(lines + ln),
                       "r"((u32)v), "r"(td_ll_flag(q)), "r"((u32)(v >> 32)), "r"(td_ll_flag(q)) : "memory");
        }
      }
    }
    if (j >= nseg || a.recv_mask == 0) continue;
    u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
    __syncthreads();  // in place: every push of this segment read `in` before `out` is written
    u64 nl = (cnt + TD_PER - 1) / TD_PER;
    for (u64 ln = t; ln < nl; ln += blockDim.x) {
      if (a.mode == 0) {
        U8B acc;
        acc.u = (pre_ok && a.local_off == 0 && j == 0 && ln == t)
                    ? pre
                    : td_pack((const T*)a.in + a.local_off + off, ln, cnt);
        for (u32 s = 0; s < a.nranks; s++) {
          if (!((a.recv_mask >> s) & 1)) continue;
          u64 q = s_recvd[s] + j + 1;
          U8B x; x.u = td_ll_wait((const uint4*)td_slot(a, a.rank, s, b, q) + ln, td_ll_flag(q));
#pragma unroll
          for (u32 e = 0; e < TD_PER; e++) acc.e[e] = tstore(OP::f(tload(acc.e[e]), tload(x.e[e])));
        }
        if (avg)
#pragma unroll
          for (u32 e = 0; e < TD_PER; e++) acc.e[e] = tstore(tp_div(tload(acc.e[e]), a.nranks));
        td_unpack((T*)a.out + off, ln, cnt, acc.u);
      } else {
        for (u32 s = 0; s < a.nranks; s++) {
          if (!((a.recv_mask >> s) & 1)) continue;
          u64 q = s_recvd[s] + j + 1;
          unsigned long long v = td_ll_wait((const uint4*)td_slot(a, a.rank, s, b, q) + ln, td_ll_flag(q));
          td_unpack((T*)a.out + s * a.gather_stride + off, ln, cnt, v);
        }
      }
    }
    // This peer's data of this call proves it finished its previous call, so it consumed all
    // that this CTA sent it before this call: the credit implied by TD_LL_IMPLIED.
    if (t < a.nranks && ((a.recv_mask >> t) & 1) && ((a.send_mask >> t) & 1) && s_credit[t] < s_sent[t])
      s_credit[t] = s_sent[t];
    __syncthreads();
    // The slots of segment j are read: hand them back with a relaxed store, as NCCL's LL
    // head updates: every load of those slots has returned before the barrier (each value was
    // waited on and stored), so the peer's next write cannot reach them; the system fence of a
    // release store only delayed the kernel's end (5.8 -> 4.5 us per call on 2xH200).
    if (!(a.opts & TD_LL_IMPLIED) && t < a.nranks && ((a.recv_mask >> t) & 1))
      st_relaxed_sys(((u64*)a.flags[t]) + TD_FLAG(1, TD_CREDIT, a.rank, b), s_recvd[t] + j + 1);
  }
  __syncthreads();
  if (t < a.nranks) {
    if ((a.send_mask >> t) & 1) my[TD_FLAG(1, TD_SENT, t, b)] = s_sent[t] + nseg;
    if ((a.recv_mask >> t) & 1) my[TD_FLAG(1, TD_RECVD, t, b)] = s_recvd[t] + nseg;
    // TD_LL_IMPLIED (the host sets it when every peer both sends and receives, this call is
    // one segment per CTA and there are at least 2 slots): the receivers hand back no
    // credit, so the kernel ends without a store crossing NVLink. A peer's data of this call
    // proves that the peer finished its previous call, so it consumed everything this CTA had
    // sent it before this call: the credit is raised here, locally, to this call's starting
    // count. The next call's one segment needs exactly that (q - nslots <= sent at start).
    // (`direct::protocol::implied_credit`; loom_direct models it.)
    // (The word holds at most that: the peer stores none during this call, and its stores of
    // earlier calls landed before its previous call ended.)
    if ((a.opts & TD_LL_IMPLIED) && nseg > 0 && ((a.send_mask >> t) & 1) && ((a.recv_mask >> t) & 1))
      my[TD_FLAG(1, TD_CREDIT, t, b)] = s_sent[t];
  }
}

// LL128 lives in direct_ll128.cu, appended to this unit (function templates are instantiated
// at the end of the unit, after their definitions).
template <typename OP> __device__ void td_l128_send(const TdArgs& a, u32 b, u32 S);
template <typename OP> __device__ void td_l128_recv(const TdArgs& a, u32 r, u32 R, u32 S);
// Pull mode lives in direct_pull.cu, appended likewise.
template <typename OP> __device__ void td_pull(const TdArgs& a, u32 b, u32 G);

template <typename OP>
__device__ void td_run(const TdArgs& a) {
  // PDL: let the next collective's grid get resident now; wait for the previous kernel on
  // this stream (the caller's producer, or our previous call) before touching any memory.
  td_pdl_launch();
  td_pdl_wait();
  u32 S = a.senders;
  if (a.ll == 1) {
    td_ll<OP>(a, blockIdx.x, gridDim.x);
  } else if (a.ll == 3) {
    td_pull<OP>(a, blockIdx.x, gridDim.x);
  } else if (a.ll == 2) {
    if (blockIdx.x < S) td_l128_send<OP>(a, blockIdx.x, S);
    else td_l128_recv<OP>(a, blockIdx.x - S, gridDim.x - S, S);
  } else {
    if (blockIdx.x < S) td_simple_send<OP>(a, blockIdx.x, S);
    else td_simple_recv<OP>(a, blockIdx.x - S, gridDim.x - S, S);
  }
}

#define TD_KERNEL(name, OP) \
  extern "C" __global__ void __launch_bounds__(512, 1) name(TdArgs a) { td_run<OP>(a); }

#ifndef TD_SHARED_BUILD
TD_KERNEL(td_direct_sum, OpSum)
TD_KERNEL(td_direct_prod, OpProd)
TD_KERNEL(td_direct_min, OpMin)
TD_KERNEL(td_direct_max, OpMax)
#else

// The same kernels with the registers per thread capped (TD_SHARED_NREG, the runtime's
// TOPOPLAN_SHARED_MAXREG): uncapped, a 512-thread CTA takes 128 per thread, a whole SM's
// register file, so no other kernel's CTA can run beside it. The in-place hybrid runs its SM
// half on these so that its copy-engine half's reduces (256-thread CTAs) find room on every SM
// (2xH200: in-place 512 MiB 369.5-369.8 against 364.9-366.8 GB/s; out of place it lost 1.5-3
// GB/s, so the uncapped kernels stay there). They are a build of their own (TD_SHARED_BUILD),
// compiled only when a call first needs them.
#ifndef TD_SHARED_NREG
#define TD_SHARED_NREG 96
#endif
#define TD_KERNEL_SHARED(name, OP) \
  extern "C" __global__ void __maxnreg__(TD_SHARED_NREG) name(TdArgs a) { td_run<OP>(a); }

TD_KERNEL_SHARED(td_direct_shared_sum, OpSum)
TD_KERNEL_SHARED(td_direct_shared_prod, OpProd)
TD_KERNEL_SHARED(td_direct_shared_min, OpMin)
TD_KERNEL_SHARED(td_direct_shared_max, OpMax)
#endif  // TD_SHARED_BUILD
