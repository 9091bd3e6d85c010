// Grouped point-to-point on the direct path (`cuda::direct::p2p`): one launch carries at most one
// message to and one from each peer, of any sizes. It travels through the Simple slots and flag
// words of direct.cuh (sent, received, ready, credit per peer and CTA), so the sequence numbers
// run on across collectives and point-to-point calls alike.
//
// Every CTA b takes share b of every message (whole 16-byte vectors of the message's own size,
// which both ends know), one slot per segment. Unlike a collective, a CTA never blocks on one
// peer: each pass, thread 0 reads the credit and ready words, and the CTA pushes every segment
// whose slot is free and consumes every segment that has arrived. A send to a rank that is busy
// sending to us therefore cannot deadlock, whatever the peer pattern; a pass that finds nothing
// to do counts towards the abort and timeout checks (common.cuh).
#pragma once
#include "direct.cuh"
#include "reduce.cuh"

struct TpP2pArgs {
  u64 scratch[TP_MAXR];  // every rank's Simple slot region
  u64 flags[TP_MAXR];    // every rank's direct flag region
  u64 send[TP_MAXR];     // the message to rank p (T*), send_n[p] elements
  u64 send_n[TP_MAXR];
  u64 recv[TP_MAXR];     // where rank s's message lands (T*), recv_n[s] elements
  u64 recv_n[TP_MAXR];
  u64 seg;               // elements per segment: one slot
  u64 slot_bytes;
  u32 rank, nranks;
  u32 send_mask, recv_mask;
  u32 nslots, pad;
  TpAbort ab;
};

// Share b of G of a message of n elements, in whole vectors (the same cut at both ends).
__device__ __forceinline__ void tp2_share(u64 n, u32 b, u32 G, u64& lo, u64& hi) {
  u64 nv = (n + VEC - 1) / VEC;
  lo = min((nv * b / G) * VEC, n);
  hi = min((nv * (b + 1) / G) * VEC, n);
}

// Slot of sequence number q for (sender, receiver, CTA b) in the receiver's Simple region.
__device__ __forceinline__ char* tp2_slot(const TpP2pArgs& a, u32 receiver, u32 sender, u32 b, u64 q) {
  u64 slot = (q - 1) % a.nslots;
  return (char*)a.scratch[receiver] +
         ((u64)(td_pidx(sender, receiver) * TD_MAXCTA + b) * a.nslots + slot) * a.slot_bytes;
}

// Segments of CTA b's share of a message of n elements.
__device__ __forceinline__ u64 tp2_nseg(const TpP2pArgs& a, u64 n, u32 b) {
  u64 lo, hi;
  tp2_share(n, b, gridDim.x, lo, hi);
  return (hi - lo + a.seg - 1) / a.seg;
}

// Thread 0: which pushes (bit p) and receives (bit 16 + s) can go now; `pending` says whether
// anything is left. Reads each peer's credit or ready word once.
__device__ __forceinline__ u32 tp2_poll(const TpP2pArgs& a, u32 b, const u64* sent, const u64* recvd,
                                        const u64* done_s, const u64* done_r, bool& pending, u32& first) {
  const u64* my = (const u64*)a.flags[a.rank];
  u32 go = 0;
  pending = false;
  for (u32 p = 0; p < a.nranks; p++) {
    if ((a.send_mask >> p) & 1 && done_s[p] < tp2_nseg(a, a.send_n[p], b)) {
      if (!pending) first = p;
      pending = true;
      u64 q = sent[p] + done_s[p] + 1;
      if (ld_acquire(my + TD_FLAG(TD_PROTO_SIMPLE, TD_CREDIT, p, b)) + a.nslots >= q) go |= 1u << p;
    }
    if ((a.recv_mask >> p) & 1 && done_r[p] < tp2_nseg(a, a.recv_n[p], b)) {
      if (!pending) first = p;
      pending = true;
      u64 q = recvd[p] + done_r[p] + 1;
      if (ld_acquire(my + TD_FLAG(TD_PROTO_SIMPLE, TD_READY, p, b)) >= q) go |= 1u << (16 + p);
    }
  }
  return go;
}

