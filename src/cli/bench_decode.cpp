// zaya bench decode [--model DIR|FILE.gguf [--bf16] | --config CONFIG.json [--dtype bf16|f32]]
// [--batch B]
//                   [--prompt-tokens P] [--tokens N] [--seed S] [--bandwidth-mib M] [--json]
// Decode throughput against the machine's memory bandwidth, measured in the same run. A decode step
// reads every weight once (attention and its conv, norms, the router, the tied LM head) except the
// experts no token of the step was routed to (Decoder::weight_bytes_read: a token routed to the
// skip class reads none, a batch may read several), so the rate is bounded by bandwidth / bytes
// per step. Printed: decode tokens/s, the median step, weight bytes read per step, the bandwidth
// that implies, the machine's read-only and copy bandwidth (perf/bandwidth.h), and their ratio.
// The bound is the read-only bandwidth: a decode step reads its weights and writes next to
// nothing, so bytes read per step over bytes read per second is the honest limit. The copy
// figure (read + written bytes of a memcpy, STREAM's convention) is printed beside it and is not
// a bound for a read-only stream: where a core's read rate is limited by its outstanding misses
// (a VM slice of a large host) a copy can move more bytes per second than a read, and a bound
// taken from it then asks the decoder for a rate no read-only stream reaches.
//
// The samples are paired in time: every timed decode step is followed by one pass of each
// bandwidth probe, and the ratio compares the median over steps of (bytes read / step time) with
// the median probe passes. On a shared machine whose bandwidth drifts by tens of percent within
// seconds, a best-of probe taken once beside an average over many steps would measure the
// neighbours, not the decoder. The ratio of the means (all bytes / all time on both sides) is
// printed beside it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/timer.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "infer/model_source.h"
#include "perf/bandwidth.h"

namespace zaya::cli {

namespace {

struct BenchDecodeArgs {
  std::string model, config, dtype = "bf16";
  int64_t batch = 1, prompt_tokens = 16, tokens = 32, bandwidth_mib = 512;
  uint64_t seed = 1;
  bool json = false, bf16 = false;
};

double gib(double bytes) {
  return bytes / double(1ull << 30);
}

// Bytes per second over all passes together (each pass moves the same bytes): the harmonic mean.
double rate_of_passes(const std::vector<double>& rates) {
  double inv = 0;
  for (double r : rates) inv += 1.0 / r;
  return double(rates.size()) / inv;
}

int run_bench_decode(const BenchDecodeArgs& a) {
  if (a.model.empty() == a.config.empty()) fail("give exactly one of --model DIR or --config FILE");
  if (a.dtype != "bf16" && a.dtype != "f32") fail("--dtype must be bf16 or f32, not '{}'", a.dtype);
  if (a.bf16 && a.model.empty()) fail("--bf16 applies to --model (a --config model takes --dtype)");
  Timer load;
  std::unique_ptr<InferModel> im;
  if (!a.model.empty()) {
    const ModelSource src = open_model_source(a.model);
    if (const std::string line = src.line(); !line.empty())
      std::fprintf(stderr, "bench decode: %s\n", line.c_str());
    im = std::make_unique<InferModel>(src.load_weights(a.bf16));
  } else {
    im = std::make_unique<InferModel>(InferModel::random(
        load_config(a.config), a.seed, a.dtype == "bf16" ? DType::BF16 : DType::F32));
  }
  const ZayaConfig& c = im->config();
  const int64_t B = a.batch, P = a.prompt_tokens, N = a.tokens, V = c.vocab_size;
  if (P + N > c.max_position_embeddings)
    fail("--prompt-tokens + --tokens = {} exceeds the model's context of {}", P + N,
         c.max_position_embeddings);
  std::fprintf(stderr, "bench decode: %s, %s weights (%.2f GiB), loaded in %.1f s\n",
               im->source().c_str(), std::string(dtype_name(im->matrix_dtype())).c_str(),
               gib(double(im->total_weight_bytes())), load.seconds());

  // Probe buffers first: their allocation and first touch are not timed.
  BandwidthProbe probe(size_t(a.bandwidth_mib) << 20);

  // B sequences: prefill P random tokens each, then N greedy decode steps for all B together.
  std::vector<std::unique_ptr<SequenceCache>> caches;
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(B));
  CounterRng rng{a.seed, 99};
  for (int64_t b = 0; b < B; ++b) {
    caches.push_back(std::make_unique<SequenceCache>(c, P + N));
    for (int64_t t = 0; t < P; ++t)
      ids[size_t(b)].push_back(int32_t(rng.bits(uint64_t(b * P + t)) % uint64_t(V)));
  }
  Decoder dec(*im);
  std::vector<float> logits(size_t(B * V));
  const Tensor lt(logits.data(), {B, V});
  auto step = [&](bool prompt) {
    std::vector<DecodeItem> items;
    for (int64_t b = 0; b < B; ++b) {
      std::span<const int32_t> all(ids[size_t(b)]);
      items.push_back({caches[size_t(b)].get(), prompt ? all : all.last(1)});
    }
    dec.forward(items, lt);
    for (int64_t b = 0; b < B; ++b) {
      const float* row = logits.data() + b * V;
      ids[size_t(b)].push_back(int32_t(std::max_element(row, row + V) - row));
    }
  };
  Timer prefill_timer;
  step(true);
  const double prefill_s = prefill_timer.seconds();
  step(false);  // untimed: first touch of the decode path and of the probes
  probe.read_pass();
  probe.copy_pass();
  const int64_t steps = N - 1;
  // Per timed step: its seconds, the weight bytes it read and their rate, then one pass of each
  // probe (bytes per second).
  std::vector<double> step_s, step_bytes, step_rates, read_rates, copy_rates;
  for (int64_t k = 0; k < steps; ++k) {
    Timer t;
    step(false);
    step_s.push_back(t.seconds());
    step_bytes.push_back(double(dec.weight_bytes_read()));
    step_rates.push_back(step_bytes.back() / step_s.back());
    read_rates.push_back(probe.read_pass());
    copy_rates.push_back(probe.copy_pass());
  }
  double decode_s = 0, bytes_total = 0;
  for (int64_t k = 0; k < steps; ++k)
    decode_s += step_s[size_t(k)], bytes_total += step_bytes[size_t(k)];

