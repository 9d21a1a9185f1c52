// The register-blocked tile GEMM of the CPU attention kernels (attention.cpp): C[M,N] (+)= A·B
// for the small products of one (query tile, key tile) pair, in the tensors' dtype.
//
// On the SIMD vector of attention_simd.h (AVX-512: 32 registers, AVX2: 16), a register block holds
// MR rows × NV vectors of C, sized so that the MR·NV accumulators, the NV vectors of a B row and a
// broadcast fit in the register file without spilling (AVX-512: 16×1, 12×2, 8×3, 6×4; AVX2: 8×1,
// 6×2). Row counts that are not a multiple of MR end in one smaller block; N must be a multiple of
// the vector width (callers zero-pad their tiles), M and K are free.
//
// A is read through two strides, a(r, p) = A[r·ars + p·aks], one scalar broadcast per
// multiply-add: ars = lda, aks = 1 reads A itself, ars = 1, aks = lda reads its transpose, so
// Pᵀ·dO and dSᵀ·Q need no transposed copy. B is row-major (ldb), C row-major (ldc).
#pragma once
#include <cstdint>
#include <cstring>

#include "ops/cpu/attention_simd.h"

namespace zaya::ops::cpu::attn {

// Widest column block in vectors, and the rows of a register block at nv vectors.
inline constexpr int kMaxNV = kVecRegs / 8;  // 4 (AVX-512) or 2 (AVX2)
constexpr int block_rows(int nv) {
  if (kVecRegs >= 32) return nv == 1 ? 16 : nv == 2 ? 12 : nv == 3 ? 8 : 6;
  return nv == 1 ? 8 : 6;
}

// One MR × NV·W block of C over the whole K.
template <class T, int MR, int NV>
inline void gemm_block(T* C, int64_t ldc, const T* A, int64_t ars, int64_t aks, const T* B,
                       int64_t ldb, int64_t K, bool accumulate) {
  using V = typename Simd<T>::vec;
  constexpr int W = Simd<T>::kLanes;
  V acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      if (accumulate) {
        std::memcpy(&acc[r][c], C + r * ldc + c * W, sizeof(V));
      } else {
        acc[r][c] = V{};
      }
    }
  for (int64_t p = 0; p < K; ++p) {
    V b[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) std::memcpy(&b[c], B + p * ldb + c * W, sizeof(V));
    const T* a = A + p * aks;
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const T ar = a[r * ars];
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] += ar * b[c];
    }
  }
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) std::memcpy(C + r * ldc + c * W, &acc[r][c], sizeof(V));
}

// The last m < MR rows: one block of exactly m rows (m is a run-time value, MR a template one).
template <class T, int NV, int MR>
inline void gemm_tail(int64_t m, T* C, int64_t ldc, const T* A, int64_t ars, int64_t aks,
                      const T* B, int64_t ldb, int64_t K, bool accumulate) {
  if constexpr (MR > 1) {
    if (m == MR - 1) {
      gemm_block<T, MR - 1, NV>(C, ldc, A, ars, aks, B, ldb, K, accumulate);
    } else {
      gemm_tail<T, NV, MR - 1>(m, C, ldc, A, ars, aks, B, ldb, K, accumulate);
    }
  }
}

// All M rows of one NV-vector column block.
template <class T, int NV>
void gemm_columns(T* C, int64_t ldc, const T* A, int64_t ars, int64_t aks, const T* B, int64_t ldb,
                  int64_t M, int64_t K, bool accumulate) {
  constexpr int MR = block_rows(NV);
  int64_t i = 0;
  for (; i + MR <= M; i += MR)
    gemm_block<T, MR, NV>(C + i * ldc, ldc, A + i * ars, ars, aks, B, ldb, K, accumulate);
  if (i < M)
    gemm_tail<T, NV, MR>(M - i, C + i * ldc, ldc, A + i * ars, ars, aks, B, ldb, K, accumulate);
}

// C[M,N] (+)= A[M,K]·B[K,N]; N % kLanes<T> == 0. With K = 0 and !accumulate, C becomes 0.
template <class T>
void gemm(T* C, int64_t ldc, const T* A, int64_t ars, int64_t aks, const T* B, int64_t ldb,
          int64_t M, int64_t N, int64_t K, bool accumulate) {
  constexpr int64_t W = kLanes<T>;
  const int64_t nv = N / W;
  int64_t c = 0;
  for (; c + kMaxNV <= nv; c += kMaxNV)
    gemm_columns<T, kMaxNV>(C + c * W, ldc, A, ars, aks, B + c * W, ldb, M, K, accumulate);
  switch (nv - c) {
    case 0:
      break;
    case 1:
      gemm_columns<T, 1>(C + c * W, ldc, A, ars, aks, B + c * W, ldb, M, K, accumulate);
      break;
    case 2:
      if constexpr (kMaxNV > 2)
        gemm_columns<T, 2>(C + c * W, ldc, A, ars, aks, B + c * W, ldb, M, K, accumulate);
      break;
    default:
      if constexpr (kMaxNV > 3)
        gemm_columns<T, 3>(C + c * W, ldc, A, ars, aks, B + c * W, ldb, M, K, accumulate);
      break;
  }
}

}  // namespace zaya::ops::cpu::attn
