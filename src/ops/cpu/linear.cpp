// linear_forward / linear_backward on the CPU: BLAS GEMMs (blas.h) plus the bias terms. Inference
// weights (x, y, b F32; no backward): BF16 and F16 go to linear_bf16.cpp, the block-quantized
// types (Q8_0 … IQ4_XS) to linear_quant.cpp.
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/blas.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/linear_quant.h"

namespace zaya::ops::cpu {

namespace {

// y[N,O] (+)= x[N,I] · w[O,I]ᵀ + b[O]; b_O may be null.
template <class T>
void forward(T* y_NO, const T* x_NI, const T* w_OI, const T* b_O, int64_t N, int64_t O, int64_t I,
             bool accumulate) {
  T beta = accumulate ? T(1) : T(0);
  if (b_O) {  // y = (y or 0) + b first, then the GEMM adds onto it
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) y_NO[n * O + o] = (accumulate ? y_NO[n * O + o] : 0) + b_O[o];
    beta = T(1);
  }
  gemm(false, true, N, O, I, T(1), x_NI, I, w_OI, I, beta, y_NO, O);
}

// dx (+)= dy · w; dw += dyᵀ · x; db += Σ_n dy. Null outputs are skipped.
template <class T>
void backward(T* dx_NI, T* dw_OI, T* db_O, const T* dy_NO, const T* x_NI, const T* w_OI, int64_t N,
              int64_t O, int64_t I, bool accumulate_dx) {
  if (dx_NI)
    gemm(false, false, N, I, O, T(1), dy_NO, O, w_OI, I, accumulate_dx ? T(1) : T(0), dx_NI, I);
  if (dw_OI) gemm(true, false, O, I, N, T(1), dy_NO, O, x_NI, I, T(1), dw_OI, I);
  if (db_O)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) db_O[o] += dy_NO[n * O + o];
}

}  // namespace

void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  if (w.dtype == DType::BF16) {
    linear_bf16_forward(y.ptr<float>(), x.ptr<float>(), w.ptr<uint16_t>(), ptr_or_null<float>(b), N,
                        O, I, accumulate);
    return;
  }
  if (w.dtype == DType::F16) {
    linear_f16_forward(y.ptr<float>(), x.ptr<float>(), static_cast<const uint16_t*>(w.data),
                       ptr_or_null<float>(b), N, O, I, accumulate);
    return;
  }
  if (dtype_is_quantized(w.dtype)) {
    linear_quant_forward(y.ptr<float>(), x.ptr<float>(), w.data, w.dtype, ptr_or_null<float>(b), N,
                         O, I, accumulate);
    return;
  }
  ZAYA_DISPATCH_FLOAT(y.dtype, forward(y.ptr<scalar_t>(), x.ptr<scalar_t>(), w.ptr<scalar_t>(),
                                       ptr_or_null<scalar_t>(b), N, O, I, accumulate));
}

void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                     const Tensor& x, const Tensor& w, bool accumulate_dx) {
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  ZAYA_DISPATCH_FLOAT(
      dy.dtype,
      backward(ptr_or_null<scalar_t>(dx), ptr_or_null<scalar_t>(dw), ptr_or_null<scalar_t>(db),
               dy.ptr<scalar_t>(), x.ptr<scalar_t>(), w.ptr<scalar_t>(), N, O, I, accumulate_dx));
}

}  // namespace zaya::ops::cpu
