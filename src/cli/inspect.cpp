// zaya inspect MODEL_or_CONFIG [--seq-len T] [--json]
// MODEL is anything open_model_source takes (a model directory, a GGUF file, a checkpoint, a run,
// a file in a model directory; what it picked goes to stderr); a config.json outside a model
// directory is read alone. A GGUF file adds what it stores: its naming scheme (A or B, and whether
// zaya wrote it), the tensors per type (count and bytes) and the bits per weight. The schema and
// layout read (original or transformers-native), the trained context of a model directory
// (tokenizer_config.json's model_max_length) and max_position_embeddings, then parameters (total /
// without embedding / active per token), FLOPs per token and KV-cache bytes per token next to full
// multi-head attention of the same width.
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "infer/cache.h"
#include "infer/gguf_model.h"
#include "infer/model_source.h"
#include "io/gguf.h"
#include "io/json_parse.h"
#include "io/model_extras.h"
#include "model/inspect.h"
#include "quant/policy.h"

namespace zaya::cli {

namespace {

struct InspectArgs {
  std::string path;
  int64_t seq_len = 4096;
  bool json = false;
};

// 8840488784 → "8,840,488,784 (8.840B)".
std::string billions(int64_t n) {
  std::string digits = std::to_string(n), grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return fmt::format("{} ({:.3f}B)", grouped, double(n) / 1e9);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

// What a GGUF file stores: per weight type, its tensors and bytes (file order of first use).
struct GgufFigures {
  std::string scheme;  // "B (zaya-written)", "A", ...
  struct Type {
    DType dtype;
    int64_t tensors = 0, bytes = 0, values = 0;
  };
  std::vector<Type> types;
  int64_t bytes = 0, values = 0;
  double bits_per_weight() const { return values ? 8.0 * double(bytes) / double(values) : 0; }
};

GgufFigures gguf_figures(const GgufModel& g) {
  GgufFigures f;
  const bool zaya = g.file->find("zaya.config_json") != nullptr;
  f.scheme = std::string(enum_word(g.scheme)) + (zaya ? " (zaya-written)" : "");
  for (const GgufTensor& t : g.file->tensors()) {
    auto it = std::find_if(f.types.begin(), f.types.end(),
                           [&](const GgufFigures::Type& x) { return x.dtype == t.dtype; });
    if (it == f.types.end()) it = f.types.insert(it, {t.dtype});
    ++it->tensors;
    it->bytes += int64_t(t.nbytes);
    it->values += t.numel();
    f.bytes += int64_t(t.nbytes);
    f.values += t.numel();
  }
  std::sort(f.types.begin(), f.types.end(),
            [](const auto& x, const auto& y) { return x.bytes > y.bytes; });
  return f;
}

int run_inspect(const InspectArgs& a) {
  namespace fs = std::filesystem;
  // A .json file is read as a config (a config.json brings its model directory's extras); a
  // model directory's other files, and directories, are --model arguments.
  std::string cfg_path = a.path;
  ModelExtras extras;
  std::optional<ModelSource> src;
  std::error_code ec;
  const std::string name = fs::path(a.path).filename().string();
  const bool config_file = fs::is_regular_file(a.path, ec) && name.ends_with(".json") &&
                           name != "tokenizer.json" && name != "tokenizer_config.json" &&
                           name != "generation_config.json" &&
                           name != "model.safetensors.index.json";
  if (config_file && name == "config.json") {
    const fs::path dir = fs::path(a.path).parent_path();
    extras = read_model_extras(dir.empty() ? "." : dir.string());
  } else if (!config_file) {
    src.emplace(open_model_source(a.path, "MODEL"));
    if (const std::string line = src->line(); !line.empty()) log_info("inspect: {}", line);
    cfg_path = src->config_origin;
    extras = src->extras;
  }
  ConfigSchema schema = ConfigSchema::Native;
  std::string schema_text;
  std::optional<GgufFigures> gguf;
  ZayaConfig c;
  if (src && src->is_gguf()) {
    c = src->config;
    gguf = gguf_figures(*src->gguf);
    // zaya's own files carry config.json's text: its schema; others are built from GGML keys.
    const GgufValue* cj = src->gguf->file->find("zaya.config_json");
    if (cj && cj->type == GgufType::String) {
      config_from_json(parse_json(cj->s), &schema);
      schema_text = schema_name(schema);
    } else {
      schema_text = "GGUF metadata (zaya.* keys and tensor shapes)";
    }
  } else {
    c = load_config(cfg_path, &schema);
    schema_text = schema_name(schema);
  }
  // The trained context: model_max_length when given (capped, as generate and serve cap it).
  const int64_t trained = extras.model_max_length > 0
                              ? std::min(extras.model_max_length, c.max_position_embeddings)
                              : c.max_position_embeddings;
  const ModelFacts f = model_facts(c, a.seq_len);
  const double flops = f.flops_matmul_per_token + f.flops_attention_per_token;
  const int64_t bf16 = 2;
  // Weight bytes: the checkpoint's bf16 (2 bytes a parameter) and each `zaya quantize` preset's
  // file under the mixed policy (tensor data; the vectors stay f32 there).
  std::vector<std::pair<std::string, uint64_t>> weight_bytes = {
      {"bf16", uint64_t(f.params_total) * 2}};
  for (const auto& [preset, word] : EnumWords<quant::QuantPreset>::words) {
    quant::PolicyOptions o;
    o.preset = preset;
    weight_bytes.emplace_back(std::string(word), gguf_weight_bytes(c, o));
  }
  int64_t windowed = 0;  // attention sub-layers with a sliding window
  for (int64_t i = 0; i < c.num_layers(); ++i) windowed += c.is_attention(i) && c.window(i) > 0;
  if (a.json) {
    nlohmann::json j = {
        {"layout", semantics_name(c.semantics)},
        {"schema", schema_text},
        {"max_position_embeddings", c.max_position_embeddings},
        {"trained_context", trained},
        {"params_total", f.params_total},
        {"params_without_embedding", f.params_no_embedding},
        {"params_active_without_embedding", f.params_active_no_embedding},
        {"buffer_values", f.buffer_values},
        {"tensors", f.tensors},
        {"weight_bytes",
         nlohmann::json(std::map<std::string, uint64_t>(weight_bytes.begin(), weight_bytes.end()))},
        {"attention_layers", f.attention_layers},
        {"moe_layers", f.moe_layers},
        {"seq_len", a.seq_len},
        {"forward_flops_per_token", flops},
        {"train_flops_per_token", 3 * flops},
        {"kv_values_per_token", f.kv_values_per_token},
        {"kv_bytes_per_token_bf16", f.kv_values_per_token * bf16},
        {"kv_bytes_bf16_at_32k", kv_values_for_context(c, 32768) * bf16},
        {"kv_bytes_bf16_at_128k", kv_values_for_context(c, 131072) * bf16},
        {"windowed_attention_layers", windowed},
        {"kv_bytes_per_token_decode_cache", SequenceCache::bytes_per_token(c)},
        {"mha_kv_bytes_per_token_bf16", f.mha_kv_values_per_token * bf16},
        {"kv_compression", double(f.mha_kv_values_per_token) / double(f.kv_values_per_token)},
        {"decode_state_bytes_per_sequence_f32", f.state_values_per_sequence * 4},
    };
    if (gguf) {
      nlohmann::json types = nlohmann::json::array();
      for (const GgufFigures::Type& t : gguf->types)
        types.push_back({{"type", dtype_name(t.dtype)},
                         {"tensors", t.tensors},
                         {"bytes", t.bytes},
                         {"values", t.values}});
      j["gguf"] = {{"file", src->path},
                   {"version", src->gguf->file->version()},
                   {"scheme", enum_word(src->gguf->scheme)},
                   {"zaya_written", src->gguf->file->find("zaya.config_json") != nullptr},
                   {"tensors", src->gguf->file->tensors().size()},
                   {"tensor_bytes", gguf->bytes},
                   {"file_bytes", src->gguf->file->file_bytes()},
                   {"bits_per_weight", gguf->bits_per_weight()},
                   {"types", std::move(types)}};
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("config                 {}\n", cfg_path);
  fmt::print("schema                 {}\n", schema_text);
  fmt::print("layout                 {} ({})\n", semantics_name(c.semantics),
             c.semantics == Semantics::Native
                 ? "transformers' ZAYA: skip class outputs 0, L2 norm clamped at f32 eps"
                 : "Zyphra's original: skip class outputs p·x, plain L2 norm");
  if (extras.model_max_length > 0)
    fmt::print("context                {} tokens trained ({}), {} positions\n", trained,
               gguf ? extras.tokenizer_config : std::string("tokenizer_config.json"),
               c.max_position_embeddings);
  else
    fmt::print("context                {} positions (max_position_embeddings)\n",
               c.max_position_embeddings);
  fmt::print("sub-layers             {} ({} CCA attention, {} MoE)\n", c.num_layers(),
             f.attention_layers, f.moe_layers);
  fmt::print("parameters             {}\n", billions(f.params_total));
  fmt::print("  without embedding    {}\n", billions(f.params_no_embedding));
  fmt::print("  active per token     {} (without embedding)\n",
             billions(f.params_active_no_embedding));
  fmt::print("  buffers              {} values (balancing biases); {} tensors in all\n",
             f.buffer_values, f.tensors);
  fmt::print("weights                {} bf16 (2 bytes a parameter)\n",
             human_bytes(double(weight_bytes[0].second)));
  for (size_t i = 1; i < weight_bytes.size(); ++i)
    fmt::print("  {:<20} {} ({:.2f} bits per weight; zaya quantize's mixed policy)\n",
               weight_bytes[i].first, human_bytes(double(weight_bytes[i].second)),
               8.0 * double(weight_bytes[i].second) / double(f.params_total));
  fmt::print("FLOPs per token        {:.3g} forward, {:.3g} training (at seq len {})\n", flops,
             3 * flops, a.seq_len);
  fmt::print("KV cache per token     {} (bf16: K and V, {} heads × {} per layer)\n",
             human_bytes(double(f.kv_values_per_token * bf16)), c.kv_heads(), c.head_dim());
  if (windowed > 0) {
    fmt::print(
        "  windowed layers      {} of {} keep at most their window's keys (full-context "
        "figure above)\n",
        windowed, f.attention_layers);
    for (const int64_t T : {int64_t(32768), int64_t(131072)})
      fmt::print("  at {:>4}K tokens      {} per sequence ({} per token on average, bf16)\n",
                 T / 1024, human_bytes(double(kv_values_for_context(c, T) * bf16)),
                 human_bytes(double(kv_values_for_context(c, T) * bf16) / double(T)));
  }
  fmt::print("  zaya's decode cache  {} (f32, exact: what `zaya generate`/`serve` hold)\n",
             human_bytes(double(SequenceCache::bytes_per_token(c))));
  fmt::print("  multi-head attention {} ({} heads) → CCA is {:.1f}x smaller\n",
             human_bytes(double(f.mha_kv_values_per_token * bf16)), c.num_attention_heads,
             double(f.mha_kv_values_per_token) / double(f.kv_values_per_token));
  fmt::print("  + decode state       {} per sequence (conv state and previous input, f32)\n",
             human_bytes(double(f.state_values_per_sequence * 4)));
  if (gguf) {
    const GgufFile& file = *src->gguf->file;
    fmt::print("GGUF                   v{}, scheme {}, {} tensors, {} ({} file)\n", file.version(),
               gguf->scheme, file.tensors().size(), human_bytes(double(gguf->bytes)),
               human_bytes(double(file.file_bytes())));
    fmt::print("  bits per weight      {:.3f} ({} values)\n", gguf->bits_per_weight(),
               billions(gguf->values));
    for (const GgufFigures::Type& t : gguf->types)
      fmt::print("  {:<20} {} tensors, {} ({:.2f} bits per weight)\n", dtype_name(t.dtype),
                 t.tensors, human_bytes(double(t.bytes)),
                 t.values ? 8.0 * double(t.bytes) / double(t.values) : 0.0);
  }
  return 0;
}

}  // namespace

Action add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Parameter counts, FLOPs per token and KV-cache size of a model or config");
  sub->add_option("path", args->path,
                  "model directory, GGUF file, checkpoint, run, file in a model directory, or a "
                  "config.json")
      ->required();
  sub->add_option("--seq-len", args->seq_len, "context length for the attention FLOPs")
      ->check(positive_number());
  sub->add_flag("--json", args->json, "print the figures as JSON");
  return [args] { return run_inspect(*args); };
}

}  // namespace zaya::cli
