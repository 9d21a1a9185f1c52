// The dispatch seam for the ops added with it (ops.h "memory", "reductions", "optimizer
// updates"): each validates its arguments (shapes, dtypes, ranges of metadata), then dispatches
// (ops/dispatch.h, which checks a GPU call against ops/gpu/support.h). Their kernels trust the
// arguments and check only what needs the data (index values, on the CPU).
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace zaya::ops {

namespace {

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  ZAYA_ASSERT(a.dtype == b.dtype && a.numel() == b.numel(), "{}: {} {} and {} {} differ", op,
              dtype_name(a.dtype), a.shape_str(), dtype_name(b.dtype), b.shape_str());
}

void check_f32(const char* op, const Tensor& t, int64_t n) {
  ZAYA_ASSERT(t.defined() && t.dtype == DType::F32, "{}: needs a defined F32 tensor, got {}", op,
              dtype_name(t.dtype));
  ZAYA_ASSERT(t.numel() == n, "{}: {} has {} elements, expected {}", op, t.shape_str(), t.numel(),
              n);
}

// A tensor whose rows are its first dimension: returns the row width.
int64_t rows_of(const char* op, const Tensor& t) {
  ZAYA_ASSERT(t.defined() && t.ndim >= 1, "{}: needs a tensor with rows, got {}", op,
              t.shape_str());
  return t.shape[0] ? t.numel() / t.shape[0] : 0;
}

}  // namespace

void fill(const Tensor& t, double value) {
  ZAYA_ASSERT(t.dtype == DType::F32 || t.dtype == DType::F64 || t.dtype == DType::I32,
              "fill: needs F32, F64 or I32, got {}", dtype_name(t.dtype));
  if (t.numel() == 0) return;
  ZAYA_OP_DISPATCH(fill, t, value);
}

void fill_zero(const Tensor& t) {
  ZAYA_ASSERT(t.defined() || t.numel() == 0, "fill_zero: tensor {} has no memory", t.shape_str());
  if (t.numel() == 0) return;
  ZAYA_OP_DISPATCH(fill_zero, t);
}

void zero_where_class(const Tensor& v, const Tensor& choice, int64_t k) {
  const int64_t n = choice.numel();
  check_f32("zero_where_class: v", v, n);
  ZAYA_ASSERT(choice.dtype == DType::I32, "zero_where_class: choice must be I32, got {}",
              dtype_name(choice.dtype));
  ZAYA_OP_DISPATCH(zero_where_class, v, choice, k);
}

void fill_uniform(const Tensor& t, uint64_t seed, uint64_t stream, double a) {
  ZAYA_ASSERT(t.dtype == DType::F32 || t.dtype == DType::BF16, "fill_uniform: F32 or BF16, got {}",
              dtype_name(t.dtype));
  ZAYA_OP_DISPATCH(fill_uniform, t, seed, stream, a);
}

void convert(const Tensor& dst, const Tensor& src) {
  ZAYA_ASSERT(dst.numel() == src.numel(), "convert: {} elements into {}", src.numel(), dst.numel());
  const bool ok = dst.dtype == src.dtype || (dst.dtype == DType::BF16 && src.dtype == DType::F32) ||
                  (dst.dtype == DType::F32 && src.dtype == DType::BF16);
  ZAYA_ASSERT(ok, "convert: {} → {} is not supported", dtype_name(src.dtype),
              dtype_name(dst.dtype));
  ZAYA_OP_DISPATCH(convert, dst, src);
}

void fill_normal(const Tensor& t, uint64_t seed, uint64_t stream, double std) {
  check_f32("fill_normal", t, t.numel());
  ZAYA_OP_DISPATCH(fill_normal, t, seed, stream, std);
}

void copy(const Tensor& dst, const Tensor& src) {
  check_same("copy", dst, src);
  if (src.numel() == 0) return;
  ZAYA_OP_DISPATCH(copy, dst, src);
}

