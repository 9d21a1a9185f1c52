// Decoder forward (see decoder.h). Legend for buffer suffixes: N new tokens of the step (all
// sequences, flattened item by item), D model width, C conv channels, d head size, Hq/Hk heads,
// R router width, K router classes, F expert gate ‖ up width, M tokens routed to one expert.
// Tensor memory is touched only through ops (copies, row gathers/scatters, SwiGLU) and
// device_copy for host metadata (token ids in, router choices out), so the same code serves any
// device the ops support.
#include "infer/decoder.h"

#include <algorithm>
#include <utility>

#include "ops/ops.h"

namespace zaya {

namespace {

// One scratch vector per buffer; sized by the largest step seen so far.
enum Slot : size_t {
  kIds,
  kCos,
  kSin,
  kCosW,
  kSinW,  // RoPE tables of the windowed sub-layers' θ, when it differs
  kO0,
  kO1,
  kH0,
  kH1,
  kX,
  kRstd,
  kR0,
  kR1,
  kXLast,  // whole model
  kQ0,
  kK0,
  kU,
  kZ,
  kQ,
  kK,
  kQr,
  kKr,
  kQn,
  kKn,
  kP1,
  kXs,
  kP2,
  kAtt,  // attention
  kRn,
  kRrstd,
  kA1p,
  kA1,
  kA2p,
  kA2,
  kLogitsK,
  kProbs,
  kChoice,
  kWeight,  // router
  kXe,
  kGu,
  kAct,
  kF,  // experts
  kSlots
};

// An I32 row-id tensor over host metadata.
Tensor row_ids(std::vector<int32_t>& v) {
  return Tensor(v.data(), {int64_t(v.size())});
}

}  // namespace

Tensor Decoder::scratch(size_t slot, DType t, std::initializer_list<int64_t> dims) {
  if (scratch_.size() < kSlots) scratch_.resize(kSlots);
  Tensor v(nullptr, t, dims);
  ZAYA_ASSERT(dtype_size(t) == sizeof(float), "decoder scratch holds 4-byte elements");
  std::vector<float>& s = scratch_[slot];
  if (s.size() < size_t(v.numel())) s.resize(size_t(v.numel()));
  v.data = s.data();
  return v;
}

void Decoder::forward(std::span<const DecodeItem> items, const Tensor& logits, bool all_positions) {
  const ZayaConfig& c = m_.config();
  const int64_t D = c.hidden_size, V = c.vocab_size;
  const float eps = float(c.norm_epsilon);
  weight_bytes_read_ = 0;
  int64_t N = 0;
  for (const DecodeItem& it : items) {
    ZAYA_ASSERT(!it.tokens.empty(), "decode item without tokens");
    ZAYA_ASSERT(it.cache->length() + int64_t(it.tokens.size()) <= it.cache->capacity(),
                "sequence cache full: {} + {} > {}", it.cache->length(), it.tokens.size(),
                it.cache->capacity());
    N += int64_t(it.tokens.size());
  }
  const int64_t rows = all_positions ? N : int64_t(items.size());
  ZAYA_ASSERT(logits.ndim == 2 && logits.shape[0] == rows && logits.shape[1] == V &&
                  logits.dtype == DType::F32,
              "logits {} for {} rows of vocab {}", logits.shape_str(), rows, V);
  if (N == 0) return;

  // Token ids and positions; the RoPE tables hold one row per token at its own position.
  const Tensor ids = scratch(kIds, DType::I32, {N});
  pos_.resize(size_t(N));
  host_ids_.resize(size_t(N));
  int64_t n = 0;
  for (const DecodeItem& it : items)
    for (size_t t = 0; t < it.tokens.size(); ++t, ++n) {
      ZAYA_ASSERT(it.tokens[t] >= 0 && it.tokens[t] < V, "token id {} outside [0, {})",
                  it.tokens[t], V);
      host_ids_[size_t(n)] = it.tokens[t];
      pos_[size_t(n)] = it.cache->length() + int64_t(t);
    }
  device_copy(ids, row_ids(host_ids_));
  const int64_t half = c.rotary_dim() / 2;
  cos_ = scratch(kCos, DType::F32, {N, half});
  sin_ = scratch(kSin, DType::F32, {N, half});
  for (int64_t k = 0; k < N; ++k)
    ops::rope_tables(cos_.rows(k, k + 1), sin_.rows(k, k + 1), pos_[size_t(k)], c.rope_theta,
                     c.rotary_dim());
  // A second pair of tables when some sub-layer rotates with another θ (the windowed ones may).
  theta_w_ = c.rope_theta;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i) && c.rope_theta_of(i) != c.rope_theta) theta_w_ = c.rope_theta_of(i);
  if (theta_w_ != c.rope_theta) {
    cos_w_ = scratch(kCosW, DType::F32, {N, half});
    sin_w_ = scratch(kSinW, DType::F32, {N, half});
    for (int64_t k = 0; k < N; ++k)
      ops::rope_tables(cos_w_.rows(k, k + 1), sin_w_.rows(k, k + 1), pos_[size_t(k)], theta_w_,
                       c.rotary_dim());
  }

  int64_t R_max = 1;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (!c.is_attention(i)) R_max = std::max(R_max, c.zaya_mlp_expansion[size_t(i)]);
  Tensor o = scratch(kO0, DType::F32, {N, D}), o_next = scratch(kO1, DType::F32, {N, D});
  Tensor h = scratch(kH0, DType::F32, {N, D}), h_next = scratch(kH1, DType::F32, {N, D});
  const Tensor x = scratch(kX, DType::F32, {N, D}), rstd = scratch(kRstd, DType::F32, {N});
  Tensor r_cur = scratch(kR0, DType::F32, {N * R_max}),
         r_free = scratch(kR1, DType::F32, {N * R_max});
  Tensor rprev;  // post-EDA router state of the previous MoE sub-layer

  weight_bytes_read_ = m_.dense_weight_bytes() + N * m_.embedding_row_bytes();
  ops::embedding_forward(o, ids, m_.embed);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const InferLayer& l = m_.layers[size_t(i)];
    ops::merge_rmsnorm_forward(h_next, x, rstd, o, i == 0 ? Tensor{} : h, l.res.ao, l.res.bo,
                               l.res.ar, l.res.br, l.input_norm, eps);
    std::swap(h, h_next);
    if (c.is_attention(i)) {
      attention(i, items, x, o_next);
    } else {
      const Tensor r = r_cur.prefix({N, c.zaya_mlp_expansion[size_t(i)]});
      moe(i, x, rprev, r, o_next);
      rprev = r;
      std::swap(r_cur, r_free);
    }
    std::swap(o, o_next);
  }
  ops::merge_rmsnorm_forward(h_next, x, rstd, o, h, m_.final_res.ao, m_.final_res.bo,
                             m_.final_res.ar, m_.final_res.br, m_.final_norm, eps);
  if (all_positions) {
    ops::linear_forward(logits, x, m_.embed, {});
  } else {  // only each item's last token needs the (large) LM head
    const Tensor xl = scratch(kXLast, DType::F32, {rows, D});
    host_rows_.clear();
    int64_t end = 0;
    for (const DecodeItem& it : items) {
      end += int64_t(it.tokens.size());
      host_rows_.push_back(int32_t(end - 1));
    }
    ops::gather_rows(xl, x, row_ids(host_rows_));
    ops::linear_forward(logits, xl, m_.embed, {});
  }
  for (const DecodeItem& it : items) it.cache->advance(int64_t(it.tokens.size()));
}

