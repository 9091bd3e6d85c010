/*
 * Ranks of one process on a real GPU (nccl/tests/c_api.rs builds and runs it; so does
 * scripts/device/nccl-library.sh inproc): `inproc DEV...` makes one communicator with
 * ncclCommInitAll over the device list (a device may repeat: ranks sharing a GPU) and runs
 * all-reduce (float32 sum, int32 max), all-gather, reduce-scatter, broadcast, reduce, all-to-all,
 * a ring of send/recv, and PreMulSum all-reduce (host scalar) and reduce-scatter (device scalar,
 * whose scaled inputs need a scratch buffer, also first grown inside a capture) on device
 * buffers, in and out of place, at several sizes, three ways:
 *   grouped  one thread issues every rank's call inside ncclGroupStart/End (nccl-tests -g N);
 *   threads  one thread per rank, each issuing its own call, no group;
 *   graph    every rank's stream captured into a CUDA graph (global mode, PyTorch's default)
 *            around a group, every capture ended before any graph is instantiated (an
 *            instantiation is refused while a global capture is under way), the graphs
 *            launched (nccl-tests -G). An int64 all-reduce runs in this mode only: its type's
 *            kernels are first needed, and loaded, inside a capture.
 * Random integer-valued data from INPROC_SEED (else the clock); every element of every output
 * is compared with a CPU reference. INPROC_NO_GRAPH=1 skips the graph runs (ranks whose calls
 * run through host copies cannot be captured). Last, ranks that disagree on a count must get
 * ncclInvalidUsage and their async errors within 10 s (`disagree`). The CUDA driver is loaded with dlopen, so the
 * program builds without CUDA headers; without a driver or a GPU it prints "SKIP" and exits 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void* CUctx;
typedef void* CUgraph;
typedef void* CUgraphExec;

static struct {
  CUresult (*init)(unsigned);
  CUresult (*count)(int*);
  CUresult (*device)(int*, int);
  CUresult (*retain)(CUctx*, int);
  CUresult (*current)(CUctx);
  CUresult (*stream)(cudaStream_t*, unsigned);
  CUresult (*sync)(cudaStream_t);
  CUresult (*alloc)(CUdeviceptr*, size_t);
  CUresult (*htod)(CUdeviceptr, const void*, size_t);
  CUresult (*dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*begin)(cudaStream_t, int);
  CUresult (*end)(cudaStream_t, CUgraph*);
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*launch)(CUgraphExec, cudaStream_t);
  CUresult (*exec_destroy)(CUgraphExec);
  CUresult (*graph_destroy)(CUgraph);
} cu;

#define MAXR 8
enum { AR, ARMAX, AG, RS, BC, RD, A2A, RING, PMAR, PMRS, AR64, KINDS };
static const char* names[KINDS] = {"all-reduce sum", "all-reduce max", "all-gather",
                                   "reduce-scatter", "broadcast", "reduce", "all-to-all",
                                   "send/recv ring", "all-reduce PreMulSum x2 (host scalar)",
                                   "reduce-scatter PreMulSum x3 (device scalar)",
                                   "all-reduce sum (first in a graph)"};
enum { GROUPED, THREADS, GRAPH };
static const char* modes[] = {"grouped", "threads", "graph"};

static int n;
static ncclComm_t comms[MAXR];
static CUctx ctxs[MAXR];
static cudaStream_t streams[MAXR];
static CUdeviceptr sendb[MAXR], recvb[MAXR];
static ncclRedOp_t twice[MAXR], thrice[MAXR]; /* PreMulSum by 2 (host scalar), by 3 (device) */
static size_t cap; /* bytes per buffer */
static unsigned seed;
static int failures;

#define CU(x) do { CUresult r_ = (x); if (r_) { printf("inproc: %s: CUDA error %d\n", #x, r_); exit(1); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_) { printf("inproc: %s: %s (%s)\n", #x, ncclGetErrorString(r_), ncclGetLastError(NULL)); exit(1); } } while (0)

