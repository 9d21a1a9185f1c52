// The dispatch seam for the model's ops: each op of ops/ops.h (the "memory", "reductions" and
// "optimizer updates" ones are in ops/ops_memory.cpp) validates its arguments here, once for every
// backend — shapes, dtypes, which tensors are required — then dispatches on the device
// (ops/dispatch.h) to ops::cpu::x (ops/cpu/) or ops::gpu::x (ops/gpu/, or no_gpu.cpp's clear
// error); a GPU call is first checked against what the GPU backend declares it computes
// (ops/gpu/support.h: F32, head sizes, row widths). Backends trust their arguments: they check
// only what needs the data (index values) and their kernels' own launch limits. Empty calls return
// here, before any backend.
#include "ops/ops.h"

#include "ops/check.h"
#include "ops/dispatch.h"

namespace zaya::ops {

namespace {

// A required tensor: defined and with n elements.
void need(const Tensor& t, int64_t n, const char* what) {
  ZAYA_ASSERT(t.defined(), "{}: missing", what);
  check_numel(t, n, what);
}

// Rows of the last dimension: D = t.size(-1), N = numel / D (0 when D is 0).
struct RowsOf {
  int64_t N, D;
};
RowsOf rows_of(const Tensor& t) {
  const int64_t D = t.size(-1);
  return {D ? t.numel() / D : 0, D};
}

// The weights that exist only for inference (F32 x/y/b, no backward): BF16, F16 and the block
// types (docs/quantization.md).
bool is_inference_weight(DType t) {
  return t == DType::BF16 || t == DType::F16 || dtype_is_quantized(t);
}

// A block-type matrix's rows are whole blocks; and only the CPU computes with block types or F16
// (the GPU backend has BF16 and F32 kernels only).
void check_blocks(const char* op, const Tensor& w) {
  if (!dtype_is_quantized(w.dtype) && w.dtype != DType::F16) return;
  ZAYA_ASSERT(w.size(1) % dtype_block_elems(w.dtype) == 0,
              "{}: a {} weight's rows must be whole blocks of {} values, got {} ({})", op,
              dtype_name(w.dtype), dtype_block_elems(w.dtype), w.size(1), w.shape_str());
  if (w.device != Device::Cpu)
    fail(
        "{}: a {} weight on the {} has no kernel: the GPU backend computes F32 and BF16 weights "
        "only; run quantized and F16 models on the CPU (docs/quantization.md)",
        op, dtype_name(w.dtype), device_name(w.device));
}

}  // namespace

// ---------------------------------------------------------------- linear

void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate) {
  ZAYA_ASSERT(w.ndim == 2 && w.size(1) > 0, "linear: w {} must be [O,I] with I > 0", w.shape_str());
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  if (is_inference_weight(w.dtype)) {
    ZAYA_ASSERT(
        x.dtype == DType::F32 && y.dtype == DType::F32 && (!b.defined() || b.dtype == DType::F32),
        "linear: a {} w needs F32 x, y and b, got x {} y {}", dtype_name(w.dtype),
        dtype_name(x.dtype), dtype_name(y.dtype));
    check_blocks("linear", w);
  } else {
    check_float(y, x, w, b);
  }
  ZAYA_ASSERT(x.numel() == N * I && y.numel() == N * O, "linear: x {} w {} y {}", x.shape_str(),
              w.shape_str(), y.shape_str());
  if (b.defined()) ZAYA_ASSERT(b.numel() == O, "linear: bias {}", b.shape_str());
  if (N == 0) return;
  ZAYA_OP_DISPATCH(linear_forward, y, x, w, b, accumulate);
}

void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                     const Tensor& x, const Tensor& w, bool accumulate_dx) {
  ZAYA_ASSERT(!is_inference_weight(w.dtype),
              "linear_backward: a {} w has no backward (inference only)", dtype_name(w.dtype));
  ZAYA_ASSERT(w.ndim == 2 && w.size(1) > 0, "linear_backward: w {} must be [O,I] with I > 0",
              w.shape_str());
  const int64_t O = w.size(0), I = w.size(1), N = x.numel() / I;
  check_float(dy, x, w, dx, dw, db);
  ZAYA_ASSERT(dy.numel() == N * O, "linear_backward: dy {} for x {} w {}", dy.shape_str(),
              x.shape_str(), w.shape_str());
  if (N == 0) return;
  if (dx.defined()) ZAYA_ASSERT(dx.numel() == N * I, "linear_backward: dx {}", dx.shape_str());
  if (dw.defined()) ZAYA_ASSERT(dw.numel() == O * I, "linear_backward: dw {}", dw.shape_str());
  if (db.defined()) ZAYA_ASSERT(db.numel() == O, "linear_backward: db {}", db.shape_str());
  ZAYA_OP_DISPATCH(linear_backward, dx, dw, db, dy, x, w, accumulate_dx);
}