void copy_segments(const Tensor& dst, const Tensor& src, std::span<const CopySegment> segments) {
  ZAYA_ASSERT(dst.dtype == src.dtype, "copy_segments: {} into {}", dtype_name(src.dtype),
              dtype_name(dst.dtype));
  for (const CopySegment& s : segments)
    ZAYA_ASSERT(s.length >= 0 && s.src >= 0 && s.src + s.length <= src.numel() && s.dst >= 0 &&
                    s.dst + s.length <= dst.numel(),
                "copy_segments: [{}, +{}) → [{}, +{}) outside {} → {} elements", s.src, s.length,
                s.dst, s.length, src.numel(), dst.numel());
  if (segments.empty()) return;
  ZAYA_OP_DISPATCH(copy_segments, dst, src, segments);
}

void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& row_ids) {
  const int64_t W = rows_of("gather_rows: dst", dst);
  check_i32(row_ids, dst.shape[0], "gather_rows: row_ids");
  ZAYA_ASSERT(dst.dtype == src.dtype && rows_of("gather_rows: src", src) == W,
              "gather_rows: rows of {} {} from {} {}", dtype_name(dst.dtype), dst.shape_str(),
              dtype_name(src.dtype), src.shape_str());
  if (dst.numel() == 0) return;
  ZAYA_OP_DISPATCH(gather_rows, dst, src, row_ids);
}

void scatter_rows(const Tensor& dst, const Tensor& row_ids, const Tensor& src,
                  const Tensor& weight) {
  const int64_t W = rows_of("scatter_rows: dst", dst);
  check_i32(row_ids, src.ndim ? src.shape[0] : 0, "scatter_rows: row_ids");
  ZAYA_ASSERT(dst.dtype == src.dtype && rows_of("scatter_rows: src", src) == W,
              "scatter_rows: rows of {} {} into {} {}", dtype_name(src.dtype), src.shape_str(),
              dtype_name(dst.dtype), dst.shape_str());
  if (weight.defined()) {
    check_float(dst, weight);
    check_numel(weight, dst.shape[0], "scatter_rows: weight");
  }
  if (src.numel() == 0) return;
  ZAYA_OP_DISPATCH(scatter_rows, dst, row_ids, src, weight);
}

void concat_cols(const Tensor& dst, const Tensor& a, const Tensor& b) {
  const int64_t W = rows_of("concat_cols: dst", dst);
  const int64_t A = rows_of("concat_cols: a", a), Bw = rows_of("concat_cols: b", b);
  ZAYA_ASSERT(a.shape[0] == dst.shape[0] && b.shape[0] == dst.shape[0] && A + Bw == W &&
                  a.dtype == dst.dtype && b.dtype == dst.dtype,
              "concat_cols: {} ‖ {} into {}", a.shape_str(), b.shape_str(), dst.shape_str());
  if (dst.numel() == 0) return;
  ZAYA_OP_DISPATCH(concat_cols, dst, a, b);
}

void shift_targets(const Tensor& targets, const Tensor& ids, int64_t B, int64_t T) {
  check_i32(ids, B * T, "shift_targets: ids");
  check_i32(targets, B * T, "shift_targets: targets");
  ZAYA_ASSERT(targets.data != ids.data, "shift_targets: targets must not alias ids");
  if (B * T == 0) return;
  ZAYA_OP_DISPATCH(shift_targets, targets, ids, B, T);
}

double sum(const Tensor& t) {
  check_float(t);
  if (t.numel() == 0) return 0.0;
  ZAYA_OP_DISPATCH(sum, t);
}

void sum_to(const Tensor& out, const Tensor& t) {
  check_float(t);
  ZAYA_ASSERT(out.dtype == DType::F64 && out.numel() == 1, "sum_to: out F64 [1], got {} {}",
              dtype_name(out.dtype), out.shape_str());
  ZAYA_OP_DISPATCH(sum_to, out, t);
}

