/*
 * A stand-in for the CUDA driver (libcuda.so), so the forwarding of device-buffer calls can be
 * tested on machines without a GPU: cuMemAlloc_v2 hands out host memory and remembers it, and
 * cuPointerGetAttribute calls exactly those ranges device memory, as the real driver would
 * its own allocations; copies between them and host memory are memcpy, and every stream has
 * finished its work. Only the few entry points the library and check.c use are here.
 */
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { FAKE_SUCCESS = 0, FAKE_INVALID_VALUE = 1, FAKE_MAX = 64 };
enum { FAKE_ATTRIBUTE_MEMORY_TYPE = 2, FAKE_MEMORYTYPE_DEVICE = 2 };

static struct { CUdeviceptr lo, hi; } ranges[FAKE_MAX];
static int nranges;

CUresult cuInit(unsigned flags) { return FAKE_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return FAKE_SUCCESS; }
CUresult cuCtxGetDevice(int* dev) { *dev = 0; return FAKE_SUCCESS; }
/* Every process's device 0 is the same stand-in GPU: one UUID. */
CUresult cuDeviceGet(int* dev, int ordinal) { *dev = ordinal; return FAKE_SUCCESS; }
CUresult cuDeviceGetUuid_v2(unsigned char* uuid, int dev) {
  for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0xa0 + i + dev);
  return FAKE_SUCCESS;
}
CUresult cuStreamSynchronize(void* stream) { return FAKE_SUCCESS; }

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (nranges == FAKE_MAX) return FAKE_INVALID_VALUE;
  void* m = malloc(bytes ? bytes : 1);
  if (!m) return FAKE_INVALID_VALUE;
  *p = (CUdeviceptr)m;
  ranges[nranges].lo = *p;
  ranges[nranges].hi = *p + bytes;
  nranges++;
  return FAKE_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  for (int i = 0; i < nranges; i++)
    if (ranges[i].lo == p) {
      ranges[i] = ranges[--nranges];
      free((void*)p);
      return FAKE_SUCCESS;
    }
  return FAKE_INVALID_VALUE;
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr p) {
  if (attribute != FAKE_ATTRIBUTE_MEMORY_TYPE) return FAKE_INVALID_VALUE;
  for (int i = 0; i < nranges; i++)
    if (p >= ranges[i].lo && p < ranges[i].hi) {
      *(unsigned*)data = FAKE_MEMORYTYPE_DEVICE;
      return FAKE_SUCCESS;
    }
  return FAKE_INVALID_VALUE; /* plain host memory: unknown to the driver */
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
  memcpy(dst, (const void*)src, n);
  return FAKE_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  memcpy(dst, (const void*)src, n);
  return FAKE_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* stream) {
  memcpy((void*)dst, src, n);
  return FAKE_SUCCESS;
}

/* Never capturing: CU_STREAM_CAPTURE_STATUS_NONE. */
CUresult cuStreamIsCapturing(void* stream, int* status) {
  *status = 0;
  return FAKE_SUCCESS;
}
