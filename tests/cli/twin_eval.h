// `zaya eval` of a model against the PyTorch twin's expected values (a case's expected.safetensors,
// or expected_native.safetensors for the native semantics): the loss within kModelLossAbs, the
// logits within kModelLogitRel of the largest |logit|, every gradient within kModelGradRelL2
// (relative L2; a gradient that is zero in the twin is skipped: its rows are not in the file
// zaya eval writes either way). Shared by the convert tests of both layouts.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace zaya::test {

// Every value of tensor `name` in `st`, as doubles.
inline std::vector<double> read_all(const SafeTensors& st, const std::string& name) {
  const SafeTensorInfo& info = st.at(name);
  std::vector<double> v(size_t(info.numel()));
  Tensor t(v.data(), {info.numel()});
  t.ndim = int(info.shape.size());
  for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = info.shape[size_t(k)];
  st.read_into(name, t);
  return v;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// `zaya eval` of `model` on `tokens` (run in `dir`), writing `logits` and `grads`; the loss it
// prints.
inline double eval_loss(const std::filesystem::path& dir, const std::filesystem::path& model,
                        const std::filesystem::path& tokens, const std::filesystem::path& logits,
                        const std::filesystem::path& grads) {
  const CliResult r = run_zaya_in(dir.string(), "eval --quiet --model " + model.string() +
                                                    " --tokens " + tokens.string() + " --logits " +
                                                    logits.string() + " --grads " + grads.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("loss ", 0), 0u) << r.out;
  return r.out.size() > 5 ? std::stod(r.out.substr(5)) : 0.0;
}

// The loss, logits and gradients `zaya eval` gave against the twin's file `expected`.
inline void expect_eval_matches_twin(double loss, const std::filesystem::path& logits_file,
                                     const std::filesystem::path& grads_file,
                                     const std::filesystem::path& expected) {
  const SafeTensors want = SafeTensors::open_file(expected.string());
  EXPECT_NEAR(loss, read_all(want, "loss")[0], kModelLossAbs) << expected;
  const std::vector<double> got = read_all(SafeTensors::open_file(logits_file.string()), "logits"),
                            wl = read_all(want, "logits");
  ASSERT_EQ(got.size(), wl.size());
  double worst = 0;
  for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::abs(got[k] - wl[k]));
  EXPECT_LE(worst, kModelLogitRel * max_abs(wl)) << expected;
  const SafeTensors grads = SafeTensors::open_file(grads_file.string());
  for (const std::string& n : want.names()) {
    if (n == "loss" || n == "logits") continue;
    const std::vector<double> g = read_all(grads, n), w = read_all(want, n);
    if (max_abs(w) > 0) {
      EXPECT_LE(rel_l2(g.data(), w.data(), g.size()), kModelGradRelL2) << n;
    }
  }
}

}  // namespace zaya::test
