// linear_forward with a block-quantized weight (Q8_0 … IQ4_XS, quant/blocks.h) on the CPU, for
// inference: linear.cpp dispatches here. The arithmetic is quant/dot.h's: x is quantized to 8 bits
// per block on the fly, every output one exactly defined dot product.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace zaya::ops::cpu {

// y[N,O] (+)= x[N,I] · w[O,I]ᵀ (+ b[O]); w: O rows of I / dtype_block_elems(t) blocks of type t
// (any alignment); x, y, b f32; b_O may be null. y = (accumulate ? y : 0) + b + dot, like the f32
// linear. The bits do not depend on N, on the thread count or on the ISA.
void linear_quant_forward(float* y_NO, const float* x_NI, const void* w_OI, DType t,
                          const float* b_O, int64_t N, int64_t O, int64_t I, bool accumulate);

}  // namespace zaya::ops::cpu
