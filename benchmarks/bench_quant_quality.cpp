// How far a quantized model's next-token distributions are from a reference's
// (docs/quantization.md, "Quality"): the same token stream through both, then per position the KL
// divergence KL(reference ‖ quantized) in nats, whether the two argmax tokens agree, and the
// reference's loss and the quantized model's on the stream's next tokens. usage:
// bench_quant_quality REFERENCE MODEL... [--tokens N] [--seed S] [--chunk C] Built as
// build/<dir>/benchmarks/bench_quant_quality. REFERENCE and each MODEL are anything
// InferModel::load takes (a model directory or a .gguf file) of the same config.
//
// The stream is N token ids drawn uniformly from the vocabulary with a counter RNG (seed S):
// random-weight models have no text they know, and a real model is better measured with
// `zaya eval` on text. Positions are scored after a warm-up of the first 16 tokens. The
// reference's log-probabilities are held in memory ([N, V] f32) while each model runs, so one
// model is loaded at a time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/assert.h"
#include "core/rng.h"
#include "core/timer.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"

using namespace zaya;

namespace {

constexpr int64_t kWarmup = 16;

// Log-softmax of every position of `ids` under the model at `path`, row-major [N, V] (double sums,
// f32 storage). Empty `ids` are first drawn as the top of this file says (n of them).
std::vector<float> log_probs(const std::string& path, std::vector<int32_t>& ids, int64_t n,
                             uint64_t seed, int64_t chunk, ZayaConfig* config_out) {
  Timer load;
  const InferModel m = InferModel::load(path);
  const ZayaConfig& c = m.config();
  *config_out = c;
  const int64_t V = c.vocab_size;
  if (ids.empty()) {
    const CounterRng rng{seed, 0};
    for (int64_t i = 0; i < n; ++i)
      ids.push_back(int32_t(std::min(int64_t(rng.uniform(uint64_t(i)) * double(V)), V - 1)));
  }
  const int64_t N = int64_t(ids.size());
  ZAYA_CHECK_INPUT(N == n, "{}: stream of {} tokens, expected {}", path, N, n);
  std::printf("  %s: %s weights, %.2f GB, loaded in %.1f s\n", path.c_str(),
              std::string(dtype_name(m.matrix_dtype())).c_str(),
              double(m.total_weight_bytes()) / 1e9, load.seconds());
  std::fflush(stdout);
  SequenceCache cache(c, N);
  Decoder dec(m);
  std::vector<float> out(size_t(N * V)), logits(size_t(chunk * V));
  Timer run;
  for (int64_t p = 0; p < N; p += chunk) {
    const int64_t L = std::min(chunk, N - p);
    const DecodeItem item{&cache, std::span<const int32_t>(ids.data() + p, size_t(L))};
    dec.forward(std::span<const DecodeItem>(&item, 1), Tensor(logits.data(), {L, V}), true);
    for (int64_t r = 0; r < L; ++r) {
      const float* z = logits.data() + r * V;
      const double mx = *std::max_element(z, z + V);
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(double(z[v]) - mx);
      const double lse = mx + std::log(s);
      float* o = out.data() + (p + r) * V;
      for (int64_t v = 0; v < V; ++v) o[v] = float(double(z[v]) - lse);
    }
  }
  std::printf("  %lld positions in %.1f s (%.1f tokens/s)\n", (long long)N, run.seconds(),
              double(N) / run.seconds());
  return out;
}

int run(int argc, char** argv) {
  std::vector<std::string> paths;
  int64_t n = 256, chunk = 64;
  uint64_t seed = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokens" && i + 1 < argc) {
      n = std::stoll(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else if (a == "--chunk" && i + 1 < argc) {
      chunk = std::stoll(argv[++i]);
    } else if (a.rfind("--", 0) == 0) {
      fail("bench_quant_quality: unknown flag '{}'", a);
    } else {
      paths.push_back(a);
    }
  }
  if (paths.size() < 2 || n <= kWarmup + 1 || chunk < 1) {
    std::fprintf(stderr,
                 "usage: bench_quant_quality REFERENCE MODEL... [--tokens N > %lld] [--seed S] "
                 "[--chunk C]\n",
                 (long long)kWarmup + 1);
    return 2;
  }
  ZayaConfig c;
  std::vector<int32_t> ids;
  std::printf("reference (%lld random tokens, seed %llu, scored after %lld):\n", (long long)n,
              (unsigned long long)seed, (long long)kWarmup);
  const std::vector<float> ref = log_probs(paths[0], ids, n, seed, chunk, &c);
  const int64_t V = c.vocab_size;
  auto nll = [&](const std::vector<float>& lp) {
    double s = 0;
    for (int64_t p = kWarmup; p + 1 < n; ++p) s -= lp[size_t(p * V + ids[size_t(p + 1)])];
    return s / double(n - 1 - kWarmup);
  };
  std::printf("  loss on the stream %.4f nats/token\n\n", nll(ref));
  std::printf("%-40s %12s %12s %10s %12s\n", "model", "mean KL", "max KL", "top-1 agree",
              "loss delta");
  for (size_t k = 1; k < paths.size(); ++k) {
    ZayaConfig ck;
    const std::vector<float> q = log_probs(paths[k], ids, n, seed, chunk, &ck);
    if (ck.vocab_size != V)
      fail("{}: vocabulary {} differs from the reference's {}", paths[k], ck.vocab_size, V);
    double kl_sum = 0, kl_max = 0;
    int64_t agree = 0, scored = 0;
    for (int64_t p = kWarmup; p < n; ++p) {
      const float* a = ref.data() + p * V;
      const float* b = q.data() + p * V;
      double kl = 0;
      for (int64_t v = 0; v < V; ++v) kl += std::exp(double(a[v])) * (double(a[v]) - double(b[v]));
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
      ++scored;
    }
    std::printf("%-40s %12.6f %12.6f %9.2f%% %+12.5f\n", paths[k].c_str(), kl_sum / double(scored),
                kl_max, 100.0 * double(agree) / double(scored), nll(q) - nll(ref));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_quant_quality: %s\n", e.what());
    return 1;
  }
}
