// Decoding with caches equals the full-sequence forward: for every twin test model (random tiny
// configs with random biases, GQA 1–8, odd head sizes, skip class, no EDA, no MoD), logits from
// prefill + incremental decode — in every chunking, including prompts of 1 and 2 tokens (the conv
// padding) and several sequences of different lengths in one batch — match model_forward's logits
// at every position within 1e-5 relative (of the largest logit), with F32 weights; a model
// read from a native-layout directory decodes like its native-semantics forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "model/activations.h"
#include "model/model.h"
#include "model/transformer.h"
#include "test_util.h"

namespace zaya {
namespace {

constexpr double kDecodeRel = 1e-5;  // the bound, relative to the largest |logit|

std::vector<std::string> model_cases() {
  std::vector<std::string> dirs;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(ZAYA_TEST_FIXTURES) + "/model"))
    if (e.is_directory()) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::vector<int32_t> random_tokens(int64_t T, int64_t V, uint64_t seed) {
  CounterRng rng{seed, 7};
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t(rng.bits(uint64_t(t)) % uint64_t(V));
  return ids;
}

// Full-sequence logits [T, V] from the training forward.
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

// Runs `ids` through the decoder in chunks of the given sizes (cycled), checking every position.
void check_chunking(const InferModel& im, const std::vector<int32_t>& ids,
                    const std::vector<float>& want, const std::vector<int64_t>& chunks,
                    const std::string& what) {
  const int64_t T = int64_t(ids.size()), V = im.config().vocab_size;
  SequenceCache cache(im.config(), T);
  Decoder dec(im);
  int64_t t = 0;
  for (size_t k = 0; t < T; ++k) {
    const int64_t L = std::min(chunks[k % chunks.size()], T - t);
    std::vector<float> logits(size_t(L * V));
    DecodeItem item{&cache, std::span<const int32_t>(ids).subspan(size_t(t), size_t(L))};
    dec.forward({&item, 1}, Tensor(logits.data(), {L, V}), /*all_positions=*/true);
    expect_rows_close(logits.data(), want.data() + t * V, L * V,
                      what + " positions " + std::to_string(t) + ".." + std::to_string(t + L - 1));
    t += L;
  }
  EXPECT_EQ(cache.length(), T);
}

TEST(Decode, PrefillAndIncrementalDecodeMatchFullForward) {
  for (const std::string& dir : model_cases()) {
    const Model m = Model::load_dir(dir);
    const InferModel im = InferModel::from_model(m);
    const auto ids = random_tokens(11, m.config().vocab_size, 3);
    const auto want = full_logits(m, ids);
    const std::string name = std::filesystem::path(dir).filename().string();
    check_chunking(im, ids, want, {11}, name + " prefill");
    check_chunking(im, ids, want, {1}, name + " token by token");
    check_chunking(im, ids, want, {2, 1, 3}, name + " chunks 2,1,3");
    check_chunking(im, ids, want, {5, 1}, name + " prefill 5 then decode");
  }
}

TEST(Decode, ShortPromptsOfOneAndTwoTokens) {
  for (const std::string& dir : model_cases()) {
    const Model m = Model::load_dir(dir);
    const InferModel im = InferModel::from_model(m);
    const std::string name = std::filesystem::path(dir).filename().string();
    for (int64_t T : {1, 2, 3}) {
      const auto ids = random_tokens(T, m.config().vocab_size, 10 + uint64_t(T));
      const auto want = full_logits(m, ids);
      check_chunking(im, ids, want, {T}, name + " prompt of " + std::to_string(T));
      check_chunking(im, ids, want, {1}, name + " decode from 1, length " + std::to_string(T));
    }
  }
}

// Several sequences of different lengths share each forward; their logits are their own.
TEST(Decode, BatchedSequencesOfDifferentLengths) {
  for (const std::string& dir : model_cases()) {
    const Model m = Model::load_dir(dir);
    const InferModel im = InferModel::from_model(m);
    const int64_t V = m.config().vocab_size;
    const std::string name = std::filesystem::path(dir).filename().string();
    const std::vector<int64_t> prompt = {1, 4, 2, 7}, total = {6, 9, 3, 10};
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::vector<float>> want;
    std::vector<std::unique_ptr<SequenceCache>> caches;
    for (size_t s = 0; s < prompt.size(); ++s) {
      ids.push_back(random_tokens(total[s], V, 100 + s));
      want.push_back(full_logits(m, ids[s]));
      caches.push_back(std::make_unique<SequenceCache>(m.config(), total[s]));
    }
    Decoder dec(im);
    std::vector<int64_t> done(prompt.size(), 0);
    for (int step = 0;; ++step) {
      std::vector<DecodeItem> items;
      std::vector<size_t> who;
      for (size_t s = 0; s < prompt.size(); ++s) {
        if (done[s] == total[s]) continue;
        const int64_t L = done[s] == 0 ? prompt[s] : 1;  // prefill, then one token a step
        items.push_back({caches[s].get(),
                         std::span<const int32_t>(ids[s]).subspan(size_t(done[s]), size_t(L))});
        who.push_back(s);
      }
      if (items.empty()) break;
      std::vector<float> logits(items.size() * size_t(V));
      dec.forward(items, Tensor(logits.data(), {int64_t(items.size()), V}));
      for (size_t k = 0; k < items.size(); ++k) {
        const size_t s = who[k];
        done[s] += int64_t(items[k].tokens.size());
        expect_rows_close(
            logits.data() + k * size_t(V), want[s].data() + (done[s] - 1) * V, V,
            name + " step " + std::to_string(step) + " sequence " + std::to_string(s));
      }
    }
  }
}

// A native-layout directory (renamed tensors, experts viewed in the stacked mapping) decodes like
// the native full forward, skip class included: skip_e routes tokens of its first row to skip, so
// there the native logits differ from the original semantics' ones and the decoder follows them.
// The first row of a twin case's tokens.txt.
std::vector<int32_t> first_row(const std::string& dir) {
  std::ifstream f(dir + "/tokens.txt");
  std::string line;
  std::getline(f, line);
  std::istringstream in(line);
  std::vector<int32_t> ids;
  for (int32_t x; in >> x;) ids.push_back(x);
  return ids;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t k = 0; k < a.size(); ++k) d = std::max(d, std::fabs(double(a[k]) - double(b[k])));
  return d;
}

