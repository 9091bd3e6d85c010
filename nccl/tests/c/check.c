/*
 * The C side of the library's tests, built with the system compiler against include/nccl.h
 * and linked against libnccl.so (nccl/tests/c_api.rs builds and runs it). One mode per run:
 *   abi        sizes, offsets, enum values, version, every symbol, every argument check
 *   ranks N    N processes: every collective, in and out of place, groups, split, non-blocking init;
 *              gather and scatter of random bytes of every datatype, roots 0 and N-1
 *   onethread  two ranks driven from one thread inside groups (nccl-tests -g 2)
 *   killed     a rank dies while the survivor is inside a call: ncclRemoteError naming it, abort in time
 *   forward    windows go to the NCCL named by TOPOPLAN_NCCL_LIB; reductions of host buffers stay
 *              on topoplan: float8 sums and averages, PreMulSum with a host scalar, uint64 max,
 *              min and average with values above 2^63
 *   noforward  the same with no real NCCL: ncclInvalidUsage naming the call and why
 *   mismatch   ranks that disagree (nranks at init, counts, datatypes, ops): an error, never a hang
 *   devforward device-buffer gather, scatter and an int32 max all-reduce go to the NCCL named by
 *              TOPOPLAN_NCCL_LIB (run with tests/c/fake_cuda.c as libcuda.so.1, whose
 *              cuMemAlloc_v2 makes the buffers)
 *   devstaged  with the CUDA direct kernels off (TOPOPLAN_DIRECT=0), device-buffer all-to-all,
 *              send/recv, gather and scatter run on topoplan through host copies: random data,
 *              every element checked (with tests/c/fake_cuda.c, and no real NCCL to fall back on);
 *              then all-reduce and all-gather of ranks in one process (ncclCommInitAll), the
 *              same way
 * Exit status 0 when every check passed; each failure prints what differed. Random data comes
 * from CHECK_SEED (else the clock), printed with every failure that involves it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* ---- abi ---- */
static const char* symbols[] = {
    /* PyTorch 2.11's imports */
    "ncclAllGather", "ncclAllReduce", "ncclAlltoAll", "ncclBcast", "ncclBroadcast", "ncclCommAbort",
    "ncclCommCount", "ncclCommDeregister", "ncclCommDestroy", "ncclCommFinalize", "ncclCommGetAsyncError",
    "ncclCommInitAll", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable",
    "ncclCommRegister", "ncclCommShrink", "ncclCommSplit", "ncclCommUserRank", "ncclCommWindowDeregister",
    "ncclCommWindowRegister", "ncclDevCommCreate", "ncclDevCommDestroy", "ncclGetErrorString",
    "ncclGetLastError", "ncclGetUniqueId", "ncclGetVersion", "ncclGroupEnd", "ncclGroupSimulateEnd",
    "ncclGroupStart", "ncclMemAlloc", "ncclMemFree", "ncclRecv", "ncclRedOpCreatePreMulSum",
    "ncclRedOpDestroy", "ncclReduce", "ncclReduceScatter", "ncclSend",
    /* nccl-tests 2.19's, beyond those (gather_perf and scatter_perf call the last two) */
    "ncclCommCuDevice", "ncclGather", "ncclScatter", NULL};

static int has(const char* msg, const char* part) { return msg && strstr(msg, part) != NULL; }

static void expect_err(ncclResult_t got, ncclResult_t want, const char* part, const char* what) {
  const char* m = ncclGetLastError(NULL);
  CHECK(got == want, "%s: result %d, expected %d (%s)", what, got, want, m);
  CHECK(has(m, part), "%s: last error \"%s\" lacks \"%s\"", what, m, part);
}

