// cuBLASLt beyond gemm_blaslt() (gemm.h), for the GEMM tuning table (gemm_table_runtime.h): the
// heuristic's list of algorithms for a GEMM, the library's check of one algorithm, and a run with
// a given one. An algorithm is the 8 words of a cublasLtMatmulAlgo_t. Host code. In the CUDA
// build gemm_blaslt.cpp implements them; builds without cuBLASLt link no_blaslt.cpp: no
// algorithms, every check refused, every run declined.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/gpu/gemm.h"

namespace zaya::gpu {

using BlasLtAlgo = std::array<uint64_t, 8>;

// cublasLtGetVersion() as text ("130100"), or "none" where the build has no cuBLASLt.
std::string blaslt_version();
// Up to `count` algorithms cublasLtMatmulAlgoGetHeuristic offers for g (shape, strides, dtypes and
// the alignment of g's pointers), best first; none where the library cannot take g.
std::vector<BlasLtAlgo> blaslt_heuristic(const Gemm& g, int count);
// Why `algo` cannot run g's shape here ("" when cublasLtMatmulAlgoCheck accepts it and its
// workspace fits). g's pointers are not read.
std::string blaslt_check(const Gemm& g, const BlasLtAlgo& algo);
// Runs g with `algo`; false (nothing run) where the check fails or g's pointers or strides are
// less aligned than the algorithm needs (CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*).
bool gemm_blaslt_algo(const Gemm& g, const BlasLtAlgo& algo);

}  // namespace zaya::gpu
