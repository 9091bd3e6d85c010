// The Simple and LL128 push paths share one stream skeleton, parameterised by the protocol P
// (direct_simple.cuh, direct_ll128.cuh): sender CTA b pushes stream b segment by segment under
// credits, receiver CTA r serves streams r, r + R, ... and hands each slot back. The skeleton
// owns the bookkeeping both protocols share (sequence numbers, the in-place guard's calls and
// progress, shares, segments, credits); P says how a segment travels:
//   P::PROTO                      the protocol's flag words (TD_PROTO_SIMPLE, TD_PROTO_LL128)
//   P::share(a, b, S, lo, hi)     stream b's elements (Simple: whole vectors; LL128: lines)
//   P::push(a, slot, src, cnt, q, p, b)  write one segment into peer p's slot, sequence q
//   P::pushed()                   after every peer's push of a segment
//   P::wait(a, b, j, recvd, call) until the peers' segment j of stream b may be read
//   P::consume<OP>(a, b, off, cnt, recvd, j, avg)  reduce or gather segment j from the slots
// Waits return false when the call stops (common.cuh); the CTA then leaves uniformly, without
// writing a slot or a word the peers have not allowed.
//   P::credit(word, v)            hand the slot back
#pragma once
#include "direct.cuh"
#include "reduce.cuh"

// Sender CTA b of S: push every segment to every peer (credit, P::push), then publish the
// in-place progress and this call's counts.
template <class P, typename OP>
__device__ void td_stream_send(const TdArgs& a, u32 b, u32 S) {
  __shared__ u64 s_sent[TP_MAXR], s_recvd[TP_MAXR], s_credit[TP_MAXR], s_call;
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x;
  if (t == 0) s_call = my[TD_SCALLS + b] + 1;
  td_load_seq(a, P::PROTO, b, s_sent, s_recvd, s_credit);
  u64 lo, hi;
  P::share(a, b, S, lo, hi);
  u64 nseg = (hi - lo + a.seg - 1) / a.seg;
  for (u64 j = 0; j < nseg; j++) {
    u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
    for (u32 p = 0; p < a.nranks; p++) {
      if (!((a.send_mask >> p) & 1)) continue;
      u64 q = s_sent[p] + j + 1;
      if (!td_credit(a, s_credit, P::PROTO, p, b, q)) return;
      P::push(a, td_slot(a, p, a.rank, b, q), (const T*)a.in + p * a.send_stride + off, cnt, q, p, b);
    }
    P::pushed();
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
  if (t < a.nranks && ((a.send_mask >> t) & 1)) my[TD_FLAG(P::PROTO, TD_SENT, t, b)] = s_sent[t] + nseg;
  if (t == 0) my[TD_SCALLS + b] = s_call;
}

// Receiver CTA r of R: for every owned stream b (r, r + R, ...), wait for every peer's
// segment, combine, hand the slot back; segments of the streams interleave so that no sender
// waits for credits while its receiver serves another stream.
template <class P, typename OP>
__device__ void td_stream_recv(const TdArgs& a, u32 r, u32 R, u32 S) {
  __shared__ u64 s_recvd[TD_RECV_STREAMS][TP_MAXR], s_call[TD_RECV_STREAMS];
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x;
  u32 k = (S - r + R - 1) / R;
  if (k > TD_RECV_STREAMS) k = TD_RECV_STREAMS;  // the host keeps S <= 4R
  bool avg = (a.opts & TD_AVG) != 0;
  u64 maxseg = 0;
  for (u32 i = 0; i < k; i++) {
    u32 b = r + i * R;
    if (t < TP_MAXR) s_recvd[i][t] = my[TD_FLAG(P::PROTO, TD_RECVD, t, b)];
    if (t == TP_MAXR) s_call[i] = my[TD_RCALLS + b] + 1;
    u64 lo, hi;
    P::share(a, b, S, lo, hi);
    u64 nseg = (hi - lo + a.seg - 1) / a.seg;
    if (nseg > maxseg) maxseg = nseg;
    // The local part of all-gather / broadcast: here, off the senders' critical path.
    if (a.opts & TD_COPY) td_copy((T*)a.out + a.copy_dst + lo, (const T*)a.in + a.copy_src + lo, hi - lo);
  }
  __syncthreads();
  for (u64 j = 0; j < maxseg && a.recv_mask; j++) {
    for (u32 i = 0; i < k; i++) {
      u32 b = r + i * R;
      u64 lo, hi;
      P::share(a, b, S, lo, hi);
      u64 nseg = (hi - lo + a.seg - 1) / a.seg;
      if (j >= nseg) continue;
      u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
      if (!P::wait(a, b, j, s_recvd[i], s_call[i])) return;
      bool ok = P::template consume<OP>(a, b, off, cnt, s_recvd[i], j, avg);
      if (__syncthreads_or(!ok)) return;
      if (t < a.nranks && ((a.recv_mask >> t) & 1))
        P::credit(((u64*)a.flags[t]) + TD_FLAG(P::PROTO, TD_CREDIT, a.rank, b), s_recvd[i][t] + j + 1);
    }
  }
  __syncthreads();
  for (u32 i = 0; i < k; i++) {
    u32 b = r + i * R;
    u64 lo, hi;
    P::share(a, b, S, lo, hi);
    u64 nseg = (hi - lo + a.seg - 1) / a.seg;
    if (t < a.nranks && ((a.recv_mask >> t) & 1)) my[TD_FLAG(P::PROTO, TD_RECVD, t, b)] = s_recvd[i][t] + nseg;
    if (t == TP_MAXR) my[TD_RCALLS + b] = s_call[i];
  }
}
