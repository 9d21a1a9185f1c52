// zaya eval --model M (--text FILE | --dataset DIR | --tokens FILE) [flags]   (docs/cli.md)
// --text: the file tokenized as one text (BOS first unless --no-bos) and scored in strided windows
// (eval/perplexity.h); --dataset: a split of a `zaya data prepare` dataset, the same windows;
// --tokens: rows of token ids, each its own sequence (the exactness tests' reading, docs/model.md
// §11) with optional --logits (F32 [B,T,V]) and --grads (∂loss/∂θ of every trainable parameter).
// Prints "loss <float>" (nats/token) and a line with the perplexity and the tokens scored, or one
// JSON object with --json, on stdout; progress and the model note on stderr. --device gpu runs the
// forward (and backward) on the GPU; logits and gradients come back to the host to be written.
// M is anything open_model_source takes: a model directory is scored by the training model (F32),
// a GGUF file by the inference decoder on its stored weights (eval/perplexity.h infer_scorer),
// in the same windows, on the CPU (--logits and --grads need the training model).
#include <xxhash.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "cli/commands.h"
#include "core/arena.h"
#include "core/assert.h"
#include "core/device.h"
#include "core/log.h"
#include "core/output.h"
#include "core/progress.h"
#include "core/timer.h"
#include "data/loader.h"
#include "data/shards.h"
#include "data/tokenizer.h"
#include "eval/perplexity.h"
#include "infer/gguf_model.h"
#include "infer/infer_model.h"
#include "infer/model_files.h"
#include "infer/model_source.h"
#include "io/file.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/transformer.h"

