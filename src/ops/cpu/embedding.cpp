// Embedding lookup on the CPU (docs/model.md §6, §8.4): out[n] = table[ids[n]]; backward scatters
// dout into dtable except row skip_row (no gradient to the pad row, docs/model.md §0.2.6). The
// scatter groups tokens by id and sums each id's rows in double in token order: parallel over ids,
// no write conflicts, thread-count independent bits. A BF16 table (inference: the tied embedding
// stays bf16) gathers into an F32 out, widening the rows (exact); an F16 or block-quantized table
// (a GGUF model's) likewise, each row dequantized by quant::dequantize_row (exact: the values the
// weight stands for).
#include <algorithm>
#include <vector>

#include "ops/backend.h"
#include "ops/check.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/parallel.h"
#include "quant/formats.h"

namespace zaya::ops::cpu {

namespace {

void check_ids(const char* op, const int32_t* ids, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    ZAYA_ASSERT(ids[n] >= 0 && ids[n] < V, "{}: ids[{}] = {} outside the vocabulary [0, {})", op, n,
                ids[n], V);
}

template <class T>
void gather(T* out_ND, const int32_t* ids_N, const T* table_VD, int64_t N, int64_t D) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) std::copy_n(table_VD + int64_t(ids_N[n]) * D, D, out_ND + n * D);
}

void gather_bf16(float* out_ND, const int32_t* ids_N, const uint16_t* table_VD, int64_t N,
                 int64_t D) {
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n) widen_bf16(out_ND + n * D, table_VD + int64_t(ids_N[n]) * D, D);
}

// Rows of an F16 or block-type table, dequantized.
void gather_quant(float* out_ND, const int32_t* ids_N, const void* table_VD, DType t, int64_t N,
                  int64_t D) {
  const size_t row = dtype_bytes(t, D);
  const uint8_t* table = static_cast<const uint8_t*>(table_VD);
#pragma omp parallel for schedule(static) if (N * D > kParallelMin)
  for (int64_t n = 0; n < N; ++n)
    quant::dequantize_row(t, table + size_t(ids_N[n]) * row, out_ND + n * D, D);
}

// order: token indices grouped by id; group g is order[starts[g] … starts[g+1]).
template <class T>
void scatter_groups(T* dtable_VD, const T* dout_ND, const int32_t* ids_N,
                    const std::vector<int64_t>& order, const std::vector<int64_t>& starts,
                    int64_t D) {
  const int64_t groups = int64_t(starts.size()) - 1;
#pragma omp parallel if (int64_t(order.size()) * D > kParallelMin)
  {
    std::vector<double> acc(D);
#pragma omp for schedule(dynamic, 16)
    for (int64_t g = 0; g < groups; ++g) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = starts[g]; i < starts[g + 1]; ++i) {
        const T* d = dout_ND + order[i] * D;
        for (int64_t j = 0; j < D; ++j) acc[j] += double(d[j]);
      }
      T* row = dtable_VD + int64_t(ids_N[order[starts[g]]]) * D;
      for (int64_t j = 0; j < D; ++j) row[j] += T(acc[j]);
    }
  }
}

}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table) {
  const int64_t V = table.size(0), D = table.size(1), N = ids.numel();
  const int32_t* ids_N = ids.ptr<int32_t>();
  check_ids("embedding_forward", ids_N, N, V);
  if (table.dtype == DType::BF16) {
    gather_bf16(out.ptr<float>(), ids_N, table.ptr<uint16_t>(), N, D);
    return;
  }
  if (table.dtype == DType::F16 || dtype_is_quantized(table.dtype)) {
    gather_quant(out.ptr<float>(), ids_N, table.data, table.dtype, N, D);
    return;
  }
  ZAYA_DISPATCH_FLOAT(table.dtype, gather(out.ptr<scalar_t>(), ids_N, table.ptr<scalar_t>(), N, D));
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t skip_row) {
  const int64_t V = dtable.size(0), D = dtable.size(1), N = ids.numel();
  const int32_t* ids_N = ids.ptr<int32_t>();
  check_ids("embedding_backward", ids_N, N, V);
  // Token indices grouped by id (stable: token order within an id), the skipped row left out.
  std::vector<int64_t> order;
  order.reserve(N);
  for (int64_t n = 0; n < N; ++n)
    if (ids_N[n] != skip_row) order.push_back(n);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ids_N[a] < ids_N[b]; });
  std::vector<int64_t> starts;  // first position in `order` of each distinct id, plus the end
  for (size_t i = 0; i < order.size(); ++i)
    if (i == 0 || ids_N[order[i]] != ids_N[order[i - 1]]) starts.push_back(int64_t(i));
  starts.push_back(int64_t(order.size()));
  ZAYA_DISPATCH_FLOAT(dtable.dtype, scatter_groups(dtable.ptr<scalar_t>(), dout.ptr<scalar_t>(),
                                                   ids_N, order, starts, D));
}

}  // namespace zaya::ops::cpu
