// Activations (activations.h): one measuring pass lays out every saved tensor and the backward
// scratch for a [B, T] micro-batch, then one allocation backs them all (with bf16 storage, the
// shared f32 working area at its end).
#include "model/activations.h"

#include <algorithm>

#include "ops/ops.h"

namespace zaya {

namespace {

// Bump allocator with a measuring mode: the first pass adds up sizes, the second carves views.
struct Carver {
  char* base = nullptr;
  size_t used = 0;
  Device device = Device::Cpu;
  Tensor operator()(DType t, std::initializer_list<int64_t> dims) {
    Tensor v(nullptr, t, dims);
    v.device = device;
    if (base) v.data = base + used;
    used += Arena::aligned(v.nbytes());
    return v;
  }
};

// The tensors a sub-layer reads only inside its own forward and backward: with bf16 storage each
// is carved twice, an f32 view in the working area (reset for every sub-layer; its largest extent
// is the area's size) and a BF16 copy among the sub-layer's own tensors.
struct StashCarver {
  Carver& own;
  Carver work;
  bool bf16 = false;
  size_t work_peak = 0;
  LayerActs* layer = nullptr;

  void begin_layer(LayerActs& l) {
    layer = &l;
    work.used = 0;
  }
  Tensor operator()(std::initializer_list<int64_t> dims) {
    if (!bf16) return own(DType::F32, dims);
    const Tensor w = work(DType::F32, dims);
    work_peak = std::max(work_peak, work.used);
    layer->stashed.push_back({w, own(DType::BF16, dims)});
    return w;
  }
};

void carve(Activations& a, const ZayaConfig& c, Carver& m, StashCarver& s, bool keep_logits) {
  const int64_t B = a.B, T = a.T, N = B * T, D = c.hidden_size, d = c.head_dim();
  const int64_t Hq = c.q_heads(), Hk = c.kv_heads(), C = c.conv_channels();
  const DType f = DType::F32;
  int64_t maxR = 1, maxK = 1, maxF = 2;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (!c.is_attention(i)) {
      maxR = std::max(maxR, c.zaya_mlp_expansion[size_t(i)]);
      maxK = std::max(maxK, c.router_classes(i));
      maxF = std::max(maxF, c.ffn_hidden_size_list[size_t(i)]);
    }
  a.ids = m(DType::I32, {B, T});
  a.targets = m(DType::I32, {N});
  a.emb = m(f, {N, D});
  a.rope_cos = m(f, {T, c.rotary_dim() / 2});
  a.rope_sin = m(f, {T, c.rotary_dim() / 2});
  bool swa_theta = false;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    swa_theta = swa_theta || (c.is_attention(i) && c.rope_theta_of(i) != c.rope_theta);
  if (swa_theta) {
    a.rope_cos_swa = m(f, {T, c.rotary_dim() / 2});
    a.rope_sin_swa = m(f, {T, c.rotary_dim() / 2});
  }
  a.layers.resize(size_t(c.num_layers()));
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerActs& l = a.layers[size_t(i)];
    l.stashed.clear();
    s.begin_layer(l);
    l.h = m(f, {N, D});
    l.x = s({N, D});
    l.rstd = m(f, {N});
    l.o = m(f, {N, D});
    if (c.is_attention(i)) {
      AttentionActs& t = l.attn;
      t.u = s({B, T, C});
      t.y = s({B, T + 1, C});
      t.z = s({B, T, C});
      t.q = s({B, T, Hq, d});
      t.k = s({B, T, Hk, d});
      t.qn = m(f, {B, T, Hq});
      t.kn = m(f, {B, T, Hk});
      t.qr = s({B, T, Hq, d});
      t.kr = s({B, T, Hk, d});
      t.p = s({B, T, Hk * d});
      t.v = s({B, T, Hk * d});
      t.att = s({B, T, Hq, d});
      t.lse = m(f, {B, Hq, T});
    } else {
      const int64_t R = c.zaya_mlp_expansion[size_t(i)], K = c.router_classes(i);
      const int64_t F = c.ffn_hidden_size_list[size_t(i)];
      MoeActs& e = l.moe;
      e.r = m(f, {N, R});
      e.rn = m(f, {N, R});
      e.rrstd = m(f, {N});
      e.a1p = m(f, {N, R});
      e.a1 = m(f, {N, R});
      e.a2p = m(f, {N, R});
      e.a2 = m(f, {N, R});
      e.logits = m(f, {N, K});
      e.probs = m(f, {N, K});
      e.choice = m(DType::I32, {N});
      e.weight = m(f, {N});
      e.f = s({N, D});
      e.gu = s({N, F});
      e.act = s({N, F / 2});
      e.order = m(DType::I32, {N});
      e.offsets.assign(size_t(c.num_experts(i) + 2), 0);  // the E experts and the skip class
    }
  }
  a.h_final = m(f, {N, D});
  a.x_final = m(f, {N, D});
  a.rstd_final = m(f, {N});
  if (keep_logits) a.logits = m(f, {N, c.vocab_size});
  a.lse = m(f, {N});
  a.loss_rows = m(f, {N});
  BackwardScratch& g = a.g;
  g.dh_a = m(f, {N, D});
  g.dh_b = m(f, {N, D});
  g.dx = m(f, {N, D});
  g.dout = m(f, {N, D});
  g.datt = m(f, {B, T, Hq, d});
  g.dqr = m(f, {B, T, Hq, d});
  g.dkr = m(f, {B, T, Hk, d});
  g.dv = m(f, {B, T, Hk * d});
  g.dq = m(f, {B, T, Hq, d});
  g.dk = m(f, {B, T, Hk, d});
  g.dz = m(f, {B, T, C});
  g.du = m(f, {B, T, C});
  g.dp = m(f, {B, T, Hk * d});
  g.dweight = m(f, {N});
  g.dlogits = m(f, {N, maxK});
  g.da2 = m(f, {N, maxR});
  g.da2p = m(f, {N, maxR});
  g.da1 = m(f, {N, maxR});
  g.da1p = m(f, {N, maxR});
  g.drn = m(f, {N, maxR});
  g.dr = m(f, {N, maxR});
  g.dcarry_in = m(f, {N, maxR});
  g.dcarry_out = m(f, {N, maxR});
}

// The sizes of the sub-layers' own tensors and of the working area (bytes, aligned).
struct Layout {
  size_t own = 0, work = 0;
};

Layout measure(Activations& a, const ZayaConfig& c, bool keep_logits, ActivationStorage storage) {
  Carver own;
  StashCarver s{own, {}, storage == ActivationStorage::BF16};
  carve(a, c, own, s, keep_logits);
  return {own.used, s.work_peak};
}

}  // namespace

