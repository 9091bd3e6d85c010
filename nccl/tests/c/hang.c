/*
 * The hang report's test program (nccl/tests/hang.rs builds and runs it against include/nccl.h
 * and the freshly built libnccl.so). 3 processes run CALLS all-reduces of host buffers; rank
 * SKIP skips one of them, so the others end up waiting in their last call while it waits,
 * alive, outside any call. Run with TOPOPLAN_HANG_REPORT and TOPOPLAN_TIMEOUT: rank 0 prints the
 * report on stderr, and the waiting ranks' last call fails with the timeout.
 *
 * Prints "rank R pid P" for each rank and "rank R: last call -> CODE after S s: MESSAGE" for
 * each waiting rank; exits 0 when every check passed. Every process is bounded by alarm(), so
 * a defect is a failure, never a hung test.
 */
#define _GNU_SOURCE
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define RANKS 3
#define CALLS 5
#define SKIP 2
#define SKIPPED_CALL 2
#define COUNT 1024

#include "check.h"

/* `done`: the read end of a pipe whose write ends only the waiting ranks hold, so it reads
 * end-of-file once they have all exited. `returned`: shared by every process, the number of
 * waiting ranks back from their last call; none leaves before all are, since a peer that
 * exits ends the others' wait early (peer gone) instead of by the timeout. */
static int rank_main(ncclUniqueId id, int rank, int done, int* returned) {
  printf("rank %d pid %d\n", rank, (int)getpid());
  fflush(stdout);
  ncclComm_t c;
  ncclResult_t r = ncclCommInitRank(&c, RANKS, id, rank);
  CHECK(r == ncclSuccess, "rank %d: init -> %d (%s)", rank, r, ncclGetLastError(NULL));
  if (r != ncclSuccess) return failures;
  static float a[COUNT], b[COUNT];
  for (int i = 0; i < COUNT; i++) a[i] = (float)(rank + i);
  for (int call = 0; call < CALLS; call++) {
    if (rank == SKIP && call == SKIPPED_CALL) continue;
    double t0 = now();
    r = ncclAllReduce(a, b, COUNT, ncclFloat32, ncclSum, c, NULL);
    if (rank != SKIP && call == CALLS - 1) {
      const char* m = ncclGetLastError(c);
      printf("rank %d: last call -> %d after %.1f s: %s\n", rank, r, now() - t0, m);
      fflush(stdout);
      CHECK(r == ncclRemoteError && strstr(m, "timed out"), "rank %d: last call -> %d (%s)", rank, r, m);
      __atomic_add_fetch(returned, 1, __ATOMIC_SEQ_CST);
      while (__atomic_load_n(returned, __ATOMIC_SEQ_CST) < RANKS - 1) usleep(10000);
    } else {
      CHECK(r == ncclSuccess, "rank %d: call %d -> %d (%s)", rank, call, r, ncclGetLastError(c));
    }
  }
  double t0 = now();
  if (rank == SKIP) {
    char x;
    while (read(done, &x, 1) > 0) {
    }
    t0 = now();
    r = ncclCommDestroy(c);
    CHECK(r == ncclSuccess, "rank %d: destroy -> %d (%s)", rank, r, ncclGetLastError(c));
  } else {
    r = ncclCommAbort(c);
    CHECK(r == ncclSuccess, "rank %d: abort -> %d", rank, r);
  }
  /* Rank 0's watchdog is stopped, never waited for. */
  CHECK(now() - t0 < 1.0, "rank %d: destroy or abort took %.2f s", rank, now() - t0);
  return failures;
}

int main(void) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId -> %d (%s)\n", r, ncclGetLastError(NULL));
    return 1;
  }
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  int* returned = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (returned == MAP_FAILED) return 1;
  *returned = 0;
  fflush(NULL);
  for (int rank = 0; rank < RANKS; rank++) {
    if (fork() == 0) {
      alarm(60);
      close(rank == SKIP ? pipefd[1] : pipefd[0]);
      _exit(rank_main(id, rank, pipefd[0], returned) ? 1 : 0);
    }
  }
  close(pipefd[0]);
  close(pipefd[1]);
  int bad = 0, status;
  for (int rank = 0; rank < RANKS; rank++) {
    wait(&status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
  }
  if (bad) fprintf(stderr, "hang: %d rank(s) failed\n", bad);
  else printf("hang: all checks passed\n");
  return bad ? 1 : 0;
}