void Decoder::attention(int64_t i, std::span<const DecodeItem> items, const Tensor& x,
                        const Tensor& out) {
  const ZayaConfig& c = m_.config();
  const InferAttention& a = m_.layers[size_t(i)].attn;
  const int64_t N = x.shape[0], D = c.hidden_size, d = c.head_dim();
  const int64_t Hq = c.q_heads(), Hk = c.kv_heads(), C = c.conv_channels(), half = Hk * d / 2;

  // u = [q⁰ ; k⁰] per token (the two projections are separate tensors on disk).
  const Tensor q0 = scratch(kQ0, DType::F32, {N, Hq * d}),
               k0 = scratch(kK0, DType::F32, {N, Hk * d});
  const Tensor u = scratch(kU, DType::F32, {N, C}), z = scratch(kZ, DType::F32, {N, C});
  ops::linear_forward(q0, x, a.wq, {});
  ops::linear_forward(k0, x, a.wk, {});
  ops::concat_cols(u, q0, k0);

  // Per sequence: the conv continues from its state; the value shift reads x_{t−1} (the cached
  // previous input for the first new token).
  const Tensor p1 = scratch(kP1, DType::F32, {N, half}), p2 = scratch(kP2, DType::F32, {N, half});
  const Tensor xs = scratch(kXs, DType::F32, {N, D});
  int64_t row = 0;
  for (const DecodeItem& it : items) {
    const int64_t L = int64_t(it.tokens.size());
    LayerCache& lc = it.cache->layer(i);
    ops::cca_conv_step_forward(z.rows(row, row + L), lc.conv_state, u.rows(row, row + L), a.conv0_w,
                               a.conv0_b, a.conv1_w, a.conv1_b);
    ops::copy(xs.rows(row, row + 1), lc.x_prev);
    ops::copy(xs.rows(row + 1, row + L), x.rows(row, row + L - 1));
    ops::copy(lc.x_prev, x.rows(row + L - 1, row + L));
    row += L;
  }
  ops::linear_forward(p1, x, a.wv1, {});
  ops::linear_forward(p2, xs, a.wv2, {});

  const Tensor Q = scratch(kQ, DType::F32, {1, N, Hq, d}),
               K = scratch(kK, DType::F32, {1, N, Hk, d});
  const Tensor qr = scratch(kQr, DType::F32, {1, N, Hq, d}),
               kr = scratch(kKr, DType::F32, {1, N, Hk, d});
  const Tensor qn = scratch(kQn, DType::F32, {1, N, Hq}), kn = scratch(kKn, DType::F32, {1, N, Hk});
  ops::qk_mean_forward(Q, K, z.view({1, N, C}), u.view({1, N, C}));
  ops::l2norm_scale_forward(qr, qn, Q, {}, c.l2norm_floor());
  ops::l2norm_scale_forward(kr, kn, K, a.temp, c.l2norm_floor());
  const bool other_theta = c.rope_theta_of(i) != c.rope_theta;
  ZAYA_ASSERT(!other_theta || c.rope_theta_of(i) == theta_w_,
              "sub-layer {}: a third RoPE theta {} (tables for {} and {})", i, c.rope_theta_of(i),
              c.rope_theta, theta_w_);
  ops::rope_forward(qr, other_theta ? cos_w_ : cos_, other_theta ? sin_w_ : sin_);
  ops::rope_forward(kr, other_theta ? cos_w_ : cos_, other_theta ? sin_w_ : sin_);

  // Append K and V = [W_v1 x_t ; W_v2 x_{t−1}] to each cache, then attend over it.
  const Tensor att = scratch(kAtt, DType::F32, {N, Hq, d});
  const Tensor q_rows = qr.view({N, Hq, d}), k_rows = kr.view({N, Hk * d});
  row = 0;
  for (const DecodeItem& it : items) {
    const int64_t L = int64_t(it.tokens.size()), start = it.cache->length();
    LayerCache& lc = it.cache->layer(i);
    if (lc.keys > 0) {
      attend_window(lc, start, att.rows(row, row + L), q_rows.rows(row, row + L),
                    k_rows.rows(row, row + L), p1.rows(row, row + L), p2.rows(row, row + L));
      row += L;
      continue;
    }
    ops::copy(lc.k.rows(start, start + L), k_rows.rows(row, row + L));
    ops::concat_cols(lc.v.rows(start, start + L).view({L, Hk * d}), p1.rows(row, row + L),
                     p2.rows(row, row + L));
    ops::attention_cached_forward(att.rows(row, row + L), q_rows.rows(row, row + L),
                                  lc.k.rows(0, start + L), lc.v.rows(0, start + L));
    row += L;
  }
  ops::linear_forward(out, att.view({N, Hq * d}), a.wo, {});
}