// ---------------------------------------------------------------- embedding

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table) {
  ZAYA_ASSERT(out.defined() && ids.defined() && table.defined(),
              "embedding_forward: out, ids and table are required");
  ZAYA_ASSERT(table.ndim == 2, "embedding_forward: table must be [V,D], got {}", table.shape_str());
  ZAYA_ASSERT(ids.dtype == DType::I32, "embedding_forward: ids must be I32, got {}",
              dtype_name(ids.dtype));
  const int64_t D = table.size(1), N = ids.numel();
  check_numel(out, N * D, "embedding_forward: out");
  if (is_inference_weight(table.dtype)) {
    ZAYA_ASSERT(out.dtype == DType::F32, "embedding_forward: a {} table needs an F32 out, got {}",
                dtype_name(table.dtype), dtype_name(out.dtype));
    check_blocks("embedding_forward", table);
  } else
    check_float(table, out);
  ZAYA_OP_DISPATCH(embedding_forward, out, ids, table);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t skip_row) {
  ZAYA_ASSERT(dtable.defined() && dout.defined() && ids.defined(),
              "embedding_backward: dtable, dout and ids are required");
  ZAYA_ASSERT(dtable.ndim == 2, "embedding_backward: dtable must be [V,D], got {}",
              dtable.shape_str());
  ZAYA_ASSERT(ids.dtype == DType::I32, "embedding_backward: ids must be I32, got {}",
              dtype_name(ids.dtype));
  const int64_t V = dtable.size(0), D = dtable.size(1), N = ids.numel();
  check_float(dtable, dout);
  check_numel(dout, N * D, "embedding_backward: dout");
  ZAYA_ASSERT(skip_row >= -1 && skip_row < V, "embedding_backward: skip_row {} not in [-1, {})",
              skip_row, V);
  ZAYA_OP_DISPATCH(embedding_backward, dtable, dout, ids, skip_row);
}

// ---------------------------------------------------------------- RMSNorm and the residual merge

void rmsnorm_forward(const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps) {
  const auto [N, D] = rows_of(x);
  check_float(x, y, rstd, w);
  ZAYA_ASSERT(y.defined() && rstd.defined() && w.defined(),
              "rmsnorm_forward: y, rstd and w are required");
  check_numel(y, N * D, "rmsnorm_forward: y");
  check_numel(rstd, N, "rmsnorm_forward: rstd");
  check_numel(w, D, "rmsnorm_forward: w");
  ZAYA_OP_DISPATCH(rmsnorm_forward, y, rstd, x, w, eps);
}

void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate_dx) {
  const auto [N, D] = rows_of(x);
  check_float(x, dx, dw, dy, w, rstd);
  ZAYA_ASSERT(dy.defined() && w.defined() && rstd.defined(),
              "rmsnorm_backward: dy, w and rstd are required");
  check_numel(dy, N * D, "rmsnorm_backward: dy");
  check_numel(w, D, "rmsnorm_backward: w");
  check_numel(rstd, N, "rmsnorm_backward: rstd");
  if (dx.defined()) check_numel(dx, N * D, "rmsnorm_backward: dx");
  if (dw.defined()) check_numel(dw, D, "rmsnorm_backward: dw");
  ZAYA_OP_DISPATCH(rmsnorm_backward, dx, dw, dy, x, w, rstd, accumulate_dx);
}

namespace {

// Shape checks shared by the four merge entry points; returns {N, D} of o.
RowsOf check_merge(const char* op, const Tensor& h, const Tensor& o, const Tensor& hp,
                   const Tensor& ao, const Tensor& bo, const Tensor& ar, const Tensor& br) {
  ZAYA_ASSERT(o.defined() && ao.defined() && bo.defined(), "{}: o, ao and bo are required", op);
  const RowsOf s = rows_of(o);
  check_float(o, h, hp, ao, bo, ar, br);
  ZAYA_ASSERT(hp.defined() == ar.defined() && hp.defined() == br.defined(),
              "{}: hp, ar and br must be all defined or all undefined", op);
  if (h.defined()) check_numel(h, s.N * s.D, op);
  check_numel(ao, s.D, op);
  check_numel(bo, s.D, op);
  if (hp.defined()) {
    check_numel(hp, s.N * s.D, op);
    check_numel(ar, s.D, op);
    check_numel(br, s.D, op);
  }
  return s;
}

// The merge backward's optional outputs: do_/dhp [N,D], the [D] parameter gradients.
void check_merge_grads(const char* op, RowsOf s, const Tensor& o, const Tensor& do_,
                       const Tensor& dhp, std::initializer_list<const Tensor*> params) {
  check_float(o, do_, dhp);
  if (do_.defined()) check_numel(do_, s.N * s.D, op);
  if (dhp.defined()) check_numel(dhp, s.N * s.D, op);
  for (const Tensor* t : params) {
    check_float(o, *t);
    if (t->defined()) check_numel(*t, s.D, op);
  }
}

}  // namespace

void residual_merge_forward(const Tensor& h, const Tensor& o, const Tensor& hp, const Tensor& ao,
                            const Tensor& bo, const Tensor& ar, const Tensor& br) {
  check_merge("residual_merge_forward", h, o, hp, ao, bo, ar, br);
  ZAYA_ASSERT(h.defined(), "residual_merge_forward: h is required");
  ZAYA_OP_DISPATCH(residual_merge_forward, h, o, hp, ao, bo, ar, br);
}

