// zaya convert --to native|original|legacy IN OUT [--max-shard-bytes N]
// IN is anything resolve_model_path takes (a model directory, a checkpoint, a run, a file in a
// model directory; what it picked goes to stderr). Rewrites the model directory in the other
// checkpoint layout (docs/checkpoint-layouts.md; legacy = the original family in the legacy 74B
// schema and `smoe_block` names): the config in the target schema, every tensor
// renamed (experts stacked or unstacked) with its dtype and bits unchanged, sharded with an index
// above --max-shard-bytes. Other files of IN (tokenizer, generation config) are copied. Warns when
// a router's balancing biases let the skip class win, since the two layouts' semantics then give
// different outputs.
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "checkpoint/model_path.h"
#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "io/model_dir.h"
#include "model/param_layout.h"

namespace zaya::cli {

namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string to, in, out;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
};

bool is_weight_file(const std::string& name) {
  return name == "config.json" || name == "model.safetensors.index.json" ||
         name.ends_with(".safetensors");
}

// MoE sub-layers whose skip class can win for some input: the best skip score 1 + b_skip (p_skip
// → 1) beats every real expert's best b_e, i.e. 1 + b_skip > max_e b_e.
std::vector<int64_t> skip_can_win(const ZayaConfig& c, const SafeTensors& st,
                                  const ParamLayout& layout) {
  std::vector<int64_t> layers;
  if (!c.zaya_use_mod) return layers;
  for (const ParamSpec& s : layout.specs) {
    if (s.kind != ParamKind::Buffer) continue;
    std::vector<float> b(size_t(s.numel()));
    st.read_into(s.name, Tensor(b.data(), {s.numel()}));
    const float best_real = *std::max_element(b.begin(), b.end() - 1);
    if (1.0f + b.back() > best_real) layers.push_back(std::atoll(s.name.c_str() + 13));
  }
  return layers;
}

int run_convert(const ConvertArgs& args) {
  const CheckpointLayout to_layout =
      parse_enum<CheckpointLayout>(args.to).value_or(CheckpointLayout::Original);  // CLI-checked
  const Semantics to =
      to_layout == CheckpointLayout::Native ? Semantics::Native : Semantics::Original;
  const ModelPath mp = resolve_model_path(args.in, "IN");
  if (!mp.gguf.empty())
    fail(
        "IN {}: a GGUF file; zaya convert converts model directories (config.json + "
        "safetensors) between layouts; a GGUF file is run as it is (--model FILE.gguf)",
        mp.gguf);
  if (const std::string line = model_path_line(mp); !line.empty()) log_info("convert: {}", line);
  ConvertArgs a = args;
  a.in = mp.dir;
  std::error_code ec;
  if (fs::exists(a.out) && fs::equivalent(a.in, a.out, ec))
    fail("OUT '{}' is IN: write the converted model to another directory", a.out);
  if (fs::exists(a.out) && !(fs::is_directory(a.out) && fs::is_empty(a.out)))
    fail("OUT '{}' exists and is not an empty directory", a.out);

  ConfigSchema schema;
  const ZayaConfig c = load_config((fs::path(a.in) / "config.json").string(), &schema);
  const ZayaConfig target = with_layout(c, to_layout);
  const SafeTensors st = open_model_tensors(a.in, c);
  const ParamLayout layout = make_param_layout(c);

  // Every parameter in layout order, as stored (dtype and bytes kept).
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t bytes = 0;
  for (const ParamSpec& s : layout.specs) {
    const SafeTensorInfo* info = st.find(s.name);
    if (!info)
      fail("{}: missing tensor '{}'; config.json and the weights disagree", st.source(), s.name);
    if (info->shape != s.shape)
      fail("{}: tensor '{}' has the wrong shape for config.json", info->file, s.name);
    Tensor t(const_cast<void*>(info->data), info->dtype, {});
    t.ndim = int(s.shape.size());
    for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = s.shape[size_t(k)];
    tensors.emplace_back(s.name, t);
    bytes += info->nbytes;
  }
  for (const std::string& name : st.names())
    if (!layout.index.count(name) && name != "lm_head.weight")
      fmt::print(stderr, "zaya: warning: {}: dropping unexpected tensor '{}'\n", st.source(), name);

  if (c.semantics != to) {
    const std::vector<int64_t> layers = skip_can_win(c, st, layout);
    if (!layers.empty())
      fmt::print(
          stderr,
          "zaya: warning: the balancing biases let the skip class win for some inputs in MoE "
          "sub-layer(s) "
          "{}: there the {} semantics give p·x and the {} ones 0, so the converted model's "
          "outputs differ for tokens routed to skip (docs/checkpoint-layouts.md)\n",
          fmt::join(layers, ", "), semantics_name(Semantics::Original),
          semantics_name(Semantics::Native));
  }

  save_model_dir(a.out, target, tensors, a.max_shard_bytes);
  for (const auto& e : fs::directory_iterator(a.in)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && !is_weight_file(name))
      fs::copy_file(e.path(), fs::path(a.out) / name, fs::copy_options::overwrite_existing);
  }
  fmt::print("{} ({}) → {} ({} layout): {} tensors, {} bytes of weights\n", a.in,
             schema_name(schema), a.out, enum_word(to_layout), tensors.size(), bytes);
  return 0;
}

}  // namespace

Action add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Rewrite a model directory in the original (ZAYA1-base) or native layout");
  sub->add_option("--to", args->to, "target layout: original | native | legacy")
      ->required()
      ->check(CLI::IsMember({"original", "native", "legacy"}));
  sub->add_option("in", args->in, "model directory to read")->required();
  sub->add_option("out", args->out, "new model directory (absent or empty)")->required();
  sub->add_option("--max-shard-bytes", args->max_shard_bytes,
                  "shard the weights above this many bytes (default 5e9)")
      ->check(CLI::PositiveNumber);
  return [args] { return run_convert(*args); };
}

}  // namespace zaya::cli