static int mode_abi(void) {
  CHECK(sizeof(ncclUniqueId) == 128, "sizeof(ncclUniqueId) = %zu", sizeof(ncclUniqueId));
  CHECK(sizeof(ncclConfig_t) == 80, "sizeof(ncclConfig_t) = %zu", sizeof(ncclConfig_t));
  CHECK(offsetof(ncclConfig_t, blocking) == 16 && offsetof(ncclConfig_t, netName) == 32 &&
            offsetof(ncclConfig_t, commName) == 48 && offsetof(ncclConfig_t, nvlinkCentricSched) == 76,
        "ncclConfig_t offsets");
  CHECK(ncclSuccess == 0 && ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 &&
            ncclInProgress == 7 && ncclNumResults == 8,
        "result values");
  CHECK(ncclInt8 == 0 && ncclUint32 == 3 && ncclFloat16 == 6 && ncclFloat32 == 7 && ncclBfloat16 == 9 &&
            ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11 && ncclNumTypes == 12,
        "datatype values");
  CHECK(ncclSum == 0 && ncclAvg == 4 && ncclNumOps == 5 && ncclMaxRedOp == 0x7fffffff, "op values");
  CHECK(NCCL_VERSION_CODE == NCCL_VERSION(2, 28, 3), "version code %d", NCCL_VERSION_CODE);
  int v = 0;
  OK(ncclGetVersion(&v));
  CHECK(v == NCCL_VERSION_CODE, "ncclGetVersion %d, header %d", v, NCCL_VERSION_CODE);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  CHECK(init.size == sizeof(ncclConfig_t) && init.magic == NCCL_API_MAGIC && init.blocking == NCCL_CONFIG_UNDEF_INT,
        "NCCL_CONFIG_INITIALIZER");

  void* self = dlopen(NULL, RTLD_NOW);
  for (const char** s = symbols; *s; s++) CHECK(dlsym(self, *s) != NULL, "symbol %s missing", *s);
  for (int r = 0; r <= 8; r++) CHECK(strlen(ncclGetErrorString((ncclResult_t)r)) > 0, "error string %d", r);

  /* Argument checks, no GPU needed. */
  expect_err(ncclGetVersion(NULL), ncclInvalidArgument, "ncclGetVersion: version is NULL", "GetVersion(NULL)");
  expect_err(ncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId is NULL", "GetUniqueId(NULL)");
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  CHECK(memcmp(id.internal, "topoplan1:", 10) == 0, "id text %.40s", id.internal);
  ncclComm_t c = (ncclComm_t)0x1;
  expect_err(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument, "nranks 0", "InitRank nranks 0");
  CHECK(c == NULL, "a failed init leaves comm NULL");
  expect_err(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument, "rank 2 is not in 0..2", "InitRank rank 2 of 2");
  expect_err(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, "comm is NULL", "InitRank(NULL)");
  ncclUniqueId foreign;
  memset(&foreign, 7, sizeof foreign);
  expect_err(ncclCommInitRank(&c, 1, foreign, 0), ncclInvalidArgument, "not made by this library", "foreign id");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  expect_err(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument, "NCCL_API_MAGIC", "bad magic");
  bad = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  bad.blocking = 3;
  expect_err(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument, "blocking is 3", "bad blocking");

  /* A one-rank communicator: every argument check of the calls. */
  OK(ncclCommInitRank(&c, 1, id, 0));
  int n = 0, r = -1;
  OK(ncclCommCount(c, &n));
  OK(ncclCommUserRank(c, &r));
  CHECK(n == 1 && r == 0, "count %d rank %d", n, r);
  float a[4] = {1, 2, 3, 4}, b[4];
  expect_err(ncclAllReduce(NULL, b, 4, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument, "ncclAllReduce: sendbuff is NULL", "null send");
  expect_err(ncclAllReduce(a, NULL, 4, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument, "recvbuff is NULL", "null recv");
  expect_err(ncclAllReduce(a, b, 4, (ncclDataType_t)12, ncclSum, c, NULL), ncclInvalidArgument, "datatype 12", "bad type");
  expect_err(ncclAllReduce(a, b, 4, ncclFloat32, (ncclRedOp_t)-2, c, NULL), ncclInvalidArgument, "op -2", "bad op");
  expect_err(ncclAllReduce(a, b, 4, ncclFloat32, (ncclRedOp_t)9, c, NULL), ncclInvalidArgument, "PreMulSum op", "unknown op");
  expect_err(ncclBroadcast(a, b, 4, ncclFloat32, 1, c, NULL), ncclInvalidArgument, "root 1", "bad root");
  expect_err(ncclReduce(a, b, 4, ncclFloat32, ncclSum, -1, c, NULL), ncclInvalidArgument, "root -1", "negative root");
  expect_err(ncclSend(a, 4, ncclFloat32, 5, c, NULL), ncclInvalidArgument, "peer 5", "bad peer");
  expect_err(ncclAllReduce(a, a + 1, 3, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument, "overlap", "overlap");
  /* Gather and scatter are checked like the other rooted calls. */
  expect_err(ncclGather(a, b, 4, ncclFloat32, 1, c, NULL), ncclInvalidArgument, "ncclGather: root 1", "gather bad root");
  expect_err(ncclScatter(a, b, 4, ncclFloat32, -1, c, NULL), ncclInvalidArgument, "ncclScatter: root -1", "scatter negative root");
  expect_err(ncclGather(NULL, b, 4, ncclFloat32, 0, c, NULL), ncclInvalidArgument, "ncclGather: sendbuff is NULL", "gather null send");
  expect_err(ncclGather(a, NULL, 4, ncclFloat32, 0, c, NULL), ncclInvalidArgument, "ncclGather: recvbuff is NULL", "gather null recv at root");
  expect_err(ncclScatter(NULL, b, 4, ncclFloat32, 0, c, NULL), ncclInvalidArgument, "ncclScatter: sendbuff is NULL", "scatter null send at root");
  expect_err(ncclScatter(a, NULL, 4, ncclFloat32, 0, c, NULL), ncclInvalidArgument, "ncclScatter: recvbuff is NULL", "scatter null recv");
  expect_err(ncclGather(a, b, 4, (ncclDataType_t)12, 0, c, NULL), ncclInvalidArgument, "ncclGather: datatype 12", "gather bad type");
  expect_err(ncclScatter(a, b, 4, (ncclDataType_t)-1, 0, c, NULL), ncclInvalidArgument, "ncclScatter: datatype -1", "scatter bad type");
  expect_err(ncclGather(b + 1, b, 2, ncclFloat32, 0, c, NULL), ncclInvalidArgument, "ncclGather: the send and receive buffers overlap", "gather overlap");
  expect_err(ncclScatter(b, b + 1, 2, ncclFloat32, 0, c, NULL), ncclInvalidArgument, "ncclScatter: the send and receive buffers overlap", "scatter overlap");
  memset(b, 0, sizeof b);
  OK(ncclGather(a, b, 4, ncclFloat32, 0, c, NULL));
  CHECK(memcmp(a, b, sizeof a) == 0, "one-rank gather copies");
  memset(b, 0, sizeof b);
  OK(ncclScatter(a, b, 4, ncclFloat32, 0, c, NULL));
  CHECK(memcmp(a, b, sizeof a) == 0, "one-rank scatter copies");
  OK(ncclGather(b, b, 4, ncclFloat32, 0, c, NULL));
  OK(ncclScatter(b, b, 4, ncclFloat32, 0, c, NULL));
  CHECK(memcmp(a, b, sizeof a) == 0, "one-rank in-place gather and scatter leave the data");
  expect_err(ncclGroupEnd(), ncclInvalidUsage, "without a matching ncclGroupStart", "unmatched GroupEnd");
  expect_err(ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument, "built in", "destroy builtin");
  OK(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, c, NULL));
  CHECK(b[0] == 1 && b[3] == 4, "one-rank all-reduce copies");
  ncclResult_t ae = ncclInternalError;
  OK(ncclCommGetAsyncError(c, &ae));
  CHECK(ae == ncclSuccess, "async error %d", ae);
  OK(ncclCommFinalize(c));
  OK(ncclCommDestroy(c));
  expect_err(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument, "not a live communicator", "use after destroy");
  expect_err(ncclCommDestroy(c), ncclInvalidArgument, "not a live communicator", "double destroy");
  expect_err(ncclCommCount(NULL, &n), ncclInvalidArgument, "comm is NULL", "count of NULL");
  return failures;
}

/* ---- ranks ---- */
static float value(int rank, size_t i) { return (float)((rank + 1) * 1000 + (int)(i % 997)) * 0.5f; }

static void check_collectives(ncclComm_t c, int rank, int n) {
  const size_t count = 1031; /* odd, not a multiple of anything */
  float* send = malloc(sizeof(float) * count * n);
  float* recv = malloc(sizeof(float) * count * n);
  for (int inplace = 0; inplace < 2; inplace++) {
    /* all-reduce sum */
    for (size_t i = 0; i < count; i++) send[i] = value(rank, i);
    float* out = inplace ? send : recv;
    OK(ncclAllReduce(send, out, count, ncclFloat32, ncclSum, c, NULL));
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int r = 0; r < n; r++) want += value(r, i);
      if (out[i] != want) { CHECK(0, "all-reduce[%zu] inplace=%d: %f, want %f", i, inplace, out[i], want); break; }
    }
    /* all-gather: in place means this rank's block already sits at rank*count of recv */
    for (size_t i = 0; i < count; i++) (inplace ? recv + rank * count : send)[i] = value(rank, i);
    OK(ncclAllGather(inplace ? recv + rank * count : send, recv, count, ncclFloat32, c, NULL));
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++)
        if (recv[r * count + i] != value(r, i)) { CHECK(0, "all-gather block %d[%zu] inplace=%d", r, i, inplace); r = n; break; }
    /* reduce-scatter max over int32 */
    int* si = (int*)send;
    for (size_t i = 0; i < count * n; i++) si[i] = (int)((i * 7 + rank * 13) % 1000) - 500;
    int* ro = inplace ? si + rank * count : (int*)recv;
    OK(ncclReduceScatter(si, ro, count, ncclInt32, ncclMax, c, NULL));
    for (size_t i = 0; i < count; i++) {
      int want = -1000000;
      for (int r = 0; r < n; r++) {
        int v = (int)(((rank * count + i) * 7 + r * 13) % 1000) - 500;
        if (v > want) want = v;
      }
      if (ro[i] != want) { CHECK(0, "reduce-scatter[%zu] inplace=%d: %d want %d", i, inplace, ro[i], want); break; }
    }
    /* broadcast from the last rank, bytes of float16 */
    unsigned short* h = (unsigned short*)send;
    unsigned short* ho = inplace ? h : (unsigned short*)recv;
    for (size_t i = 0; i < count; i++) h[i] = (unsigned short)(rank == n - 1 ? 0x3c00 + i : 0xffff);
    OK(ncclBroadcast(h, ho, count, ncclFloat16, n - 1, c, NULL));
    for (size_t i = 0; i < count; i++)
      if (ho[i] != (unsigned short)(0x3c00 + i)) { CHECK(0, "broadcast[%zu] inplace=%d: %x", i, inplace, ho[i]); break; }
    /* reduce prod of doubles to root 0; non-roots pass no receive buffer out of place */
    double* d = (double*)send;
    for (size_t i = 0; i < count; i++) d[i] = 1.0 + (double)((rank + i) % 3);
    double* dout = inplace ? d : (rank == 0 ? (double*)recv : NULL);
    OK(ncclReduce(d, dout, count, ncclFloat64, ncclProd, 0, c, NULL));
    if (rank == 0)
      for (size_t i = 0; i < count; i++) {
        double want = 1;
        for (int r = 0; r < n; r++) want *= 1.0 + (double)((r + i) % 3);
        if (dout[i] != want) { CHECK(0, "reduce[%zu] inplace=%d: %f want %f", i, inplace, dout[i], want); break; }
      }
  }
  /* all-to-all (out of place), uint8 */
  unsigned char* bs = (unsigned char*)send;
  unsigned char* br = (unsigned char*)recv;
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++) bs[p * count + i] = (unsigned char)(rank * 31 + p * 7 + i);
  OK(ncclAlltoAll(bs, br, count, ncclUint8, c, NULL));
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++)
      if (br[p * count + i] != (unsigned char)(p * 31 + rank * 7 + i)) { CHECK(0, "all-to-all from %d [%zu]", p, i); p = n; break; }
  /* send/recv ring inside a group (both directions at once need the group) */
  for (size_t i = 0; i < count; i++) send[i] = value(rank, i);
  OK(ncclGroupStart());
  OK(ncclSend(send, count, ncclFloat32, (rank + 1) % n, c, NULL));
  OK(ncclRecv(recv, count, ncclFloat32, (rank + n - 1) % n, c, NULL));
  OK(ncclGroupEnd());
  for (size_t i = 0; i < count; i++)
    if (recv[i] != value((rank + n - 1) % n, i)) { CHECK(0, "ring recv[%zu]", i); break; }
  /* uint32 sum wraps like NCCL's */
  unsigned* u = (unsigned*)send;
  for (size_t i = 0; i < count; i++) u[i] = 0xfffffff0u + (unsigned)rank;
  OK(ncclAllReduce(u, recv, count, ncclUint32, ncclSum, c, NULL));
  unsigned want = 0;
  for (int r = 0; r < n; r++) want += 0xfffffff0u + (unsigned)r;
  CHECK(((unsigned*)recv)[count - 1] == want, "uint32 sum %u want %u", ((unsigned*)recv)[count - 1], want);
  free(send);
  free(recv);
}

