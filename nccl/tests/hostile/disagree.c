/*
 * Ranks that disagree, and peers that stop: every rank must end with an error naming the call
 * (never success with wrong data, never a wait past TOPOPLAN_TIMEOUT). nccl/tests/hostile.rs
 * runs each mode:
 *   roots    broadcast where every rank is the root; reduce and gather with different roots;
 *            scatter with root = self, then a send/recv that must not get the scatter's data
 *   p2p      sends nobody receives; a receive of another size than the send
 *   reorder  collectives in different orders inside a group: ncclGroupEnd's error, the
 *            communicator's last error, then its async error
 *   split    NCCL_COMM_ID set: ncclCommSplit into two colors, an all-reduce in each
 *   stopped  over TCP, a peer stopped (SIGSTOP): ncclCommAbort returns at once
 *   attacked prints rank 0's address ("ADDR host:port"), waits for a line on stdin (the
 *            attacker has connected), then two ranks join and all-reduce
 */
#include "common.h"

/* Every rank calls `run`; it must fail on each, with `part` in the communicator's message. */
static int disagreeing(ncclUniqueId id, int rank, int n, ncclResult_t (*run)(ncclComm_t, int, float*, float*),
                       const char* part, const char* what) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  float a[64], b[64];
  for (int i = 0; i < 64; i++) a[i] = (float)(rank * 100 + i), b[i] = -1;
  double t = now();
  ncclResult_t r = run(c, rank, a, b);
  double took = now() - t;
  char label[96];
  snprintf(label, sizeof label, "%s (rank %d)", what, rank);
  expect(r, ncclInvalidUsage, c, part, label);
  CHECK(took < 10, "%s: the error took %.1f s", label, took);
  ncclResult_t async = ncclSuccess;
  OK(ncclCommGetAsyncError(c, &async));
  CHECK(async != ncclSuccess, "%s: ncclCommGetAsyncError says 0 after the mismatch", label);
  OK(ncclCommAbort(c));
  return failures;
}

static ncclResult_t bcast_self(ncclComm_t c, int rank, float* a, float* b) {
  return ncclBroadcast(a, b, 64, ncclFloat32, rank, c, NULL);
}
static int roots_bcast(ncclUniqueId id, int rank, int n) {
  return disagreeing(id, rank, n, bcast_self, "does not match", "broadcast, every rank its own root");
}
static ncclResult_t reduce_roots(ncclComm_t c, int rank, float* a, float* b) {
  return ncclReduce(a, b, 64, ncclFloat32, ncclSum, rank % 2, c, NULL);
}
static int roots_reduce(ncclUniqueId id, int rank, int n) {
  return disagreeing(id, rank, n, reduce_roots, "root", "reduce with different roots");
}
static ncclResult_t gather_roots(ncclComm_t c, int rank, float* a, float* b) {
  float all[64 * 4];
  (void)b;
  return ncclGather(a, all, 16, ncclFloat32, rank, c, NULL);
}
static int roots_gather(ncclUniqueId id, int rank, int n) {
  return disagreeing(id, rank, n, gather_roots, "gather", "gather with different roots");
}
static ncclResult_t scatter_then_recv(ncclComm_t c, int rank, float* a, float* b) {
  float all[64 * 4];
  for (int i = 0; i < 64 * 4; i++) all[i] = (float)(1000 * rank + i);
  ncclResult_t r = ncclScatter(all, b, 16, ncclFloat32, rank, c, NULL);
  if (r != ncclSuccess) return r;
  /* Only reached if the scatter wrongly succeeded: then the receive must not get its data. */
  int peer = rank ^ 1;
  ncclGroupStart();
  ncclSend(a, 16, ncclFloat32, peer, c, NULL);
  ncclRecv(b, 16, ncclFloat32, peer, c, NULL);
  r = ncclGroupEnd();
  CHECK(b[0] == (float)(peer * 100), "rank %d received %f, not its peer's send", rank, b[0]);
  return r;
}
static int roots_scatter(ncclUniqueId id, int rank, int n) {
  return disagreeing(id, rank, n, scatter_then_recv, "scatter", "scatter with root = self");
}

/* Every rank of this spawn waits here until all have arrived (files named by the parent's pid),
 * so that none exits while another is still inside its call: a peer's exit would turn that
 * rank's own error into "peer is gone". Bounded: gives up after 30 s. */
static void arrive_and_wait(int rank, int n, const char* tag) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/topoplan-hostile-%d-%s-%d", (int)getppid(), tag, rank);
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
  double t0 = now();
  for (int r = 0; r < n; r++) {
    snprintf(path, sizeof path, "/tmp/topoplan-hostile-%d-%s-%d", (int)getppid(), tag, r);
    while (access(path, F_OK) != 0 && now() - t0 < 30) usleep(1000);
  }
}

static int both_send(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  float a[16] = {0};
  double t = now();
  ncclResult_t r = ncclSend(a, 16, ncclFloat32, rank ^ 1, c, NULL);
  char label[64];
  snprintf(label, sizeof label, "sends nobody receives (rank %d)", rank);
  expect(r, ncclRemoteError, c, "to receive what this rank sent", label);
  CHECK(now() - t < 10, "%s: took %.1f s", label, now() - t);
  arrive_and_wait(rank, n, "both-send");
  OK(ncclCommAbort(c));
  return failures;
}

