/*
 * Hostile arguments to one process: sizes past what memory or a byte count can hold, codes
 * NCCL documents, ids and settings that used to panic. nccl/tests/hostile.rs runs each mode:
 *   sizes        huge rank and device counts, counts whose byte size wraps or cannot exist
 *   codes        destroy(NULL), a bad ncclSimInfo_t, a failed call inside a group, handles
 *                of re-registered buffers, 40,000 PreMulSum ops, an id with multi-byte text
 *   timeout      init under the TOPOPLAN_TIMEOUT the driver sets (past any clock: refused;
 *                past Instant's range but a Duration: accepted)
 *   nonblocking  a non-blocking init whose rank 0 never comes: the async error, the message
 * Each case prints "case NAME: code C, MESSAGE"; exit 0 when every check passed.
 */
#include "common.h"

static ncclComm_t one_rank(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&c, 1, id, 0));
  return c;
}

static int mode_sizes(void) {
  ncclUniqueId id;
  ncclComm_t c = (ncclComm_t)0x1;
  OK(ncclGetUniqueId(&id));
  double t = now();
  expect(ncclCommInitRank(&c, 1 << 30, id, 0), ncclInvalidArgument, NULL, "a world of 1073741824 ranks",
         "init with 2^30 ranks");
  CHECK(c == NULL && now() - t < 2, "refused at once, comm NULL");
  ncclComm_t all[8];
  expect(ncclCommInitAll(all, 10000, NULL), ncclInvalidArgument, NULL, "10000 ranks in this process",
         "ncclCommInitAll of 10,000 devices");
  c = one_rank();
  float a[4] = {1, 2, 3, 4}, b[4] = {0};
  expect(ncclAllReduce(a, b, SIZE_MAX / 4, ncclFloat32, ncclSum, c, NULL), ncclInvalidArgument, c,
         "more than a buffer of this process can hold", "all-reduce of SIZE_MAX/4 floats");
  /* One rank, in place: as in NCCL, nothing to do and nothing allocated or touched, at once. */
  t = now();
  CHECK(ncclAllReduce(a, a, (size_t)1 << 38, ncclFloat32, ncclSum, c, NULL) == ncclSuccess && now() - t < 1,
        "one-rank in-place all-reduce of 2^38 floats: not an immediate no-op");
  CHECK(a[0] == 1 && a[3] == 4, "the one-rank in-place all-reduce changed its buffer");
  /* count * 4 wraps to 4 bytes: refused, nothing moved. */
  expect(ncclAllGather(a, b, ((size_t)1 << 62) + 1, ncclFloat32, c, NULL), ncclInvalidArgument, c, "overflows",
         "all-gather whose byte count wraps");
  CHECK(b[0] == 0, "the wrapped all-gather moved data: %f", b[0]);
  expect(ncclReduceScatter(a, b, SIZE_MAX / 2 + 1, ncclInt8, ncclSum, c, NULL), ncclInvalidArgument, c,
         "more than a buffer", "reduce-scatter of 2^63 bytes");
  /* The communicator is still usable after all of that. */
  OK(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, c, NULL));
  CHECK(b[3] == 4, "one-rank all-reduce [3] = %f", b[3]);
  OK(ncclCommDestroy(c));
  return failures;
}