namespace zaya::cli {

namespace {

namespace fs = std::filesystem;

constexpr size_t kAutoBatchBytes = size_t(2) << 30;  // activations budget of the automatic choice

// Largest row count ≤ B whose activations fit the budget (at least 1).
int64_t auto_rows(const ZayaConfig& c, int64_t B, int64_t T, bool keep_logits) {
  int64_t rows = B;
  while (rows > 1 && Activations::bytes_needed(c, rows, T, keep_logits) > kAutoBatchBytes)
    rows = (rows + 1) / 2;
  return rows;
}

struct EvalArgs {
  std::string model, tokens, text, dataset, tokenizer, logits_out, grads_out;
  DataSplit split = DataSplit::Val;
  int64_t context = 0, stride = 0, max_tokens = 0;  // 0: the default
  int64_t rows_per_batch = 0;                       // 0: as many as fit in kAutoBatchBytes
  Device device = Device::Cpu;
  bool no_bos = false, json = false, quiet = false;
  bool split_given = false;
};

Device eval_device(Device d) {
  if (d == Device::Gpu && !gpu::available()) fail("--device gpu: {}", gpu::describe());
  return d;
}

std::string device_words(Device d) {
  return d == Device::Cpu ? std::string("cpu") : "gpu (" + gpu::describe() + ")";
}

// --tokens must be a text file of ids: a shard, a safetensors or any other binary file is refused
// with its offset and a pointer to the right flag, never echoed (its bytes would garble the
// terminal). Text that is not ids is left to read_token_lines, which names line and column.
void check_token_text(const std::string& path) {
  const std::string bytes = read_text_file(path, "token file");
  if (bytes.compare(0, 8, kShardMagic) == 0)
    fail(
        "--tokens {}: a zaya token shard, not a text file of token ids; evaluate a dataset with "
        "--dataset DIR (the folder holding dataset.json)",
        path);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0 || c == 0x7f ||
        (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\v' && c != '\f'))
      fail(
          "--tokens {}: binary data (byte 0x{:02x} at offset {}), not a text file of token ids; "
          "--text FILE evaluates a text, --dataset DIR a prepared dataset",
          path, c, i);
  }
}

// The result on stdout: "loss …" and a human line, or one JSON object.
void print_eval_result(const EvalArgs& a, const std::string& source, double loss, int64_t tokens,
                       int64_t windows, int64_t context, int64_t stride) {
  const double ppl = std::exp(loss);
  if (a.json) {
    nlohmann::json j = {{"loss", loss},       {"perplexity", ppl}, {"tokens", tokens},
                        {"windows", windows}, {"source", source},  {"context", context}};
    if (stride > 0) j["stride"] = stride;
    print_result("{}", j.dump());
    return;
  }
  print_result("loss {:.9g}", loss);
  if (stride > 0)
    print_result("perplexity {:.4f} over {} tokens in {} windows (context {}, stride {})", ppl,
                 tokens, windows, context, stride);
  else
    print_result("perplexity {:.4f} over {} tokens in {} rows of {}", ppl, tokens, windows,
                 context);
}

// --tokens: each line its own sequence; positions 0…T−2 predict the next id.
int eval_token_lines(const EvalArgs& args, const std::string& model_dir, Model& model,
                     Device device, const Timer& timer) {
  const ZayaConfig& c = model.config();
  check_token_text(args.tokens);
  TokenLines lines = read_token_lines(args.tokens, c.vocab_size);
  const int64_t B = lines.rows, T = lines.cols, V = c.vocab_size;
  const bool want_grads = !args.grads_out.empty();
  log_info("eval: {} rows × {} tokens, model {} ({} sub-layers), loaded in {:.2f}s, device {}", B,
           T, model_dir, c.num_layers(), timer.seconds(), device_words(device));

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
  print_eval_result(args, "tokens", loss_sum / double(B), B * (T - 1), B, T, 0);

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
  return 0;
}

// --tokens on a GGUF file: each line its own sequence, scored by the inference decoder.
int eval_token_lines_infer(const EvalArgs& args, const ModelSource& src, const InferModel& model,
                           const Timer& timer) {
  if (!args.logits_out.empty() || !args.grads_out.empty())
    fail(
        "--logits and --grads need the training model: give a model directory, not the GGUF "
        "file {}",
        src.path);
  const ZayaConfig& c = model.config();
  check_token_text(args.tokens);
  const TokenLines lines = read_token_lines(args.tokens, c.vocab_size);
  const int64_t B = lines.rows, T = lines.cols;
  log_info("eval: {} rows × {} tokens, model {} ({} sub-layers), loaded in {:.2f}s, device cpu", B,
           T, src.path, c.num_layers(), timer.seconds());
  std::vector<int32_t> targets(size_t(B * T), -1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t + 1 < T; ++t)
      targets[size_t(b * T + t)] = lines.ids[size_t(b * T + t + 1)];
  const double sum = infer_scorer(model)(lines.ids.data(), targets.data(), B, T);
  print_eval_result(args, "tokens", sum / double(B * (T - 1)), B * (T - 1), B, T, 0);
  return 0;
}

// The whole of --text as one stream of ids: [BOS] + the file's tokens.
std::vector<int32_t> text_stream(const EvalArgs& a, const ModelSource& src, const ZayaConfig& c,
                                 std::string* tok_used) {
  const SourceTokenizer st = src.require_tokenizer(a.tokenizer);
  const std::string& tok_file = st.origin;
  *tok_used = tok_file;
  const std::string text = read_text_file(a.text, "text to evaluate");
  if (text.compare(0, 8, kShardMagic) == 0)
    fail("--text {}: a zaya token shard, not text; evaluate a dataset with --dataset DIR", a.text);
  const Tokenizer& tok = *st.tok;
  if (tok.vocab_size() > c.vocab_size)
    fail(
        "tokenizer {} has {} tokens but the model's vocab_size is {} ({}): they do not belong "
        "together; pass the tokenizer the model was trained with (--tokenizer)",
        tok_file, tok.vocab_size(), c.vocab_size, src.config_origin);
  std::vector<int32_t> ids;
  if (!a.no_bos && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  tok.encode(text, ids);
  if (ids.size() < 2)
    fail("--text {}: {} token(s) with {}; at least 2 are needed to score one", a.text, ids.size(),
         tok_file);
  return ids;
}

// --dataset: refuses a dataset tokenized with another tokenizer than the model's (a GGUF file's
// is the exact tokenizer.json text it embeds as zaya.tokenizer_json; one rebuilt from its GGML
// vocabulary has no file to compare).
void check_dataset_tokenizer(const EvalArgs& a, const DatasetManifest& m, const ModelSource& src,
                             const ZayaConfig& c) {
  if (m.vocab_size > c.vocab_size)
    fail(
        "--dataset {} was tokenized with {} tokens (dataset.json vocab_size) but the model's "
        "vocab_size is {} ({})",
        a.dataset, m.vocab_size, c.vocab_size, src.config_origin);
  if (m.tokenizer_xxh3.empty()) return;
  std::string tok, ours;
  const GgufValue* embedded =
      src.is_gguf() && a.tokenizer.empty() ? src.gguf->file->find("zaya.tokenizer_json") : nullptr;
  if (embedded && embedded->type == GgufType::String) {
    tok = src.path + " (zaya.tokenizer_json)";
    ours = hex64(XXH3_64bits(embedded->s.data(), embedded->s.size()));
  } else {
    tok = src.is_gguf() && a.tokenizer.empty() ? "" : find_tokenizer(src.path, a.tokenizer);
    std::error_code ec;
    if (tok.empty() || !fs::is_regular_file(tok, ec)) return;
    ours = hex64(file_checksum(tok));
  }
  if (ours != m.tokenizer_xxh3)
    fail(
        "--dataset {} was tokenized with {} (xxh3 {}, dataset.json) but the model's tokenizer "
        "{} differs (xxh3 {}): the loss would be meaningless",
        a.dataset, m.tokenizer_path.empty() ? std::string("another tokenizer") : m.tokenizer_path,
        m.tokenizer_xxh3, tok, ours);
}

int run_eval(EvalArgs& args) {
  if (args.quiet) set_log_level(LogLevel::Quiet);
  const int sources = !args.tokens.empty() + !args.text.empty() + !args.dataset.empty();
  if (sources == 0)
    fail("eval: nothing to evaluate: give --text FILE, --dataset DIR or --tokens FILE");
  const bool windows = args.tokens.empty();
  if (!windows && (args.context || args.stride || args.max_tokens || args.no_bos))
    fail(
        "--context, --stride, --max-tokens and --no-bos go with --text or --dataset, not --tokens");
  if (windows && (!args.logits_out.empty() || !args.grads_out.empty()))
    fail("--logits and --grads go with --tokens (fixed rows), not --{}",
         args.text.empty() ? "dataset" : "text");
  if (args.dataset.empty() && args.split_given) fail("--split goes with --dataset");
  if (!args.dataset.empty() && args.no_bos)
    fail("--no-bos goes with --text (a dataset's documents carry what data prepare gave them)");
  // Fail on a missing input before the (possibly slow) model load.
  for (const std::string* f : {&args.tokens, &args.text}) {
    std::error_code ec;
    if (!f->empty() && !fs::exists(*f, ec))
      fail("--{} {}: no such file", f == &args.tokens ? "tokens" : "text", *f);
  }

  const ModelSource src = open_model_source(args.model);
  if (src.is_gguf() && args.device == Device::Gpu)
    fail(
        "--device gpu: a GGUF file ({}) is scored by the inference decoder, on the CPU; give a "
        "model directory to evaluate on the GPU",
        src.path);
  const Device device = eval_device(args.device);
  if (!src.note.empty()) log_info("eval: model {} ({})", src.path, src.note);
  Timer timer;
  // A model directory: the training model (F32, any device); a GGUF file: its stored weights.
  std::optional<Model> model;
  std::optional<InferModel> infer;
  if (src.is_gguf())
    infer.emplace(src.load_weights());
  else
    model.emplace(Model::load_dir(src.path, device));
  const ZayaConfig& c = src.config;
  if (!windows) {
    if (infer) return eval_token_lines_infer(args, src, *infer, timer);
    const int rc = eval_token_lines(args, src.path, *model, device, timer);
    if (device == Device::Gpu) log_info("eval: {}", gpu::memory_report());
    return rc;
  }

  // The windows: --context, else the trained context; --stride, else half of it.
  int64_t context = args.context;
  std::string context_why = "--context";
  if (context == 0) {
    const ContextChoice d = default_context(src.extras, c);
    context = d.context;
    context_why = d.why;
  } else if (context > c.max_position_embeddings) {
    fail("--context {} is longer than the model's max_position_embeddings {} ({})", context,
         c.max_position_embeddings, src.config_origin);
  }
  const int64_t stride = args.stride > 0 ? args.stride : std::max<int64_t>(1, context / 2);
  if (stride > context)
    fail("--stride {} is longer than the context {}: tokens between windows would go unscored",
         stride, context);

  std::vector<int32_t> text_ids;
  std::optional<TokenLoader> data;
  int64_t n = 0;
  std::string what;
  if (!args.text.empty()) {
    std::string tok_used;
    text_ids = text_stream(args, src, c, &tok_used);
    n = int64_t(text_ids.size());
    what = fmt::format("text {} ({} tokens by {})", args.text, n, tok_used);
  } else {
    const std::string split(enum_word(args.split));
    data.emplace(args.dataset, split, 2, 0);  // window 2: reads any range; verifies the shards
    check_dataset_tokenizer(args, data->manifest(), src, c);
    n = data->total_tokens();
    what = fmt::format("dataset {}, split {} ({} tokens)", args.dataset, split, n);
  }
  if (args.max_tokens > 0 && n > args.max_tokens + 1) {
    n = args.max_tokens + 1;  // the first max_tokens + 1 tokens: max_tokens scored
    what += fmt::format(", the first {} scored (--max-tokens)", args.max_tokens);
  }
  if (n < 2) fail("{}: at least 2 tokens are needed to score one", what);
  const int64_t T = std::min(context, n - 1);
  const int64_t rows =
      args.rows_per_batch > 0 ? args.rows_per_batch : auto_rows(c, int64_t(1) << 20, T, false);
  log_info(
      "eval: {}; model {} ({} sub-layers, loaded in {:.2f}s), device {}; context {} ({}), "
      "stride {}",
      what, src.path, c.num_layers(), timer.seconds(), device_words(device), context, context_why,
      stride);

  Progress progress("eval", int64_t(plan_windows(n, context, stride).size()), "windows",
                    args.quiet);
  const EvalProgress report = [&](int64_t done, int64_t) { progress.update(done); };
  const BatchScorer score = infer ? infer_scorer(*infer) : model_scorer(*model);
  PerplexityResult r;
  if (data)
    r = strided_loss(
        score, n, [&](int64_t pos, int64_t k, int32_t* out) { data->read_tokens(pos, k, out); },
        context, stride, rows, report);
  else
    r = strided_loss(score, std::span<const int32_t>(text_ids.data(), size_t(n)), context, stride,
                     rows, report);
  progress.finish(fmt::format("{} tokens in {:.1f}s", r.tokens, timer.seconds()));
  print_eval_result(args, args.text.empty() ? "dataset" : "text", r.loss(), r.tokens, r.windows,
                    context, stride);
  if (device == Device::Gpu) log_info("eval: {}", gpu::memory_report());
  return 0;
}

}  // namespace

Action add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Loss and perplexity of a model on a text, a prepared dataset or token rows");
  sub->add_option("--model", args->model,
                  "model directory (config.json + safetensors), GGUF file, checkpoint (step_N) or "
                  "run directory (its newest valid checkpoint)")
      ->required();
  auto* text = sub->add_option("--text", args->text,
                               "a text file, tokenized whole and scored in strided windows");
  auto* dataset = sub->add_option("--dataset", args->dataset,
                                  "a dataset directory of `zaya data prepare`: its --split, "
                                  "scored in strided windows");
  auto* tokens = sub->add_option("--tokens", args->tokens,
                                 "file with one sequence per line of whitespace-separated token "
                                 "ids (all lines the same length, at least 2 tokens), each "
                                 "scored on its own");
  text->excludes(dataset)->excludes(tokens);
  dataset->excludes(tokens);
  auto* split = add_enum_option(sub, "--split", args->split, "the dataset's split to score");
  sub->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json that encodes --text, or that --dataset must have been made "
                  "with (default: the model directory's tokenizer.json)");
  sub->add_option("--context", args->context,
                  "tokens a window holds (default: tokenizer_config.json's model_max_length in "
                  "the model directory, else max_position_embeddings up to 2048)")
      ->check(positive_number());
  sub->add_option("--stride", args->stride,
                  "tokens between window starts; each window scores the tokens no earlier one "
                  "did (default: context / 2)")
      ->check(positive_number());
  sub->add_option("--max-tokens", args->max_tokens, "score at most this many tokens (the first)")
      ->check(positive_number());
  sub->add_flag("--no-bos", args->no_bos, "--text: do not start the text with the BOS token");
  sub->add_flag("--json", args->json, "print the result as one JSON object");
  sub->add_option("--logits", args->logits_out,
                  "--tokens: write logits F32 [B,T,V] to this safetensors");
  sub->add_option("--grads", args->grads_out,
                  "--tokens: write the loss gradient of every trainable parameter to this "
                  "safetensors");
  sub->add_option("--rows-per-batch", args->rows_per_batch,
                  "rows (windows) evaluated together (default: as many as fit in 2 GiB of "
                  "activations; results agree up to rounding)")
      ->check(non_negative_number());
  add_enum_option(sub, "--device", args->device,
                  "where the forward and backward run: cpu or gpu (a build with a GPU backend, "
                  "on a machine with a GPU)");
  sub->add_flag("--quiet", args->quiet, "no progress output");
  return [args, split] {
    args->split_given = split->count() > 0;
    return run_eval(*args);
  };
}

}  // namespace zaya::cli
