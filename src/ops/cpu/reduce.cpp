// Reductions, counting and scaling on the CPU (ops.h "reductions"). sum and sum_squares use a
// fixed partition into blocks of 2^16 elements, each summed in double in a fixed order (sum in
// order, sum_squares in kSumLanes interleaved sums), then the partial sums in order: threads only
// pick which blocks they sum, so the bits never depend on the thread count (the partition is the
// one the global gradient norm always used).
#include <algorithm>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"

namespace zaya::ops::cpu {

namespace {

constexpr int64_t kSumBlock = 1 << 16;
// sum_squares' interleaved partial sums per block (element i of a block goes to lane i mod
// kSumLanes, the tail to lane 0, then the lanes in order): a fixed order that vectorises, where one
// running sum waits for each add's latency (several times slower on a whole model's gradient
// norm). sum keeps one running sum (the loss sum: sequential up to one block).
constexpr int64_t kSumLanes = 8;

// Σ term(x[i]) over fixed blocks (see the file comment), each block in Lanes interleaved sums.
template <int64_t Lanes, class T, class Term>
double block_sum(const T* x, int64_t n, Term term) {
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(size_t(blocks), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i1 = std::min(n, (b + 1) * kSumBlock);
    double lane[Lanes] = {};
    int64_t i = b * kSumBlock;
    for (; i + Lanes <= i1; i += Lanes)
      for (int64_t l = 0; l < Lanes; ++l) lane[l] += term(double(x[i + l]));
    for (; i < i1; ++i) lane[0] += term(double(x[i]));
    double s = 0;
    for (double v : lane) s += v;
    part[size_t(b)] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

template <class T>
void scale_n(T* x, int64_t n, T f) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

template <class C>
void count_into(C* counts_K, const int32_t* choice_N, int64_t N, int64_t K) {
  std::vector<int64_t> c(size_t(K), 0);
  for (int64_t n = 0; n < N; ++n) {
    ZAYA_ASSERT(choice_N[n] >= 0 && choice_N[n] < K,
                "count_classes: choice[{}] = {} not in [0, {})", n, choice_N[n], K);
    ++c[size_t(choice_N[n])];
  }
  for (int64_t k = 0; k < K; ++k) counts_K[k] += C(c[size_t(k)]);
}

}  // namespace

double sum(const Tensor& t) {
  double s = 0;
  ZAYA_DISPATCH_FLOAT(t.dtype,
                      s = block_sum<1>(t.ptr<scalar_t>(), t.numel(), [](double v) { return v; }));
  return s;
}

void sum_to(const Tensor& out, const Tensor& t) {
  out.ptr<double>()[0] = t.numel() ? sum(t) : 0.0;
}

double sum_squares(const Tensor& t) {
  double s = 0;
  ZAYA_DISPATCH_FLOAT(t.dtype, s = block_sum<kSumLanes>(t.ptr<scalar_t>(), t.numel(),
                                                        [](double v) { return v * v; }));
  return s;
}

int64_t count_scored(const Tensor& target) {
  const int32_t* t = target.ptr<int32_t>();
  int64_t scored = 0;
  for (int64_t n = 0; n < target.numel(); ++n) scored += t[n] >= 0;
  return scored;
}

void count_classes(const Tensor& counts, const Tensor& choice, int64_t K) {
  const int32_t* c = choice.ptr<int32_t>();
  if (counts.dtype == DType::I64)
    count_into(counts.ptr<int64_t>(), c, choice.numel(), K);
  else
    count_into(counts.ptr<double>(), c, choice.numel(), K);
}

void scale(const Tensor& t, double s) {
  if (t.dtype == DType::F32)
    scale_n(t.ptr<float>(), t.numel(), float(s));
  else
    scale_n(t.ptr<double>(), t.numel(), s);
}

}  // namespace zaya::ops::cpu