static int load(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return 0;
#define SYM(f, s) if (!(*(void**)&cu.f = dlsym(h, s))) return 0
  SYM(init, "cuInit"); SYM(count, "cuDeviceGetCount"); SYM(device, "cuDeviceGet");
  SYM(retain, "cuDevicePrimaryCtxRetain"); SYM(current, "cuCtxSetCurrent");
  SYM(stream, "cuStreamCreate"); SYM(sync, "cuStreamSynchronize"); SYM(alloc, "cuMemAlloc_v2");
  SYM(htod, "cuMemcpyHtoD_v2"); SYM(dtoh, "cuMemcpyDtoH_v2");
  SYM(begin, "cuStreamBeginCapture_v2"); SYM(end, "cuStreamEndCapture");
  SYM(instantiate, "cuGraphInstantiateWithFlags"); SYM(launch, "cuGraphLaunch");
  SYM(exec_destroy, "cuGraphExecDestroy"); SYM(graph_destroy, "cuGraphDestroy");
  return 1;
}

/* Elements of a rank's input and output for `kind` with NCCL's per-rank count `c`. */
static size_t in_len(int kind, size_t c) { return (kind == RS || kind == PMRS || kind == A2A) ? n * c : c; }
static size_t out_len(int kind, size_t c) { return (kind == AG || kind == A2A) ? n * c : c; }
static int root_of(int kind) { return kind == BC ? n - 1 : kind == RD ? (n > 1) : 0; }

/* The expected output of rank r from every rank's input (int32 values; float32 kinds hold
 * the same small integers, whose sums are exact). */
static int32_t expect(int kind, int32_t** in, int r, size_t c, size_t i) {
  int32_t acc = 0;
  switch (kind) {
  case AR: case AR64: for (int q = 0; q < n; q++) acc += in[q][i]; return acc;
  case RD: for (int q = 0; q < n; q++) acc += in[q][i]; return acc;
  case ARMAX: acc = in[0][i]; for (int q = 1; q < n; q++) if (in[q][i] > acc) acc = in[q][i]; return acc;
  case AG: return in[i / c][i % c];
  case RS: for (int q = 0; q < n; q++) acc += in[q][r * c + i]; return acc;
  case PMAR: for (int q = 0; q < n; q++) acc += 2 * in[q][i]; return acc;
  case PMRS: for (int q = 0; q < n; q++) acc += 3 * in[q][r * c + i]; return acc;
  case BC: return in[root_of(kind)][i];
  case A2A: return in[i / c][r * c + i % c];
  default: return in[(r + n - 1) % n][i]; /* RING */
  }
}

static int is_float(int kind) { return kind == AR || kind == RS || kind == RD || kind == PMAR || kind == PMRS; }
static size_t esize(int kind) { return kind == AR64 ? 8 : 4; }
static const char* tname(int kind) { return kind == AR64 ? "int64" : is_float(kind) ? "float32" : "int32"; }

/* The i-th element of a device-format array of `kind` as the integer it stands for, and back. */
static int32_t get_elem(int kind, const void* a, size_t i) {
  if (kind == AR64) { int64_t v; memcpy(&v, (const char*)a + 8 * i, 8); return v == (int32_t)v ? (int32_t)v : INT32_MIN; }
  if (is_float(kind)) { float f; memcpy(&f, (const char*)a + 4 * i, 4); return (float)(int32_t)f == f ? (int32_t)f : INT32_MIN; }
  int32_t v; memcpy(&v, (const char*)a + 4 * i, 4); return v;
}
static void put_elem(int kind, void* a, size_t i, int32_t v) {
  if (kind == AR64) { int64_t w = v; memcpy((char*)a + 8 * i, &w, 8); }
  else if (is_float(kind)) { float f = (float)v; memcpy((char*)a + 4 * i, &f, 4); }
  else memcpy((char*)a + 4 * i, &v, 4);
}

typedef struct { int kind; size_t c; int in_place; int rank; } Call;

/* Rank r's input and output device addresses for the call. */
static void bufs(const Call* k, int r, CUdeviceptr* in, CUdeviceptr* out) {
  size_t es = esize(k->kind);
  *out = recvb[r];
  *in = sendb[r];
  if (!k->in_place) return;
  if (k->kind == AG) *in = recvb[r] + r * k->c * es;
  else if (k->kind == RS || k->kind == PMRS) { *in = recvb[r]; *out = recvb[r] + r * k->c * es; }
  else *in = recvb[r];
}

