// Decoding a native-layout model: InferModel::load_dir reads a native directory (renamed tensors,
// experts viewed in the stacked mapping) and its cached decode reproduces the native full forward
// at every position, skip class included (skip_e routes tokens to it: there native logits differ
// from the original semantics' ones, and the decoder follows the native ones).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
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

std::vector<float> full_logits(const Model& m, const std::vector<int32_t>& ids) {
  const int64_t T = int64_t(ids.size()), V = m.config().vocab_size;
  Activations a(m.config(), 1, T);
  model_forward(m, a, ids.data());
  const float* p = a.logits.ptr<float>();
  return std::vector<float>(p, p + T * V);
}

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

TEST(DecodeNative, NativeDirectoryDecodesLikeTheNativeForward) {
  for (const char* name : {"tiny_a", "skip_e"}) {
    const std::string src = std::string(ZAYA_TEST_DATA) + "/model/" + name;
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
