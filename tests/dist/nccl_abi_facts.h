// What tests/dist/test_nccl_abi.cpp compares between zaya's NCCL declarations (dist/nccl_abi.h)
// and the CUDA build's nccl.h: each file includes one of them, then this header, whose
// facts_of_the_nccl_in_scope() (internal linkage: one per file) reads the declarations that file
// sees — values, the config's layout and initializer, and the entry points' types by their
// mangled names (the same names and types mangle alike).
#pragma once
#include <climits>
#include <cstddef>
#include <regex>
#include <string>
#include <typeinfo>
#include <vector>

namespace zaya::test {

struct NcclFacts {
  size_t unique_id_bytes = 0;
  std::vector<int> results, reduce_ops, data_types;  // the enumerators zaya uses, in order
  std::vector<size_t> config_offsets;                // size … netName
  size_t config_bytes = 0;
  unsigned config_magic = 0;
  std::vector<long> config_undefined;  // blocking … maxCTAs as initialised, netName == null
  std::vector<int> version_codes;      // NCCL_VERSION of 2.8.3, 2.14.0, 2.28.9
  std::vector<std::string> entry_points;
};

// The mangled type with the config struct's versioned tag (ncclConfig_vNNNNN) made neutral.
inline std::string entry_point_type(const std::type_info& t) {
  return std::regex_replace(t.name(), std::regex("[0-9]+ncclConfig_v[0-9]+"), "ncclConfig");
}

// NcclFacts of ours (nccl_abi_ours.cpp).
NcclFacts nccl_abi_facts();

[[maybe_unused]] static NcclFacts facts_of_the_nccl_in_scope() {
  NcclFacts f;
  f.unique_id_bytes = sizeof(ncclUniqueId);
  f.results = {ncclSuccess,       ncclUnhandledCudaError, ncclSystemError,
               ncclInternalError, ncclInvalidArgument,    ncclInvalidUsage,
               ncclRemoteError,   ncclInProgress,         ncclNumResults};
  f.reduce_ops = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  f.data_types = {ncclInt32, ncclFloat32, ncclFloat64};
  f.config_offsets = {offsetof(ncclConfig_t, size),           offsetof(ncclConfig_t, magic),
                      offsetof(ncclConfig_t, version),        offsetof(ncclConfig_t, blocking),
                      offsetof(ncclConfig_t, cgaClusterSize), offsetof(ncclConfig_t, minCTAs),
                      offsetof(ncclConfig_t, maxCTAs),        offsetof(ncclConfig_t, netName)};
  f.config_bytes = sizeof(ncclConfig_t);
  const ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  f.config_magic = c.magic;
  f.config_undefined = {c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.netName == nullptr};
  f.version_codes = {NCCL_VERSION(2, 8, 3), NCCL_VERSION(2, 14, 0), NCCL_VERSION(2, 28, 9)};
  for (const std::type_info* t :
       {&typeid(ncclGetVersion), &typeid(ncclGetErrorString), &typeid(ncclGetLastError),
        &typeid(ncclGetUniqueId), &typeid(ncclCommInitRankConfig), &typeid(ncclCommGetAsyncError),
        &typeid(ncclCommFinalize), &typeid(ncclCommDestroy), &typeid(ncclCommAbort),
        &typeid(ncclAllReduce), &typeid(ncclReduceScatter), &typeid(ncclAllGather),
        &typeid(ncclBroadcast)})
    f.entry_points.push_back(entry_point_type(*t));
  return f;
}

}  // namespace zaya::test
