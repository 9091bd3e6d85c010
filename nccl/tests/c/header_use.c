/*
 * Compiled, never run (nccl/tests/c_api.rs builds it as C and as C++): uses include/nccl.h the
 * way nccl-tests 2.19.6 does, so a call it makes at this header's version code that the header
 * does not declare, or declares with another signature, fails the test.
 */
#include <nccl.h>

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
/* nccl-tests' src/gather.cu and src/scatter.cu, from 2.28 on. */
ncclResult_t header_use_gather(void* sendbuff, size_t sendoffset, void* recvbuff, size_t recvoffset, size_t count,
                               ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t stream) {
  char* sptr = (char*)sendbuff + sendoffset;
  char* rptr = (char*)recvbuff + recvoffset;
  return ncclGather(sptr, rptr, count, type, root, comm, stream);
}

ncclResult_t header_use_scatter(void* sendbuff, size_t sendoffset, void* recvbuff, size_t recvoffset, size_t count,
                                ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t stream) {
  char* sptr = (char*)sendbuff + sendoffset;
  char* rptr = (char*)recvbuff + recvoffset;
  return ncclScatter(sptr, rptr, count, type, root, comm, stream);
}

/* The exact signatures: a pointer of the documented type takes each function unconverted. */
typedef ncclResult_t (*rooted_move_t)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
extern const rooted_move_t header_use_rooted[2];
const rooted_move_t header_use_rooted[2] = {ncclGather, ncclScatter};
#else
#error "nccl-tests builds its gather and scatter tests on ncclGather and ncclScatter from 2.28 on"
#endif

/* The host calls nccl-tests 2.19.6 references at this version code (outside nccl_device.h). */
typedef void (*any_fn)(void);
extern const any_fn header_use_calls[];
const any_fn header_use_calls[] = {
    (any_fn)ncclGetVersion, (any_fn)ncclGetUniqueId, (any_fn)ncclCommInitRank, (any_fn)ncclCommInitRankConfig,
    (any_fn)ncclCommDestroy, (any_fn)ncclCommAbort, (any_fn)ncclCommGetAsyncError, (any_fn)ncclGetErrorString,
    (any_fn)ncclGetLastError, (any_fn)ncclCommCount, (any_fn)ncclCommUserRank, (any_fn)ncclCommRegister,
    (any_fn)ncclCommDeregister, (any_fn)ncclCommWindowRegister, (any_fn)ncclCommWindowDeregister,
    (any_fn)ncclMemAlloc, (any_fn)ncclMemFree, (any_fn)ncclRedOpCreatePreMulSum, (any_fn)ncclRedOpDestroy,
    (any_fn)ncclGroupStart, (any_fn)ncclGroupEnd, (any_fn)ncclAllReduce, (any_fn)ncclAllGather,
    (any_fn)ncclReduceScatter, (any_fn)ncclBroadcast, (any_fn)ncclBcast, (any_fn)ncclReduce, (any_fn)ncclAlltoAll,
    (any_fn)ncclGather, (any_fn)ncclScatter, (any_fn)ncclSend, (any_fn)ncclRecv};