void residual_merge_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                             const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                             const Tensor& dh, const Tensor& o, const Tensor& hp, const Tensor& ao,
                             const Tensor& bo, const Tensor& ar, const Tensor& br) {
  const char* op = "residual_merge_backward";
  const RowsOf s = check_merge(op, dh, o, hp, ao, bo, ar, br);
  ZAYA_ASSERT(dh.defined(), "{}: dh is required", op);
  check_merge_grads(op, s, o, do_, dhp, {&dao, &dbo, &dar, &dbr});
  ZAYA_OP_DISPATCH(residual_merge_backward, do_, dhp, dao, dbo, dar, dbr, dh, o, hp, ao, bo, ar,
                   br);
}

void merge_rmsnorm_forward(const Tensor& h, const Tensor& x, const Tensor& rstd, const Tensor& o,
                           const Tensor& hp, const Tensor& ao, const Tensor& bo, const Tensor& ar,
                           const Tensor& br, const Tensor& w, float eps) {
  const char* op = "merge_rmsnorm_forward";
  const auto [N, D] = check_merge(op, h, o, hp, ao, bo, ar, br);
  ZAYA_ASSERT(h.defined() && x.defined() && rstd.defined() && w.defined(),
              "{}: h, x, rstd and w are required", op);
  check_float(o, x, rstd, w);
  check_numel(x, N * D, op);
  check_numel(rstd, N, op);
  check_numel(w, D, op);
  ZAYA_OP_DISPATCH(merge_rmsnorm_forward, h, x, rstd, o, hp, ao, bo, ar, br, w, eps);
}

void merge_rmsnorm_backward(const Tensor& do_, const Tensor& dhp, const Tensor& dao,
                            const Tensor& dbo, const Tensor& dar, const Tensor& dbr,
                            const Tensor& dw, const Tensor& dh, const Tensor& dx, const Tensor& h,
                            const Tensor& o, const Tensor& hp, const Tensor& ao, const Tensor& bo,
                            const Tensor& ar, const Tensor& br, const Tensor& w,
                            const Tensor& rstd) {
  const char* op = "merge_rmsnorm_backward";
  const RowsOf s = check_merge(op, dh, o, hp, ao, bo, ar, br);
  ZAYA_ASSERT(dh.defined() && dx.defined() && h.defined() && w.defined() && rstd.defined(),
              "{}: dh, dx, h, w and rstd are required", op);
  check_float(o, dx, h, w, rstd);
  check_numel(dx, s.N * s.D, op);
  check_numel(h, s.N * s.D, op);
  check_numel(w, s.D, op);
  check_numel(rstd, s.N, op);
  check_merge_grads(op, s, o, do_, dhp, {&dao, &dbo, &dar, &dbr, &dw});
  ZAYA_OP_DISPATCH(merge_rmsnorm_backward, do_, dhp, dao, dbo, dar, dbr, dw, dh, dx, h, o, hp, ao,
                   bo, ar, br, w, rstd);
}

// ---------------------------------------------------------------- CCA pieces

namespace {

// u[B,T,C], w1[C,d,2] with d | C, w0[C,1,2], b0[C], y[B,T+1,C]; returns {B·T, C} and sets d.
RowsOf check_conv(const char* op, const Tensor& u, const Tensor& y, const Tensor& w0,
                  const Tensor& b0, const Tensor& w1) {
  ZAYA_ASSERT(u.ndim == 3, "{}: u must be [B,T,C], got {}", op, u.shape_str());
  const int64_t B = u.size(0), T = u.size(1), C = u.size(2);
  ZAYA_ASSERT(
      w1.ndim == 3 && w1.size(0) == C && w1.size(2) == 2 && w1.size(1) > 0 && C % w1.size(1) == 0,
      "{}: w1 {} for C = {} (need [C,d,2] with d | C)", op, w1.shape_str(), C);
  need(w0, 2 * C, "cca_conv w0 [C,1,2]");
  need(b0, C, "cca_conv b0 [C]");
  need(y, B * (T + 1) * C, "cca_conv y [B,T+1,C]");
  return {B * T, C};
}

}  // namespace

void cca_conv_forward(const Tensor& z, const Tensor& y, const Tensor& u, const Tensor& w0,
                      const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  check_float(u, z, y, w0, b0, w1, b1);
  const auto [BT, C] = check_conv("cca_conv_forward", u, y, w0, b0, w1);
  need(z, BT * C, "cca_conv z [B,T,C]");
  need(b1, C, "cca_conv b1 [C]");
  ZAYA_OP_DISPATCH(cca_conv_forward, z, y, u, w0, b0, w1, b1);
}

void cca_conv_backward(const Tensor& du, const Tensor& dw0, const Tensor& db0, const Tensor& dw1,
                       const Tensor& db1, const Tensor& dz, const Tensor& u, const Tensor& y,
                       const Tensor& w0, const Tensor& w1) {
  check_float(u, du, dw0, db0, dw1, db1, dz, y, w0, w1);
  const auto [BT, C] = check_conv("cca_conv_backward", u, y, w0, db0, w1);
  need(du, BT * C, "cca_conv du [B,T,C]");
  need(dz, BT * C, "cca_conv dz [B,T,C]");
  need(dw0, 2 * C, "cca_conv dw0 [C,1,2]");
  need(dw1, w1.numel(), "cca_conv dw1 [C,d,2]");
  need(db1, C, "cca_conv db1 [C]");
  ZAYA_OP_DISPATCH(cca_conv_backward, du, dw0, db0, dw1, db1, dz, u, y, w0, w1);
}