  const double bytes_per_step = bytes_total / double(steps);
  const double steps_per_s = double(steps) / decode_s;  // what a user sees over the whole run
  const double median_step_s = median(step_s);
  const double achieved = median(step_rates);  // weight bytes streamed per second
  const double read_bw = median(read_rates), copy_bw = median(copy_rates);
  const double bound_bw = read_bw;
  const double bound_rate = bound_bw / bytes_per_step;
  const double ratio = achieved / bound_bw;
  // The same comparison with means (total bytes over total time on both sides): outlier steps
  // and outlier probe passes count here.
  const double ratio_of_means = bytes_total / decode_s / rate_of_passes(read_rates);
  if (a.json) {
    nlohmann::json j = {{"model", im->source()},
                        {"dtype", std::string(dtype_name(im->matrix_dtype()))},
                        {"batch", B},
                        {"prompt_tokens", P},
                        {"decode_steps", steps},
                        {"prefill_tokens_per_s", double(B * P) / prefill_s},
                        {"decode_tokens_per_s", steps_per_s * double(B)},
                        {"decode_steps_per_s", steps_per_s},
                        {"median_step_seconds", median_step_s},
                        {"weight_bytes_per_step", bytes_per_step},
                        {"weight_bytes_per_routed_token", double(im->active_weight_bytes())},
                        {"achieved_bytes_per_s", achieved},
                        {"read_bandwidth", read_bw},
                        {"copy_bandwidth", copy_bw},
                        {"bound_steps_per_s", bound_rate},
                        {"ratio", ratio},
                        {"ratio_of_means", ratio_of_means}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model                 %s (%s weights)\n", im->source().c_str(),
              std::string(dtype_name(im->matrix_dtype())).c_str());
  std::printf("batch                 %lld sequences, prompt %lld tokens, %lld decode steps\n",
              (long long)B, (long long)P, (long long)steps);
  std::printf("prefill               %.1f tokens/s\n", double(B * P) / prefill_s);
  std::printf("decode                %.2f tokens/s (%.2f steps/s × %lld sequences)\n",
              steps_per_s * double(B), steps_per_s, (long long)B);
  std::printf("median step           %.2f ms (%.2f steps/s)\n", 1e3 * median_step_s,
              1.0 / median_step_s);
  std::printf(
      "weights read / step   %.1f MiB (mean; every weight but the experts no token was "
      "routed to)\n",
      bytes_per_step / double(1 << 20));
  std::printf("achieved              %.2f GB/s of weights (median over steps)\n", achieved / 1e9);
  std::printf(
      "read bandwidth        %.2f GB/s (read-only stream; median of %lld passes, one after "
      "each step)\n",
      read_bw / 1e9, (long long)steps);
  std::printf(
      "copy bandwidth        %.2f GB/s (memcpy, read + written; median of %lld passes; not the "
      "bound)\n",
      copy_bw / 1e9, (long long)steps);
  std::printf("bound                 %.2f steps/s (read bandwidth %.2f GB/s / %.1f MiB)\n",
              bound_rate, bound_bw / 1e9, bytes_per_step / double(1 << 20));
  std::printf("ratio                 %.1f%% of the bandwidth bound (achieved / read bandwidth)\n",
              100.0 * ratio);
  std::printf("ratio of means        %.1f%% (all steps / all probe passes, outliers included)\n",
              100.0 * ratio_of_means);
  return 0;
}

}  // namespace

Action add_bench_decode_command(CLI::App& bench) {
  auto a = std::make_shared<BenchDecodeArgs>();
  CLI::App* sub = bench.add_subcommand(
      "decode", "Decode tokens/s against the memory-bandwidth bound measured in the same run");
  sub->add_option("--model", a->model,
                  "model directory, GGUF file, checkpoint or run (weights used in their stored "
                  "dtype)");
  sub->add_option("--config", a->config,
                  "config.json of a random model instead (e.g. configs/models/decode-bench.json)")
      ->check(CLI::ExistingFile);
  sub->add_option("--dtype", a->dtype, "matrix dtype of a --config model: bf16 or f32")
      ->capture_default_str();
  sub->add_option("--batch", a->batch, "sequences decoded together")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(256)));
  sub->add_option("--prompt-tokens", a->prompt_tokens, "prompt length (prefilled first)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_option("--tokens", a->tokens, "decode steps (the first one is not timed)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  sub->add_option("--bandwidth-mib", a->bandwidth_mib, "buffer size of the bandwidth measurement")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(16), int64_t(1) << 16));
  sub->add_option("--seed", a->seed, "seed of the random model and prompt")->capture_default_str();
  sub->add_flag("--json", a->json, "print one JSON object instead of the table");
  sub->add_flag(
      "--bf16", a->bf16,
      "with --model: "
      "hold F32 matrices and conv weights as bf16 (rounded at load: half the bytes per token)");
  return [a] { return run_bench_decode(*a); };
}

}  // namespace zaya::cli