static void issue(const Call* k, int r) {
  CUdeviceptr in, out;
  bufs(k, r, &in, &out);
  void *s = (void*)in, *d = (void*)out;
  ncclDataType_t t = k->kind == AR64 ? ncclInt64 : is_float(k->kind) ? ncclFloat32 : ncclInt32;
  cudaStream_t st = streams[r];
  CU(cu.current(ctxs[r]));
  switch (k->kind) {
  case AR: case AR64: case ARMAX: NC(ncclAllReduce(s, d, k->c, t, k->kind == ARMAX ? ncclMax : ncclSum, comms[r], st)); break;
  case AG: NC(ncclAllGather(s, d, k->c, t, comms[r], st)); break;
  case RS: NC(ncclReduceScatter(s, d, k->c, t, ncclSum, comms[r], st)); break;
  case PMAR: NC(ncclAllReduce(s, d, k->c, t, twice[r], comms[r], st)); break;
  case PMRS: NC(ncclReduceScatter(s, d, k->c, t, thrice[r], comms[r], st)); break;
  case BC: NC(ncclBroadcast(s, d, k->c, t, root_of(k->kind), comms[r], st)); break;
  case RD: NC(ncclReduce(s, d, k->c, t, ncclSum, root_of(k->kind), comms[r], st)); break;
  case A2A: NC(ncclAlltoAll(s, d, k->c, t, comms[r], st)); break;
  default:
    NC(ncclGroupStart());
    NC(ncclSend(s, k->c, t, (r + 1) % n, comms[r], st));
    NC(ncclRecv(d, k->c, t, (r + n - 1) % n, comms[r], st));
    NC(ncclGroupEnd());
  }
}

static void* rank_thread(void* p) { issue((const Call*)p, ((const Call*)p)->rank); return NULL; }

static int32_t rnd(void) { return (int32_t)(rand_r(&seed) % 17) - 8; }

/* Fills every rank's buffers with a sentinel and its input with random values; `in[r]` gets
 * rank r's input as the integers its elements stand for. */
static void fill(const Call* k, int32_t** in) {
  size_t il = in_len(k->kind, k->c), es = esize(k->kind);
  unsigned char* junk = malloc(cap);
  for (size_t i = 0; i < cap; i += 4) { uint32_t w = 0x7eadbeef; memcpy(junk + i, &w, 4); }
  void* dev = malloc(il * es);
  for (int r = 0; r < n; r++) {
    in[r] = malloc(il * 4);
    for (size_t i = 0; i < il; i++) { in[r][i] = rnd(); put_elem(k->kind, dev, i, in[r][i]); }
    CU(cu.current(ctxs[r]));
    CU(cu.htod(sendb[r], junk, cap));
    CU(cu.htod(recvb[r], junk, cap));
    CUdeviceptr ip, op;
    bufs(k, r, &ip, &op);
    CU(cu.htod(ip, dev, il * es));
  }
  free(dev);
  free(junk);
}

static void check(const Call* k, int32_t** in, const char* mode) {
  size_t ol = out_len(k->kind, k->c);
  void* got = malloc(ol * esize(k->kind));
  for (int r = 0; r < n; r++) {
    if (k->kind == RD && r != root_of(k->kind)) continue; /* NCCL leaves a non-root's output unspecified */
    CUdeviceptr ip, op;
    bufs(k, r, &ip, &op);
    CU(cu.current(ctxs[r]));
    CU(cu.dtoh(got, op, ol * esize(k->kind)));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ol; i++)
      if (get_elem(k->kind, got, i) != expect(k->kind, in, r, k->c, i) && bad++ == 0) first = i;
    if (bad) {
      failures++;
      printf("inproc: FAIL %s %s %zu x %s, %s, rank %d: %zu of %zu elements wrong, first at %zu "
             "(got %d, want %d; INPROC_SEED=%u)\n", mode, names[k->kind], k->c, tname(k->kind),
             k->in_place ? "in place" : "out of place", r, bad, ol, first,
             get_elem(k->kind, got, first), expect(k->kind, in, r, k->c, first), seed);
    }
  }
  free(got);
}

static void sync_all(void) { for (int r = 0; r < n; r++) { CU(cu.current(ctxs[r])); CU(cu.sync(streams[r])); } }