/* ---- ranks: gather and scatter ---- */
static unsigned long long seed;

/* The byte at `i` of what rank `rank` contributes to call `tag`: every rank can compute every
 * other rank's data, so each checks every element it holds against the reference. */
static unsigned char rnd(int tag, int rank, size_t i) {
  unsigned long long z = seed ^ ((unsigned long long)tag << 44) ^ ((unsigned long long)rank << 36) ^ i;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (unsigned char)(z ^ (z >> 31));
}

static size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8; /* int64, uint64, float64 */
  }
}

#define GUARD 64
#define FILL 0xa5

/* The first of `len` bytes at `p` that is not block `block` of call `tag` (-1: none). */
static long off_block(const unsigned char* p, size_t len, int tag, int block) {
  for (size_t i = 0; i < len; i++)
    if (p[i] != rnd(tag, block, i)) return (long)i;
  return -1;
}

static int untouched(const unsigned char* p, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (p[i] != FILL) return 0;
  return 1;
}

/* One gather or scatter of `count` elements of `t` with `root`. Every rank checks every byte it
 * holds afterwards, and that nothing beyond the call's buffers was written. In place is nccl-tests'
 * layout on every rank: a rank's own block of the root-sized buffer. Out of place, the buffer a
 * rank does not use (gather's receive, scatter's send on non-roots) is NULL. */
