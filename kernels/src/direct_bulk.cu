// topoplan direct executor, bulk pushes (appended to the direct unit; `TD_BULK`). A Simple sender
// CTA stages its input through shared memory and pushes each 16 KiB chunk to the peer's slot
// with one bulk copy (`cp.async.bulk`, Hopper's TMA) instead of 16-byte stores from every
// thread: the threads only load the next chunk while the bulk engine streams the previous one
// over NVLink.
//
// Ordering, for the sender's publication protocol in td_simple_send:
//   - shared memory: a thread's generic stores into a stage become visible to the bulk copy
//     (async proxy) after `fence.proxy.async.shared::cta` and the CTA barrier; a stage is
//     refilled only after the bulk copy that read it has finished reading (`wait_group.read`).
//   - global: thread 0 issued every bulk copy; `td_bulk_drain` waits for them to complete and
//     orders their writes before the system fence that precedes the ready word.

#define TD_BULK_CHUNK 16384u  // bytes per bulk copy
#define TD_BULK_STAGES 2      // shared-memory stages (TD_BULK_STAGES * TD_BULK_CHUNK static bytes)

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void td_bulk_issue(void* gdst, const void* ssrc, u32 bytes) {
  u32 s = (u32)__cvta_generic_to_shared(ssrc);
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(s), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
#endif

// Thread 0: every bulk copy this thread issued has completed and its writes are ordered before
// the thread's later fences (the caller then fences at system scope and publishes).
__device__ void td_bulk_drain() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}

// dst[0, cnt) = src[0, cnt), dst in a peer's memory: bulk copies for the 16-byte body when both
// are 16-byte aligned, plain stores for the rest. Every thread of the CTA calls it; the caller
// drains (thread 0) and fences before publishing.
__device__ void td_push_bulk(T* dst, const T* src, u64 cnt) {
#if __CUDA_ARCH__ >= 900
  __shared__ int4 stage[TD_BULK_STAGES][TD_BULK_CHUNK / 16];
  const u64 bytes = cnt * sizeof(T);
  const u64 body = (td_aligned(dst) && td_aligned(src)) ? bytes / 16 * 16 : 0;
  const u64 nchunks = (body + TD_BULK_CHUNK - 1) / TD_BULK_CHUNK;
  for (u64 k = 0; k < nchunks; k++) {
    const u32 s = (u32)(k % TD_BULK_STAGES);
    const u64 off = k * TD_BULK_CHUNK;
    const u32 len = (u32)min((u64)TD_BULK_CHUNK, body - off);
    // The copy that last read stage s (chunk k - STAGES) must be done reading it.
    if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    __syncthreads();
    const int4* g = (const int4*)((const char*)src + off);
    for (u32 i = threadIdx.x; i < len / 16; i += blockDim.x) stage[s][i] = __ldcg(g + i);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) td_bulk_issue((char*)dst + off, stage[s], len);
  }
  for (u64 e = body / sizeof(T) + threadIdx.x; e < cnt; e += blockDim.x) {
    volatile const T* s = src;
    dst[e] = s[e];
  }
#else
  td_copy(dst, src, cnt);
#endif
}