/* Captures every rank's call (one group) on its stream, then instantiates and replays. */
static void graph_run(const Call* k) {
  CUgraph g[MAXR];
  CUgraphExec e[MAXR];
  for (int r = 0; r < n; r++) { CU(cu.current(ctxs[r])); CU(cu.begin(streams[r], 0 /* global */)); }
  NC(ncclGroupStart());
  for (int r = 0; r < n; r++) issue(&k[r], r);
  NC(ncclGroupEnd());
  /* Every capture ends before the first instantiation, which a global capture still under way
   * on any stream refuses (CUDA error 900), as nccl-tests -G does. */
  for (int r = 0; r < n; r++) { CU(cu.current(ctxs[r])); CU(cu.end(streams[r], &g[r])); }
  for (int r = 0; r < n; r++) {
    CU(cu.current(ctxs[r]));
    CUresult err = cu.instantiate(&e[r], g[r], 0);
    if (err) { printf("inproc: graph of rank %d, %s %zu x %s: instantiation: CUDA error %d\n", r, names[k->kind], k->c, tname(k->kind), err); exit(1); }
  }
  /* Out of place a replay is idempotent: replay twice, as a training step repeats. */
  for (int rep = 0; rep < (k->in_place ? 1 : 2); rep++)
    for (int r = 0; r < n; r++) { CU(cu.current(ctxs[r])); CU(cu.launch(e[r], streams[r])); }
  sync_all();
  for (int r = 0; r < n; r++) { CU(cu.exec_destroy(e[r])); CU(cu.graph_destroy(g[r])); }
}

static void run(const Call* proto, int mode) {
  Call k[MAXR];
  int32_t* in[MAXR];
  fill(proto, in);
  for (int r = 0; r < n; r++) { k[r] = *proto; k[r].rank = r; }
  if (mode == THREADS) {
    pthread_t t[MAXR];
    for (int r = 0; r < n; r++) pthread_create(&t[r], NULL, rank_thread, &k[r]);
    for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
  } else if (mode == GROUPED) {
    NC(ncclGroupStart());
    for (int r = 0; r < n; r++) issue(&k[r], r);
    NC(ncclGroupEnd());
  } else {
    graph_run(k);
  }
  sync_all();
  check(proto, in, modes[mode]);
  for (int r = 0; r < n; r++) free(in[r]);
}

/* Every rank's PreMulSum ops of `comms`: by 2 with a host scalar, by 3 with a device one. */
static void make_ops(void) {
  for (int r = 0; r < n; r++) {
    float two = 2.0f, three = 3.0f;
    CUdeviceptr dev3;
    CU(cu.current(ctxs[r]));
    CU(cu.alloc(&dev3, sizeof three));
    CU(cu.htod(dev3, &three, sizeof three));
    NC(ncclRedOpCreatePreMulSum(&twice[r], &two, ncclFloat32, ncclScalarHostImmediate, comms[r]));
    NC(ncclRedOpCreatePreMulSum(&thrice[r], (void*)dev3, ncclFloat32, ncclScalarDevice, comms[r]));
  }
}

/* A PreMulSum reduce-scatter whose scaled inputs' buffer is first allocated inside a capture:
 * on communicators of their own, after one plain all-reduce opens their CUDA path. */
static void premul_first_in_graph(int* devs) {
  NC(ncclCommInitAll(comms, n, devs));
  make_ops();
  Call warm = {AR, 1, 0, 0};
  run(&warm, GROUPED);
  Call k = {PMRS, 70001, 0, 0};
  run(&k, GRAPH);
  for (int r = 0; r < n; r++) NC(ncclCommDestroy(comms[r]));
}

/* Ranks that disagree (docs/nccl-library.md, "Agreement on the CUDA path"), on communicators of
 * their own made after the checks: rank r all-reduces 1000 + r floats inside a group. The group
 * must end with ncclInvalidUsage naming the difference, every stream must drain, and every rank's
 * async error must be set within LIMIT_S seconds: never a hang, never success. */
#define LIMIT_S 10.0
static double secs(void) { struct timeval t; gettimeofday(&t, NULL); return t.tv_sec + t.tv_usec * 1e-6; }

