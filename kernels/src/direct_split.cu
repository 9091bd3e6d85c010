// topoplan direct executor, split calls (appended to the direct unit after direct_pull.cu; an
// experiment not yet run on a GPU, `TOPOPLAN_SPLIT_PCT`). One all-reduce in one grid: the first
// elements go over the push path (S sender CTAs, then R receiver CTAs, as td_run's Simple
// branch), the last `pull_n` are pulled (P CTAs running td_pull on that range), so SM stores
// and SM peer loads share NVLink inside one launch. The ranges are disjoint and each keeps its
// own protocol and words (push: slots, credits, ready and progress words per stream; pull:
// arrive, done and call words per CTA), so nothing new is shared between the two halves.
// Every CTA must be resident at once (each half waits for the peer's CTAs of the same index):
// the host keeps S + R + P within one 512-thread CTA per SM.

struct TdSplitArgs {
  TdArgs a;                // the push half: a.n elements from a.in / a.out
  u64 pull_in[TP_MAXR];    // every rank's input (the pulled half reads the peers')
  u64 pull_off;            // the pulled half starts at this element
  u64 pull_n;              // elements pulled
  u32 receivers;           // R
  u32 pull_ctas;           // P
};

template <typename OP>
__device__ void td_split_run(const TdSplitArgs& s) {
  td_pdl_launch();
  td_pdl_wait();
  const TdArgs& a = s.a;
  const u32 S = a.senders, R = s.receivers;
  if (blockIdx.x < S) {
    td_simple_send<OP>(a, blockIdx.x, S);
  } else if (blockIdx.x < S + R) {
    td_simple_recv<OP>(a, blockIdx.x - S, R, S);
  } else {
    TdArgs p = a;
    const u64 off = s.pull_off * sizeof(T);
    p.in = a.in + off;
    p.out = a.out + off;
    p.n = s.pull_n;
    p.ll = 3;
    for (u32 r = 0; r < TP_MAXR; r++) p.scratch[r] = s.pull_in[r] ? s.pull_in[r] + off : 0;
    td_pull<OP>(p, blockIdx.x - S - R, s.pull_ctas);
  }
}

#define TD_SPLIT_KERNEL(name, OP) \
  extern "C" __global__ void __launch_bounds__(512, 1) name(TdSplitArgs s) { td_split_run<OP>(s); }

TD_SPLIT_KERNEL(td_split_sum, OpSum)
TD_SPLIT_KERNEL(td_split_prod, OpProd)
TD_SPLIT_KERNEL(td_split_min, OpMin)
TD_SPLIT_KERNEL(td_split_max, OpMax)