namespace {

// Q[B,T,Hq,d], K[B,T,Hk,d] with Hk | Hq; z and u [B,T,(Hq+Hk)·d].
void check_qk(const char* op, const Tensor& Q, const Tensor& K, const Tensor& z, const Tensor& u) {
  check_float(Q, K, z, u);
  ZAYA_ASSERT(Q.ndim == 4 && K.ndim == 4, "{}: Q {} and K {} must be [B,T,H,d]", op, Q.shape_str(),
              K.shape_str());
  const int64_t B = Q.size(0), T = Q.size(1), Hq = Q.size(2), Hk = K.size(2), d = Q.size(3);
  ZAYA_ASSERT(K.size(0) == B && K.size(1) == T && K.size(3) == d && Hk > 0 && Hq % Hk == 0,
              "{}: Q {} K {} (need equal B, T, d and Hk | Hq)", op, Q.shape_str(), K.shape_str());
  for (const Tensor* t : {&z, &u}) need(*t, B * T * (Hq + Hk) * d, "qk_mean z/u [B,T,(Hq+Hk)·d]");
}

// out and in [B,T,W…] with an even width W per position, not aliasing.
void check_shift(const char* op, const Tensor& out, const Tensor& in) {
  check_float(in, out);
  ZAYA_ASSERT(in.defined() && out.defined() && in.ndim >= 2, "{}: needs [B,T,…], got {}", op,
              in.shape_str());
  const int64_t B = in.size(0), T = in.size(1), W = B * T > 0 ? in.numel() / (B * T) : 0;
  ZAYA_ASSERT(W % 2 == 0, "{}: width {} of {} is odd", op, W, in.shape_str());
  check_numel(out, B * T * W, "value_shift output");
  ZAYA_ASSERT(out.data != in.data, "{}: output must not alias the input", op);
}

// x[B,T,H,d]; y (or dx) like x; norm[B,T,H]; temp[H] when defined.
void check_norm(const char* op, const Tensor& x, const Tensor& y, const Tensor& norm,
                const Tensor& temp) {
  ZAYA_ASSERT(x.ndim == 4, "{}: x must be [B,T,H,d], got {}", op, x.shape_str());
  const int64_t N = x.size(0) * x.size(1), H = x.size(2), d = x.size(3);
  ZAYA_ASSERT(y.defined() && norm.defined(), "{}: missing output or norm", op);
  check_numel(y, N * H * d, "l2norm_scale y/dx [B,T,H,d]");
  check_numel(norm, N * H, "l2norm_scale norm [B,T,H]");
  if (temp.defined()) check_numel(temp, H, "l2norm_scale temp [H]");
}

}  // namespace

void qk_mean_forward(const Tensor& Q, const Tensor& K, const Tensor& z, const Tensor& u) {
  check_qk("qk_mean_forward", Q, K, z, u);
  ZAYA_OP_DISPATCH(qk_mean_forward, Q, K, z, u);
}

void qk_mean_backward(const Tensor& dz, const Tensor& du, const Tensor& dQ, const Tensor& dK) {
  check_qk("qk_mean_backward", dQ, dK, dz, du);
  ZAYA_OP_DISPATCH(qk_mean_backward, dz, du, dQ, dK);
}

void value_shift_forward(const Tensor& v, const Tensor& p) {
  check_shift("value_shift_forward", v, p);
  ZAYA_OP_DISPATCH(value_shift_forward, v, p);
}

void value_shift_backward(const Tensor& dp, const Tensor& dv) {
  check_shift("value_shift_backward", dp, dv);
  ZAYA_OP_DISPATCH(value_shift_backward, dp, dv);
}

void l2norm_scale_forward(const Tensor& y, const Tensor& norm, const Tensor& x, const Tensor& temp,
                          float floor) {
  check_float(x, y, norm, temp);
  check_norm("l2norm_scale_forward", x, y, norm, temp);
  ZAYA_OP_DISPATCH(l2norm_scale_forward, y, norm, x, temp, floor);
}

void l2norm_scale_backward(const Tensor& dx, const Tensor& dtemp, const Tensor& dy, const Tensor& x,
                           const Tensor& norm, const Tensor& temp, float floor) {
  check_float(x, dx, dtemp, dy, norm, temp);
  check_norm("l2norm_scale_backward", x, dx, norm, temp);
  need(dy, x.numel(), "l2norm_scale dy [B,T,H,d]");
  // dtemp may be left undefined (not needed); it must not be given without temp.
  ZAYA_ASSERT(!dtemp.defined() || temp.defined(), "l2norm_scale_backward: dtemp without temp");
  if (dtemp.defined()) check_numel(dtemp, x.size(2), "l2norm_scale dtemp [H]");
  ZAYA_OP_DISPATCH(l2norm_scale_backward, dx, dtemp, dy, x, norm, temp, floor);
}

