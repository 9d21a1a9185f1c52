// The dispatch seam: the only code that knows devices. Every op of ops/ops.h checks once that all
// its defined tensors live on one device, then an exhaustive `switch` on that device (this file
// compiles with -Werror=switch, so a new Device is an error until every op handles it) calls the
// backend: ops::cpu::x (ops/cpu/) or ops::gpu::x (ops/gpu/, or no_gpu.cpp's clear error). Shape
// and dtype checks that need no data are done here for the ops added with the seam; the older
// kernels still validate in their ops/cpu entry points.
#include "ops/ops.h"

#include "ops/backend.h"
#include "ops/check.h"

namespace zaya::ops {

namespace {

// The device of a call: that of its defined tensors, which must all agree (Cpu when none is
// defined). Mixed devices are a caller bug, so this asserts with the op's name.
template <class... Ts>
Device call_device(const char* op, const Ts&... ts) {
  const Tensor* first = nullptr;
  auto visit = [&](const Tensor& t) {
    if (!t.defined()) return;
    if (!first) {
      first = &t;
      return;
    }
    ZAYA_ASSERT(t.device == first->device, "{}: tensors on different devices ({} and {})", op,
                device_name(first->device), device_name(t.device));
  };
  (visit(ts), ...);
  return first ? first->device : Device::Cpu;
}

}  // namespace

#define ZAYA_UNPAREN(...) __VA_ARGS__
// Checks the devices of TENSORS (a parenthesised list), then calls the backend's NAME(ARGS...).
#define ZAYA_OP_DISPATCH(name, tensors, ...)          \
  switch (call_device(#name, ZAYA_UNPAREN tensors)) { \
    case Device::Cpu:                                 \
      return cpu::name(__VA_ARGS__);                  \
    case Device::Gpu:                                 \
      return gpu::name(__VA_ARGS__);                  \
  }                                                   \
  ::zaya::assert_fail(__FILE__, __LINE__, #name, "unknown device")

void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  ZAYA_OP_DISPATCH(linear_forward, (y, x, w, b), y, x, w, b, accumulate);
}

void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                     const Tensor& x, const Tensor& w, bool accumulate_dx) {
  ZAYA_OP_DISPATCH(linear_backward, (dx, dw, db, dy, x, w), dx, dw, db, dy, x, w, accumulate_dx);
}

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table) {
  ZAYA_OP_DISPATCH(embedding_forward, (out, ids, table), out, ids, table);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t skip_row) {
  ZAYA_OP_DISPATCH(embedding_backward, (dtable, dout, ids), dtable, dout, ids, skip_row);
}

void rmsnorm_forward(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  ZAYA_OP_DISPATCH(rmsnorm_forward, (y, rstd, x, w), y, rstd, x, w, eps);
}

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate_dx) {
  ZAYA_OP_DISPATCH(rmsnorm_backward, (dx, dw, dy, x, w, rstd), dx, dw, dy, x, w, rstd,
                   accumulate_dx);
}

void residual_merge_forward(const Tensor& h, const Tensor& o, const Tensor& hp, const Tensor& ao,
                            const Tensor& bo, const Tensor& ar, const Tensor& br) {
  ZAYA_OP_DISPATCH(residual_merge_forward, (h, o, hp, ao, bo, ar, br), h, o, hp, ao, bo, ar, br);
}

void residual_merge_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                             const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                             const Tensor& dh, const Tensor& o, const Tensor& hp, const Tensor& ao,
                             const Tensor& bo, const Tensor& ar, const Tensor& br) {
  ZAYA_OP_DISPATCH(residual_merge_backward,
                   (do_, dhp, dao, dbo, dar, dbr, dh, o, hp, ao, bo, ar, br), do_, dhp, dao, dbo,
                   dar, dbr, dh, o, hp, ao, bo, ar, br);
}

void merge_rmsnorm_forward(const Tensor& h, const Tensor& x, const Tensor& rstd, const Tensor& o,
                           const Tensor& hp, const Tensor& ao, const Tensor& bo, const Tensor& ar,
                           const Tensor& br, const Tensor& w, float eps) {
  ZAYA_OP_DISPATCH(merge_rmsnorm_forward, (h, x, rstd, o, hp, ao, bo, ar, br, w), h, x, rstd, o, hp,
                   ao, bo, ar, br, w, eps);
}

void merge_rmsnorm_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                            const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                            const Tensor& dw, const Tensor& dh, const Tensor& dx, const Tensor& h,
                            const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                            const Tensor& ar, const Tensor& br, const Tensor& w,
                            const Tensor& rstd) {
  ZAYA_OP_DISPATCH(merge_rmsnorm_backward,
                   (do_, dhp, dao, dbo, dar, dbr, dw, dh, dx, h, o, hp, ao, bo, ar, br, w, rstd),
                   do_, dhp, dao, dbo, dar, dbr, dw, dh, dx, h, o, hp, ao, bo, ar, br, w, rstd);
}