static int sizes_differ(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  float a[32] = {0};
  ncclResult_t r = rank == 0 ? ncclSend(a, 16, ncclFloat32, 1, c, NULL) : ncclRecv(a, 32, ncclFloat32, 0, c, NULL);
  char label[64];
  snprintf(label, sizeof label, "a receive larger than the send (rank %d)", rank);
  if (rank == 1) expect(r, ncclInvalidUsage, c, "receives 128 bytes", label);
  else expect(r, ncclRemoteError, c, "rank 1", label);
  OK(ncclCommAbort(c));
  return failures;
}

static int reorder(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  OK(ncclCommInitRank(&c, n, id, rank));
  float a[64] = {0}, b[64], d[64];
  OK(ncclGroupStart());
  if (rank == 0) {
    OK(ncclAllReduce(a, b, 64, ncclFloat32, ncclSum, c, NULL));
    OK(ncclBroadcast(a, d, 64, ncclFloat32, 0, c, NULL));
  } else {
    OK(ncclBroadcast(a, d, 64, ncclFloat32, 0, c, NULL));
    OK(ncclAllReduce(a, b, 64, ncclFloat32, ncclSum, c, NULL));
  }
  char label[64];
  snprintf(label, sizeof label, "collectives reordered in a group (rank %d)", rank);
  expect(ncclGroupEnd(), ncclInvalidUsage, c, "does not match", label);
  CHECK(has(ncclGetLastError(c), "ncclGroupEnd"), "the communicator's last error: %s", ncclGetLastError(c));
  ncclResult_t async = ncclSuccess;
  OK(ncclCommGetAsyncError(c, &async));
  CHECK(async == ncclInvalidUsage, "async error after the mismatch: %d", async);
  OK(ncclCommAbort(c));
  return failures;
}

static int split(ncclUniqueId id, int rank, int n) {
  ncclComm_t c, sub = NULL;
  OK(ncclCommInitRank(&c, n, id, rank));
  double t = now();
  OK(ncclCommSplit(c, rank % 2, rank, &sub, NULL));
  CHECK(now() - t < 10, "split took %.1f s", now() - t);
  if (!sub) return failures + 1;
  int sn = 0;
  OK(ncclCommCount(sub, &sn));
  CHECK(sn == n / 2, "color of %d ranks", sn);
  float v = (float)rank, sum = 0;
  OK(ncclAllReduce(&v, &sum, 1, ncclFloat32, ncclSum, sub, NULL));
  float want = 0;
  for (int r = rank % 2; r < n; r += 2) want += (float)r;
  CHECK(sum == want, "rank %d: sum over its color %f, expected %f", rank, sum, want);
  printf("case split with NCCL_COMM_ID (rank %d): code 0, sum %g\n", rank, sum);
  OK(ncclCommDestroy(sub));
  OK(ncclCommDestroy(c));
  return failures;
}

static int stopped(void) {
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  fflush(NULL);
  pid_t peer = fork();
  if (peer == 0) {
    ncclComm_t c;
    OK(ncclCommInitRank(&c, 2, id, 1));
    float a = 1, b;
    OK(ncclAllReduce(&a, &b, 1, ncclFloat32, ncclSum, c, NULL));
    raise(SIGSTOP);
    _exit(0);
  }
  ncclComm_t c;
  OK(ncclCommInitRank(&c, 2, id, 0));
  float a = 1, b;
  OK(ncclAllReduce(&a, &b, 1, ncclFloat32, ncclSum, c, NULL));
  usleep(300000);
  double t = now();
  OK(ncclCommAbort(c));
  double took = now() - t;
  printf("case abort over TCP with a stopped peer: %.3f s\n", took);
  CHECK(took < 1.5, "ncclCommAbort took %.2f s (waiting for the peer's FIN took 2 s)", took);
  kill(peer, SIGKILL);
  waitpid(peer, NULL, 0);
  return failures;
}

static int attacked_rank(ncclUniqueId id, int rank, int n) {
  ncclComm_t c;
  double t = now();
  OK(ncclCommInitRank(&c, n, id, rank));
  float v = (float)(rank + 1), sum = 0;
  OK(ncclAllReduce(&v, &sum, 1, ncclFloat32, ncclSum, c, NULL));
  CHECK(sum == 3, "rank %d: sum %f", rank, sum);
  printf("case rendezvous under attack (rank %d): code 0 in %.2f s\n", rank, now() - t);
  OK(ncclCommDestroy(c));
  return failures;
}

static int attacked(void) {
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  printf("ADDR %s\n", strchr(id.internal, '@') + 1);
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 1;
  return spawn_on(id, 2, 30, attacked_rank);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "roots";
  int bad = 0;
  if (!strcmp(mode, "roots")) {
    bad += spawn(2, 30, roots_bcast);
    bad += spawn(2, 30, roots_reduce);
    bad += spawn(2, 30, roots_gather);
    bad += spawn(2, 30, roots_scatter);
  } else if (!strcmp(mode, "p2p")) {
    bad += spawn(2, 30, both_send);
    bad += spawn(2, 30, sizes_differ);
  } else if (!strcmp(mode, "reorder")) bad = spawn(2, 30, reorder);
  else if (!strcmp(mode, "split")) bad = spawn(4, 30, split);
  else if (!strcmp(mode, "stopped")) bad = stopped();
  else if (!strcmp(mode, "attacked")) bad = attacked();
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return finish(mode, bad);
}
