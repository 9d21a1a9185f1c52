// training_gemms of gemm_shapes.h: the model's GEMM calls (model/attention.cpp, moe.cpp,
// transformer.cpp) with the shapes the GPU ops give them (ops/gpu/linear.cu, moe.cu,
// lm_head_xent.cpp), written out once from the config.
#include "model/gemm_shapes.h"

#include <algorithm>
#include <map>

#include "core/assert.h"

namespace zaya {

namespace {

using gemm_table::GemmDtype;
using gemm_table::GemmKey;

// lm_head_xent.cpp's logits block: at most 2^24 floats (kScratchFloats), so max(1, 2^24 / V) rows.
constexpr int64_t kLmHeadBlockFloats = int64_t(1) << 24;

struct Lister {
  GemmDtype dtype;
  std::vector<GemmUse> out;

  // Row-major C[M,N] = op(A)·op(B) (gemm.h), A's and B's strides, C's.
  void gemm(std::string what, int64_t M, int64_t N, int64_t K, bool ta, int64_t lda, bool tb,
            int64_t ldb, int64_t ldc, char expert_rows = 0) {
    if (M <= 0 || N <= 0 || K <= 0) return;  // gemm() runs nothing, or no key (K = 0)
    out.push_back({gemm_table::key_of_row_major(dtype, M, N, K, ta, lda, tb, ldb, ldc),
                   std::move(what), expert_rows});
  }
  // linear.cu: y[n,O] = x[n,I]·wᵀ; dx[n,I] = dy·w; dw[O,I] += dyᵀ·x.
  void linear_forward(const std::string& what, int64_t n, int64_t I, int64_t O) {
    gemm(what + ": forward", n, O, I, false, I, true, I, O);
  }
  void linear_backward(const std::string& what, int64_t n, int64_t I, int64_t O) {
    gemm(what + ": dX", n, I, O, false, O, false, I, I);
    gemm(what + ": dW", O, I, n, true, O, false, I, I);
  }
};

std::string layer_name(int64_t i, const char* part) {
  return fmt::format("layer {} {}", i, part);
}

}  // namespace

std::vector<GemmUse> training_gemms(const ZayaConfig& c, int64_t tokens, GemmDtype dtype) {
  ZAYA_CHECK_INPUT(tokens >= 1, "GEMM shapes: tokens must be ≥ 1, got {}", tokens);
  Lister l{dtype, {}};
  const int64_t n = tokens, D = c.hidden_size, d = c.head_dim(), V = c.vocab_size;
  const int64_t Hq = c.q_heads(), Hk = c.kv_heads(), C = c.conv_channels();
  // The experts of MoE layer i: balanced rows, F and F/2 (moe.cu's forward and backward order).
  auto expert_rows = [&](int64_t i) {
    return std::max<int64_t>(1, n * c.moe_router_topk / c.num_experts(i));
  };
  auto experts_forward = [&](int64_t i) {
    const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[size_t(i)], H = F / 2;
    const int64_t m = expert_rows(i);
    for (int64_t e = 0; e < E; ++e)
      l.gemm(layer_name(i, "expert fc1: forward"), m, F, D, false, D, true, D, F, 'M');
    for (int64_t e = 0; e < E; ++e)
      l.gemm(layer_name(i, "expert fc2: forward"), m, D, H, false, H, true, H, D, 'M');
  };
  auto experts_backward = [&](int64_t i) {
    const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[size_t(i)], H = F / 2;
    const int64_t m = expert_rows(i);
    for (int64_t e = 0; e < E; ++e) {
      l.gemm(layer_name(i, "expert fc2: dW"), D, H, m, true, D, false, H, H, 'K');
      l.gemm(layer_name(i, "expert fc2: dX"), m, H, D, false, D, false, H, H, 'M');
    }
    for (int64_t e = 0; e < E; ++e) {
      l.gemm(layer_name(i, "expert fc1: dW"), F, D, m, true, F, false, D, D, 'K');
      l.gemm(layer_name(i, "expert fc1: dX"), m, D, F, false, F, false, D, D, 'M');
    }
  };
  const int64_t rows = std::max<int64_t>(1, std::min(n, kLmHeadBlockFloats / V));
  // lm_head_xent.cpp: logits[rows, V] = x·embedᵀ per block; backward adds dX and dW.
  auto lm_head = [&](bool backward) {
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t b = std::min(rows, n - r0);
      l.gemm(backward ? "LM head: logits again" : "LM head: logits", b, V, D, false, D, true, D, V);
      if (!backward) continue;
      l.gemm("LM head: dX", b, D, V, false, V, false, D, D);
      l.gemm("LM head: dW", V, D, b, true, V, false, D, D);
    }
  };

  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (c.is_attention(i)) {  // attention.cpp
      l.linear_forward(layer_name(i, "attention q‖k"), n, D, C);
      l.linear_forward(layer_name(i, "attention v"), n, D, Hk * d);
      l.linear_forward(layer_name(i, "attention o"), n, Hq * d, D);
    } else {  // moe.cpp: the router MLP, then the experts
      const int64_t R = c.zaya_mlp_expansion[size_t(i)], K = c.router_classes(i);
      l.dtype = GemmDtype::F32;  // the router's GEMMs stay fp32 (moe.cpp's precision scope)
      l.linear_forward(layer_name(i, "router down"), n, D, R);
      l.linear_forward(layer_name(i, "router mlp 1"), n, R, R);
      l.linear_forward(layer_name(i, "router mlp 2"), n, R, R);
      l.linear_forward(layer_name(i, "router logits"), n, R, K);
      l.dtype = dtype;
      experts_forward(i);
    }
  }
  lm_head(false);
  lm_head(true);
  for (int64_t i = c.num_layers() - 1; i >= 0; --i) {
    if (c.is_attention(i)) {
      l.linear_backward(layer_name(i, "attention o"), n, Hq * d, D);
      l.linear_backward(layer_name(i, "attention v"), n, D, Hk * d);
      l.linear_backward(layer_name(i, "attention q‖k"), n, D, C);
    } else {
      const int64_t R = c.zaya_mlp_expansion[size_t(i)], K = c.router_classes(i);
      experts_backward(i);
      l.dtype = GemmDtype::F32;
      l.linear_backward(layer_name(i, "router logits"), n, R, K);
      l.linear_backward(layer_name(i, "router mlp 2"), n, R, R);
      l.linear_backward(layer_name(i, "router mlp 1"), n, R, R);
      l.linear_backward(layer_name(i, "router down"), n, D, R);
      l.dtype = dtype;
    }
  }
  return std::move(l.out);
}

std::vector<GemmShape> distinct_gemms(const std::vector<GemmUse>& uses) {
  std::vector<GemmShape> out;
  std::map<GemmKey, size_t> at;
  for (const GemmUse& u : uses) {
    const auto [it, fresh] = at.emplace(u.key, out.size());
    if (fresh) out.push_back({u.key, u.what, 0});
    ++out[it->second].uses;
  }
  return out;
}

}  // namespace zaya
