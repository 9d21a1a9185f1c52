// Quantizing and dequantizing rows of weights in GGML's block formats (blocks.h,
// docs/quantization.md). The scalar code here is the reference every SIMD kernel is tested
// against; it is also what `zaya quantize` and the loaders run (rows in parallel).
//
// Every block type has a quantizer, the read-only community types (Q4_0, Q5_0, IQ4_XS) too, so that
// tests and the test writers can produce them. The K-type quantizers search each sub-block's
// scale (and min) for the least squared error, as GGML's reference quantizers do; their bits need
// not equal GGML's (only the layout must), their error must be as small.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace zaya::quant {

// True for the types these functions take: the block types, F16, BF16 and F32.
bool is_weight_type(DType t);

// dst (dtype_bytes(t, n) bytes) = x[0, n) in type t; n a multiple of dtype_block_elems(t).
// F16/BF16 round to nearest even; F32 copies. A non-finite value, or one too large for t (its
// block's f16 scale, or the F16 value, would overflow), throws zaya::Error naming its index
// ("non-finite value at index N"); the caller adds the tensor's name.
void quantize_row(DType t, const float* x, void* dst, int64_t n);
// y[0, n) = the values of src (exact: every block value is d·q (− dmin·m) computed in f32, as
// GGML computes it).
void dequantize_row(DType t, const void* src, float* y, int64_t n);

// A [rows, cols] matrix, rows in parallel (OpenMP); same bits as quantize_row row by row, whatever
// the thread count. Errors name the index in the matrix and the first failing row.
void quantize_matrix(DType t, const float* x, void* dst, int64_t rows, int64_t cols);
void dequantize_matrix(DType t, const void* src, float* y, int64_t rows, int64_t cols);

}  // namespace zaya::quant