void Decoder::attend_window(LayerCache& lc, int64_t start, const Tensor& att, const Tensor& q,
                            const Tensor& k, const Tensor& p1, const Tensor& p2) {
  const int64_t W = lc.keys, rows = lc.k.shape[0], L = q.shape[0];
  const int64_t Hk = lc.k.shape[1], d = lc.k.shape[2];
  for (int64_t done = 0; done < L;) {
    const int64_t p = start + done;
    // Slide the buffer's front to where it must be for writes at p (cache.h), moving the rows of
    // positions [f, p) to the front in pieces no longer than the distance moved, so that no piece
    // overlaps its own destination.
    const int64_t f = SequenceCache::window_first(W, p);
    ZAYA_ASSERT(lc.first <= f, "window front {} past {}", lc.first, f);
    if (f > lc.first) {
      const int64_t by = f - lc.first, keep = p - f;
      for (int64_t r = 0; r < keep; r += by) {
        const int64_t n = std::min(by, keep - r);
        ops::copy(lc.k.rows(r, r + n), lc.k.rows(r + by, r + by + n));
        ops::copy(lc.v.rows(r, r + n), lc.v.rows(r + by, r + by + n));
      }
      lc.first = f;
    }
    // As many new positions as fit, then the attention of their queries.
    const int64_t s = std::min(L - done, rows - (p - f)), r0 = p - f;
    ZAYA_ASSERT(s >= 1, "window buffer of {} rows full at position {} (front {})", rows, p, f);
    ops::copy(lc.k.rows(r0, r0 + s), k.rows(done, done + s));
    ops::concat_cols(lc.v.rows(r0, r0 + s).view({s, Hk * d}), p1.rows(done, done + s),
                     p2.rows(done, done + s));
    // Keys from the first one the earliest query sees: older rows may be stale (cache.h).
    const int64_t k0 = std::max<int64_t>(0, p - (W - 1)) - f;
    const Tensor kk = lc.k.rows(k0, r0 + s);
    // A window as long as the keys passed hides nothing (a decode step: exactly the W keys its
    // query sees), so it is passed as 0, the plain causal call every backend has.
    const int64_t window = W >= kk.shape[0] ? 0 : W;
    ops::attention_cached_forward(att.rows(done, done + s), q.rows(done, done + s), kk,
                                  lc.v.rows(k0, r0 + s), window);
    done += s;
  }
}