void rope_tables(const Tensor& cos, const Tensor& sin, int64_t pos0, double theta, int64_t r) {
  ZAYA_ASSERT(cos.defined() && sin.defined() && cos.dtype == DType::F32 && sin.dtype == DType::F32,
              "rope_tables: cos/sin must be F32 (fp32 RoPE, docs/model.md §0.2.7), got {} / {}",
              dtype_name(cos.dtype), dtype_name(sin.dtype));
  ZAYA_ASSERT(r > 0 && r % 2 == 0 && pos0 >= 0, "rope_tables: r = {} (even, > 0), pos0 = {}", r,
              pos0);
  ZAYA_ASSERT(cos.ndim == 2 && cos.size(1) == r / 2 && sin.ndim == 2 &&
                  sin.size(0) == cos.size(0) && sin.size(1) == r / 2,
              "rope_tables: cos {} sin {} for r = {} (need [T, r/2])", cos.shape_str(),
              sin.shape_str(), r);
  ZAYA_OP_DISPATCH(rope_tables, cos, sin, pos0, theta, r);
}

namespace {

// x[B,T,H,d] F32/F64, tables F32 [T, r/2] with r ≤ d.
void check_rope(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin) {
  ZAYA_ASSERT(x.defined() && (x.dtype == DType::F32 || x.dtype == DType::F64),
              "{}: x must be F32/F64, got {}", op, dtype_name(x.dtype));
  ZAYA_ASSERT(cos.defined() && sin.defined() && cos.dtype == DType::F32 && sin.dtype == DType::F32,
              "{}: tables must be F32 (fp32 RoPE, docs/model.md §0.2.7)", op);
  ZAYA_ASSERT(x.ndim == 4, "{}: x must be [B,T,H,d], got {}", op, x.shape_str());
  const int64_t T = x.size(1), d = x.size(3);
  ZAYA_ASSERT(cos.ndim == 2 && cos.size(0) == T && sin.ndim == 2 && sin.size(0) == T &&
                  sin.size(1) == cos.size(1) && 2 * cos.size(1) <= d,
              "{}: x {} with tables cos {} sin {} (need [T, r/2], r ≤ d)", op, x.shape_str(),
              cos.shape_str(), sin.shape_str());
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_rope("rope_forward", x, cos, sin);
  ZAYA_OP_DISPATCH(rope_forward, x, cos, sin);
}

void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin) {
  check_rope("rope_backward", dx, cos, sin);
  ZAYA_OP_DISPATCH(rope_backward, dx, cos, sin);
}

// ---------------------------------------------------------------- attention

namespace {

// q[B,T,Hq,d], k and v [B,T,Hk,d] with Hk | Hq; returns B·Hq·T (the lse size).
int64_t check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  ZAYA_ASSERT(q.ndim == 4 && k.ndim == 4 && v.ndim == 4, "{}: q {} k {} v {} must be [B,T,H,d]", op,
              q.shape_str(), k.shape_str(), v.shape_str());
  const int64_t B = q.size(0), T = q.size(1), Hq = q.size(2), Hk = k.size(2);
  ZAYA_ASSERT(k.size(0) == B && k.size(1) == T && k.size(3) == q.size(3) && Hk > 0 && Hq % Hk == 0,
              "{}: q {} k {}", op, q.shape_str(), k.shape_str());
  for (int i = 0; i < 4; ++i)
    ZAYA_ASSERT(v.size(i) == k.size(i), "{}: v {} k {}", op, v.shape_str(), k.shape_str());
  return B * Hq * T;
}

}  // namespace

void attention_forward(const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window) {
  check_float(q, k, v, o, lse);
  const int64_t rows = check_attention("attention_forward", q, k, v);
  ZAYA_ASSERT(window >= 0, "attention_forward: window {} < 0", window);
  check_numel(o, q.numel(), "attention_forward: o");
  check_numel(lse, rows, "attention_forward: lse");
  if (q.numel() == 0) return;
  ZAYA_OP_DISPATCH(attention_forward, o, lse, q, k, v, window);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& do_,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, int64_t window) {
  check_float(q, k, v, o, lse, do_, dq, dk, dv);
  const int64_t rows = check_attention("attention_backward", q, k, v);
  ZAYA_ASSERT(window >= 0, "attention_backward: window {} < 0", window);
  check_numel(o, q.numel(), "attention_backward: o");
  check_numel(do_, q.numel(), "attention_backward: do");
  check_numel(dq, q.numel(), "attention_backward: dq");
  check_numel(dk, k.numel(), "attention_backward: dk");
  check_numel(dv, v.numel(), "attention_backward: dv");
  check_numel(lse, rows, "attention_backward: lse");
  if (q.numel() == 0) return;
  ZAYA_OP_DISPATCH(attention_backward, dq, dk, dv, do_, q, k, v, o, lse, window);
}

// ---------------------------------------------------------------- router pieces

void gelu_forward(const Tensor& y, const Tensor& x) {
  check_float(x, y);
  ZAYA_ASSERT(y.defined(), "gelu_forward: y is required");
  check_numel(y, x.numel(), "gelu_forward: y");
  ZAYA_OP_DISPATCH(gelu_forward, y, x);
}

void gelu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x) {
  check_float(x, dx, dy);
  ZAYA_ASSERT(dx.defined() && dy.defined(), "gelu_backward: dx and dy are required");
  check_numel(dx, x.numel(), "gelu_backward: dx");
  check_numel(dy, x.numel(), "gelu_backward: dy");
  ZAYA_OP_DISPATCH(gelu_backward, dx, dy, x);
}

