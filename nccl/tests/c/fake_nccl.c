/*
 * A stand-in for NVIDIA's libnccl.so, for testing what the library forwards: every call is
 * appended to the file named by FAKE_NCCL_LOG ("<pid> <call> <arguments>") and succeeds.
 * It computes nothing; the tests check that the right calls arrived with the right arguments.
 * Built with -DFAKE_NCCL_BEFORE_2_28 it stands for an NCCL older than 2.28: no ncclGather or
 * ncclScatter.
 * Like NVIDIA's library, its collectives call another of its own public entry points by name
 * (ncclAllReduce asks ncclCommGetAsyncError about its communicator), through the PLT: if that
 * call binds to another library's symbol of the same name, the collective fails.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int res_t;
typedef struct { char internal[128]; } id_t_;

static void note(const char* fmt, ...) {
  const char* path = getenv("FAKE_NCCL_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(f, "%d ", (int)getpid());
  vfprintf(f, fmt, ap);
  fprintf(f, "\n");
  va_end(ap);
  fclose(f);
}

static char comm_token[8];

res_t ncclGetVersion(int* v) { *v = 22899; return 0; }
res_t ncclGetUniqueId(id_t_* id) {
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "FAKE-ID-%d", (int)getpid());
  note("GetUniqueId %s", id->internal);
  return 0;
}
res_t ncclCommInitRank(void** comm, int n, id_t_ id, int rank) {
  note("CommInitRank n=%d rank=%d id=%s", n, rank, id.internal);
  *comm = comm_token;
  return 0;
}
res_t ncclCommDestroy(void* c) { note("CommDestroy"); return 0; }
res_t ncclCommAbort(void* c) { note("CommAbort"); return 0; }
res_t ncclGroupStart(void) { note("GroupStart"); return 0; }
res_t ncclGroupEnd(void) { note("GroupEnd"); return 0; }
const char* ncclGetLastError(void* c) { return "fake NCCL: no error"; }
res_t ncclCommGetAsyncError(void* c, res_t* e) {
  if (c != comm_token) return 4; /* ncclInvalidArgument: not one of this library's */
  *e = 0;
  return 0;
}
res_t ncclAllReduce(const void* s, void* r, size_t n, int t, int op, void* c, void* st) {
  res_t e = 0;
  res_t got = ncclCommGetAsyncError(c, &e);
  if (got != 0 || e != 0) {
    note("AllReduce internal ncclCommGetAsyncError -> %d", got);
    return 3; /* ncclInternalError */
  }
  note("AllReduce count=%zu type=%d op=%d", n, t, op);
  return 0;
}
res_t ncclAllGather(const void* s, void* r, size_t n, int t, void* c, void* st) { note("AllGather count=%zu type=%d", n, t); return 0; }
res_t ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, void* c, void* st) {
  note("ReduceScatter count=%zu type=%d op=%d", n, t, op);
  return 0;
}
res_t ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* c, void* st) { note("Broadcast"); return 0; }
res_t ncclReduce(const void* s, void* r, size_t n, int t, int op, int root, void* c, void* st) { note("Reduce"); return 0; }
res_t ncclAlltoAll(const void* s, void* r, size_t n, int t, void* c, void* st) { note("AlltoAll"); return 0; }
res_t ncclSend(const void* s, size_t n, int t, int p, void* c, void* st) {
  note("Send count=%zu type=%d peer=%d", n, t, p);
  return 0;
}
res_t ncclRecv(void* r, size_t n, int t, int p, void* c, void* st) {
  note("Recv count=%zu type=%d peer=%d", n, t, p);
  return 0;
}
#ifndef FAKE_NCCL_BEFORE_2_28
res_t ncclGather(const void* s, void* r, size_t n, int t, int root, void* c, void* st) {
  note("Gather count=%zu type=%d root=%d", n, t, root);
  return 0;
}
res_t ncclScatter(const void* s, void* r, size_t n, int t, int root, void* c, void* st) {
  note("Scatter count=%zu type=%d root=%d", n, t, root);
  return 0;
}
#endif
res_t ncclRedOpCreatePreMulSum(int* op, void* scalar, int t, int residence, void* c) {
  note("RedOpCreatePreMulSum type=%d residence=%d scalar=%g", t, residence, residence == 1 ? *(float*)scalar : 0.0);
  *op = 17;
  return 0;
}
res_t ncclRedOpDestroy(int op, void* c) { note("RedOpDestroy op=%d", op); return 0; }
res_t ncclCommWindowRegister(void* c, void* buf, size_t size, void** win, int flags) {
  note("WindowRegister size=%zu flags=%d", size, flags);
  *win = comm_token + 1;
  return 0;
}
res_t ncclCommWindowDeregister(void* c, void* win) { note("WindowDeregister ok=%d", win == comm_token + 1); return 0; }
res_t ncclMemAlloc(void** p, size_t n) { *p = malloc(n); return 0; }
res_t ncclMemFree(void* p) { free(p); return 0; }
