// The block layouts of GGML's quantized weight types, byte for byte (docs/quantization.md): a row
// of n values is n / block_elems blocks, stored one after another; scales are IEEE halves (f16).
// These structs are the contract between the formats (formats.cpp: quantize, dequantize), the
// kernels (ops/cpu/linear_quant.cpp) and the GGUF files (io/gguf.h), so a block written here reads
// in llama.cpp and the other way round.
#pragma once
#include <cstdint>

namespace zaya::quant {

inline constexpr int kBlock = 32;   // values per block of the _0 types
inline constexpr int kSuper = 256;  // values per super-block of the K types and IQ4_XS

// y = d · q
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kBlock];
};
// y[j] = d · ((qs[j] & 15) − 8), y[j + 16] = d · ((qs[j] >> 4) − 8)
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kBlock / 2];
};
// As Q4_0 with a fifth bit from qh (read as a little-endian u32: bit j for y[j], bit j + 16 for
// y[j + 16]), offset 16.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kBlock / 2];
};
// 8 sub-blocks of 32 with 6-bit scales and mins packed in `scales`: y = d·sc·q − dmin·m.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kSuper / 2];
};
// Q4_K plus a fifth bit per value in qh.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kSuper / 8];
  uint8_t qs[kSuper / 2];
};
// 16 sub-blocks of 16 with 8-bit signed scales; 6-bit values (4 low bits in ql, 2 high in qh),
// offset 32. The scale d comes last.
struct BlockQ6_K {
  uint8_t ql[kSuper / 2];
  uint8_t qh[kSuper / 4];
  int8_t scales[kSuper / 16];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h), values
// through the non-linear table kIQ4NL.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kSuper / 64];
  uint8_t qs[kSuper / 2];
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 16 values of IQ4_NL / IQ4_XS.
inline constexpr int8_t kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace zaya::quant
