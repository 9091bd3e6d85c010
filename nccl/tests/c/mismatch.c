/*
 * Ranks that disagree on a device-buffer call (docs/nccl-library.md, "Agreement"): run on a GPU
 * by `scripts/device/nccl-library.sh mismatch`, built there against include/nccl.h, the freshly
 * built libnccl.so and the CUDA driver (cuda.h, -lcuda). 2 processes share GPU 0 and make one
 * call each on device buffers (the direct CUDA path), after agreeing warm-up calls that compile
 * the kernels, which differ by CASE:
 *   count     all-reduce of 4096 floats on rank 0, 2048 on rank 1;
 *   dtype     all-reduce of 4096 floats on rank 0, 4096 halves on rank 1;
 *   sendrecv  rank 0 sends 256 bytes to rank 1, which receives 128;
 *   agree     both all-reduce 4096 floats: success, every element checked against the sum;
 *   abort     rank 1 skips the call, so rank 0's kernel waits for it on the GPU; rank 0's
 *             ncclCommAbort must return, and its stream drain, within 1 s, and a new
 *             communicator of both ranks on the GPU then all-reduces right.
 * Every disagreeing rank must end with ncclInvalidUsage, from the call or from
 * ncclCommGetAsyncError after its stream drained, within LIMIT seconds, and ncclGetLastError
 * must name the disagreement ("disagree on") and the field; no rank may see success from both.
 *
 * Prints "rank R: call -> C, stream drained after S s, async -> A: MESSAGE" per rank and
 * "mismatch CASE: PASS" or "mismatch CASE: FAIL"; exits 0 on PASS. Bounded by alarm().
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define COUNT 4096
#define LIMIT 10.0

static const char* CASE;
static ncclUniqueId again; /* the communicator made after `abort` */

static int cu(CUresult r, const char* what) {
  CHECK(r == CUDA_SUCCESS, "%s -> %d", what, (int)r);
  return r == CUDA_SUCCESS;
}

/* This rank's call of CASE on device buffers `a` (input) and `b` (output). */
static ncclResult_t call(ncclComm_t c, int rank, CUdeviceptr a, CUdeviceptr b, CUstream s) {
  if (!strcmp(CASE, "sendrecv")) {
    ncclGroupStart();
    if (rank == 0) ncclSend((void*)a, 256, ncclUint8, 1, c, s);
    else ncclRecv((void*)b, 128, ncclUint8, 0, c, s);
    return ncclGroupEnd();
  }
  size_t n = COUNT;
  ncclDataType_t t = ncclFloat32;
  if (rank == 1 && !strcmp(CASE, "count")) n = COUNT / 2;
  if (rank == 1 && !strcmp(CASE, "dtype")) t = ncclFloat16;
  return ncclAllReduce((void*)a, (void*)b, n, t, ncclSum, c, s);
}

/* Agreeing calls of every kind the cases make, before the timed one: a first call compiles
 * its kernels (seconds), which the limit is not about. */
static int warm_up(ncclComm_t c, int rank, CUdeviceptr a, CUdeviceptr b, CUstream s) {
  int ok = ncclAllReduce((void*)a, (void*)b, COUNT, ncclFloat32, ncclSum, c, s) == ncclSuccess &&
           ncclAllReduce((void*)a, (void*)b, COUNT, ncclFloat16, ncclSum, c, s) == ncclSuccess;
  ncclGroupStart();
  if (rank == 0) ncclSend((void*)a, 256, ncclUint8, 1, c, s);
  else ncclRecv((void*)b, 256, ncclUint8, 0, c, s);
  ok = ncclGroupEnd() == ncclSuccess && ok;
  CHECK(ok && cu(cuStreamSynchronize(s), "cuStreamSynchronize"), "rank %d: warm-up failed", rank);
  return ok;
}

/* `agree`: the output is the sum of both ranks' inputs, element by element. */
static void check_sum(int rank, CUdeviceptr b) {
  static float got[COUNT];
  if (!cu(cuMemcpyDtoH(got, b, sizeof got), "cuMemcpyDtoH")) return;
  int bad = 0;
  for (int i = 0; i < COUNT; i++) {
    float want = (float)(1 + i % 7) + (float)(2 + i % 7) * 0.5f;
    if (got[i] != want && bad++ < 3) CHECK(0, "rank %d: element %d is %g, want %g", rank, i, got[i], want);
  }
  CHECK(bad == 0, "rank %d: %d elements wrong", rank, bad);
}