static void one_rooted(ncclComm_t c, int rank, int n, int scatter, ncclDataType_t t, int root, int inplace,
                       size_t count, int tag) {
  const size_t b = count * type_size(t);
  unsigned char* big = malloc(n * b + GUARD);   /* n blocks: gather's receive, scatter's send */
  unsigned char* small = malloc(b + GUARD);     /* one block: gather's send, scatter's receive */
  memset(big, FILL, n * b + GUARD);
  memset(small, FILL, b + GUARD);
  unsigned char* mine = inplace ? big + rank * b : small;
  void* whole = (rank == root || inplace) ? big : NULL;
  const char* what = scatter ? "scatter" : "gather";
  long at;
  if (!scatter) {
    for (size_t i = 0; i < b; i++) mine[i] = rnd(tag, rank, i);
    OK(ncclGather(mine, whole, count, t, root, c, NULL));
  } else {
    if (rank == root)
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < b; i++) big[r * b + i] = rnd(tag, r, i);
    OK(ncclScatter(whole, mine, count, t, root, c, NULL));
  }
  /* This rank's own block: what it sent (gather) or received (scatter). */
  at = off_block(mine, b, tag, rank);
  CHECK(at < 0, "%s type %d root %d inplace %d rank %d: own block byte %ld wrong (seed %llu)", what, t, root,
        inplace, rank, at, seed);
  for (int r = 0; r < n; r++) {
    if (r == rank && inplace) continue;
    if (rank == root) {
      /* Gather: every rank's block arrived; scatter: the send buffer is as it was. */
      at = off_block(big + r * b, b, tag, r);
      CHECK(at < 0, "%s type %d root %d inplace %d: block %d byte %ld wrong on the root (seed %llu)", what, t,
            root, inplace, r, at, seed);
    } else if (inplace) {
      CHECK(untouched(big + r * b, b), "%s type %d root %d inplace: rank %d's block %d was written", what, t,
            root, rank, r);
    }
  }
  CHECK(untouched(big + n * b, GUARD) && untouched(small + b, GUARD), "%s type %d root %d inplace %d rank %d: "
        "written past a buffer", what, t, root, inplace, rank);
  free(big);
  free(small);
}

static void check_rooted(ncclComm_t c, int rank, int n) {
  int tag = 0;
  for (int t = 0; t < ncclNumTypes; t++)
    for (int ri = 0; ri < 2; ri++)
      for (int inplace = 0; inplace < 2; inplace++)
        for (int scatter = 0; scatter < 2; scatter++) {
          /* odd counts, a different one per type */
          one_rooted(c, rank, n, scatter, (ncclDataType_t)t, ri ? n - 1 : 0, inplace, 301 + 37 * (size_t)t, ++tag);
        }
  /* Inside a group both are deferred to its end and run together. */
  const size_t count = 129;
  unsigned char* g = malloc(n * count * 4);
  unsigned char* gs = malloc(count * 4);
  unsigned char* ss = malloc(n * count * 8);
  unsigned char* sr = malloc(count * 8);
  int gtag = ++tag, stag = ++tag;
  for (size_t i = 0; i < count * 4; i++) gs[i] = rnd(gtag, rank, i);
  if (rank == n - 1)
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count * 8; i++) ss[r * count * 8 + i] = rnd(stag, r, i);
  OK(ncclGroupStart());
  OK(ncclGather(gs, g, count, ncclFloat32, 0, c, NULL));
  OK(ncclScatter(ss, sr, count, ncclInt64, n - 1, c, NULL));
  OK(ncclGroupEnd());
  if (rank == 0)
    for (int r = 0; r < n; r++) CHECK(off_block(g + r * count * 4, count * 4, gtag, r) < 0, "grouped gather block %d", r);
  CHECK(off_block(sr, count * 8, stag, rank) < 0, "grouped scatter on rank %d", rank);
  /* A root outside the communicator is refused, naming it. */
  char want[64];
  snprintf(want, sizeof want, "ncclGather: root %d is not a rank", n);
  expect_err(ncclGather(gs, g, 1, ncclInt8, n, c, NULL), ncclInvalidArgument, want, "gather root n");
  snprintf(want, sizeof want, "ncclScatter: root %d is not a rank", n + 5);
  expect_err(ncclScatter(ss, sr, 1, ncclInt8, n + 5, c, NULL), ncclInvalidArgument, want, "scatter root n+5");
  free(g);
  free(gs);
  free(ss);
  free(sr);
}