void Decoder::moe(int64_t i, const Tensor& x, const Tensor& rprev, const Tensor& r,
                  const Tensor& out) {
  const ZayaConfig& c = m_.config();
  const InferMoe& e = m_.layers[size_t(i)].moe;
  const int64_t N = x.shape[0], D = c.hidden_size, R = r.shape[1];
  const int64_t K = c.router_classes(i), E = c.num_experts(i);
  const int64_t F = c.ffn_hidden_size_list[size_t(i)], H = F / 2;

  // Router (docs/model.md §5.1–5.4).
  ops::linear_forward(r, x, e.down_w, e.down_b);
  if (e.eda_scale.defined()) {
    ZAYA_ASSERT(rprev.defined(), "EDA scale without an earlier MoE layer");
    ops::eda_forward(r, e.eda_scale, rprev);
  }
  const Tensor rn = scratch(kRn, DType::F32, {N, R}), rrstd = scratch(kRrstd, DType::F32, {N});
  const Tensor a1p = scratch(kA1p, DType::F32, {N, R}), a1 = scratch(kA1, DType::F32, {N, R});
  const Tensor a2p = scratch(kA2p, DType::F32, {N, R}), a2 = scratch(kA2, DType::F32, {N, R});
  const Tensor lg = scratch(kLogitsK, DType::F32, {N, K}),
               probs = scratch(kProbs, DType::F32, {N, K});
  const Tensor choice = scratch(kChoice, DType::I32, {N}),
               weight = scratch(kWeight, DType::F32, {N});
  ops::rmsnorm_forward(rn, rrstd, r, e.norm_w, float(c.norm_epsilon));
  ops::linear_forward(a1p, rn, e.m1_w, e.m1_b);
  ops::gelu_forward(a1, a1p);
  ops::linear_forward(a2p, a1, e.m2_w, e.m2_b);
  ops::gelu_forward(a2, a2p);
  ops::linear_forward(lg, a2, e.m3_w, {});
  ops::router_select_forward(probs, choice, weight, lg, e.biases);

  // Dispatch (docs/model.md §5.5–5.6): each chosen expert runs once on its gathered tokens. The
  // grouping is host metadata: the choices are copied back once.
  host_choice_.resize(size_t(N));
  device_copy(row_ids(host_choice_), choice);
  std::vector<std::vector<int32_t>>& tokens = expert_tokens_;  // reused: no allocation per step
  tokens.resize(size_t(E + 1));
  for (auto& t : tokens) t.clear();
  for (int64_t n = 0; n < N; ++n) tokens[size_t(host_choice_[size_t(n)])].push_back(int32_t(n));
  // Skip class (MoD only): the normed input times its p, or 0 under native semantics.
  if (!tokens[size_t(E)].empty()) {
    const Tensor skip = row_ids(tokens[size_t(E)]);
    const Tensor x_SD = scratch(kXe, DType::F32, {skip.numel(), D});
    if (m_.config().skip_outputs_zero()) {
      ops::fill_zero(x_SD);
      ops::scatter_rows(out, skip, x_SD, {});
    } else {
      ops::gather_rows(x_SD, x, skip);
      ops::scatter_rows(out, skip, x_SD, weight);
    }
  }
  for (int64_t ex = 0; ex < E; ++ex) {
    const Tensor tok_M = row_ids(tokens[size_t(ex)]);
    const int64_t M = tok_M.numel();
    if (M == 0) continue;
    weight_bytes_read_ += int64_t(e.fc1[size_t(ex)].nbytes() + e.fc2[size_t(ex)].nbytes());
    const Tensor x_MD = scratch(kXe, DType::F32, {M, D}), gu_MF = scratch(kGu, DType::F32, {M, F});
    const Tensor act_MH = scratch(kAct, DType::F32, {M, H}), f_MD = scratch(kF, DType::F32, {M, D});
    ops::gather_rows(x_MD, x, tok_M);
    ops::linear_forward(gu_MF, x_MD, e.fc1[size_t(ex)], {});
    ops::silu_mul(act_MH, gu_MF);  // gate, then up
    ops::linear_forward(f_MD, act_MH, e.fc2[size_t(ex)], {});
    ops::scatter_rows(out, tok_M, f_MD, weight);
  }
}

}  // namespace zaya