const char* activation_storage_name(ActivationStorage s) {
  return s == ActivationStorage::BF16 ? "bf16" : "fp32";
}

void stash_layer(const LayerActs& l) {
  for (const StashedTensor& t : l.stashed) ops::convert(t.stored, t.work);
}

void unstash_layer(const LayerActs& l) {
  for (const StashedTensor& t : l.stashed) ops::convert(t.work, t.stored);
}

size_t Activations::bytes_needed(const ZayaConfig& c, int64_t B, int64_t T, bool keep_logits,
                                 ActivationStorage storage) {
  Activations a;
  a.B = B, a.T = T;
  const Layout l = measure(a, c, keep_logits, storage);
  return l.own + l.work;
}

Activations::Activations(const ZayaConfig& c, int64_t B_, int64_t T_, Device device,
                         bool keep_logits, ActivationStorage storage)
    : B(B_), T(T_), storage_(storage) {
  const Layout l = measure(*this, c, keep_logits, storage);
  mem_ = Buffer(l.own + l.work, device);
  char* base = static_cast<char*>(mem_.data());
  Carver own{base, 0, device};
  StashCarver s{own, Carver{base + l.own, 0, device}, storage == ActivationStorage::BF16};
  carve(*this, c, own, s, keep_logits);
}

}  // namespace zaya