static int rank_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "check";
  ncclResult_t r = ncclCommInitRankConfig(&c, n, id, rank, &cfg);
  CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking init -> %d", r);
  ncclResult_t st = ncclInProgress;
  double t0 = now();
  while (st == ncclInProgress && now() - t0 < 60) {
    OK(ncclCommGetAsyncError(c, &st));
    usleep(1000);
  }
  CHECK(st == ncclSuccess, "non-blocking init ended with %d", st);
  check_collectives(c, rank, n);
  check_rooted(c, rank, n);
  /* split by parity, ordered by descending rank */
  ncclComm_t sub = NULL;
  OK(ncclCommSplit(c, rank % 2, -rank, &sub, NULL));
  int sn = 0, sr = -1;
  OK(ncclCommCount(sub, &sn));
  OK(ncclCommUserRank(sub, &sr));
  int members = (n + 1 - rank % 2) / 2;
  CHECK(sn == members, "split count %d want %d", sn, members);
  float x = (float)rank, y = -1;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclMax, sub, NULL));
  int top = (n - 1) % 2 == rank % 2 ? n - 1 : n - 2;
  CHECK(y == (float)top, "split all-reduce max %f want %d", y, top);
  CHECK(sr == (top - rank) / 2, "split rank %d want %d", sr, (top - rank) / 2);
  ncclComm_t none = (ncclComm_t)0x1;
  OK(ncclCommSplit(c, rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, &none, NULL));
  CHECK((rank == 0) == (none != NULL), "NCCL_SPLIT_NOCOLOR gives a NULL comm");
  if (none) OK(ncclCommDestroy(none));
  OK(ncclCommDestroy(sub));
  OK(ncclCommDestroy(c));
  return failures;
}

static int spawn(int n, int (*body)(ncclUniqueId, int, int)) {
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  fflush(NULL);
  for (int r = 0; r < n; r++) {
    if (fork() == 0) _exit(body(id, r, n) ? 1 : 0);
  }
  int bad = 0, status;
  for (int r = 0; r < n; r++) {
    wait(&status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
  }
  return bad + failures;
}

/* ---- onethread ---- */
static int mode_onethread(void) {
  ncclUniqueId id;
  ncclComm_t c[2];
  OK(ncclGetUniqueId(&id));
  OK(ncclGroupStart());
  for (int r = 0; r < 2; r++) OK(ncclCommInitRank(&c[r], 2, id, r));
  OK(ncclGroupEnd());
  float in[2][64], out[2][64];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 64; i++) in[r][i] = (float)(r * 100 + i);
  OK(ncclGroupStart());
  for (int r = 0; r < 2; r++) OK(ncclAllReduce(in[r], out[r], 64, ncclFloat32, ncclSum, c[r], NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 64; i++) CHECK(out[r][i] == (float)(100 + 2 * i), "rank %d [%d] = %f", r, i, out[r][i]);
  ncclComm_t all[3];
  int devs[3] = {0, 0, 0};
  OK(ncclCommInitAll(all, 3, devs));
  OK(ncclGroupStart());
  float a3[3][8], o3[3][24];
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < 8; i++) a3[r][i] = (float)(r * 8 + i);
    OK(ncclAllGather(a3[r], o3[r], 8, ncclFloat32, all[r], NULL));
  }
  OK(ncclGroupEnd());
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 24; i++) CHECK(o3[r][i] == (float)i, "InitAll all-gather rank %d [%d]", r, i);
  for (int r = 0; r < 3; r++) OK(ncclCommDestroy(all[r]));
  for (int r = 0; r < 2; r++) OK(ncclCommDestroy(c[r]));
  return failures;
}

/* ---- killed ---- */
static int killed_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  const size_t big = (size_t)1 << 20;
  float* a = calloc(big, sizeof(float));
  float* b = calloc(big, sizeof(float));
  OK(ncclAllReduce(a, b, 1024, ncclFloat32, ncclSum, c, NULL));
  if (rank == n - 1) {
    /* Dies while the survivor is inside the next all-reduce, waiting for it. */
    usleep(200000);
    _exit(0);
  }
  double t0 = now();
  ncclResult_t r = ncclAllReduce(a, b, big, ncclFloat32, ncclSum, c, NULL);
  double took = now() - t0;
  const char* m = ncclGetLastError(c);
  CHECK(r == ncclRemoteError, "survivor %d: result %d (%s)", rank, r, m);
  char dead[32];
  snprintf(dead, sizeof dead, "peer rank %d", n - 1);
  CHECK(has(m, dead), "survivor %d: message \"%s\" does not name %s", rank, m, dead);
  CHECK(has(m, "#1"), "survivor %d: message \"%s\" lacks the call's sequence number #1", rank, m);
  CHECK(took < 20, "survivor %d took %.1f s", rank, took);
  ncclResult_t ae = ncclSuccess;
  OK(ncclCommGetAsyncError(c, &ae));
  CHECK(ae == ncclRemoteError, "survivor %d: async error %d", rank, ae);
  t0 = now();
  OK(ncclCommAbort(c));
  CHECK(now() - t0 < 1.0, "abort took %.2f s", now() - t0);
  free(a);
  free(b);
  return failures;
}

/* ---- forward / noforward ---- */
/* Element i of rank r's uint64 input: odd ranks above 2^63, where a signed reading would order
 * and divide differently. */
static uint64_t u64_at(int r, int i) {
  return r % 2 ? UINT64_MAX - (uint64_t)(r * 16 + i) : (uint64_t)(r * 16 + i + 1);
}

/* uint64 max, min and average (NCCL's: the wrapping sum divided by n, unsigned) on topoplan. */
static void check_uint64(ncclComm_t c, int rank, int n) {
  uint64_t u[16], v[16];
  for (int i = 0; i < 16; i++) u[i] = u64_at(rank, i);
  const ncclRedOp_t ops[3] = {ncclMax, ncclMin, ncclAvg};
  for (int k = 0; k < 3; k++) {
    OK(ncclAllReduce(u, v, 16, ncclUint64, ops[k], c, NULL));
    for (int i = 0; i < 16; i++) {
      uint64_t hi = 0, lo = UINT64_MAX, sum = 0;
      for (int r = 0; r < n; r++) {
        const uint64_t x = u64_at(r, i);
        hi = x > hi ? x : hi;
        lo = x < lo ? x : lo;
        sum += x;
      }
      const uint64_t want = k == 0 ? hi : k == 1 ? lo : sum / (uint64_t)n;
      CHECK(v[i] == want, "uint64 op %d [%d] = %llu, want %llu", (int)ops[k], i, (unsigned long long)v[i],
            (unsigned long long)want);
    }
  }
}

