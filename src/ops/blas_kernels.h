// Which OpenBLAS kernels this process runs: the name OpenBLAS gives them ("Haswell" for AVX2,
// "SkylakeX"/"Cooperlake" for AVX-512, …), printed by `zaya train` and `zaya bench step` beside
// the sgemm rate. OpenBLAS (a DYNAMIC_ARCH build) picks them when it loads, from the CPU or from
// OPENBLAS_CORETYPE in the environment: on this project's AMD Zen 5 VMs it picks Cooperlake
// (AVX-512), and OPENBLAS_CORETYPE=Haswell (which these VMs' tool environment sets) halves the
// sgemm rate.
#pragma once
#include <string>

namespace zaya::ops {

std::string blas_core_name();

}  // namespace zaya::ops
