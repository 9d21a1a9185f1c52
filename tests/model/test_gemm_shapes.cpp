// training_gemms (model/gemm_shapes.h) against shapes counted by hand for the tiny twin config
// (tests/fixtures/model/tiny_a: D 64, 8 heads of 8 → Hq 4, Hk 2, C 48; layers a,4,a,4 with R 16,
// F 16, 5 router classes; V 96), and the LM head's row blocks. The GPU test
// (tests/ops/gpu/test_gemm_table_runtime.cpp) checks the same list against a recorded forward/backward.
#include <gtest/gtest.h>

#include <string>

#include "io/zaya_config.h"
#include "model/gemm_shapes.h"
#include "test_util.h"

using namespace zaya;
using gemm_table::GemmDtype;

namespace {

ZayaConfig tiny() {
  return load_config(std::string(ZAYA_TEST_FIXTURES) + "/model/tiny_a/config.json");
}

std::string line(const GemmUse& u) {
  return gemm_table::op_name(u.key) + "," + gemm_table::params(u.key);
}

const GemmUse& find(const std::vector<GemmUse>& v, const std::string& what) {
  for (const GemmUse& u : v)
    if (u.what == what) return u;
  ADD_FAILURE() << "no GEMM '" << what << "'";
  return v.front();
}

}  // namespace

TEST(GemmShapes, TinyConfigByHand) {
  const std::vector<GemmUse> u = training_gemms(tiny(), 32, GemmDtype::F32);
  // Attention: 3 linears × 3; MoE: 4 linears × 3 + 4 experts × (2 + 4); LM head: 1 + 3.
  ASSERT_EQ(u.size(), size_t(2 * 9 + 2 * (12 + 24) + 4));
  // y[32,48] = x[32,64]·wqkᵀ: BLAS tn, m 48, n 32, k 64.
  EXPECT_EQ(line(u[0]), "GemmTunableOp_float_TN,tn_48_32_64_ld_64_64_48");
  EXPECT_EQ(u[0].what, "layer 0 attention q‖k: forward");
  EXPECT_EQ(line(find(u, "layer 0 attention o: forward")),
            "GemmTunableOp_float_TN,tn_64_32_32_ld_32_32_64");
  // dX[32,64] = dy[32,48]·w[48,64]: nn, m 64, n 32, k 48; dW[48,64] += dyᵀ·x: nt, m 64, n 48, k 32.
  EXPECT_EQ(line(find(u, "layer 2 attention q‖k: dX")),
            "GemmTunableOp_float_NN,nn_64_32_48_ld_64_48_64");
  EXPECT_EQ(line(find(u, "layer 2 attention q‖k: dW")),
            "GemmTunableOp_float_NT,nt_64_48_32_ld_64_48_64");
  EXPECT_EQ(line(find(u, "layer 1 router logits: forward")),
            "GemmTunableOp_float_TN,tn_5_32_16_ld_16_16_5");
  // Experts: 32 tokens · top-1 / 4 experts = 8 rows each; F 16, F/2 8.
  const GemmUse& fc1 = find(u, "layer 3 expert fc1: forward");
  EXPECT_EQ(line(fc1), "GemmTunableOp_float_TN,tn_16_8_64_ld_64_64_16");
  EXPECT_EQ(fc1.expert_rows, 'M');
  const GemmUse& dw2 = find(u, "layer 3 expert fc2: dW");
  EXPECT_EQ(line(dw2), "GemmTunableOp_float_NT,nt_8_64_8_ld_8_64_8");
  EXPECT_EQ(dw2.expert_rows, 'K');
  EXPECT_EQ(line(find(u, "LM head: logits")), "GemmTunableOp_float_TN,tn_96_32_64_ld_64_64_96");
  EXPECT_EQ(line(find(u, "LM head: dW")), "GemmTunableOp_float_NT,nt_64_96_32_ld_64_96_64");
  EXPECT_EQ(find(u, "layer 0 attention q‖k: forward").expert_rows, 0);

  const std::vector<GemmShape> s = distinct_gemms(u);
  int64_t uses = 0;
  for (const GemmShape& x : s) uses += x.uses;
  EXPECT_EQ(uses, int64_t(u.size()));
  // Layers 0/2 and 1/3 repeat each other; attention v (64 → 16) and router down (64 → 16) share
  // all three keys; the LM head's logits run twice.
  auto uses_of = [&](const std::string& first_use) {
    for (const GemmShape& x : s)
      if (x.first_use == first_use) return x.uses;
    return int64_t(-1);
  };
  EXPECT_EQ(s[0].uses, 2);
  EXPECT_EQ(uses_of("layer 0 attention v: forward"), 4);
  EXPECT_EQ(uses_of("LM head: logits"), 2);
  EXPECT_EQ(uses_of("layer 1 expert fc1: forward"), 8);    // 4 experts × 2 layers
  EXPECT_EQ(uses_of("layer 1 router down: forward"), -1);  // not a first use
}

TEST(GemmShapes, LmHeadRowBlocksAndBf16) {
  ZayaConfig c = tiny();
  c.vocab_size = int64_t(1) << 20;  // 2^24 / 2^20 = 16 rows per block: 40 = 16 + 16 + 8
  const std::vector<GemmUse> u = training_gemms(c, 40, GemmDtype::F32AsBF16);
  std::vector<std::string> lm;
  for (const GemmUse& x : u)
    if (x.what.rfind("LM head", 0) == 0) lm.push_back(x.what + " " + gemm_table::params(x.key));
  ASSERT_EQ(lm.size(), size_t(3 + 3 * 3));
  EXPECT_EQ(lm[0], "LM head: logits tn_1048576_16_64_ld_64_64_1048576");
  EXPECT_EQ(lm[2], "LM head: logits tn_1048576_8_64_ld_64_64_1048576");
  EXPECT_EQ(lm[11], "LM head: dW nt_64_1048576_8_ld_64_1048576_64");
  // train.precision = bf16: every GEMM but the router's rounds its float operands to bf16.
  EXPECT_EQ(gemm_table::op_name(u[0].key), "GemmTunableOp_floatAsBFloat16_TN");
  EXPECT_EQ(gemm_table::op_name(find(u, "layer 1 router mlp 2: dW").key), "GemmTunableOp_float_NT");
  EXPECT_EQ(gemm_table::op_name(find(u, "layer 1 expert fc2: dX").key),
            "GemmTunableOp_floatAsBFloat16_NN");
  // Few tokens: at least one row per expert.
  EXPECT_EQ(gemm_table::params(
                find(training_gemms(tiny(), 2, GemmDtype::F32), "layer 1 expert fc1: forward").key),
            "tn_16_1_64_ld_64_64_16");
  EXPECT_THROW(training_gemms(tiny(), 0, GemmDtype::F32), Error);
}
