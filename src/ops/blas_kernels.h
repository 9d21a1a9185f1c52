// Which OpenBLAS kernels this process runs: the name OpenBLAS gives them ("Haswell" for AVX2,
// "SkylakeX"/"Cooperlake" for AVX-512, …), printed by `zaya train` and `zaya bench step` beside
// the sgemm rate. OpenBLAS (a DYNAMIC_ARCH build) picks them when it loads, from the CPU or from
// OPENBLAS_CORETYPE in the environment, and the choice matters: forcing AVX2 kernels on an
// AVX-512 machine can halve the sgemm rate (the results in benchmarks/results/ name theirs).
#pragma once
#include <string>

namespace zaya::ops {

std::string blas_core_name();

}  // namespace zaya::ops
