// topoplan direct-push executor: the planner's one-shot schedules (every sender writes its block
// straight to each receiver) without barriers. One NVRTC unit per element type and build
// (TD_SHARED_BUILD: the register-capped kernels); the slot and credit protocol is described in
// direct.cuh, Simple and LL128 share the stream skeleton of direct_stream.cuh, pull mode is
// direct_pull.cuh, grouped point-to-point direct_p2p.cuh, LL is td_ll below.

#include "common.cuh"
#include "direct.cuh"
#include "direct_ll128.cuh"
#include "direct_p2p.cuh"
#include "direct_pull.cuh"
#include "direct_simple.cuh"
#include "direct_stream.cuh"
#include "reduce.cuh"

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
  td_load_seq(a, TD_PROTO_LL, b, s_sent, s_recvd, s_credit);
  bool avg = (a.opts & TD_AVG) != 0;
  if (a.opts & TD_COPY) td_copy((T*)a.out + a.copy_dst + lo, (const T*)a.in + a.copy_src + lo, len);
  u64 sent = 0;
  for (u64 j = 0; j < nseg || sent < nseg; j++) {
    for (; sent < nseg && sent < j + a.nslots; sent++) {
      // Segment j must be out before segment j is awaited (td_credit may wait for it); later
      // ones go ahead only if their credits are already there. Waiting for them here could
      // deadlock after calls that left their credits implied (TD_LL_IMPLIED): the peer hands
      // the last one back only by consuming this call's first segment.
      if (sent > j && !td_credit_ready(a, s_sent, s_credit, TD_PROTO_LL, b, sent)) break;
      u64 off = lo + sent * a.seg, cnt = min(a.seg, hi - off);
      for (u32 p = 0; p < a.nranks; p++) {
        if (!((a.send_mask >> p) & 1)) continue;
        u64 q = s_sent[p] + sent + 1;
        if (!td_credit(a, s_credit, TD_PROTO_LL, p, b, q)) return;
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
    bool stop = false;
    for (u64 ln = t; ln < nl; ln += blockDim.x) {
      if (a.mode == 0) {
        U8B own;
        own.u = (pre_ok && a.local_off == 0 && j == 0 && ln == t)
                    ? pre
                    : td_pack((const T*)a.in + a.local_off + off, ln, cnt);
        // Contributions in rank order, this rank's own at its place: the same bits on every rank.
        U8B acc;
        acc.u = 0;
        bool first = true;
        for (u32 s = 0; s < a.nranks; s++) {
          U8B x;
          if (s == a.rank) {
            x = own;
          } else if ((a.recv_mask >> s) & 1) {
            u64 q = s_recvd[s] + j + 1;
            x.u = td_ll_wait(a.ab, s, (const uint4*)td_slot(a, a.rank, s, b, q) + ln, td_ll_flag(q), stop);
          } else {
            continue;
          }
          if (first) {
            acc = x;
            first = false;
            continue;
          }
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
          unsigned long long v = td_ll_wait(a.ab, s, (const uint4*)td_slot(a, a.rank, s, b, q) + ln, td_ll_flag(q), stop);
          td_unpack((T*)a.out + s * a.gather_stride + off, ln, cnt, v);
        }
      }
    }
    // This peer's data of this call proves it finished its previous call, so it consumed all
    // that this CTA sent it before this call: the credit implied by TD_LL_IMPLIED.
    if (t < a.nranks && ((a.recv_mask >> t) & 1) && ((a.send_mask >> t) & 1) && s_credit[t] < s_sent[t])
      s_credit[t] = s_sent[t];
    if (__syncthreads_or(stop)) return;
    // The slots of segment j are read: hand them back with a relaxed store, as NCCL's LL
    // head updates: every load of those slots has returned before the barrier (each value was
    // waited on and stored), so the peer's next write cannot reach them; the system fence of a
    // release store only delayed the kernel's end (5.8 -> 4.5 us per call on 2xH200).
    if (!(a.opts & TD_LL_IMPLIED) && t < a.nranks && ((a.recv_mask >> t) & 1))
      st_relaxed_sys(((u64*)a.flags[t]) + TD_FLAG(TD_PROTO_LL, TD_CREDIT, a.rank, b), s_recvd[t] + j + 1);
  }
  __syncthreads();
  if (t < a.nranks) {
    if ((a.send_mask >> t) & 1) my[TD_FLAG(TD_PROTO_LL, TD_SENT, t, b)] = s_sent[t] + nseg;
    if ((a.recv_mask >> t) & 1) my[TD_FLAG(TD_PROTO_LL, TD_RECVD, t, b)] = s_recvd[t] + nseg;
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
      my[TD_FLAG(TD_PROTO_LL, TD_CREDIT, t, b)] = s_sent[t];
  }
}

template <typename OP>
__device__ void td_run(const TdArgs& a) {
  // PDL: let the next collective's grid get resident now; wait for the previous kernel on
  // this stream (the caller's producer, or our previous call) before touching any memory.
  td_pdl_launch();
  td_pdl_wait();
  u32 S = a.senders;
  if (a.ll == TD_PROTO_LL) {
    td_ll<OP>(a, blockIdx.x, gridDim.x);
  } else if (a.ll == TD_PROTO_PULL) {
    td_pull<OP>(a, blockIdx.x, gridDim.x);
  } else if (a.ll == TD_PROTO_LL128) {
    if (blockIdx.x < S) td_stream_send<TdLl128, OP>(a, blockIdx.x, S);
    else td_stream_recv<TdLl128, OP>(a, blockIdx.x - S, gridDim.x - S, S);
  } else {
    if (blockIdx.x < S) td_stream_send<TdSimple, OP>(a, blockIdx.x, S);
    else td_stream_recv<TdSimple, OP>(a, blockIdx.x - S, gridDim.x - S, S);
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

// The same kernels with the registers per thread capped (TD_SHARED_NREG, passed by the host:
// `layout::SHARED_NREG` or TOPOPLAN_SHARED_MAXREG): uncapped, a 512-thread CTA takes 128 per thread, a whole SM's
// register file, so no other kernel's CTA can run beside it. The in-place hybrid runs its SM
// half on these so that its copy-engine half's reduces (256-thread CTAs) find room on every SM
// (2xH200: in-place 512 MiB 369.5-369.8 against 364.9-366.8 GB/s; out of place it lost 1.5-3
// GB/s, so the uncapped kernels stay there). They are a build of their own (TD_SHARED_BUILD),
// compiled only when a call first needs them.
#define TD_KERNEL_SHARED(name, OP) \
  extern "C" __global__ void __maxnreg__(TD_SHARED_NREG) name(TdArgs a) { td_run<OP>(a); }

TD_KERNEL_SHARED(td_direct_shared_sum, OpSum)
TD_KERNEL_SHARED(td_direct_shared_prod, OpProd)
TD_KERNEL_SHARED(td_direct_shared_min, OpMin)
TD_KERNEL_SHARED(td_direct_shared_max, OpMax)
#endif  // TD_SHARED_BUILD
