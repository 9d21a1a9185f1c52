// zaya tune gemm --config CONFIG.json [--tokens N] [--out FILE] [--candidates K] [--reps R]
//                [--precision fp32|bf16]
// Tunes the GPU GEMMs of one training micro-batch of N tokens (model/gemm_shapes.h: every linear's
// forward, dX and dW, the experts at the balanced tokens·top_k/E rows, the LM head's blocks): for
// each distinct shape, times the default, our tiled kernel and up to K cuBLASLt heuristic
// candidates (ops/gpu/gemm_table_runtime.h), keeps the fastest whose result matches the default's,
// prints default ms, best ms and the gain per shape and in total (each shape weighted by its uses
// per micro-batch), and writes the table (io/gemm_table.h) for train.gemm_table. Without
// cuBLASLt (every build but CUDA) the candidates are the default and nothing else to compare, so
// every line is Default. --precision bf16 tunes the GEMMs of train.precision = bf16
// (floatAsBFloat16: float operands rounded to bf16 as they load; the router's stay float).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/device.h"
#include "io/gemm_table.h"
#include "io/zaya_config.h"
#include "model/gemm_shapes.h"
#include "ops/gpu/gemm_table_runtime.h"

namespace zaya::cli {

namespace {

using gemm_table::SolutionKind;

struct TuneArgs {
  std::string config, out = "gemm_table.csv", precision = "fp32";
  int64_t tokens = 4096, candidates = 8, reps = 20;
};

std::string short_name(const gemm_table::Solution& s) {
  const std::string full = gemm_table::solution_name(s);
  return s.kind == SolutionKind::BlasLt ? full.substr(0, 30) + "…" : full;
}

int run_tune_gemm(const TuneArgs& a) {
  if (a.precision != "fp32" && a.precision != "bf16")
    fail("--precision must be fp32 or bf16, got '{}'", a.precision);
  const ZayaConfig cfg = load_config(a.config);
  if (!gpu::available()) fail("zaya tune gemm needs a GPU: {}", gpu::describe());
  // train.precision = bf16: float operands rounded to bf16 as they load (Gemm::bf16_inputs).
  const auto dtype =
      a.precision == "bf16" ? gemm_table::GemmDtype::F32AsBF16 : gemm_table::GemmDtype::F32;
  const std::vector<GemmUse> uses = training_gemms(cfg, a.tokens, dtype);
  const std::vector<GemmShape> shapes = distinct_gemms(uses);
  std::vector<gemm_table::GemmKey> keys;
  for (const GemmShape& s : shapes) keys.push_back(s.key);
  std::printf(
      "tune gemm: %zu distinct GEMMs (%zu per micro-batch of %lld tokens), %s, up to %lld "
      "cuBLASLt candidates, %lld timed calls each; %s\n",
      shapes.size(), uses.size(), (long long)a.tokens, a.precision.c_str(), (long long)a.candidates,
      (long long)a.reps, gpu::describe().c_str());
  std::printf("%5s  %-52s %11s %11s %7s  %-32s %s\n", "uses", "op,params", "default ms", "best ms",
              "gain", "solution", "first use");
  size_t i = 0;
  double total_default = 0, total_best = 0;
  gemm_table::Table table;
  table.validators = gpu::gemm_table_validators();
  int counts[3] = {0, 0, 0};
  gpu::tune_gemms(keys, {int(a.candidates), int(a.reps)}, [&](const gpu::GemmTuneResult& r) {
    const GemmShape& s = shapes[i++];
    total_default += double(s.uses) * r.default_ms;
    total_best += double(s.uses) * r.best_ms;
    ++counts[int(r.best.kind)];
    table.entries.push_back({r.key, r.best, r.best_ms, 0});
    const std::string line = gemm_table::op_name(r.key) + "," + gemm_table::params(r.key);
    std::printf(
        "%5lld  %-52s %11.4f %11.4f %6.1f%%  %-32s %s%s\n", (long long)s.uses, line.c_str(),
        r.default_ms, r.best_ms, r.default_ms > 0 ? 100 * (1 - r.best_ms / r.default_ms) : 0.0,
        short_name(r.best).c_str(), s.first_use.c_str(),
        r.rejected ? fmt::format(" ({} rejected: result differs)", r.rejected).c_str() : "");
    std::fflush(stdout);
  });
  std::printf("total per micro-batch (Σ uses × ms): default %.4f ms, tuned %.4f ms, gain %.1f%%\n",
              total_default, total_best,
              total_default > 0 ? 100 * (1 - total_best / total_default) : 0.0);
  gemm_table::save_table(a.out, table);
  std::printf("wrote %s: %zu GEMMs (%d Gemm_Zaya_Tiled, %d cuBLASLt, %d Default)\n", a.out.c_str(),
              table.entries.size(), counts[int(SolutionKind::Tiled)],
              counts[int(SolutionKind::BlasLt)], counts[int(SolutionKind::Default)]);
  return 0;
}

}  // namespace

Action add_tune_command(CLI::App& app) {
  CLI::App* tune = app.add_subcommand("tune", "Tune GPU kernels for this device (gemm)");
  tune->require_subcommand(1);
  auto a = std::make_shared<TuneArgs>();
  CLI::App* gemm = tune->add_subcommand(
      "gemm", "Time the GEMM candidates of a model's training step and write a GEMM table");
  gemm->add_option("--config", a->config, "model config.json")->required();
  gemm->add_option("--tokens", a->tokens, "tokens per micro-batch (micro_batch × seq_len)")
      ->check(positive_number());
  gemm->add_option("--out", a->out, "the table to write (for train.gemm_table)");
  gemm->add_option("--candidates", a->candidates, "cuBLASLt heuristic candidates per GEMM")
      ->check(non_negative_number());
  gemm->add_option("--reps", a->reps, "timed calls per candidate")->check(positive_number());
  gemm->add_option("--precision", a->precision,
                   "fp32 | bf16: the GEMM operands' dtype (train.precision)");
  return [a, gemm] { return gemm->parsed() ? run_tune_gemm(*a) : 1; };
}

}  // namespace zaya::cli