void cca_conv_forward(const Tensor& z, const Tensor& y, const Tensor& u, const Tensor& w0,
                      const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  ZAYA_OP_DISPATCH(cca_conv_forward, (z, y, u, w0, b0, w1, b1), z, y, u, w0, b0, w1, b1);
}

void cca_conv_backward(const Tensor& du, const Tensor& dw0, const Tensor& db0, const Tensor& dw1,
                       const Tensor& db1, const Tensor& dz, const Tensor& u, const Tensor& y,
                       const Tensor& w0, const Tensor& w1) {
  ZAYA_OP_DISPATCH(cca_conv_backward, (du, dw0, db0, dw1, db1, dz, u, y, w0, w1), du, dw0, db0, dw1,
                   db1, dz, u, y, w0, w1);
}

void qk_mean_forward(const Tensor& Q, const Tensor& K, const Tensor& z, const Tensor& u) {
  ZAYA_OP_DISPATCH(qk_mean_forward, (Q, K, z, u), Q, K, z, u);
}

void qk_mean_backward(const Tensor& dz, const Tensor& du, const Tensor& dQ, const Tensor& dK) {
  ZAYA_OP_DISPATCH(qk_mean_backward, (dz, du, dQ, dK), dz, du, dQ, dK);
}

void value_shift_forward(const Tensor& v, const Tensor& p) {
  ZAYA_OP_DISPATCH(value_shift_forward, (v, p), v, p);
}

void value_shift_backward(const Tensor& dp, const Tensor& dv) {
  ZAYA_OP_DISPATCH(value_shift_backward, (dp, dv), dp, dv);
}

void l2norm_scale_forward(const Tensor& y, const Tensor& norm, const Tensor& x, const Tensor& temp,
                          float floor) {
  ZAYA_OP_DISPATCH(l2norm_scale_forward, (y, norm, x, temp), y, norm, x, temp, floor);
}

void l2norm_scale_backward(const Tensor& dx, const Tensor& dtemp, const Tensor& dy, const Tensor& x,
                           const Tensor& norm, const Tensor& temp, float floor) {
  ZAYA_OP_DISPATCH(l2norm_scale_backward, (dx, dtemp, dy, x, norm, temp), dx, dtemp, dy, x, norm,
                   temp, floor);
}

void rope_tables(const Tensor& cos, const Tensor& sin, int64_t pos0, double theta, int64_t r) {
  ZAYA_OP_DISPATCH(rope_tables, (cos, sin), cos, sin, pos0, theta, r);
}

void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  ZAYA_OP_DISPATCH(rope_forward, (x, cos, sin), x, cos, sin);
}

void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin) {
  ZAYA_OP_DISPATCH(rope_backward, (dx, cos, sin), dx, cos, sin);
}

void attention_forward(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v) {
  ZAYA_OP_DISPATCH(attention_forward, (o, lse, q, k, v), o, lse, q, k, v);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& do_,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse) {
  ZAYA_OP_DISPATCH(attention_backward, (dq, dk, dv, do_, q, k, v, o, lse), dq, dk, dv, do_, q, k, v,
                   o, lse);
}

void gelu_forward(const Tensor& y, const Tensor& x) {
  ZAYA_OP_DISPATCH(gelu_forward, (y, x), y, x);
}

void gelu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x) {
  ZAYA_OP_DISPATCH(gelu_backward, (dx, dy, x), dx, dy, x);
}

void eda_forward(const Tensor& r, const Tensor& gamma, const Tensor& rprev) {
  ZAYA_OP_DISPATCH(eda_forward, (r, gamma, rprev), r, gamma, rprev);
}

void eda_backward(const Tensor& drprev, const Tensor& dgamma, const Tensor& dr, const Tensor& rprev,
                  const Tensor& gamma) {
  ZAYA_OP_DISPATCH(eda_backward, (drprev, dgamma, dr, rprev, gamma), drprev, dgamma, dr, rprev,
                   gamma);
}

void router_select_forward(const Tensor& probs, const Tensor& choice, const Tensor& weight,
                           const Tensor& logits, const Tensor& biases) {
  ZAYA_OP_DISPATCH(router_select_forward, (probs, choice, weight, logits, biases), probs, choice,
                   weight, logits, biases);
}

void router_select_backward(const Tensor& dlogits, const Tensor& dweight, const Tensor& probs,
                            const Tensor& choice) {
  ZAYA_OP_DISPATCH(router_select_backward, (dlogits, dweight, probs, choice), dlogits, dweight,
                   probs, choice);
}

