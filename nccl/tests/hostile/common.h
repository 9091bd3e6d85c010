/*
 * Shared by the hostile programs: CHECK prints what differed and counts it; expect() checks a
 * call's code and that ncclGetLastError names what went wrong; spawn() runs one body per rank
 * in forked processes, killing them all if they outlive a bound (a hang is a failure, never a
 * stuck test).
 */
#ifndef HOSTILE_COMMON_H
#define HOSTILE_COMMON_H
#define _GNU_SOURCE
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../c/check.h"

static int has(const char* msg, const char* part) { return msg && strstr(msg, part) != NULL; }

/* The call returned `want` and the last error (of `comm`, or the process's) contains `part`. */
__attribute__((unused)) static void expect(ncclResult_t got, ncclResult_t want, ncclComm_t comm, const char* part, const char* what) {
  const char* m = ncclGetLastError(comm);
  CHECK(got == want, "%s: result %d, expected %d (%s)", what, got, want, m);
  CHECK(has(m, part), "%s: last error \"%s\" lacks \"%s\"", what, m, part);
  printf("case %s: code %d, \"%s\"\n", what, got, m);
}

/* Runs body(id, rank, n) in n processes on `id`; all are killed after `limit` seconds. */
__attribute__((unused)) static int spawn_on(ncclUniqueId id, int n, double limit, int (*body)(ncclUniqueId, int, int)) {
  fflush(NULL);
  pid_t pids[16];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(body(id, r, n) ? 1 : 0);
  }
  int bad = 0, left = n;
  double t0 = now();
  while (left > 0) {
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      left--;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
      continue;
    }
    if (now() - t0 > limit) {
      fprintf(stderr, "FAIL: ranks still running after %.0f s: killed\n", limit);
      for (int r = 0; r < n; r++) kill(pids[r], SIGKILL);
      while (waitpid(-1, NULL, 0) > 0) {
      }
      return bad + left + failures;
    }
    usleep(2000);
  }
  return bad + failures;
}

/* spawn_on with a fresh id. */
__attribute__((unused)) static int spawn(int n, double limit, int (*body)(ncclUniqueId, int, int)) {
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  return spawn_on(id, n, limit, body);
}

static int finish(const char* mode, int bad) {
  if (bad) fprintf(stderr, "%s: %d failure(s)\n", mode, bad);
  else printf("%s: all checks passed\n", mode);
  return bad ? 1 : 0;
}
#endif
