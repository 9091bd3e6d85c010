// topoplan direct-push executor, LL128 protocol (see direct.cu for the slot protocol; this file
// is appended to exec.cu + direct.cu in one NVRTC unit).

// ---------------------------------------------------------------- LL128
// A 128-byte line carries 120 data bytes and, in its last 8 bytes, the sequence number. Eight
// lanes write a line with one 16-byte store each; NVLink delivers a warp's 128-byte line whole
// (the property NCCL's LL128 rests on), so a reader that sees the sequence number in the flag
// lane's 16 bytes, loaded in the same warp-wide load as the other lanes' data, saw the whole
// line. No fence, no ready flag: receivers consume as lines land.
#define TD_L128_DATA 120
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

template <typename OP>
__device__ void td_l128_send(const TdArgs& a, u32 b, u32 S) {
  __shared__ u64 s_sent[TP_MAXR], s_recvd[TP_MAXR], s_credit[TP_MAXR], s_call;
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x, lane = t & 7;
  if (t == 0) s_call = my[TD_SCALLS + b] + 1;
  td_load_seq(a, 2, b, s_sent, s_recvd, s_credit);
  u64 lo, hi;
  td_l128_share(a, b, S, lo, hi);
  u64 nseg = (hi - lo + a.seg - 1) / a.seg;
  u32 nb = lane < 7 ? 16 : 8;
  for (u64 j = 0; j < nseg; j++) {
    u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
    u64 nl = (cnt + TD_L128_E - 1) / TD_L128_E;
    for (u32 p = 0; p < a.nranks; p++) {
      if (!((a.send_mask >> p) & 1)) continue;
      u64 q = s_sent[p] + j + 1;
      td_credit(a, s_credit, 2, p, b, q);
      const T* src = (const T*)a.in + p * a.send_stride + off;
      char* slot = td_slot(a, p, a.rank, b, q);
      for (u64 ln = t / 8; ln < nl; ln += blockDim.x / 8) {
        u64 w0, w1;
        td_l128_load(src, ln * TD_L128_E + lane * (16 / sizeof(T)), cnt, nb, w0, w1);
        if (lane == 7) w1 = q;
        asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(slot + ln * 128 + lane * 16), "l"(w0), "l"(w1) : "memory");
      }
    }
    __syncthreads();  // every thread's loads of segment j are done
    // A GPU-scope release: the reader is this GPU's receiver CTA (see td_simple_send).
    if ((a.opts & TD_INPLACE) && t == 0) {
      u64 v = (s_call << 32) | (j + 1);
      st_release_gpu(my + TD_PROGRESS + b, v);
    }
  }
  __syncthreads();
  if (t < a.nranks && ((a.send_mask >> t) & 1)) my[TD_FLAG(2, TD_SENT, t, b)] = s_sent[t] + nseg;
  if (t == 0) my[TD_SCALLS + b] = s_call;
}

template <typename OP>
__device__ void td_l128_recv(const TdArgs& a, u32 r, u32 R, u32 S) {
  __shared__ u64 s_recvd[TD_RECV_STREAMS][TP_MAXR], s_call[TD_RECV_STREAMS];
  u64* my = (u64*)a.flags[a.rank];
  u32 t = threadIdx.x, lane = t & 7;
  u32 k = (S - r + R - 1) / R;
  if (k > TD_RECV_STREAMS) k = TD_RECV_STREAMS;
  bool avg = (a.opts & TD_AVG) != 0;
  u32 nb = lane < 7 ? 16 : 8;
  u64 maxseg = 0;
  for (u32 i = 0; i < k; i++) {
    u32 b = r + i * R;
    if (t < TP_MAXR) s_recvd[i][t] = my[TD_FLAG(2, TD_RECVD, t, b)];
    if (t == TP_MAXR) s_call[i] = my[TD_RCALLS + b] + 1;
    u64 lo, hi;
    td_l128_share(a, b, S, lo, hi);
    u64 nseg = (hi - lo + a.seg - 1) / a.seg;
    if (nseg > maxseg) maxseg = nseg;
    if (a.opts & TD_COPY) td_copy((T*)a.out + a.copy_dst + lo, (const T*)a.in + lo, hi - lo);
  }
  __syncthreads();
  // Lines are handed out per warp (4 lines of 8 lanes) so the warp-wide reload vote is uniform.
  const u32 nwarps = blockDim.x / 32, warp = t / 32, sub = (t & 31) / 8;
  for (u64 j = 0; j < maxseg && a.recv_mask; j++) {
    for (u32 i = 0; i < k; i++) {
      u32 b = r + i * R;
      u64 lo, hi;
      td_l128_share(a, b, S, lo, hi);
      u64 nseg = (hi - lo + a.seg - 1) / a.seg;
      if (j >= nseg) continue;
      u64 off = lo + j * a.seg, cnt = min(a.seg, hi - off);
      u64 nl = (cnt + TD_L128_E - 1) / TD_L128_E;
      if ((a.opts & TD_INPLACE)) {
        if (t == 0) {
          u64 want = (s_call[i] << 32) | (j + 1);
          while (ld_acquire(my + TD_PROGRESS + b) < want) {}
        }
        __syncthreads();
      }
      for (u64 base = (u64)warp * 4; base < nl; base += (u64)nwarps * 4) {
        u64 ln = base + sub;
        bool valid = ln < nl;
        u64 e = ln * TD_L128_E + lane * (16 / sizeof(T));
        u64 acc0 = 0, acc1 = 0;
        if (a.mode == 0 && valid) td_l128_load((const T*)a.in + a.local_off + off, e, cnt, nb, acc0, acc1);
        for (u32 s = 0; s < a.nranks; s++) {
          if (!((a.recv_mask >> s) & 1)) continue;
          u64 q = s_recvd[i][s] + j + 1;
          const char* line = td_slot(a, a.rank, s, b, q) + ln * 128 + lane * 16;
          u64 v0 = 0, v1 = 0;
          bool again;
          do {
            if (valid)
              asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(v0), "=l"(v1) : "l"(line) : "memory");
            again = valid && lane == 7 && v1 != q;
          } while (__any_sync(0xffffffffu, again));
          if (!valid) continue;
          if (a.mode == 0) {
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
      __syncthreads();
      if (t < a.nranks && ((a.recv_mask >> t) & 1))
        st_release(((u64*)a.flags[t]) + TD_FLAG(2, TD_CREDIT, a.rank, b), s_recvd[i][t] + j + 1);
    }
  }
  __syncthreads();
  for (u32 i = 0; i < k; i++) {
    u32 b = r + i * R;
    u64 lo, hi;
    td_l128_share(a, b, S, lo, hi);
    u64 nseg = (hi - lo + a.seg - 1) / a.seg;
    if (t < a.nranks && ((a.recv_mask >> t) & 1)) my[TD_FLAG(2, TD_RECVD, t, b)] = s_recvd[i][t] + nseg;
    if (t == TP_MAXR) my[TD_RCALLS + b] = s_call[i];
  }
}
