// The NCCL C interface zaya's NCCL group calls (dist/nccl.cpp), declared here for the builds
// without a vendor header for it: CUDA has nccl.h and ROCm <rccl/rccl.h>, which Debian 12 does not
// ship; other vendors have none. NCCL's own names, values and signatures; RCCL keeps them (it is
// NCCL's port). The functions are never linked: the group loads them from the library at run
// time (dist/nccl.h: open_nccl_library).
//
// The communicator's config is NCCL 2.14's (the first with non-blocking communicators):
// `version` says so, and NCCL reads a config up to its `size` and keeps its own defaults for the
// fields a 2.14 caller did not have, so any later NCCL or RCCL accepts it. The CUDA build checks
// every declaration here against the real nccl.h (tests/dist/test_nccl_abi.cpp: values, layout,
// signatures); against RCCL's header they are unchecked (none here).
#pragma once
#include <climits>
#include <cstddef>

#include "ops/gpu/vendor.h"  // cudaStream_t (hipStream_t on AMD)

#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(2, 14, 0)  // the interface declared here
#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR nullptr

extern "C" {

typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef enum { ncclInt32 = 2, ncclFloat32 = 7, ncclFloat64 = 8 } ncclDataType_t;
typedef struct ncclConfig_v21400 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                                    \
  {                                                                                                \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,                    \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR \
  }

ncclResult_t ncclGetVersion(int* version);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
}
