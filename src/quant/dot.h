// Dot products of quantized weight rows (blocks.h) with activations quantized on the fly to 8 bits:
// the arithmetic of linear_forward with a block-type weight (ops/cpu/linear_quant.cpp,
// docs/quantization.md "Kernels").
//
// Activations. A row x[0, I) is quantized per block of act_block(t) values (32 for Q8_0, Q4_0 and
// Q5_0, 256 for the K types and IQ4_XS — the weight's own block): d = max|x| / 127 and
// q = round-to-nearest-even(x · 127 / max|x|), so |q| ≤ 127. For Q4_K and Q5_K (whose blocks carry
// a min) the row also holds the sum of q over every 32 values. A block with a NaN or infinite value
// gets d = NaN (q = 0), so the outputs it reaches are NaN rather than finite garbage; a block with
// max|x| < kTinyAmax (where 127 / max|x| would overflow) is all zeros (d = 0, q = 0).
//
// One dot product, defined exactly (every ISA computes these bits):
//   acc[0..8) = 0 (f32), m = 0 (f32)
//   for each weight block b in order:
//     i[l] = the exact integer Σ over the block's positions p with (p mod 32) / 4 = l of
//            scale16(p) · q_w(p) · q_x(p), where q_w is the weight's integer value with its offset
//            applied (Q4_0: q − 8, Q5_0: q − 16, Q6_K: q − 32, IQ4_XS: kIQ4NL[q]) and scale16(p)
//            the block's integer scale of p (1 for the _0 types; the 6-bit sub-block scale for
//            Q4_K/Q5_K, the signed 8-bit one of p's 16 values for Q6_K, ls − 32 for IQ4_XS);
//     acc[l] = fma(f32(d_w) · d_x, f32(i[l]), acc[l])        (the product rounded to f32 first)
//     Q4_K, Q5_K: m = fma(f32(dmin_w) · d_x, f32(Σ_g min_g · Σ_{p in g} q_x(p)), m)
//   dot = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)) − m
// The lanes are those of a 256-bit register of 32-bit sums of 4 byte products (maddubs + madd,
// or vpdpbusd), so SIMD kernels produce exactly the scalar reference's bits; every integer fits
// int32 for any block bytes (the largest lane, Q6_K with scales −128, is below 2^25; the 16-bit
// pair sums of maddubs stay below 2^15 because |q_x| ≤ 127). The result therefore does not
// depend on the ISA, on how many rows or inputs a kernel handles at once, or on threads.
//
// ISAs: the scalar reference (always), AVX2 (+FMA, F16C; compiled on every x86-64 build through
// function target attributes) and AVX-512 VNNI (vpdpbusd on 256-bit registers, AVX512VL; compiled
// the same way). best_isa() picks the best one this CPU runs (cpuid).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace zaya::quant {

inline constexpr float kTinyAmax = 1e-30f;

enum class Isa : uint8_t { Scalar, Avx2, Avx512Vnni };
std::string_view isa_name(Isa isa);
// Compiled into this build and runnable on this CPU.
bool isa_supported(Isa isa);
// The ISA the kernels use: the best supported one, unless set_isa chose another.
Isa active_isa();
// Tests and benchmarks: use `isa` (must be supported) from now on, in every thread.
void set_isa(Isa isa);

// Values per activation block for weights of block type t (32 or 256).
int64_t act_block(DType t);
// Bytes of one quantized activation row of I values (a multiple of 64; rows laid out at a multiple
// of 64 bytes keep their int8 values 64-byte aligned).
size_t act_row_bytes(DType t, int64_t I);

// A quantized activation row: I int8 values, then I / act_block(t) f32 scales, then (Q4_K, Q5_K)
// I / 32 int16 sums of 32 values.
struct ActRow {
  const int8_t* q;
  const float* d;
  const int16_t* sum32;
};
ActRow act_row(DType t, const void* row, int64_t I);

// The kernels of one weight type on one ISA.
struct DotKernels {
  // x[0, I) → one activation row at `row` (act_row_bytes(t, I) bytes).
  void (*quantize)(const float* x, void* row, int64_t I);
  // out[c · ldo + r] = dot(weight row r, activation row c) for r < R ≤ kMaxRows, c < C ≤ kMaxCols:
  // weight rows at w + r · w_stride, activation rows at act + c · act_stride (bytes), I values.
  void (*dot)(const void* w, size_t w_stride, int R, const void* act, size_t act_stride, int C,
              int64_t I, float* out, int64_t ldo);
  // The fastest shapes of `dot` (any shape gives the same bits): rows per call with one input
  // (the decode GEMV), and the register tile of the GEMM.
  int gemv_rows = 1, tile_rows = 1, tile_cols = 1;
};
inline constexpr int kMaxRows = 4, kMaxCols = 8;

// t a block type; isa supported.
const DotKernels& dot_kernels(DType t, Isa isa);
inline const DotKernels& dot_kernels(DType t) {
  return dot_kernels(t, active_isa());
}

}  // namespace zaya::quant