double sum_squares(const Tensor& t) {
  check_float(t);
  if (t.numel() == 0) return 0.0;
  ZAYA_OP_DISPATCH(sum_squares, t);
}

int64_t count_scored(const Tensor& target) {
  check_i32(target, target.numel(), "count_scored: target");
  if (target.numel() == 0) return 0;
  ZAYA_OP_DISPATCH(count_scored, target);
}

void count_classes(const Tensor& counts, const Tensor& choice, int64_t K) {
  ZAYA_ASSERT(counts.dtype == DType::I64 || counts.dtype == DType::F64,
              "count_classes: counts must be I64 or F64, got {}", dtype_name(counts.dtype));
  check_numel(counts, K, "count_classes: counts");
  check_i32(choice, choice.numel(), "count_classes: choice");
  if (choice.numel() == 0) return;
  ZAYA_OP_DISPATCH(count_classes, counts, choice, K);
}

void scale(const Tensor& t, double s) {
  check_float(t);
  if (t.numel() == 0) return;
  ZAYA_OP_DISPATCH(scale, t, s);
}

void silu_mul(const Tensor& act, const Tensor& gu) {
  const int64_t H = rows_of("silu_mul: act", act);
  check_f32("silu_mul: act", act, act.numel());
  check_f32("silu_mul: gu", gu, 2 * act.numel());
  ZAYA_ASSERT(rows_of("silu_mul: gu", gu) == 2 * H, "silu_mul: gu {} for act {}", gu.shape_str(),
              act.shape_str());
  if (act.numel() == 0) return;
  ZAYA_OP_DISPATCH(silu_mul, act, gu);
}

void adamw_update(const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v,
                  const AdamWParams& p) {
  ZAYA_ASSERT(p.step >= 1, "adamw_update: step {} (must be ≥ 1)", p.step);
  const int64_t n = w.numel();
  check_f32("adamw_update: w", w, n);
  check_f32("adamw_update: g", g, n);
  check_f32("adamw_update: m", m, n);
  check_f32("adamw_update: v", v, n);
  if (n == 0) return;
  ZAYA_OP_DISPATCH(adamw_update, w, g, m, v, p);
}

void balance_update(const Tensor& bias, const Tensor& m, const Tensor& v, const Tensor& counts,
                    const BalanceParams& p) {
  ZAYA_ASSERT(p.step >= 1, "balance_update: step {} (must be ≥ 1)", p.step);
  const int64_t n = bias.numel();
  ZAYA_ASSERT(n > 0, "balance_update: no experts");
  check_f32("balance_update: bias", bias, n);
  check_f32("balance_update: m", m, n);
  check_f32("balance_update: v", v, n);
  ZAYA_ASSERT(counts.dtype == DType::F64 && counts.numel() >= n,
              "balance_update: counts must be F64 with ≥ {} classes, got {} {}", n,
              dtype_name(counts.dtype), counts.shape_str());
  ZAYA_OP_DISPATCH(balance_update, bias, m, v, counts, p);
}

void muon_momentum(const Tensor& buf, const Tensor& scratch, const Tensor& g, double momentum,
                   bool nesterov) {
  const int64_t n = buf.numel();
  check_f32("muon_momentum: buf", buf, n);
  check_f32("muon_momentum: scratch", scratch, n);
  check_f32("muon_momentum: g", g, n);
  if (n == 0) return;
  ZAYA_OP_DISPATCH(muon_momentum, buf, scratch, g, momentum, nesterov);
}

void muon_apply(const Tensor& w, const Tensor& u, double lr, double decay, double scale) {
  const int64_t n = w.numel();
  check_f32("muon_apply: w", w, n);
  check_f32("muon_apply: u", u, n);
  if (n == 0) return;
  ZAYA_OP_DISPATCH(muon_apply, w, u, lr, decay, scale);
}

}  // namespace zaya::ops