/* `abort`, after the warm-up: see the file's comment. */
static int abort_case(ncclComm_t c, int rank, CUdeviceptr a, CUdeviceptr b, CUstream s) {
  if (rank == 0) {
    ncclResult_t r = ncclAllReduce((void*)a, (void*)b, COUNT, ncclFloat32, ncclSum, c, s);
    CHECK(r == ncclSuccess, "rank 0: the call -> %d", r);
    usleep(1000000);
    CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "rank 0: the call ended without its peer");
    double t0 = now();
    CHECK(ncclCommAbort(c) == ncclSuccess, "rank 0: abort");
    double took = now() - t0;
    cu(cuStreamSynchronize(s), "cuStreamSynchronize");
    double drained = now() - t0;
    printf("rank 0: ncclCommAbort returned after %.3f s, the stream drained after %.3f s\n", took, drained);
    fflush(stdout);
    CHECK(took < 1.0 && drained < 1.0, "rank 0: abort took %.3f s, draining %.3f s", took, drained);
  } else {
    usleep(3000000); /* past rank 0's abort */
    CHECK(ncclCommAbort(c) == ncclSuccess, "rank 1: abort");
  }
  ncclComm_t c2;
  ncclResult_t r = ncclCommInitRank(&c2, 2, again, rank);
  CHECK(r == ncclSuccess, "rank %d: a new communicator -> %d (%s)", rank, r, ncclGetLastError(NULL));
  if (r != ncclSuccess) return failures;
  r = ncclAllReduce((void*)a, (void*)b, COUNT, ncclFloat32, ncclSum, c2, s);
  CHECK(r == ncclSuccess, "rank %d: all-reduce on the new communicator -> %d", rank, r);
  cu(cuStreamSynchronize(s), "cuStreamSynchronize");
  check_sum(rank, b);
  printf("rank %d: the new communicator's all-reduce -> %d\n", rank, r);
  fflush(stdout);
  CHECK(ncclCommDestroy(c2) == ncclSuccess, "rank %d: destroy", rank);
  return failures;
}

static int rank_main(ncclUniqueId id, int rank) {
  CUdevice d;
  CUcontext ctx;
  CUstream s;
  CUdeviceptr a, b;
  if (!cu(cuInit(0), "cuInit") || !cu(cuDeviceGet(&d, 0), "cuDeviceGet") ||
      !cu(cuDevicePrimaryCtxRetain(&ctx, d), "retain") || !cu(cuCtxSetCurrent(ctx), "set current") ||
      !cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
      !cu(cuMemAlloc(&a, COUNT * 4), "cuMemAlloc") || !cu(cuMemAlloc(&b, COUNT * 4), "cuMemAlloc"))
    return 1;
  static float in[COUNT];
  for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + 1 + i % 7) * (rank ? 0.5f : 1.0f);
  cu(cuMemcpyHtoD(a, in, sizeof in), "cuMemcpyHtoD");
  ncclComm_t c;
  ncclResult_t r = ncclCommInitRank(&c, 2, id, rank);
  CHECK(r == ncclSuccess, "rank %d: init -> %d (%s)", rank, r, ncclGetLastError(NULL));
  if (r != ncclSuccess) return 1;
  if (!warm_up(c, rank, a, b, s)) return 1;
  if (!strcmp(CASE, "abort")) return abort_case(c, rank, a, b, s);
  double t0 = now();
  r = call(c, rank, a, b, s);
  /* The stream drains: kernels waiting for a peer that stopped are released. */
  cu(cuStreamSynchronize(s), "cuStreamSynchronize");
  double drained = now() - t0;
  ncclResult_t async = ncclSuccess;
  while (now() - t0 < LIMIT && ncclCommGetAsyncError(c, &async) == ncclSuccess && async == ncclSuccess &&
         strcmp(CASE, "agree"))
    usleep(10000);
  const char* m = ncclGetLastError(c);
  printf("rank %d: call -> %d, stream drained after %.2f s, async -> %d: %s\n", rank, r, drained, async, m);
  fflush(stdout);
  if (!strcmp(CASE, "agree")) {
    CHECK(r == ncclSuccess && async == ncclSuccess, "rank %d: agreeing calls failed", rank);
    check_sum(rank, b);
  } else {
    const char* field = !strcmp(CASE, "count") ? "count differs" : !strcmp(CASE, "dtype") ? "type differs" : "size differs";
    CHECK(r == ncclInvalidUsage || async == ncclInvalidUsage, "rank %d: no ncclInvalidUsage", rank);
    CHECK(strstr(m, "disagree on") && strstr(m, field), "rank %d: the message names no disagreement", rank);
    CHECK(drained < LIMIT && now() - t0 < LIMIT, "rank %d: took %.1f s", rank, now() - t0);
  }
  CHECK(ncclCommAbort(c) == ncclSuccess, "rank %d: abort", rank);
  return failures;
}

int main(int argc, char** argv) {
  CASE = argc > 1 ? argv[1] : "count";
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclGetUniqueId(&again) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  fflush(NULL);
  for (int rank = 0; rank < 2; rank++) {
    if (fork() == 0) {
      alarm(300); /* a first call compiles kernels for tens of seconds */
      _exit(rank_main(id, rank) ? 1 : 0);
    }
  }
  int bad = 0, status;
  for (int rank = 0; rank < 2; rank++) {
    wait(&status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
  }
  printf("mismatch %s: %s\n", CASE, bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