TEST(Decode, NativeDirectoryDecodesLikeTheNativeForward) {
  for (const char* name : {"tiny_a", "skip_e"}) {
    const std::string src = std::string(ZAYA_TEST_FIXTURES) + "/model/" + name;
    const Model orig = Model::load_dir(src);
    Model native(with_semantics(orig.config(), Semantics::Native));
    std::copy_n(orig.params(), orig.layout().total, native.params());
    test::ScratchDir dir;
    native.save_dir(dir / "native");
    const InferModel im = InferModel::load_dir(dir / "native");
    ASSERT_EQ(im.config().semantics, Semantics::Native);

    const std::vector<int32_t> ids = first_row(src);
    const int64_t T = int64_t(ids.size()), V = orig.config().vocab_size;
    const std::vector<float> want = full_logits(native, ids), orig_logits = full_logits(orig, ids);
    double scale = 0;
    for (float x : want) scale = std::max(scale, std::fabs(double(x)));
    const double semantic_gap = max_abs_diff(want, orig_logits);
    std::printf("%s: native vs original logits differ by %.3g (of max |logit| %.3g)\n", name,
                semantic_gap, scale);
    if (std::string(name) == "skip_e")
      EXPECT_GT(semantic_gap, 1e-3 * scale);  // the row routes tokens to skip
    else
      EXPECT_EQ(semantic_gap, 0.0);

    SequenceCache cache(im.config(), T);
    Decoder dec(im);
    std::vector<float> got(size_t(T * V));
    for (int64_t t = 0; t < T; ++t) {  // token by token
      DecodeItem item{&cache, std::span<const int32_t>(ids).subspan(size_t(t), 1)};
      dec.forward({&item, 1}, Tensor(got.data() + t * V, {1, V}), /*all_positions=*/true);
    }
    test::expect_close(got.data(), want.data(), got.size(), 1e-5 * scale, 1e-5, name);
  }
}

}  // namespace
}  // namespace zaya
