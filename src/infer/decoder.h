// Decoder: the ZAYA1 forward pass for inference over a batch of sequences, each bringing some new
// tokens (a prompt chunk when prefilling, one token when decoding) and its SequenceCache. The new
// tokens of all sequences are flattened into one [N, D] stream so every weight matrix is read once
// per step for the whole batch; only the conv, value shift and attention look at one sequence at
// a time (through its cache). Same equations as model/transformer.cpp, forward only: each
// attention sub-layer rotates with its own θ (rope_theta_of), and a sliding-window one attends
// over its cache's bounded buffer (cache.h), a long chunk in pieces that fit it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "infer/cache.h"
#include "infer/infer_model.h"

namespace zaya {

struct DecodeItem {
  SequenceCache* cache;             // positions continue at cache->length()
  std::span<const int32_t> tokens;  // ≥ 1 new token ids
};

class Decoder {
 public:
  explicit Decoder(const InferModel& m) : m_(m) {}
  // Runs the new tokens of every item, appends them to the caches (advancing their lengths) and
  // writes logits[rows, V] (F32): one row per item (its last token), or with all_positions one row
  // per token, item by item.
  void forward(std::span<const DecodeItem> items, const Tensor& logits, bool all_positions = false);
  // Bytes of weights the last forward read: every weight but the experts, the embedding rows of
  // its tokens, and each expert that at least one token was routed to (once, for all of them).
  int64_t weight_bytes_read() const { return weight_bytes_read_; }

 private:
  void attention(int64_t i, std::span<const DecodeItem> items, const Tensor& x, const Tensor& out);
  // The attention of one sequence's L new tokens on a windowed sub-layer (cache.h): appends their
  // K rows k[L, Hk·d] and V = [p1 ; p2] to the sliding buffer and writes att[L, Hq, d].
  void attend_window(LayerCache& lc, int64_t start, const Tensor& att, const Tensor& q,
                     const Tensor& k, const Tensor& p1, const Tensor& p2);
  void moe(int64_t i, const Tensor& x, const Tensor& rprev, const Tensor& r, const Tensor& out);
  Tensor scratch(size_t slot, DType t, std::initializer_list<int64_t> dims);

  const InferModel& m_;
  std::vector<std::vector<float>> scratch_;  // reused between calls
  std::vector<int64_t> pos_;                 // position of every token of the current call
  Tensor cos_, sin_;                         // RoPE tables, one row per token of the call
  Tensor cos_w_, sin_w_;  // the same for theta_w_, the other θ some sub-layers use (if any)
  double theta_w_ = 0;
  // Host-side metadata of a call (token ids, row indices, the router's choices copied back),
  // reused between calls; the ops read them as I32 row-id tensors.
  std::vector<int32_t> host_ids_, host_rows_, host_choice_;
  std::vector<std::vector<int32_t>> expert_tokens_;  // per class: the tokens routed to it
  int64_t weight_bytes_read_ = 0;
};

}  // namespace zaya