static int mode_codes(void) {
  OK(ncclCommDestroy(NULL));
  printf("case ncclCommDestroy(NULL): code 0\n");
  ncclComm_t c = one_rank();
  /* A bad ncclSimInfo_t fails the group like a failed call inside it. */
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  sim.magic = 0;
  OK(ncclGroupStart());
  expect(ncclGroupSimulateEnd(&sim), ncclInvalidArgument, NULL, "simInfo.magic", "simulate with a bad magic");
  /* A failed call inside a group: the group runs nothing and returns that call's code. */
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {0};
  OK(ncclGroupStart());
  OK(ncclAllReduce(a, b, 8, ncclFloat32, ncclSum, c, NULL));
  CHECK(ncclBroadcast(a, b, 8, ncclFloat32, 5, c, NULL) == ncclInvalidArgument, "bad root in a group");
  expect(ncclGroupEnd(), ncclInvalidArgument, NULL, "nothing in the group ran", "group with an invalid call");
  CHECK(b[0] == 0, "the group ran its all-reduce anyway: %f", b[0]);
  OK(ncclAllReduce(a, b, 8, ncclFloat32, ncclSum, c, NULL));
  CHECK(b[7] == 8, "after the failed group the communicator works: %f", b[7]);
  /* An init deferred in a group that fails is cancelled: its handle comes back NULL. */
  ncclUniqueId gid;
  ncclComm_t deferred = NULL;
  OK(ncclGetUniqueId(&gid));
  OK(ncclGroupStart());
  OK(ncclCommInitRank(&deferred, 1, gid, 0));
  CHECK(ncclAllReduce(NULL, b, 8, ncclFloat32, ncclSum, c, NULL) == ncclInvalidArgument, "NULL sendbuff in a group");
  expect(ncclGroupEnd(), ncclInvalidArgument, NULL, "sendbuff is NULL", "group with an init and an invalid call");
  CHECK(deferred == NULL, "the cancelled init's handle is %p", (void*)deferred);
  /* Handles of registrations are never reused while the communicator lives. */
  void *h1, *h2, *h3;
  OK(ncclCommRegister(c, a, sizeof a, &h1));
  OK(ncclCommRegister(c, b, sizeof b, &h2));
  OK(ncclCommDeregister(c, h1));
  OK(ncclCommRegister(c, a, sizeof a, &h3));
  CHECK(h3 != h2 && h3 != h1, "re-registration reused handle %p", h3);
  OK(ncclCommDeregister(c, h2));
  OK(ncclCommDeregister(c, h3));
  expect(ncclCommDeregister(c, h3), ncclInvalidArgument, c, "not a registration", "deregister twice");
  /* 40,000 PreMulSum ops: linear, and they die with the communicator. */
  double t = now();
  float s = 2;
  ncclRedOp_t op = ncclSum, first = ncclSum;
  for (int i = 0; i < 40000; i++) {
    ncclResult_t r = ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, c);
    if (r != ncclSuccess) {
      CHECK(0, "PreMulSum %d -> %d", i, r);
      break;
    }
    if (i == 0) first = op;
  }
  double took = now() - t;
  printf("case 40000 PreMulSum ops: %.3f s\n", took);
  CHECK(took < 3, "40,000 PreMulSum ops took %.1f s", took);
  OK(ncclRedOpDestroy(first, c));
  ncclRedOp_t again;
  OK(ncclRedOpCreatePreMulSum(&again, &s, ncclFloat32, ncclScalarHostImmediate, c));
  CHECK(again == first, "a destroyed op's value %d is handed out again (got %d)", first, again);
  OK(ncclCommDestroy(c));
  /* An id whose secret holds multi-byte characters: refused, not a panic. */
  ncclUniqueId wide;
  memset(&wide, 0, sizeof wide);
  strcpy(wide.internal, "topoplan1:");
  for (int i = 0; i < 16; i++) strcat(wide.internal, "\xc3\xa9");
  strcat(wide.internal, "@127.0.0.1:1");
  expect(ncclCommInitRank(&c, 2, wide, 1), ncclInvalidArgument, NULL, "bad unique id", "id with multi-byte UTF-8");
  return failures;
}

static int mode_timeout(void) {
  const char* t = getenv("TOPOPLAN_TIMEOUT");
  ncclUniqueId id;
  ncclComm_t c = NULL;
  OK(ncclGetUniqueId(&id));
  ncclResult_t r = ncclCommInitRank(&c, 1, id, 0);
  if (t && strlen(t) > 20) {
    expect(r, ncclInvalidUsage, NULL, "TOPOPLAN_TIMEOUT", "a timeout past any clock");
    return failures;
  }
  CHECK(r == ncclSuccess, "init with TOPOPLAN_TIMEOUT=%s -> %d (%s)", t, r, ncclGetLastError(NULL));
  float a[2] = {1, 2}, b[2];
  OK(ncclAllReduce(a, b, 2, ncclFloat32, ncclSum, c, NULL));
  printf("case TOPOPLAN_TIMEOUT=%s: code %d\n", t, r);
  if (c) OK(ncclCommDestroy(c));
  return failures;
}

static int mode_nonblocking(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  /* Rank 0 of this id never listens: port 1 is outside the range the OS hands out. */
  strcpy(id.internal, "topoplan1:00112233445566778899aabbccddeeff@127.0.0.1:1");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t c = NULL;
  CHECK(ncclCommInitRankConfig(&c, 2, id, 1, &cfg) == ncclInProgress, "non-blocking init");
  ncclResult_t state = ncclInProgress;
  double t = now();
  while (state == ncclInProgress && now() - t < 20) {
    OK(ncclCommGetAsyncError(c, &state));
    usleep(10000);
  }
  expect(state, ncclRemoteError, c, "timed out", "a non-blocking init that fails");
  CHECK(has(ncclGetLastError(NULL), "ncclCommInitRankConfig"), "the process's last error names the call: %s",
        ncclGetLastError(NULL));
  OK(ncclCommAbort(c));
  return failures;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "sizes";
  int bad;
  if (!strcmp(mode, "sizes")) bad = mode_sizes();
  else if (!strcmp(mode, "codes")) bad = mode_codes();
  else if (!strcmp(mode, "timeout")) bad = mode_timeout();
  else if (!strcmp(mode, "nonblocking")) bad = mode_nonblocking();
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return finish(mode, bad);
}