void moe_forward(const Tensor& out, const Tensor& f, const Tensor& gu, const Tensor& act,
                 const Tensor& x, const Tensor& choice, const Tensor& weight, const Tensor& w1,
                 const Tensor& w2) {
  ZAYA_OP_DISPATCH(moe_forward, (out, f, gu, act, x, choice, weight, w1, w2), out, f, gu, act, x,
                   choice, weight, w1, w2);
}

void moe_backward(const Tensor& dx, const Tensor& dw1, const Tensor& dw2, const Tensor& dweight,
                  const Tensor& dout, const Tensor& x, const Tensor& choice, const Tensor& weight,
                  const Tensor& w1, const Tensor& w2, const Tensor& f, const Tensor& gu,
                  const Tensor& act) {
  ZAYA_OP_DISPATCH(moe_backward,
                   (dx, dw1, dw2, dweight, dout, x, choice, weight, w1, w2, f, gu, act), dx, dw1,
                   dw2, dweight, dout, x, choice, weight, w1, w2, f, gu, act);
}

void xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                  const Tensor& target) {
  ZAYA_OP_DISPATCH(xent_forward, (loss, lse, logits, target), loss, lse, logits, target);
}

void xent_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                   const Tensor& target, double scale) {
  ZAYA_OP_DISPATCH(xent_backward, (dlogits, logits, lse, target), dlogits, logits, lse, target,
                   scale);
}

void cca_conv_step_forward(const Tensor& z, const Tensor& state, const Tensor& u, const Tensor& w0,
                           const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  ZAYA_OP_DISPATCH(cca_conv_step_forward, (z, state, u, w0, b0, w1, b1), z, state, u, w0, b0, w1,
                   b1);
}

void attention_cached_forward(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v) {
  ZAYA_OP_DISPATCH(attention_cached_forward, (o, q, k, v), o, q, k, v);
}

void newton_schulz(const Tensor& out, const Tensor& g, int steps, bool symmetric) {
  ZAYA_OP_DISPATCH(newton_schulz, (out, g), out, g, steps, symmetric);
}
// ---------------------------------------------------------------- ops added with the seam
// These validate here (shapes, dtypes, ranges of metadata); their kernels trust the arguments
// and check only what needs the data (index values).

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
  ZAYA_OP_DISPATCH(fill, (t), t, value);
}

void fill_zero(const Tensor& t) {
  ZAYA_ASSERT(t.defined() || t.numel() == 0, "fill_zero: tensor {} has no memory", t.shape_str());
  if (t.numel() == 0) return;
  ZAYA_OP_DISPATCH(fill_zero, (t), t);
}

void zero_where_class(const Tensor& v, const Tensor& choice, int64_t k) {
  const int64_t n = choice.numel();
  check_f32("zero_where_class: v", v, n);
  ZAYA_ASSERT(choice.dtype == DType::I32, "zero_where_class: choice must be I32, got {}",
              dtype_name(choice.dtype));
  ZAYA_OP_DISPATCH(zero_where_class, (v, choice), v, choice, k);
}

void fill_uniform(const Tensor& t, uint64_t seed, uint64_t stream, double a) {
  ZAYA_ASSERT(t.dtype == DType::F32 || t.dtype == DType::BF16, "fill_uniform: F32 or BF16, got {}",
              dtype_name(t.dtype));
  ZAYA_OP_DISPATCH(fill_uniform, (t), t, seed, stream, a);
}

void convert(const Tensor& dst, const Tensor& src) {
  ZAYA_ASSERT(dst.numel() == src.numel(), "convert: {} elements into {}", src.numel(), dst.numel());
  const bool ok = dst.dtype == src.dtype || (dst.dtype == DType::BF16 && src.dtype == DType::F32) ||
                  (dst.dtype == DType::F32 && src.dtype == DType::BF16);
  ZAYA_ASSERT(ok, "convert: {} → {} is not supported", dtype_name(src.dtype),
              dtype_name(dst.dtype));
  ZAYA_OP_DISPATCH(convert, (dst, src), dst, src);
}

void fill_normal(const Tensor& t, uint64_t seed, uint64_t stream, double std) {
  check_f32("fill_normal", t, t.numel());
  ZAYA_OP_DISPATCH(fill_normal, (t), t, seed, stream, std);
}

void copy(const Tensor& dst, const Tensor& src) {
  check_same("copy", dst, src);
  if (src.numel() == 0) return;
  ZAYA_OP_DISPATCH(copy, (dst, src), dst, src);
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
  ZAYA_OP_DISPATCH(copy_segments, (dst, src), dst, src, segments);
}