static int forward_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  /* float8 on topoplan: 1.0 + 1.0 = 2.0 in e4m3; the average is NCCL's PreMulSum by 1/nranks
   * rounded to e4m3 (0.5 on 2 ranks), then the sum: 1.0. */
  unsigned char a[16], b[16];
  memset(a, 0x38, sizeof a);
  OK(ncclAllReduce(a, b, 16, ncclFloat8e4m3, ncclSum, c, NULL));
  for (int i = 0; i < 16; i++) CHECK(b[i] == 0x40, "fp8 sum [%d] = %#x", i, b[i]);
  OK(ncclAllReduce(a, b, 16, ncclFloat8e4m3, ncclAvg, c, NULL));
  for (int i = 0; i < 16 && n == 2; i++) CHECK(b[i] == 0x38, "fp8 avg [%d] = %#x", i, b[i]);
  /* PreMulSum with a host scalar on topoplan: every input times 2, then summed. */
  float s = 2.0f;
  ncclRedOp_t op;
  OK(ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, c));
  float f[4] = {1, 2, 3, 4}, g[4];
  OK(ncclReduceScatter(f, g, 4 / n, ncclFloat32, op, c, NULL));
  for (int i = 0; i < 4 / n; i++)
    CHECK(g[i] == 2.0f * n * f[rank * (4 / n) + i], "PreMulSum reduce-scatter [%d] = %f", i, g[i]);
  OK(ncclRedOpDestroy(op, c));
  check_uint64(c, rank, n);
  /* Windows are NCCL's: the handle comes from it and goes back to it. */
  ncclWindow_t w = NULL;
  ncclResult_t r = ncclCommWindowRegister(c, a, sizeof a, &w, NCCL_WIN_DEFAULT);
  const char* want = getenv("CHECK_EXPECT_FORWARD");
  if (want && *want == '1') {
    CHECK(r == ncclSuccess, "forwarded window registration -> %d (%s)", r, ncclGetLastError(c));
    OK(ncclCommWindowDeregister(c, w));
    /* Data movement of the same type stays on topoplan. */
    OK(ncclAllGather(a, b, 16 / n, ncclFloat8e5m2, c, NULL));
  } else {
    CHECK(r == ncclInvalidUsage, "window registration without NCCL -> %d", r);
    const char* m = ncclGetLastError(c);
    CHECK(has(m, "ncclCommWindowRegister needs NCCL") && has(m, "windows are NCCL's") &&
              has(m, "TOPOPLAN_NCCL_LIB"),
          "message \"%s\"", m);
  }
  OK(ncclCommDestroy(c));
  return failures;
}

/* ---- devforward ---- */
typedef int (*cu_alloc_t)(unsigned long long*, size_t);
typedef int (*cu_free_t)(unsigned long long);

static int devforward_main(ncclUniqueId id, int rank, int n) {
  void* cu = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(cu != NULL, "libcuda.so.1: %s", dlerror());
  if (!cu) return failures;
  cu_alloc_t alloc = (cu_alloc_t)dlsym(cu, "cuMemAlloc_v2");
  cu_free_t release = (cu_free_t)dlsym(cu, "cuMemFree_v2");
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  unsigned long long dsend = 0, drecv = 0;
  CHECK(alloc(&dsend, 4096) == 0 && alloc(&drecv, 4096) == 0, "cuMemAlloc_v2");
  /* 24 bfloat16 gathered to rank 1, out of place; 40 int32 scattered from rank 0, in place. */
  OK(ncclGather((void*)dsend, (void*)drecv, 24, ncclBfloat16, 1, c, NULL));
  OK(ncclScatter((void*)dsend, (void*)(dsend + rank * 40 * 4), 40, ncclInt32, 0, c, NULL));
  /* A reduction too: NCCL gets its own value of the op (ncclMax is 2), never topoplan's. */
  OK(ncclAllReduce((void*)dsend, (void*)drecv, 16, ncclInt32, ncclMax, c, NULL));
  /* The same calls on host buffers stay on topoplan. */
  float hs[8], hr[16];
  for (int i = 0; i < 8; i++) hs[i] = (float)(rank * 8 + i);
  OK(ncclGather(hs, hr, 8, ncclFloat32, 0, c, NULL));
  if (rank == 0)
    for (int i = 0; i < 16; i++) CHECK(hr[i] == (float)i, "host gather [%d] = %f", i, hr[i]);
  OK(ncclScatter(hr, hs, 8, ncclFloat32, 0, c, NULL));
  for (int i = 0; i < 8; i++) CHECK(hs[i] == (float)(rank * 8 + i), "host scatter [%d] = %f", i, hs[i]);
  /* A PreMulSum whose scalar lives in device memory, on host buffers, stays on topoplan: the
   * scalar is read when the call runs (the stand-in's device memory is host memory). */
  unsigned long long dscalar = 0;
  CHECK(alloc(&dscalar, sizeof(float)) == 0, "cuMemAlloc_v2");
  *(float*)dscalar = 3.0f;
  ncclRedOp_t pm;
  OK(ncclRedOpCreatePreMulSum(&pm, (void*)dscalar, ncclFloat32, ncclScalarDevice, c));
  for (int round = 0; round < 2; round++) {
    OK(ncclAllReduce(hs, hr, 8, ncclFloat32, pm, c, NULL));
    float k = round ? 0.5f : 3.0f;
    for (int i = 0; i < 8; i++) {
      float want = 0;
      for (int r = 0; r < n; r++) want += k * (float)(r * 8 + i);
      CHECK(hr[i] == want, "device-scalar PreMulSum round %d [%d] = %f, want %f", round, i, hr[i], want);
    }
    *(float*)dscalar = 0.5f;
  }
  OK(ncclRedOpDestroy(pm, c));
  OK(ncclCommDestroy(c));
  release(dscalar);
  release(dsend);
  release(drecv);
  return failures;
}