// Pushes the next segment of CTA b's share of the message to rank p (its slot is free).
__device__ __forceinline__ void tp2_push(const TpP2pArgs& a, u32 b, u32 p, u64 q, u64 j) {
  u64 lo, hi;
  tp2_share(a.send_n[p], b, gridDim.x, lo, hi);
  u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
  td_copy((T*)tp2_slot(a, p, a.rank, b, q), (const T*)a.send[p] + off, cnt);
  // The barrier-fence-flag pattern of direct_simple.cuh: one fence, then a relaxed flag.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    st_relaxed_sys(((u64*)a.flags[p]) + TD_FLAG(TD_PROTO_SIMPLE, TD_READY, a.rank, b), q);
  }
}

// Consumes the next segment of CTA b's share of rank s's message (it has arrived).
__device__ __forceinline__ void tp2_take(const TpP2pArgs& a, u32 b, u32 s, u64 q, u64 j) {
  u64 lo, hi;
  tp2_share(a.recv_n[s], b, gridDim.x, lo, hi);
  u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
  td_copy((T*)a.recv[s] + off, (const T*)tp2_slot(a, a.rank, s, b, q), cnt);
  // Every load of the slot returned before the barrier: a relaxed credit hands it back.
  __syncthreads();
  if (threadIdx.x == 0) st_relaxed_sys(((u64*)a.flags[s]) + TD_FLAG(TD_PROTO_SIMPLE, TD_CREDIT, a.rank, b), q);
}

#ifndef TD_SHARED_BUILD
extern "C" __global__ void __launch_bounds__(512, 1) td_p2p(TpP2pArgs a) {
  td_pdl_launch();
  td_pdl_wait();
  __shared__ u64 s_sent[TP_MAXR], s_recvd[TP_MAXR], s_done_s[TP_MAXR], s_done_r[TP_MAXR];
  __shared__ u32 s_go, s_pending, s_stop;
  const u32 b = blockIdx.x, t = threadIdx.x;
  u64* my = (u64*)a.flags[a.rank];
  if (t < TP_MAXR) {
    s_sent[t] = my[TD_FLAG(TD_PROTO_SIMPLE, TD_SENT, t, b)];
    s_recvd[t] = my[TD_FLAG(TD_PROTO_SIMPLE, TD_RECVD, t, b)];
    s_done_s[t] = 0;
    s_done_r[t] = 0;
  }
  __syncthreads();
  u64 idle_since = 0;  // thread 0's: the stalled wait's start, for tp_stop
  u32 idle = 0;
  for (;;) {
    if (t == 0) {
      bool pending;
      u32 first = 0;
      u32 go = tp2_poll(a, b, s_sent, s_recvd, s_done_s, s_done_r, pending, first);
      s_stop = 0;
      if (pending && go == 0 && ++idle % TP_CHECK_EVERY == 0)
        s_stop = tp_stop(a.ab, idle_since, TP_WAIT_READY, first) ? 1 : 0;
      if (go != 0) idle_since = 0;
      s_go = go;
      s_pending = pending ? 1 : 0;
    }
    __syncthreads();
    const u32 go = s_go;
    if (s_stop || !s_pending) break;
    for (u32 p = 0; p < a.nranks; p++) {
      if ((go >> p) & 1) {
        u64 j = s_done_s[p];
        tp2_push(a, b, p, s_sent[p] + j + 1, j);
        if (t == 0) s_done_s[p] = j + 1;
      }
      if ((go >> (16 + p)) & 1) {
        u64 j = s_done_r[p];
        tp2_take(a, b, p, s_recvd[p] + j + 1, j);
        if (t == 0) s_done_r[p] = j + 1;
      }
    }
    __syncthreads();
  }
  // What this CTA pushed and consumed, for the next call (collective or point-to-point); a call
  // that stopped leaves its counts where it got to, and the communicator is unusable anyway.
  if (t < a.nranks) {
    if ((a.send_mask >> t) & 1) my[TD_FLAG(TD_PROTO_SIMPLE, TD_SENT, t, b)] = s_sent[t] + s_done_s[t];
    if ((a.recv_mask >> t) & 1) my[TD_FLAG(TD_PROTO_SIMPLE, TD_RECVD, t, b)] = s_recvd[t] + s_done_r[t];
  }
}
#endif  // TD_SHARED_BUILD