void eda_forward(const Tensor& r, const Tensor& gamma, const Tensor& rprev) {
  ZAYA_ASSERT(r.defined() && gamma.defined() && rprev.defined(),
              "eda_forward: r, gamma and rprev are required");
  const auto [N, R] = rows_of(r);
  check_float(r, gamma, rprev);
  check_numel(gamma, R, "eda_forward: gamma");
  check_numel(rprev, N * R, "eda_forward: rprev");
  ZAYA_OP_DISPATCH(eda_forward, r, gamma, rprev);
}

void eda_backward(const Tensor& drprev, const Tensor& dgamma, const Tensor& dr, const Tensor& rprev,
                  const Tensor& gamma) {
  ZAYA_ASSERT(dr.defined() && rprev.defined() && gamma.defined(),
              "eda_backward: dr, rprev and gamma are required");
  const auto [N, R] = rows_of(dr);
  check_float(dr, drprev, dgamma, rprev, gamma);
  check_numel(rprev, N * R, "eda_backward: rprev");
  check_numel(gamma, R, "eda_backward: gamma");
  if (drprev.defined()) check_numel(drprev, N * R, "eda_backward: drprev");
  if (dgamma.defined()) check_numel(dgamma, R, "eda_backward: dgamma");
  ZAYA_OP_DISPATCH(eda_backward, drprev, dgamma, dr, rprev, gamma);
}

void router_select_forward(const Tensor& probs, const Tensor& choice, const Tensor& weight,
                           const Tensor& logits, const Tensor& biases) {
  const auto [N, K] = rows_of(logits);
  check_float(logits, probs, weight, biases);
  ZAYA_ASSERT(probs.defined() && weight.defined() && biases.defined(),
              "router_select_forward: probs, weight and biases are required");
  ZAYA_ASSERT(K > 0, "router_select_forward: no classes in logits {}", logits.shape_str());
  check_numel(probs, N * K, "router_select_forward: probs");
  check_numel(weight, N, "router_select_forward: weight");
  check_numel(biases, K, "router_select_forward: biases");
  check_i32(choice, N, "router_select_forward: choice");
  ZAYA_OP_DISPATCH(router_select_forward, probs, choice, weight, logits, biases);
}

void router_select_backward(const Tensor& dlogits, const Tensor& dweight, const Tensor& probs,
                            const Tensor& choice) {
  const auto [N, K] = rows_of(probs);
  check_float(probs, dlogits, dweight);
  check_numel(dlogits, N * K, "router_select_backward: dlogits");
  check_numel(dweight, N, "router_select_backward: dweight");
  check_i32(choice, N, "router_select_backward: choice");
  ZAYA_OP_DISPATCH(router_select_backward, dlogits, dweight, probs, choice);
}

// ---------------------------------------------------------------- MoE dispatch

namespace {

// x[N,D], choice I32 [N], weight[N], w1[E,F,D], w2[E,D,F/2]; returns {N·D, N·F}.
RowsOf check_moe(const char* op, const Tensor& x, const Tensor& choice, const Tensor& weight,
                 const Tensor& w1, const Tensor& w2) {
  ZAYA_ASSERT(w1.ndim == 3 && w2.ndim == 3, "{}: w1 {} and w2 {} must be [E,F,D] and [E,D,F/2]", op,
              w1.shape_str(), w2.shape_str());
  const int64_t E = w1.size(0), F = w1.size(1), D = w1.size(2), N = choice.numel();
  ZAYA_ASSERT(
      D > 0 && F > 0 && F % 2 == 0 && w2.size(0) == E && w2.size(1) == D && w2.size(2) == F / 2,
      "{}: w1 {} and w2 {} disagree (want w1 [E,F,D], w2 [E,D,F/2], D > 0, F even > 0)", op,
      w1.shape_str(), w2.shape_str());
  ZAYA_ASSERT(choice.dtype == DType::I32, "{}: choice must be I32, got {}", op,
              dtype_name(choice.dtype));
  ZAYA_ASSERT(x.numel() == N * D, "{}: x {} for {} choices and D = {}", op, x.shape_str(), N, D);
  check_numel(weight, N, "moe: weight");
  return {N * D, N * F};
}

// order I32 [N] on x's device (checked by the dispatch), offsets I32 [E+2] in host memory.
void check_grouping(const char* op, const Tensor& order, const Tensor& offsets,
                    const Tensor& choice, const Tensor& w1) {
  ZAYA_ASSERT(order.defined() && order.dtype == DType::I32 && order.numel() == choice.numel(),
              "{}: order must be I32 [{}]", op, choice.numel());
  ZAYA_ASSERT(offsets.defined() && offsets.dtype == DType::I32 &&
                  offsets.numel() == w1.size(0) + 2 && offsets.device == Device::Cpu,
              "{}: offsets must be I32 [{}] in host memory", op, w1.size(0) + 2);
}

}  // namespace

void moe_forward(const Tensor& out, const Tensor& f, const Tensor& gu, const Tensor& act,
                 const Tensor& x, const Tensor& choice, const Tensor& weight, const Tensor& w1,
                 const Tensor& w2, const Tensor& order, const Tensor& offsets) {
  check_float(x, out, f, gu, act, weight, w1, w2);
  ZAYA_ASSERT(out.defined() && f.defined() && gu.defined() && act.defined() && weight.defined(),
              "moe_forward: out, f, gu, act and weight are required");
  const auto [ND, NF] = check_moe("moe_forward", x, choice, weight, w1, w2);
  check_numel(out, ND, "moe_forward: out");
  check_numel(f, ND, "moe_forward: f");
  check_numel(gu, NF, "moe_forward: gu");
  check_numel(act, NF / 2, "moe_forward: act");
  check_grouping("moe_forward", order, offsets, choice, w1);
  ZAYA_OP_DISPATCH(moe_forward, out, f, gu, act, x, choice, weight, w1, w2, order,
                   detail::host(offsets));
}