/* ---- devstaged ---- */
/* Element i of rank r's block b of tag t: a random byte, the same on every rank. */
static int staged_all_to_all(ncclComm_t c, unsigned long long d, int rank, int n, size_t per, int inplace) {
  unsigned char* send = (unsigned char*)d;
  unsigned char* recv = inplace ? send : send + n * per;
  for (int b = 0; b < n; b++)
    for (size_t i = 0; i < per; i++) send[b * per + i] = rnd(100 + b, rank, i);
  OK(ncclAlltoAll(send, recv, per / 2, ncclFloat16, c, NULL));
  for (int b = 0; b < n; b++)
    for (size_t i = 0; i < per; i++)
      CHECK(recv[b * per + i] == rnd(100 + rank, b, i), "all-to-all inplace %d: block %d byte %zu", inplace, b, i);
  return failures;
}

/* PreMulSum (its scalar in device memory) and float8 average on device buffers run through host
 * copies as sums of scaled inputs: exact values for the first, the host-buffer call's bytes for
 * the second. */
static void devstaged_scaled(ncclComm_t c, int rank, int n, cu_alloc_t alloc, cu_free_t release) {
  unsigned long long ds = 0, dx = 0;
  CHECK(alloc(&ds, 4) == 0 && alloc(&dx, 2 * n * 64 * 4) == 0, "cuMemAlloc_v2");
  if (!ds || !dx) return;
  *(float*)ds = 0.75f;
  ncclRedOp_t pm;
  OK(ncclRedOpCreatePreMulSum(&pm, (void*)ds, ncclFloat32, ncclScalarDevice, c));
  float* xin = (float*)dx;
  float* xout = xin + n * 64;
  for (int i = 0; i < n * 64; i++) xin[i] = (float)((rank + 1) * (i + 1));
  OK(ncclReduceScatter(xin, xout, 64, ncclFloat32, pm, c, NULL));
  for (int i = 0; i < 64; i++) {
    float want = 0;
    for (int r = 0; r < n; r++) want += 0.75f * (float)((r + 1) * (rank * 64 + i + 1));
    CHECK(xout[i] == want, "device PreMulSum reduce-scatter [%d] = %f, want %f", i, xout[i], want);
  }
  OK(ncclRedOpDestroy(pm, c));
  unsigned char* e8 = (unsigned char*)dx;
  unsigned char h8[256], o8[256];
  for (int i = 0; i < 256; i++) e8[i] = h8[i] = rnd(500, rank, i);
  OK(ncclAllReduce(e8, e8 + 256, 256, ncclFloat8e4m3, ncclAvg, c, NULL));
  OK(ncclAllReduce(h8, o8, 256, ncclFloat8e4m3, ncclAvg, c, NULL));
  for (int i = 0; i < 256; i++)
    CHECK(e8[256 + i] == o8[i], "float8 average [%d]: device %#x, host %#x", i, e8[256 + i], o8[i]);
  release(ds);
  release(dx);
}

static int devstaged_main(ncclUniqueId id, int rank, int n) {
  void* cu = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(cu != NULL, "libcuda.so.1: %s", dlerror());
  if (!cu) return failures;
  cu_alloc_t alloc = (cu_alloc_t)dlsym(cu, "cuMemAlloc_v2");
  cu_free_t release = (cu_free_t)dlsym(cu, "cuMemFree_v2");
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  const size_t per = 1030; /* bytes per block: 515 float16 */
  unsigned long long d = 0, e = 0;
  CHECK(alloc(&d, 2 * n * per) == 0 && alloc(&e, 2 * n * per) == 0, "cuMemAlloc_v2");
  staged_all_to_all(c, d, rank, n, per, 0);
  staged_all_to_all(c, d, rank, n, per, 1);
  /* batch_isend_irecv's pattern: to the next rank, from the previous, and to itself. */
  unsigned char* s = (unsigned char*)d;
  unsigned char* r = (unsigned char*)e;
  for (size_t i = 0; i < 2 * per; i++) s[i] = rnd(200, rank, i);
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  OK(ncclGroupStart());
  OK(ncclSend(s, per, ncclUint8, next, c, NULL));
  OK(ncclRecv(r, per, ncclUint8, prev, c, NULL));
  OK(ncclSend(s + per, per, ncclUint8, rank, c, NULL));
  OK(ncclRecv(r + per, per, ncclUint8, rank, c, NULL));
  OK(ncclGroupEnd());
  for (size_t i = 0; i < per; i++) {
    CHECK(r[i] == rnd(200, prev, i), "recv from rank %d byte %zu", prev, i);
    CHECK(r[per + i] == rnd(200, rank, per + i), "recv from itself byte %zu", i);
  }
  /* Gather to the last rank out of place; scatter from rank 0 in place. */
  for (size_t i = 0; i < per; i++) s[i] = rnd(300, rank, i);
  OK(ncclGather(s, r, per / 4, ncclInt32, n - 1, c, NULL));
  if (rank == n - 1)
    for (int b = 0; b < n; b++)
      for (size_t i = 0; i < per / 4 * 4; i++)
        CHECK(r[b * (per / 4 * 4) + i] == rnd(300, b, i), "gather block %d byte %zu", b, i);
  const size_t sc = 96; /* int64 per rank */
  if (rank == 0)
    for (int b = 0; b < n; b++)
      for (size_t i = 0; i < sc * 8; i++) s[b * sc * 8 + i] = rnd(400 + b, 0, i);
  OK(ncclScatter(s, s + rank * sc * 8, sc, ncclInt64, 0, c, NULL));
  for (size_t i = 0; i < sc * 8; i++)
    CHECK(s[rank * sc * 8 + i] == rnd(400 + rank, 0, i), "scatter byte %zu on rank %d", i, rank);
  devstaged_scaled(c, rank, n, alloc, release);
  OK(ncclCommDestroy(c));
  release(d);
  release(e);
  return failures;
}

/* Ranks of one process (ncclCommInitAll, nccl-tests -g N): the IPC path cannot map a
 * process's own memory, so device-buffer all-reduce and all-gather run through host copies. */
