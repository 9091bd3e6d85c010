/*
 * What every C test of the library shares: CHECK prints what differed (file and line) and
 * counts it in `failures`; OK checks that a call returned ncclSuccess and prints
 * ncclGetLastError's message when it did not; now() is wall-clock seconds.
 */
#ifndef TOPOPLAN_TEST_CHECK_H
#define TOPOPLAN_TEST_CHECK_H
#include <nccl.h>
#include <stdio.h>
#include <sys/time.h>

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
    }                                                      \
  } while (0)
#define OK(call)                                                                  \
  do {                                                                            \
    ncclResult_t r_ = (call);                                                     \
    CHECK(r_ == ncclSuccess, "%s -> %d (%s)", #call, r_, ncclGetLastError(NULL)); \
  } while (0)

__attribute__((unused)) static double now(void) {
  struct timeval t;
  gettimeofday(&t, NULL);
  return t.tv_sec + t.tv_usec * 1e-6;
}
#endif