static void disagree(int* devs) {
  ncclComm_t c[MAXR];
  NC(ncclCommInitAll(c, n, devs));
  /* Agreeing first: the kernels compile, which the limit is not about. */
  NC(ncclGroupStart());
  for (int r = 0; r < n; r++)
    NC(ncclAllReduce((void*)sendb[r], (void*)recvb[r], 1000, ncclFloat32, ncclSum, c[r], streams[r]));
  NC(ncclGroupEnd());
  sync_all();
  double t0 = secs();
  ncclGroupStart();
  for (int r = 0; r < n; r++)
    ncclAllReduce((void*)sendb[r], (void*)recvb[r], 1000 + r, ncclFloat32, ncclSum, c[r], streams[r]);
  ncclResult_t g = ncclGroupEnd();
  const char* m = ncclGetLastError(NULL);
  sync_all();
  int set = 0;
  while (set < n && secs() - t0 < LIMIT_S) {
    set = 0;
    for (int r = 0; r < n; r++) {
      ncclResult_t a = ncclSuccess;
      if (ncclCommGetAsyncError(c[r], &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress) set++;
    }
  }
  double took = secs() - t0;
  /* The message: the thread's last error, else a rank's. */
  for (int r = 0; r < n && !strstr(m, "disagree on"); r++) m = ncclGetLastError(c[r]);
  printf("inproc: disagreeing ranks: group -> %d, %d of %d async errors set, %.2f s: %s\n", g, set, n, took, m);
  if (g != ncclInvalidUsage || !strstr(m, "disagree on") || !strstr(m, "count differs") || set != n || took >= LIMIT_S) {
    printf("inproc: disagreeing ranks: FAIL\n");
    failures++;
  }
  for (int r = 0; r < n; r++) ncclCommAbort(c[r]);
}

int main(int argc, char** argv) {
  n = argc - 1;
  if (n < 2 || n > MAXR) { printf("usage: inproc DEV DEV [DEV...] (2 to %d ranks)\n", MAXR); return 2; }
  int devs[MAXR], gpus = 0;
  if (!load() || cu.init(0) || cu.count(&gpus) || gpus == 0) { printf("inproc: SKIP: no CUDA driver or GPU\n"); return 0; }
  for (int r = 0; r < n; r++) {
    devs[r] = atoi(argv[r + 1]);
    if (devs[r] < 0 || devs[r] >= gpus) { printf("inproc: SKIP: GPU %d asked, %d present\n", devs[r], gpus); return 0; }
  }
  const char* s = getenv("INPROC_SEED");
  struct timeval tv;
  gettimeofday(&tv, NULL);
  seed = s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)(tv.tv_usec ^ tv.tv_sec);
  size_t counts[] = {1, 1000, 70001, 1 << 20};
  cap = (size_t)n * counts[3] * 4; /* the largest call's bytes: n blocks of 2^20 x 4 B, or 2^20 x 8 B */
  for (int r = 0; r < n; r++) {
    int d;
    CU(cu.device(&d, devs[r]));
    CU(cu.retain(&ctxs[r], d));
    CU(cu.current(ctxs[r]));
    CU(cu.stream(&streams[r], 1 /* non-blocking */));
    CU(cu.alloc(&sendb[r], cap));
    CU(cu.alloc(&recvb[r], cap));
  }
  NC(ncclCommInitAll(comms, n, devs));
  make_ops();
  int graphs = !getenv("INPROC_NO_GRAPH");
  for (int mode = GROUPED; mode <= (graphs ? GRAPH : THREADS); mode++)
    for (int kind = 0; kind < KINDS; kind++)
      for (int ci = 0; ci < 4; ci++)
        for (int ip = 0; ip < 2; ip++) {
          /* A ring's sends and receives use separate buffers; one element is not worth a graph. */
          if (kind == RING && ip) continue;
          if (mode == GRAPH && ci == 0) continue;
          if (kind == AR64 && mode != GRAPH) continue;
          Call k = {kind, counts[ci], ip, 0};
          run(&k, mode);
        }
  for (int r = 0; r < n; r++) NC(ncclCommDestroy(comms[r]));
  if (graphs) premul_first_in_graph(devs);
  disagree(devs);
  if (failures) { printf("inproc: %d checks failed\n", failures); return 1; }
  printf("inproc: %d ranks on GPUs", n);
  for (int r = 0; r < n; r++) printf(" %d", devs[r]);
  printf(": all checks passed\n");
  return 0;
}