void moe_backward(const Tensor& dx, const Tensor& dw1, const Tensor& dw2, const Tensor& dweight,
                  const Tensor& dout, const Tensor& x, const Tensor& choice, const Tensor& weight,
                  const Tensor& w1, const Tensor& w2, const Tensor& f, const Tensor& gu,
                  const Tensor& act, const Tensor& order, const Tensor& offsets) {
  check_float(x, dx, dw1, dw2, dweight, dout, weight, w1, w2, f, gu, act);
  ZAYA_ASSERT(dx.defined() && dw1.defined() && dw2.defined() && dweight.defined() &&
                  dout.defined() && weight.defined() && f.defined() && gu.defined() &&
                  act.defined(),
              "moe_backward: every tensor is required");
  const auto [ND, NF] = check_moe("moe_backward", x, choice, weight, w1, w2);
  check_numel(dx, ND, "moe_backward: dx");
  check_numel(dw1, w1.numel(), "moe_backward: dw1");
  check_numel(dw2, w2.numel(), "moe_backward: dw2");
  check_numel(dweight, choice.numel(), "moe_backward: dweight");
  check_numel(dout, ND, "moe_backward: dout");
  check_numel(f, ND, "moe_backward: f");
  check_numel(gu, NF, "moe_backward: gu");
  check_numel(act, NF / 2, "moe_backward: act");
  check_grouping("moe_backward", order, offsets, choice, w1);
  ZAYA_OP_DISPATCH(moe_backward, dx, dw1, dw2, dweight, dout, x, choice, weight, w1, w2, f, gu, act,
                   order, detail::host(offsets));
}

// ---------------------------------------------------------------- cross-entropy

void xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                  const Tensor& target) {
  ZAYA_ASSERT(loss.defined() && lse.defined() && logits.defined() && target.defined(),
              "xent_forward: loss, lse, logits and target are required");
  const auto [N, V] = rows_of(logits);
  ZAYA_ASSERT(V > 0, "xent_forward: empty vocabulary in logits {}", logits.shape_str());
  check_float(logits, loss, lse);
  check_numel(loss, N, "xent_forward: loss");
  check_numel(lse, N, "xent_forward: lse");
  check_i32(target, N, "xent_forward: target");
  ZAYA_OP_DISPATCH(xent_forward, loss, lse, logits, target);
}

void xent_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                   const Tensor& target, double scale) {
  ZAYA_ASSERT(dlogits.defined() && logits.defined() && lse.defined() && target.defined(),
              "xent_backward: dlogits, logits, lse and target are required");
  const auto [N, V] = rows_of(logits);
  check_float(logits, dlogits, lse);
  check_numel(dlogits, N * V, "xent_backward: dlogits");
  check_numel(lse, N, "xent_backward: lse");
  check_i32(target, N, "xent_backward: target");
  ZAYA_OP_DISPATCH(xent_backward, dlogits, logits, lse, target, scale);
}

namespace {

// The shapes of the fused LM head: x[N,D], w[V,D] (D > 0, V > 0), target I32 [N], lse[N].
RowsOf check_lm_head(const char* op, const Tensor& x, const Tensor& w, const Tensor& lse,
                     const Tensor& target) {
  ZAYA_ASSERT(x.defined() && w.defined() && lse.defined() && target.defined(),
              "{}: x, w, lse and target are required", op);
  const RowsOf s = rows_of(x);
  ZAYA_ASSERT(s.D > 0 && w.ndim == 2 && w.size(1) == s.D && w.size(0) > 0,
              "{}: w {} must be [V,D] with V > 0 for x {}", op, w.shape_str(), x.shape_str());
  check_float(x, w, lse);
  check_numel(lse, s.N, "lm_head_xent: lse");
  check_i32(target, s.N, "lm_head_xent: target");
  return s;
}

}  // namespace

void lm_head_xent_forward(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& w,
                          const Tensor& target) {
  const auto [N, D] = check_lm_head("lm_head_xent_forward", x, w, lse, target);
  ZAYA_ASSERT(loss.defined(), "lm_head_xent_forward: loss is required");
  check_float(x, loss);
  check_numel(loss, N, "lm_head_xent_forward: loss");
  ZAYA_OP_DISPATCH(lm_head_xent_forward, loss, lse, x, w, target);
}

void lm_head_xent_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w,
                           const Tensor& lse, const Tensor& target, double scale) {
  const auto [N, D] = check_lm_head("lm_head_xent_backward", x, w, lse, target);
  check_float(x, dx, dw);
  if (dx.defined()) check_numel(dx, N * D, "lm_head_xent_backward: dx");
  if (dw.defined()) check_numel(dw, w.numel(), "lm_head_xent_backward: dw");
  ZAYA_OP_DISPATCH(lm_head_xent_backward, dx, dw, x, w, lse, target, scale);
}

