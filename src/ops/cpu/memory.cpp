// Memory ops on the CPU (ops.h "memory"): fill, copy, segment copies, row gather/scatter, column
// concatenation and the next-token target shift. They move bits (or, for a weighted scatter, form
// one f32 product per element), so running large calls in parallel cannot change a result.
// Shapes, dtypes and segment ranges were checked in ops/ops.cpp; index values are checked here.
#include <cstring>

#include "core/rng.h"
#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/parallel.h"

namespace zaya::ops::cpu {

namespace {

template <class T>
void fill_n(T* p, int64_t n, T value) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

// Row width of a tensor whose rows are its first dimension.
int64_t row_width(const Tensor& t) {
  return t.shape[0] ? t.numel() / t.shape[0] : 0;
}

void check_row_ids(const char* op, const int32_t* ids, int64_t M, int64_t R) {
  for (int64_t m = 0; m < M; ++m)
    ZAYA_ASSERT(ids[m] >= 0 && ids[m] < R, "{}: row_ids[{}] = {} not in [0, {})", op, m, ids[m], R);
}

template <class T>
void scatter_weighted(T* dst_RW, const int32_t* ids_M, const T* src_MW, const T* w_R, int64_t M,
                      int64_t W) {
#pragma omp parallel for schedule(static) if (M * W > kParallelMin)
  for (int64_t m = 0; m < M; ++m) {
    const int64_t r = ids_M[m];
    const T* s = src_MW + m * W;
    T* d = dst_RW + r * W;
    for (int64_t j = 0; j < W; ++j) d[j] = w_R[r] * s[j];
  }
}

}  // namespace

void fill(const Tensor& t, double value) {
  const int64_t n = t.numel();
  if (t.dtype == DType::F32) return fill_n(t.ptr<float>(), n, float(value));
  if (t.dtype == DType::F64) return fill_n(t.ptr<double>(), n, value);
  fill_n(t.ptr<int32_t>(), n, int32_t(value));  // I32, the third dtype ops.cpp admits
}

void fill_zero(const Tensor& t) {
  if (t.nbytes()) std::memset(t.data, 0, t.nbytes());
}

void fill_normal(const Tensor& t, uint64_t seed, uint64_t stream, double std) {
  float* p = t.ptr<float>();
  const int64_t n = t.numel();
  const CounterRng rng{seed, stream};
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) p[i] = float(std * rng.normal(uint64_t(i)));
}

void zero_where_class(const Tensor& v, const Tensor& choice, int64_t k) {
  const int32_t* ch = choice.ptr<int32_t>();
  float* p = v.ptr<float>();
  for (int64_t n = 0; n < choice.numel(); ++n)
    if (ch[n] == k) p[n] = 0.0f;
}

void fill_uniform(const Tensor& t, uint64_t seed, uint64_t stream, double a) {
  const int64_t n = t.numel();
  const CounterRng rng{seed, stream};
  float* f = t.dtype == DType::F32 ? static_cast<float*>(t.data) : nullptr;
  uint16_t* h = t.dtype == DType::BF16 ? static_cast<uint16_t*>(t.data) : nullptr;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t k = 0; k < n; ++k) {
    const float v = float(a * (2.0 * rng.uniform(uint64_t(k)) - 1.0));
    if (f)
      f[k] = v;
    else
      h[k] = f32_to_bf16(v);
  }
}

void convert(const Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (dst.dtype == src.dtype) {
    if (dst.data != src.data && src.nbytes()) std::memcpy(dst.data, src.data, src.nbytes());
  } else if (dst.dtype == DType::BF16) {
    uint16_t* out = static_cast<uint16_t*>(dst.data);
    const float* in = static_cast<const float*>(src.data);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t k = 0; k < n; ++k) out[k] = f32_to_bf16(in[k]);
  } else {
    float* out = static_cast<float*>(dst.data);
    const uint16_t* in = static_cast<const uint16_t*>(src.data);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t k = 0; k < n; ++k) out[k] = bf16_to_f32(in[k]);
  }
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.data != src.data && src.nbytes()) std::memcpy(dst.data, src.data, src.nbytes());
}

void copy_segments(const Tensor& dst, const Tensor& src, std::span<const CopySegment> segments) {
  const size_t es = dtype_size(src.dtype);
  char* d = static_cast<char*>(dst.data);
  const char* s = static_cast<const char*>(src.data);
  const int64_t n = int64_t(segments.size());
#pragma omp parallel for schedule(dynamic, 4) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    const CopySegment& g = segments[size_t(i)];
    std::memcpy(d + size_t(g.dst) * es, s + size_t(g.src) * es, size_t(g.length) * es);
  }
}

void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& row_ids) {
  const int64_t M = row_ids.numel(), W = row_width(dst);
  const int32_t* ids = row_ids.ptr<int32_t>();
  check_row_ids("gather_rows", ids, M, src.shape[0]);
  const size_t row = size_t(W) * dtype_size(dst.dtype);
  char* d = static_cast<char*>(dst.data);
  const char* s = static_cast<const char*>(src.data);
#pragma omp parallel for schedule(static) if (M * W > kParallelMin)
  for (int64_t m = 0; m < M; ++m) std::memcpy(d + size_t(m) * row, s + size_t(ids[m]) * row, row);
}

void scatter_rows(const Tensor& dst, const Tensor& row_ids, const Tensor& src,
                  const Tensor& weight) {
  const int64_t M = row_ids.numel(), W = row_width(dst);
  const int32_t* ids = row_ids.ptr<int32_t>();
  check_row_ids("scatter_rows", ids, M, dst.shape[0]);
  if (weight.defined()) {
    ZAYA_DISPATCH_FLOAT(dst.dtype, scatter_weighted(dst.ptr<scalar_t>(), ids, src.ptr<scalar_t>(),
                                                    weight.ptr<scalar_t>(), M, W));
    return;
  }
  const size_t row = size_t(W) * dtype_size(dst.dtype);
  char* d = static_cast<char*>(dst.data);
  const char* s = static_cast<const char*>(src.data);
#pragma omp parallel for schedule(static) if (M * W > kParallelMin)
  for (int64_t m = 0; m < M; ++m) std::memcpy(d + size_t(ids[m]) * row, s + size_t(m) * row, row);
}

void concat_cols(const Tensor& dst, const Tensor& a, const Tensor& b) {
  const int64_t N = dst.shape[0];
  const size_t es = dtype_size(dst.dtype);
  const size_t ra = size_t(row_width(a)) * es, rb = size_t(row_width(b)) * es;
  char* d = static_cast<char*>(dst.data);
  const char* pa = static_cast<const char*>(a.data);
  const char* pb = static_cast<const char*>(b.data);
#pragma omp parallel for schedule(static) if (dst.numel() > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(d + size_t(n) * (ra + rb), pa + size_t(n) * ra, ra);
    std::memcpy(d + size_t(n) * (ra + rb) + ra, pb + size_t(n) * rb, rb);
  }
}

void shift_targets(const Tensor& targets, const Tensor& ids, int64_t B, int64_t T) {
  int32_t* tgt = targets.ptr<int32_t>();
  const int32_t* id = ids.ptr<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) tgt[b * T + t] = t + 1 < T ? id[b * T + t + 1] : -1;
}

}  // namespace zaya::ops::cpu
