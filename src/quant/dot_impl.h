// Between dot.cpp (the scalar reference, the choice of ISA) and the SIMD kernel tables that
// dot_x86.inc builds once per ISA (dot_avx2.cpp, dot_vnni.cpp). Not for other callers: use dot.h.
#pragma once
#include "quant/dot.h"

namespace zaya::quant {

// The index of block type t in the kernel tables: Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, IQ4_XS.
int type_index(DType t);
inline constexpr int kBlockTypes = 7;

#if defined(__x86_64__)
namespace avx2 {
extern const DotKernels kernels[kBlockTypes];
}
namespace vnni {
extern const DotKernels kernels[kBlockTypes];
}
#endif

}  // namespace zaya::quant
