// zaya eval --model DIR --tokens FILE [--logits OUT] [--grads OUT] [--rows-per-batch N]
//           [--device cpu|gpu] [--quiet]
// Prints "loss <float>": the mean next-token cross-entropy over positions 0..T−2 of every line
// (no ignore index: pad tokens are targets too). --logits writes `logits` F32 [B,T,V]; --grads
// writes ∂loss/∂θ for every trainable parameter under its own name (F32). --device gpu runs the
// whole forward and backward on the GPU (weights widened to F32 at load, as on the CPU); logits and
// gradients come back to the host to be written.
#include <algorithm>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/arena.h"
#include "core/device.h"
#include "core/log.h"
#include "core/timer.h"
#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/transformer.h"

namespace zaya::cli {

namespace {

constexpr size_t kAutoBatchBytes = size_t(2) << 30;  // activations budget of the automatic choice

// Largest row count ≤ B whose activations fit the budget (at least 1).
int64_t auto_rows(const ZayaConfig& c, int64_t B, int64_t T, bool keep_logits) {
  int64_t rows = B;
  while (rows > 1 && Activations::bytes_needed(c, rows, T, keep_logits) > kAutoBatchBytes)
    rows = (rows + 1) / 2;
  return rows;
}

struct EvalArgs {
  std::string model, tokens, logits_out, grads_out;
  int64_t rows_per_batch = 0;  // 0: as many as fit in kAutoBatchBytes
  std::string device = "cpu";
  bool quiet = false;
};

// The device --device names (the flag's check admits only cpu and gpu); gpu must be usable here.
Device eval_device(const std::string& name) {
  if (name == "cpu") return Device::Cpu;
  if (!gpu::available()) fail("--device gpu: {}", gpu::describe());
  return Device::Gpu;
}

int run_eval(const EvalArgs& args) {
  if (args.quiet) set_log_level(LogLevel::Quiet);
  const Device device = eval_device(args.device);
  Timer timer;
  Model model = Model::load_dir(args.model, device);
  const ZayaConfig& c = model.config();
  TokenLines lines = read_token_lines(args.tokens, c.vocab_size);
  const int64_t B = lines.rows, T = lines.cols, V = c.vocab_size;
  const bool want_grads = !args.grads_out.empty();
  log_info("eval: {} rows × {} tokens, model {} ({} sub-layers), loaded in {:.2f}s, device {}", B,
           T, args.model, c.num_layers(), timer.seconds(),
           device == Device::Cpu ? std::string("cpu") : "gpu (" + gpu::describe() + ")");

  Buffer logits_all(args.logits_out.empty() ? 0 : size_t(B * T * V) * sizeof(float));
  const bool want_logits = !args.logits_out.empty();  // only then are [rows·T, V] logits kept
  const int64_t chunk =
      args.rows_per_batch > 0 ? std::min(args.rows_per_batch, B) : auto_rows(c, B, T, want_logits);
  if (want_grads) model.zero_grads();
  std::unique_ptr<Activations> acts;
  double loss_sum = 0;  // Σ of per-chunk mean losses weighted by their rows
  for (int64_t r0 = 0; r0 < B; r0 += chunk) {
    const int64_t rows = std::min(chunk, B - r0);
    if (!acts || acts->B != rows)
      acts = std::make_unique<Activations>(c, rows, T, device, want_logits);
    const int32_t* ids = lines.ids.data() + r0 * T;
    const double loss = model_forward(model, *acts, ids);
    loss_sum += loss * double(rows);
    if (logits_all.data())  // to the host, whatever the device
      device_copy(Tensor(static_cast<float*>(logits_all.data()) + r0 * T * V, {rows * T, V}),
                  acts->logits);
    if (want_grads) model_backward(model, *acts, 1.0 / double(B * (T - 1)));
    if (B > chunk) log_info("eval: {}/{} rows ({:.1f}s)", r0 + rows, B, timer.seconds());
  }
  std::printf("loss %.9g\n", loss_sum / double(B));

  if (!args.logits_out.empty()) {
    Tensor t(static_cast<float*>(logits_all.data()), {B, T, V});
    save_safetensors(args.logits_out, {{"logits", t}});
    log_info("eval: wrote logits [{},{},{}] to {}", B, T, V, args.logits_out);
  }
  if (want_grads) {
    Buffer staging;  // a GPU model's gradients are copied to the host first
    float* base = model.host_grads(staging);
    std::vector<std::pair<std::string, Tensor>> grads;
    for (const ParamSpec& s : model.layout().specs)
      if (s.trainable()) grads.emplace_back(s.name, s.view(base));
    save_safetensors(args.grads_out, grads);
    log_info("eval: wrote {} gradients to {}", grads.size(), args.grads_out);
  }
  if (device == Device::Gpu) log_info("eval: {}", gpu::memory_report());
  return 0;
}

}  // namespace

Action add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval",
                                     "Loss (and optionally logits and gradients) of a "
                                     "model on token lines");
  sub->add_option("--model", args->model, "model directory (config.json + safetensors)")
      ->required();
  sub->add_option("--tokens", args->tokens,
                  "file with one sequence per line of whitespace-separated token ids (all lines "
                  "the same length, at least 2 tokens)")
      ->required();
  sub->add_option("--logits", args->logits_out, "write logits F32 [B,T,V] to this safetensors");
  sub->add_option("--grads", args->grads_out,
                  "write the loss gradient of every trainable parameter to this safetensors");
  sub->add_option("--rows-per-batch", args->rows_per_batch,
                  "rows evaluated together (default: as many as fit in 2 GiB of activations; "
                  "results agree up to rounding)")
      ->check(non_negative_number());
  sub->add_option("--device", args->device,
                  "where the forward and backward run: cpu (default) or gpu (a build with a GPU "
                  "backend, on a machine with a GPU)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  sub->add_flag("--quiet", args->quiet, "no progress output");
  return [args] { return run_eval(*args); };
}

}  // namespace zaya::cli
