// The kernels of dot.h for AVX2 (+FMA, F16C): dot_x86.inc compiled for that ISA through a target
// region, so every x86-64 build has them whatever its -march; dot.cpp calls them only on a CPU
// that runs them (isa_supported).
#include "quant/dot_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/blocks.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace zaya::quant::avx2 {
#define ZAYA_DOT_VNNI 0
#include "quant/dot_x86.inc"
#undef ZAYA_DOT_VNNI
}  // namespace zaya::quant::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
