// Element types and their conversions. bf16/f16 are storage formats: compute is f32 (or f64 in
// tests), so they only ever appear at load/store time. The block types (Q8_0 … IQ4_XS) are GGML's
// quantized weight formats (docs/quantization.md): a row of a weight matrix is a run of blocks of
// dtype_block_elems values in dtype_block_bytes bytes each; they exist only as inference weights.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace zaya {

enum class DType : uint8_t {
  F32,
  F64,
  BF16,
  F16,
  I32,
  U32,
  I64,
  // Block-quantized weights, bit-compatible with GGML's types of the same names.
  Q8_0,
  Q4_0,
  Q5_0,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_XS,
};

inline bool dtype_is_quantized(DType t) {
  return t >= DType::Q8_0;
}

// Values per block: 1 for element types, 32 or 256 for the block types.
inline int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
      return 32;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return 256;
    default:
      return 1;
  }
}

// Bytes of one block (of one element for element types).
inline size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::BF16:
    case DType::F16:
      return 2;
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::Q8_0:
      return 34;
    case DType::Q4_0:
      return 18;
    case DType::Q5_0:
      return 22;
    case DType::Q4_K:
      return 144;
    case DType::Q5_K:
      return 176;
    case DType::Q6_K:
      return 210;
    case DType::IQ4_XS:
      return 136;
  }
  return 0;
}

// Bytes of one element; only for element types (a block type has no per-element size: use
// dtype_bytes).
inline size_t dtype_size(DType t) {
  return dtype_is_quantized(t) ? 0 : dtype_block_bytes(t);
}

// Bytes of n values (n a multiple of the block size for block types).
inline size_t dtype_bytes(DType t, int64_t n) {
  return size_t(n / dtype_block_elems(t)) * dtype_block_bytes(t);
}

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I32:
      return "I32";
    case DType::U32:
      return "U32";
    case DType::I64:
      return "I64";
    case DType::Q8_0:
      return "Q8_0";
    case DType::Q4_0:
      return "Q4_0";
    case DType::Q5_0:
      return "Q5_0";
    case DType::Q4_K:
      return "Q4_K";
    case DType::Q5_K:
      return "Q5_K";
    case DType::Q6_K:
      return "Q6_K";
    case DType::IQ4_XS:
      return "IQ4_XS";
  }
  return "?";
}

// bf16 is the top half of an f32; rounding is to nearest, ties to even; NaN stays NaN.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// IEEE half precision → f32 (handles subnormals, inf, NaN).
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 → IEEE half, rounding to nearest, ties to even (subnormals, overflow to inf, NaN kept).
inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to ≥ 65520: inf
  if (a < 0x38800000u) {                                  // below 2^-14: a subnormal half (or zero)
    if (a < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25)
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const int shift = int(113 - (a >> 23)) + 13;  // 14..24
    uint32_t h = man >> shift;
    const uint32_t rest = man & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((a - 0x38000000u) >> 13);  // rebias the exponent by 112
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry rounds up the exponent
  return uint16_t(sign | h);
}

}  // namespace zaya
