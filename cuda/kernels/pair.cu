// Elementwise reduce of two buffers: the compute half of the copy-engine pair all-reduce
// (`cuda/src/ce_pair.rs`). The copy engines move the peer's chunk into local scratch;
// this kernel folds it into the local input: out = a (op) b, divided by 2 for average.
// Uses td_reduce (reduce.cuh), so it is vectorised and handles unaligned tails.

#include "reduce.cuh"

template <typename OP>
__device__ void td_pair_run(T* out, const T* a, const T* b, u64 n, u32 avg) {
  // Contiguous shares, a multiple of 256 elements so every share starts 16-byte aligned
  // whenever the buffers do.
  u64 per = (n + gridDim.x - 1) / gridDim.x;
  per = (per + 255) & ~255ull;
  const u64 lo = (u64)blockIdx.x * per;
  if (lo >= n) return;
  const u64 cnt = n - lo < per ? n - lo : per;
  const T* srcs[1] = {b + lo};
  td_reduce<OP>(out + lo, a + lo, srcs, 1, cnt, avg != 0, 2);
}

#define TD_PAIR_KERNEL(name, OP)                                                              \
  extern "C" __global__ void __launch_bounds__(512, 2) name(T* out, const T* a, const T* b, \
                                                            u64 n, u32 avg) {               \
    td_pair_run<OP>(out, a, b, n, avg);                                                       \
  }

TD_PAIR_KERNEL(td_pair_sum, OpSum)
TD_PAIR_KERNEL(td_pair_prod, OpProd)
TD_PAIR_KERNEL(td_pair_min, OpMin)
TD_PAIR_KERNEL(td_pair_max, OpMax)
