// Decoding with sliding-window sub-layers (infer/cache.h): prefill and incremental decode over 3·W
// tokens match the training forward's recomputation (model_forward, the windowed attention ops)
// at every position within 1e-5 relative, and the float64 twin's windowed cases
// (tests/fixtures/model_swa) within the model tolerance of 1e-4, for W = 1, windows across the
// buffer's slide step, windows larger than the sequence (then equal to a model without windows),
// mixed full and windowed sub-layers with their own RoPE θ, GQA and odd head sizes; greedy decoding
// picks the recomputation's argmax at every step; and the windowed sub-layers' K/V memory is fixed
// by the window, not the context (measured on the allocated tensors and the whole cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/rng.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "io/file.h"
#include "io/json_parse.h"
#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"

namespace zaya {
namespace {

constexpr double kDecodeRel = 1e-5;  // test_decoder.cpp's bound, relative to the largest |logit|

std::string case_dir(const char* name) {
  return std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
}

std::vector<int32_t> random_tokens(int64_t T, int64_t V, uint64_t seed) {
  CounterRng rng{seed, 7};
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t(rng.bits(uint64_t(t)) % uint64_t(V));
  return ids;
}

// A twin case's weights under a config with the given windows per sub-layer (0: full) and θ.
Model windowed(const char* name, std::vector<int64_t> swa, double swa_theta = 0) {
  const Model base = Model::load_dir(case_dir(name));
  ZayaConfig c = base.config();
  c.swa_layers = std::move(swa);
  c.swa_rope_theta = swa_theta;
  Model m(c);
  std::copy_n(base.params(), base.layout().total, m.params());
  return m;
}

// Windows W on every attention sub-layer, or on the first one only (mixed).
std::vector<int64_t> windows(const ZayaConfig& c, int64_t W, bool mixed) {
  std::vector<int64_t> swa(size_t(c.num_layers()), 0);
  bool first = true;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i)) {
      if (!mixed || first) swa[size_t(i)] = W;
      first = false;
    }
  return swa;
}

std::vector<float> full_logits(const Model& m, const std::vector<int32_t>& ids) {
  const int64_t T = int64_t(ids.size()), V = m.config().vocab_size;
  Activations a(m.config(), 1, T, Device::Cpu, /*keep_logits=*/true);
  model_forward(m, a, ids.data());
  const float* p = a.logits.ptr<float>();
  return std::vector<float>(p, p + T * V);
}

void expect_rows_close(const float* got, const float* want, int64_t n, const std::string& what) {
  double scale = 0;
  for (int64_t k = 0; k < n; ++k) scale = std::max(scale, std::fabs(double(want[k])));
  test::expect_close(got, want, size_t(n), kDecodeRel * scale, kDecodeRel, what.c_str());
}

// Runs ids through the decoder in the given chunk sizes (cycled), logits at every position.
std::vector<float> decode(const InferModel& im, const std::vector<int32_t>& ids,
                          const std::vector<int64_t>& chunks, int64_t capacity) {
  const int64_t T = int64_t(ids.size()), V = im.config().vocab_size;
  SequenceCache cache(im.config(), capacity);
  Decoder dec(im);
  std::vector<float> out(size_t(T * V));
  for (int64_t t = 0, k = 0; t < T; ++k) {
    const int64_t L = std::min(chunks[size_t(k) % chunks.size()], T - t);
    DecodeItem item{&cache, std::span<const int32_t>(ids).subspan(size_t(t), size_t(L))};
    dec.forward({&item, 1}, Tensor(out.data() + t * V, {L, V}), /*all_positions=*/true);
    t += L;
  }
  return out;
}

TEST(DecodeWindow, CachedDecodeEqualsRecomputationOver3W) {
  for (const char* name : {"tiny_a", "gqa4_c", "odd_d", "skip_e"}) {
    for (int64_t W : {1, 2, 3, 5, 8}) {
      for (bool mixed : {false, true}) {
        const ZayaConfig base = Model::load_dir(case_dir(name)).config();
        // Mixed: one windowed sub-layer, the others full, the windowed one with its own θ.
        const Model m = windowed(name, windows(base, W, mixed), mixed ? 500.0 : 0.0);
        const InferModel im = InferModel::from_model(m);
        const int64_t T = 3 * W + 1;
        const auto ids = random_tokens(T, m.config().vocab_size, uint64_t(10 * W + mixed));
        const auto want = full_logits(m, ids);
        const std::string what =
            std::string(name) + " W " + std::to_string(W) + (mixed ? " mixed" : " all windowed");
        const int64_t V = m.config().vocab_size;
        for (const auto& chunks :
             std::vector<std::vector<int64_t>>{{T}, {1}, {2, 1, 3}, {W + 1, 1}, {2 * W + 1, 1}}) {
          std::string c = " chunks";
          for (int64_t x : chunks) c += " " + std::to_string(x);
          for (int64_t cap : {T, 4 * T}) {
            const auto got = decode(im, ids, chunks, cap);
            expect_rows_close(got.data(), want.data(), T * V,
                              what + c + " capacity " + std::to_string(cap));
          }
        }
      }
    }
  }
}

