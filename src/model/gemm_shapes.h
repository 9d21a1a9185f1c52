// The GEMMs one training micro-batch runs on the GPU, derived from the config in one place (the
// list `zaya tune gemm` tunes; tests/ops/gpu/test_gemm_table_runtime.cpp checks it against what a real
// forward + backward records). Each linear y = x·wᵀ (ops::linear_forward) is three GEMMs: the
// forward, dX = dy·w and dW += dyᵀ·x (linear.cu); the experts' two matrices four more per expert
// (moe.cu); the tied LM head its row blocks (lm_head_xent.cpp): logits forward, and in backward the
// logits again, dX and dW. Not listed: the optimizer's (Muon's Newton–Schulz) GEMMs and the
// logits kept for evaluation.
//
// Expert GEMMs depend on how many rows the router sends to each expert, which changes every step:
// the list uses the balanced count, tokens·top_k / E rows per expert (rounded down, at least 1),
// so a tuned table matches them only when routing is exactly balanced (`expert_rows` marks them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/gemm_table.h"
#include "io/zaya_config.h"

namespace zaya {

struct GemmUse {
  gemm_table::GemmKey key;
  std::string what;      // "layer 0 attention q‖k: forward"
  char expert_rows = 0;  // expert GEMMs: the row-major size (gemm.h's 'M' or 'K') that is M_e
};

// Forward then backward, in the order the model runs them. `dtype`: F32 (train.precision =
// fp32) or F32AsBF16 (bf16) for every GEMM but the router's, which stay F32 (model/moe.cpp).
std::vector<GemmUse> training_gemms(const ZayaConfig& c, int64_t tokens,
                                    gemm_table::GemmDtype dtype);

struct GemmShape {
  gemm_table::GemmKey key;
  std::string first_use;
  int64_t uses = 0;
};
// The distinct keys of `uses`, in first-use order, with how often each is run.
std::vector<GemmShape> distinct_gemms(const std::vector<GemmUse>& uses);

}  // namespace zaya