static int devstaged_one_process(void) {
  void* cu = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(cu != NULL, "libcuda.so.1: %s", dlerror());
  if (!cu) return failures;
  cu_alloc_t alloc = (cu_alloc_t)dlsym(cu, "cuMemAlloc_v2");
  cu_free_t release = (cu_free_t)dlsym(cu, "cuMemFree_v2");
  enum { N = 3, COUNT = 301 };
  ncclComm_t c[N];
  int devs[N] = {0, 0, 0};
  OK(ncclCommInitAll(c, N, devs));
  unsigned long long in[N], out[N];
  for (int r = 0; r < N; r++) {
    CHECK(alloc(&in[r], COUNT * 4) == 0 && alloc(&out[r], N * COUNT * 4) == 0, "cuMemAlloc_v2");
    int* p = (int*)in[r];
    for (int i = 0; i < COUNT; i++) p[i] = (int)rnd(500, r, i) - 128;
  }
  OK(ncclGroupStart());
  for (int r = 0; r < N; r++) OK(ncclAllReduce((void*)in[r], (void*)out[r], COUNT, ncclInt32, ncclSum, c[r], NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < N; r++)
    for (int i = 0; i < COUNT; i++) {
      int want = 0;
      for (int k = 0; k < N; k++) want += (int)rnd(500, k, i) - 128;
      CHECK(((int*)out[r])[i] == want, "one-process all-reduce rank %d [%d]", r, i);
    }
  OK(ncclGroupStart());
  for (int r = 0; r < N; r++) OK(ncclAllGather((void*)in[r], (void*)out[r], COUNT, ncclInt32, c[r], NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < N; r++)
    for (int k = 0; k < N; k++)
      for (int i = 0; i < COUNT; i++)
        CHECK(((int*)out[r])[k * COUNT + i] == (int)rnd(500, k, i) - 128, "one-process all-gather rank %d block %d [%d]", r, k, i);
  for (int r = 0; r < N; r++) {
    OK(ncclCommDestroy(c[r]));
    release(in[r]);
    release(out[r]);
  }
  return failures;
}

/* ---- mismatch ---- */
static int mismatch_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  /* Rank 1 claims a world of 3: both ranks fail to join, naming the disagreement. */
  ncclResult_t r = ncclCommInitRank(&c, rank == 1 ? 3 : 2, id, rank);
  CHECK(r == ncclInvalidUsage || r == ncclInvalidArgument || r == ncclRemoteError, "rank %d: init with mismatched nranks -> %d", rank, r);
  if (rank == 0) CHECK(has(ncclGetLastError(NULL), "world has 3 ranks"), "rank 0: \"%s\"", ncclGetLastError(NULL));
  return failures;
}

static int counts_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  float a[256] = {0}, b[256];
  /* Rank 1 reduces 256 elements, rank 0 only 128. */
  ncclResult_t r = ncclAllReduce(a, b, rank == 1 ? 256 : 128, ncclFloat32, ncclSum, c, NULL);
  CHECK(r != ncclSuccess, "rank %d: all-reduce with mismatched counts succeeded", rank);
  const char* m = ncclGetLastError(c);
  CHECK(has(m, "ncclAllReduce: "), "rank %d: message \"%s\" does not name the call", rank, m);
  OK(ncclCommAbort(c));
  return failures;
}

static int types_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  int a[64] = {0}, b[64];
  /* The same bytes, but rank 1 says int32 and rank 0 float32; then the same type, other ops. */
  ncclResult_t r = ncclAllReduce(a, b, 64, rank == 1 ? ncclInt32 : ncclFloat32, ncclSum, c, NULL);
  CHECK(r != ncclSuccess && has(ncclGetLastError(c), "does not match"), "rank %d: mixed types -> %d (%s)", rank, r, ncclGetLastError(c));
  OK(ncclCommAbort(c));
  return failures;
}

static int ops_main(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  float a[64] = {0}, b[64];
  ncclResult_t r = ncclAllReduce(a, b, 64, ncclFloat32, rank == 1 ? ncclMax : ncclSum, c, NULL);
  CHECK(r != ncclSuccess && has(ncclGetLastError(c), "does not match"), "rank %d: mixed ops -> %d (%s)", rank, r, ncclGetLastError(c));
  OK(ncclCommAbort(c));
  return failures;
}

static int mode_mismatch(void) {
  int bad = spawn(2, mismatch_main);
  bad += spawn(2, counts_main);
  bad += spawn(2, types_main);
  return bad + spawn(2, ops_main);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "abi";
  /* Stands for a framework loaded before the first NCCL call (PyTorch's libtorch_cuda.so). */
  const char* pre = getenv("CHECK_LOAD_FIRST");
  if (pre && !dlopen(pre, RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "cannot load %s: %s\n", pre, dlerror());
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 3;
  const char* s = getenv("CHECK_SEED");
  seed = s && *s ? strtoull(s, NULL, 0) : (unsigned long long)(now() * 1e6) ^ ((unsigned long long)getpid() << 32);
  int bad;
  if (!strcmp(mode, "abi")) bad = mode_abi();
  else if (!strcmp(mode, "ranks")) bad = spawn(n, rank_main);
  else if (!strcmp(mode, "onethread")) bad = mode_onethread();
  else if (!strcmp(mode, "killed")) bad = spawn(2, killed_main);
  else if (!strcmp(mode, "mismatch")) bad = mode_mismatch();
  else if (!strcmp(mode, "forward") || !strcmp(mode, "noforward")) bad = spawn(2, forward_main);
  else if (!strcmp(mode, "devforward")) bad = spawn(2, devforward_main);
  else if (!strcmp(mode, "devstaged")) bad = spawn(n, devstaged_main) + devstaged_one_process();
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  if (bad) fprintf(stderr, "%s: %d failure(s)\n", mode, bad);
  else printf("%s: all checks passed\n", mode);
  return bad ? 1 : 0;
}