void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& row_ids) {
  const int64_t W = rows_of("gather_rows: dst", dst);
  check_i32(row_ids, dst.shape[0], "gather_rows: row_ids");
  ZAYA_ASSERT(dst.dtype == src.dtype && rows_of("gather_rows: src", src) == W,
              "gather_rows: rows of {} {} from {} {}", dtype_name(dst.dtype), dst.shape_str(),
              dtype_name(src.dtype), src.shape_str());
  if (dst.numel() == 0) return;
  ZAYA_OP_DISPATCH(gather_rows, (dst, src, row_ids), dst, src, row_ids);
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
  ZAYA_OP_DISPATCH(scatter_rows, (dst, row_ids, src, weight), dst, row_ids, src, weight);
}

void concat_cols(const Tensor& dst, const Tensor& a, const Tensor& b) {
  const int64_t W = rows_of("concat_cols: dst", dst);
  const int64_t A = rows_of("concat_cols: a", a), Bw = rows_of("concat_cols: b", b);
  ZAYA_ASSERT(a.shape[0] == dst.shape[0] && b.shape[0] == dst.shape[0] && A + Bw == W &&
                  a.dtype == dst.dtype && b.dtype == dst.dtype,
              "concat_cols: {} ‖ {} into {}", a.shape_str(), b.shape_str(), dst.shape_str());
  if (dst.numel() == 0) return;
  ZAYA_OP_DISPATCH(concat_cols, (dst, a, b), dst, a, b);
}

void shift_targets(const Tensor& targets, const Tensor& ids, int64_t B, int64_t T) {
  check_i32(ids, B * T, "shift_targets: ids");
  check_i32(targets, B * T, "shift_targets: targets");
  ZAYA_ASSERT(targets.data != ids.data, "shift_targets: targets must not alias ids");
  if (B * T == 0) return;
  ZAYA_OP_DISPATCH(shift_targets, (targets, ids), targets, ids, B, T);
}

double sum(const Tensor& t) {
  check_float(t);
  if (t.numel() == 0) return 0.0;
  ZAYA_OP_DISPATCH(sum, (t), t);
}

double sum_squares(const Tensor& t) {
  check_float(t);
  if (t.numel() == 0) return 0.0;
  ZAYA_OP_DISPATCH(sum_squares, (t), t);
}

int64_t count_scored(const Tensor& target) {
  check_i32(target, target.numel(), "count_scored: target");
  if (target.numel() == 0) return 0;
  ZAYA_OP_DISPATCH(count_scored, (target), target);
}

void count_classes(const Tensor& counts, const Tensor& choice, int64_t K) {
  ZAYA_ASSERT(counts.dtype == DType::I64 || counts.dtype == DType::F64,
              "count_classes: counts must be I64 or F64, got {}", dtype_name(counts.dtype));
  check_numel(counts, K, "count_classes: counts");
  check_i32(choice, choice.numel(), "count_classes: choice");
  if (choice.numel() == 0) return;
  ZAYA_OP_DISPATCH(count_classes, (counts, choice), counts, choice, K);
}

void scale(const Tensor& t, double s) {
  check_float(t);
  if (t.numel() == 0) return;
  ZAYA_OP_DISPATCH(scale, (t), t, s);
}

void silu_mul(const Tensor& act, const Tensor& gu) {
  const int64_t H = rows_of("silu_mul: act", act);
  check_f32("silu_mul: act", act, act.numel());
  check_f32("silu_mul: gu", gu, 2 * act.numel());
  ZAYA_ASSERT(rows_of("silu_mul: gu", gu) == 2 * H, "silu_mul: gu {} for act {}", gu.shape_str(),
              act.shape_str());
  if (act.numel() == 0) return;
  ZAYA_OP_DISPATCH(silu_mul, (act, gu), act, gu);
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
  ZAYA_OP_DISPATCH(adamw_update, (w, g, m, v), w, g, m, v, p);
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
  ZAYA_OP_DISPATCH(balance_update, (bias, m, v, counts), bias, m, v, counts, p);
}

void muon_momentum(const Tensor& buf, const Tensor& scratch, const Tensor& g, double momentum,
                   bool nesterov) {
  const int64_t n = buf.numel();
  check_f32("muon_momentum: buf", buf, n);
  check_f32("muon_momentum: scratch", scratch, n);
  check_f32("muon_momentum: g", g, n);
  if (n == 0) return;
  ZAYA_OP_DISPATCH(muon_momentum, (buf, scratch, g), buf, scratch, g, momentum, nesterov);
}

void muon_apply(const Tensor& w, const Tensor& u, double lr, double decay, double scale) {
  const int64_t n = w.numel();
  check_f32("muon_apply: w", w, n);
  check_f32("muon_apply: u", u, n);
  if (n == 0) return;
  ZAYA_OP_DISPATCH(muon_apply, (w, u), w, u, lr, decay, scale);
}

}  // namespace zaya::ops