void lm_head_xent_forward_backward(const Tensor& loss, const Tensor& lse, const Tensor& dx,
                                   const Tensor& dw, const Tensor& x, const Tensor& w,
                                   const Tensor& target, double scale) {
  const auto [N, D] = check_lm_head("lm_head_xent_forward_backward", x, w, lse, target);
  ZAYA_ASSERT(loss.defined() && dx.defined() && dw.defined(),
              "lm_head_xent_forward_backward: loss, dx and dw are required");
  check_float(x, loss, dx, dw);
  check_numel(loss, N, "lm_head_xent_forward_backward: loss");
  check_numel(dx, N * D, "lm_head_xent_forward_backward: dx");
  check_numel(dw, w.numel(), "lm_head_xent_forward_backward: dw");
  ZAYA_OP_DISPATCH(lm_head_xent_forward_backward, loss, lse, dx, dw, x, w, target, scale);
}

// ---------------------------------------------------------------- decoding

void cca_conv_step_forward(const Tensor& z, const Tensor& state, const Tensor& u, const Tensor& w0,
                           const Tensor& b0, const Tensor& w1, const Tensor& b1) {
  ZAYA_ASSERT(z.defined() && state.defined() && u.defined() && w0.defined() && b0.defined() &&
                  w1.defined() && b1.defined(),
              "cca_conv_step_forward: every tensor is required");
  ZAYA_ASSERT(u.dtype == DType::F32, "cca_conv_step_forward: F32 only, got {}",
              dtype_name(u.dtype));
  check_float(u, z, state, b0, b1);
  for (const Tensor* w : {&w0, &w1})
    ZAYA_ASSERT(w->dtype == DType::F32 || w->dtype == DType::BF16,
                "cca_conv_step_forward: conv weights are F32 or BF16, got {}",
                dtype_name(w->dtype));
  ZAYA_ASSERT(u.ndim == 2, "cca_conv_step_forward: u must be [L,C], got {}", u.shape_str());
  const int64_t L = u.size(0), C = u.size(1);
  ZAYA_ASSERT(
      w1.ndim == 3 && w1.size(0) == C && w1.size(2) == 2 && w1.size(1) > 0 && C % w1.size(1) == 0,
      "cca_conv_step_forward: w1 {} for C = {} (need [C,d,2] with d | C)", w1.shape_str(), C);
  check_numel(z, L * C, "cca_conv_step_forward: z [L,C]");
  check_numel(state, 2 * C, "cca_conv_step_forward: state [2,C]");
  check_numel(w0, 2 * C, "cca_conv_step_forward: w0 [C,1,2]");
  check_numel(b0, C, "cca_conv_step_forward: b0 [C]");
  check_numel(b1, C, "cca_conv_step_forward: b1 [C]");
  if (L == 0) return;
  ZAYA_OP_DISPATCH(cca_conv_step_forward, z, state, u, w0, b0, w1, b1);
}

void attention_cached_forward(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v,
                              int64_t window) {
  ZAYA_ASSERT(o.defined() && q.defined() && k.defined() && v.defined(),
              "attention_cached_forward: o, q, k and v are required");
  ZAYA_ASSERT(q.dtype == DType::F32, "attention_cached_forward: F32 only, got {}",
              dtype_name(q.dtype));
  check_float(q, k, v, o);
  ZAYA_ASSERT(q.ndim == 3 && k.ndim == 3 && v.ndim == 3,
              "attention_cached_forward: q {} k {} v {} must be [L,H,d]", q.shape_str(),
              k.shape_str(), v.shape_str());
  const int64_t L = q.size(0), S = k.size(0), Hq = q.size(1), Hk = k.size(1), d = q.size(2);
  ZAYA_ASSERT(k.size(2) == d && Hk > 0 && Hq % Hk == 0 && S >= L,
              "attention_cached_forward: q {} k {} (need Hk | Hq, equal d, S ≥ L)", q.shape_str(),
              k.shape_str());
  for (int i = 0; i < 3; ++i)
    ZAYA_ASSERT(v.size(i) == k.size(i), "attention_cached_forward: v {} k {}", v.shape_str(),
                k.shape_str());
  check_numel(o, q.numel(), "attention_cached_forward: o");
  ZAYA_ASSERT(window >= 0, "attention_cached_forward: window {} < 0", window);
  if (q.numel() == 0) return;
  ZAYA_OP_DISPATCH(attention_cached_forward, o, q, k, v, window);
}

// ---------------------------------------------------------------- optimizer math

void newton_schulz(const Tensor& out, const Tensor& g, int steps, bool symmetric, bool bf16) {
  check_float(out, g);
  ZAYA_ASSERT(g.ndim == 2 || g.ndim == 3, "newton_schulz: g must be 2-D or 3-D, got {}",
              g.shape_str());
  bool same = out.ndim == g.ndim;
  for (int i = 0; same && i < g.ndim; ++i) same = out.shape[size_t(i)] == g.shape[size_t(i)];
  ZAYA_ASSERT(same, "newton_schulz: out {} for g {}", out.shape_str(), g.shape_str());
  ZAYA_ASSERT(steps >= 0, "newton_schulz: steps {}", steps);
  if (g.numel() == 0) return;
  ZAYA_OP_DISPATCH(newton_schulz, out, g, steps, symmetric, bf16);
}

}  // namespace zaya::ops