TEST(DecodeWindow, AWindowLargerThanTheSequenceIsFullAttention) {
  for (const char* name : {"tiny_a", "gqa4_c"}) {
    const Model full = Model::load_dir(case_dir(name));
    const Model m = windowed(name, windows(full.config(), 64, false));
    const InferModel im = InferModel::from_model(m);
    const auto ids = random_tokens(20, m.config().vocab_size, 5);
    const auto want = full_logits(full, ids);  // no windows at all
    const int64_t V = m.config().vocab_size;
    expect_rows_close(decode(im, ids, {1}, 20).data(), want.data(), 20 * V, name);
    expect_rows_close(decode(im, ids, {7, 1}, 40).data(), want.data(), 20 * V, name);
  }
}

TEST(DecodeWindow, GreedyDecodingPicksTheRecomputationsArgmax) {
  for (int64_t W : {1, 4, 6}) {
    const ZayaConfig base = Model::load_dir(case_dir("tiny_a")).config();
    const Model m = windowed("tiny_a", windows(base, W, true), 2000.0);
    const InferModel im = InferModel::from_model(m);
    const int64_t V = m.config().vocab_size, P = 3, T = P + 3 * W;
    std::vector<int32_t> ids = random_tokens(P, V, 77);
    SequenceCache cache(m.config(), T);
    Decoder dec(im);
    std::vector<float> logits(static_cast<size_t>(V));
    std::vector<std::vector<float>> rows;
    for (int64_t fed = 0; int64_t(ids.size()) < T;) {
      DecodeItem item{&cache,
                      std::span<const int32_t>(ids).subspan(size_t(fed), ids.size() - size_t(fed))};
      fed = int64_t(ids.size());
      dec.forward({&item, 1}, Tensor(logits.data(), {1, V}));
      rows.push_back(logits);
      ids.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    const auto want = full_logits(m, ids);
    for (size_t k = 0; k < rows.size(); ++k) {
      const int64_t t = P - 1 + int64_t(k);  // the position whose logits drew ids[t + 1]
      const float* w = want.data() + t * V;
      expect_rows_close(rows[k].data(), w, V,
                        "W " + std::to_string(W) + " step " + std::to_string(k));
      EXPECT_EQ(ids[size_t(t + 1)], int32_t(std::max_element(w, w + V) - w))
          << "W " << W << " position " << t;
    }
  }
}

// The float64 twin's windowed cases, their windows and θ set from config.json's legacy names (as
// tests/model/test_attention_window.cpp reads them): decoded token by token and in chunks, every
// position's logits within 1e-4 of the largest |logit| of the twin's.
TEST(DecodeWindow, TwinWindowedCasesDecodeLikeTheFloat64Reference) {
  for (const char* name : {"swa_i", "swa_j"}) {
    const std::string dir = std::string(ZAYA_TEST_FIXTURES) + "/model_swa/" + name;
    const nlohmann::json j = parse_json(read_text_file(dir + "/config.json", "config"));
    ZayaConfig c = config_from_json(j);
    c.swa_layers = j.at("swa_layers").get<std::vector<int64_t>>();
    c.swa_rope_theta = j.at("swa_rotary_base").get<double>();
    Model m(c);
    m.load_weights(SafeTensors::open_file(dir + "/model.safetensors"), dir);
    const InferModel im = InferModel::from_model(m);
    const TokenLines tl = read_token_lines(dir + "/tokens.txt", c.vocab_size);
    const int64_t V = c.vocab_size, T = tl.cols;
    std::vector<double> ref(size_t(tl.rows * T * V));
    SafeTensors::open_file(dir + "/expected.safetensors")
        .read_into("logits", Tensor(ref.data(), {tl.rows, T, V}));
    for (int64_t r = 0; r < tl.rows; ++r) {
      const std::vector<int32_t> ids(tl.ids.begin() + r * T, tl.ids.begin() + (r + 1) * T);
      const std::vector<float> want(ref.begin() + r * T * V, ref.begin() + (r + 1) * T * V);
      double scale = 0;
      for (float x : want) scale = std::max(scale, std::fabs(double(x)));
      for (const auto& chunks : std::vector<std::vector<int64_t>>{{1}, {T}, {4, 1}}) {
        const auto got = decode(im, ids, chunks, T);
        const std::string what =
            std::string(name) + " row " + std::to_string(r) + " chunk " + std::to_string(chunks[0]);
        test::expect_close(got.data(), want.data(), size_t(T * V), 1e-4 * scale, 1e-4,
                           what.c_str());
      }
    }
  }
}

// K/V bytes actually allocated for sub-layer i.
int64_t layer_kv_bytes(const SequenceCache& s, int64_t i) {
  const LayerCache& l = s.layer(i);
  return int64_t(l.k.nbytes() + l.v.nbytes());
}

TEST(DecodeWindow, WindowedMemoryStaysFlatPastTheWindow) {
  const ZayaConfig base = Model::load_dir(case_dir("tiny_a")).config();
  const int64_t W = 5;
  const Model m = windowed("tiny_a", windows(base, W, true));
  const ZayaConfig& c = m.config();
  const int64_t row = 2 * c.kv_heads() * c.head_dim() * int64_t(sizeof(float));
  // Allocated bytes, per sub-layer and for the whole cache, as the context grows past W.
  int64_t windowed_bytes = -1;
  size_t all_windowed_prev = 0;
  const Model only = windowed("tiny_a", windows(base, W, false));
  for (int64_t T : {3 * W, 10 * W, 100 * W, 1000 * W}) {
    const SequenceCache s(c, T);
    int64_t kv = 0;
    for (int64_t i = 0; i < c.num_layers(); ++i) {
      if (!c.is_attention(i)) continue;
      kv += layer_kv_bytes(s, i);
      if (c.window(i) > 0) {
        if (windowed_bytes < 0) windowed_bytes = layer_kv_bytes(s, i);
        EXPECT_EQ(layer_kv_bytes(s, i), windowed_bytes) << "context " << T;
        EXPECT_LT(layer_kv_bytes(s, i), 2 * W * row) << "context " << T;
      } else {
        EXPECT_EQ(layer_kv_bytes(s, i), T * row) << "context " << T;
      }
    }
    std::printf("context %6lld: K/V %8lld bytes (full %lld + windowed %lld); all windowed %zu\n",
                (long long)T, (long long)kv, (long long)(SequenceCache::bytes_per_token(c) * T),
                (long long)(kv - SequenceCache::bytes_per_token(c) * T),
                SequenceCache(only.config(), T).bytes());
    EXPECT_EQ(kv, SequenceCache::kv_bytes(c, T));
    EXPECT_EQ(kv, SequenceCache::bytes_per_token(c) * T + SequenceCache::window_bytes(c));
    // With every sub-layer windowed, the whole allocation does not grow at all.
    const SequenceCache o(only.config(), T);
    if (all_windowed_prev > 0) EXPECT_EQ(o.bytes(), all_windowed_prev) << "context " << T;
    all_windowed_prev = o.bytes();
  }
  EXPECT_EQ(SequenceCache::bytes_per_token(only.config()), 0);

  // Decoding 3·W tokens one by one moves nothing: the same tensors, the same bytes.
  const InferModel im = InferModel::from_model(m);
  SequenceCache s(c, 3 * W);
  const size_t bytes = s.bytes();
  std::vector<void*> data;
  for (int64_t i = 0; i < c.num_layers(); ++i)
    if (c.is_attention(i)) data.push_back(s.layer(i).k.data);
  Decoder dec(im);
  const auto ids = random_tokens(3 * W, c.vocab_size, 9);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  for (int64_t t = 0; t < 3 * W; ++t) {
    DecodeItem item{&s, std::span<const int32_t>(ids).subspan(size_t(t), 1)};
    dec.forward({&item, 1}, Tensor(logits.data(), {1, c.vocab_size}));
    EXPECT_EQ(s.bytes(), bytes);
    size_t k = 0;
    for (int64_t i = 0; i < c.num_layers(); ++i)
      if (c.is_attention(i)) EXPECT_EQ(s.layer(i).k.data, data[k++]);
  }
}

}  // namespace
}  // namespace zaya
