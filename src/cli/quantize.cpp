// zaya quantize --model DIR|FILE.gguf --type q8_0|q6_k|q5_k_m|q4_k_m [--keep PATTERN=TYPE …]
//               [--blanket] --out FILE.gguf [--force] [--tokenizer T] [--quiet]
// Writes the model as one GGUF file (docs/quantization.md, "zaya quantize and the mixed policy";
// docs/cli.md): the tensors under scheme B names (infer/gguf_model.h) in the types the mixed
// policy (quant/policy.h) or --blanket / --keep choose, and everything else a model needs to run —
// the config (zaya.config_json and the community converters' keys), the tokenizer
// (zaya.tokenizer_json, and the standard tokenizer.ggml.* vocabulary arrays and special ids
// when they can say it exactly: data/tokenizer_gguf.h), tokenizer_config.json,
// generation_config.json and the chat template.
//
// The source is a model directory (anything --model takes: F32/BF16/F16/F64 safetensors) or a
// GGUF file (F32/F16/BF16 tensors; a block-quantized one is dequantized first, with a warning, or
// copied as it is when the policy wants the type it already has). Which one is decided as every
// --model decides it (checkpoint/model_path.h): a file that starts with the GGUF magic (or is
// named *.gguf: then a wrong magic is an error naming the file) is a GGUF, whatever its name. It is
// streamed: each tensor is read from the mapping a block of rows at a time, widened to F32,
// quantized (rows in parallel) and written, so the memory used is a few block buffers whatever the
// model's size (ZAYA1-8B is 17.7 GB of bf16). The file appears at --out only when complete
// (io/gguf.h writes atomically).
//
// Results on stdout: per type the tensors and bytes, the file's size and the bits per weight
// (over all weights and over the matrices'). Progress, the fallbacks and warnings on stderr.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/model_path.h"
#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/tokenizer.h"
#include "data/tokenizer_gguf.h"
#include "infer/gguf_model.h"
#include "infer/model_files.h"
#include "infer/model_source.h"
#include "io/file.h"
#include "io/gguf.h"
#include "io/json_parse.h"
#include "io/model_dir.h"
#include "io/model_extras.h"
#include "model/param_layout.h"
#include "quant/formats.h"
#include "quant/policy.h"

namespace zaya::cli {

namespace {

namespace fs = std::filesystem;

struct QuantizeArgs {
  std::string model, out, tokenizer;
  quant::QuantPreset type = quant::QuantPreset::Q4_K_M;
  std::vector<std::string> keep;
  bool blanket = false, force = false, quiet = false;
};

// Where the weights and the texts come from.
struct Source {
  std::string what;  // for the log: "DIR (native layout)", "FILE.gguf (scheme A)"
  ZayaConfig config;
  // The stored tensor of a parameter (a view over a mapping; any float or block dtype).
  std::function<Tensor(const ParamSpec&)> tensor;
  // The texts a GGUF written by zaya carries ("" when absent).
  std::string tokenizer_json, tokenizer_config_json, generation_config_json, chat_template;
  std::string tokenizer_origin;  // the file (or key) the tokenizer came from
  ModelExtras extras;            // the special ids and tokens of those texts (io/model_extras.h)
  // Metadata copied as it is (a GGUF source's tokenizer.ggml.* keys).
  std::vector<std::pair<std::string, GgufValue>> keep_keys;
  std::shared_ptr<const void> owner;  // keeps the mappings alive
};

std::string read_if_exists(const fs::path& p, std::string_view what) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? read_text_file(p.string(), what) : std::string();
}

// tokenizer_config.json's "chat_template": a string, or a list of {name, template} whose
// "default" entry is the template (transformers' two forms).
std::string config_chat_template(const std::string& text, const std::string& path) {
  if (text.empty()) return "";
  nlohmann::json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("chat_template")) return "";
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const nlohmann::json& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
          e["template"].is_string())
        return e["template"].get<std::string>();
  if (t.is_null()) return "";
  fail("{}: chat_template must be a string or a list of {{name, template}} with a \"default\"",
       path);
}

Source open_dir_source(const ModelPath& mp) {
  if (const std::string line = model_path_line(mp); !line.empty()) log_info("quantize: {}", line);
  const std::string dir = mp.dir;
  Source s;
  ConfigSchema schema;
  s.config = load_config((fs::path(dir) / "config.json").string(), &schema);
  auto st = std::make_shared<SafeTensors>(open_model_tensors(dir, s.config));
  s.owner = st;
  s.what = fmt::format("{} ({} layout)", dir, semantics_name(s.config.semantics));
  s.tensor = [st, dir, c = s.config](const ParamSpec& spec) {
    const SafeTensorInfo* info = st->find(spec.name);
    if (!info)
      fail("{}: missing tensor '{}'; config.json and the weights disagree", st->source(),
           stored_name(c, spec.name));
    if (info->shape != spec.shape)
      fail("{}: tensor '{}' has shape [{}], config.json says [{}]", info->file,
           stored_name(c, spec.name), fmt::join(info->shape, ", "), fmt::join(spec.shape, ", "));
    Tensor t(const_cast<void*>(info->data), info->dtype, {});
    t.ndim = int(spec.shape.size());
    for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = spec.shape[size_t(k)];
    return t;
  };
  // The texts: read_model_extras validates the two JSON files (a malformed one is an error here,
  // not in every later run of the GGUF).
  s.extras = read_model_extras(dir);
  s.tokenizer_config_json =
      read_if_exists(fs::path(dir) / "tokenizer_config.json", "tokenizer config");
  s.generation_config_json =
      read_if_exists(fs::path(dir) / "generation_config.json", "generation config");
  s.chat_template = read_if_exists(fs::path(dir) / "chat_template.jinja", "chat template");
  if (s.chat_template.empty())
    s.chat_template = config_chat_template(s.tokenizer_config_json,
                                           (fs::path(dir) / "tokenizer_config.json").string());
  if (const std::string tok = find_tokenizer(dir, ""); !tok.empty()) {
    s.tokenizer_json = read_text_file(tok, "tokenizer");
    s.tokenizer_origin = tok;
  }
  return s;
}

Source open_gguf_source(const std::string& path) {
  auto gm = std::make_shared<GgufModel>(open_gguf_model(path));
  Source s;
  s.owner = gm;
  s.config = gm->config;
  s.what = fmt::format("{} (GGUF, scheme {})", path, enum_word(gm->scheme));
  s.tensor = [gm](const ParamSpec& spec) { return gm->tensor(spec); };
  const GgufFile& f = *gm->file;
  auto text = [&](const std::string& key) {
    const GgufValue* v = f.find(key);
    return v && v->type == GgufType::String ? v->s : std::string();
  };
  s.tokenizer_json = text("zaya.tokenizer_json");
  if (!s.tokenizer_json.empty()) s.tokenizer_origin = path + " (zaya.tokenizer_json)";
  s.tokenizer_config_json = text("zaya.tokenizer_config_json");
  s.generation_config_json = text("zaya.generation_config_json");
  s.chat_template = text("tokenizer.chat_template");
  s.extras = gguf_model_extras(f);
  for (const auto& [key, v] : f.metadata())
    if (key.starts_with("tokenizer.") && key != "tokenizer.chat_template")
      s.keep_keys.emplace_back(key, v);
  return s;
}

// The special ids the GGML keys carry beside the vocabulary (data/tokenizer_gguf.h): those zaya
// itself uses running the source (infer/model_files.h) — generation_config's bos_token_id, else
// tokenizer_config's bos_token, else "<bos>"; generation_config's first eos_token_id, and a
// second one as the end of turn (tokenizer.ggml.eot_token_id, which a reader adds to the EOS ids),
// else config.json's; config.json's pad_token_id — and tokenizer_config's add_bos_token /
// add_eos_token when it sets them, else what tokenizer.json `tj`'s post-processor does.
GgmlSpecialIds special_ids(const Source& src, const Tokenizer& tok, const nlohmann::json& tj) {
  const ModelExtras& x = src.extras;
  GgmlSpecialIds s;
  s.bos = x.bos_token_id >= 0   ? x.bos_token_id
          : x.bos_token.empty() ? tok.bos_id()
                                : tok.token_id(x.bos_token);
  s.eos = x.eos_token_ids.empty() ? src.config.eos_token_id : x.eos_token_ids[0];
  if (x.eos_token_ids.size() > 1 && x.eos_token_ids[1] != s.eos) s.eot = x.eos_token_ids[1];
  s.pad = src.config.pad_token_id;
  s.add_bos = post_processor_adds(tj, true);
  s.add_eos = post_processor_adds(tj, false);
  if (!src.tokenizer_config_json.empty()) {
    nlohmann::json tc;
    try {
      tc = parse_json(src.tokenizer_config_json);
    } catch (const JsonError&) {  // read into the extras already: never malformed here
    }
    if (tc.is_object()) {
      if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
        s.add_bos = tc["add_bos_token"].get<bool>();
      if (tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean())
        s.add_eos = tc["add_eos_token"].get<bool>();
    }
  }
  return s;
}

bool is_matrix_role(quant::TensorRole r) {
  return r != quant::TensorRole::Vector && r != quant::TensorRole::Conv;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

// 1234567 → "1,234,567".
std::string grouped(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// Rows [r0, r0 + n) of a stored [rows, cols] tensor `src`, widened to F32 into y.
void widen_rows(const Tensor& src, int64_t cols, int64_t r0, int64_t n, float* y) {
  const char* base = static_cast<const char*>(src.data) + dtype_bytes(src.dtype, r0 * cols);
  if (src.dtype == DType::F64) {
    const double* x = reinterpret_cast<const double*>(base);
    for (int64_t i = 0; i < n * cols; ++i) y[i] = float(x[i]);
    return;
  }
  quant::dequantize_matrix(src.dtype, base, y, n, cols);
}

void check_out(const QuantizeArgs& a, const std::string& model_path) {
  std::error_code ec;
  const fs::path out(a.out);
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    fail("--out {}: the directory {} does not exist", a.out, parent.string());
  if (fs::is_directory(out, ec)) fail("--out {}: a directory; name the .gguf file to write", a.out);
  if (fs::exists(out, ec)) {
    if (fs::equivalent(out, model_path, ec))
      fail("--out {} is the --model file: write the quantized model to another file", a.out);
    if (!a.force) fail("--out {} exists; pass --force to replace it", a.out);
  }
}

int run_quantize(const QuantizeArgs& a) {
  if (a.quiet) set_log_level(LogLevel::Quiet);
  quant::PolicyOptions opt;
  opt.preset = a.type;
  opt.blanket = a.blanket;
  for (const std::string& k : a.keep) opt.keep.push_back(quant::parse_keep_rule(k));
  check_out(a, a.model);

  // GGUF or directory as every --model decides it: by the file's magic (model_path.h).
  const ModelPath mp = resolve_model_path(a.model);
  Source src = mp.gguf.empty() ? open_dir_source(mp) : open_gguf_source(mp.gguf);
  if (!a.tokenizer.empty()) {
    src.tokenizer_json = read_text_file(a.tokenizer, "--tokenizer");
    src.tokenizer_origin = a.tokenizer;
    std::erase_if(src.keep_keys,
                  [](const auto& kv) { return kv.first.starts_with("tokenizer.ggml."); });
  }
  std::vector<std::pair<std::string, GgufValue>> ggml_vocab;
  if (!src.tokenizer_json.empty()) {
    // A tokenizer that does not load would make every later run of the file fail: check it now.
    // Then its GGML arrays, when they say it exactly (Gemma 3's kind; else only the text goes),
    // built once the parsed JSON is gone: the vocabulary is never held three times.
    std::optional<GgufVocab> vocab;
    GgmlSpecialIds ids;
    {
      nlohmann::json j;
      try {
        j = parse_json(src.tokenizer_json);
      } catch (const JsonError& e) {
        fail("{}: {}", src.tokenizer_origin, e.what());
      }
      ids = special_ids(src, Tokenizer::from_json(j, src.tokenizer_origin), j);
      std::string why_not;
      vocab = vocab_from_tokenizer_json(j, src.config.vocab_size, &why_not);
    }
    if (vocab) {
      ggml_vocab = ggml_tokenizer_keys(std::move(*vocab), ids);
      // They replace a GGUF source's arrays (which said the same tokenizer, or less).
      std::erase_if(src.keep_keys,
                    [](const auto& kv) { return kv.first.starts_with("tokenizer.ggml."); });
    }
  } else if (src.keep_keys.empty()) {
    fmt::print(stderr,
               "zaya: warning: {} has no tokenizer.json: the GGUF will hold none (pass "
               "--tokenizer FILE to embed one; without it text in or out needs --tokenizer)\n",
               a.model);
  }

  const ZayaConfig& c = src.config;
  const ParamLayout layout = make_param_layout(c);
  const std::vector<GgufOutTensor> tensors = gguf_output_tensors(c, layout);
  const std::vector<quant::TensorDesc> descs = gguf_tensor_descs(tensors);
  const std::vector<quant::TensorChoice> choice = quant::choose_types(descs, opt);

  log_info("quantize: {} → {}, {}{}", src.what, a.out, enum_word(a.type),
           a.blanket ? " (blanket: every matrix at the preset's type)" : " (mixed policy)");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (choice[i].fell_back())
      log_info("quantize: {}: rows of {} do not fill {}'s blocks of {}: {} instead",
               tensors[i].name, tensors[i].ne[0], dtype_name(choice[i].wanted),
               dtype_block_elems(choice[i].wanted), dtype_name(choice[i].type));

  // Sources already block-quantized are dequantized first (unless the chosen type is theirs).
  std::map<DType, int64_t> requant;
  uint64_t src_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    for (const ParamSpec* p : tensors[i].parts) {
      const Tensor t = src.tensor(*p);
      if (dtype_is_quantized(t.dtype) && t.dtype != choice[i].type) ++requant[t.dtype];
      src_bytes += t.nbytes();
    }
  for (const auto& [t, n] : requant)
    fmt::print(stderr,
               "zaya: warning: {} source tensor(s) are {}: requantizing {} loses quality (they are "
               "dequantized to f32 first)\n",
               n, dtype_name(t), dtype_name(t));

  GgufWriter w(a.out);
  set_model_keys(w, c);
  w.set("general.file_type", GgufValue::u32(quant::preset_file_type(a.type)));
  w.set("general.quantization_version", GgufValue::u32(2));
  if (!src.tokenizer_json.empty())
    w.set("zaya.tokenizer_json", GgufValue::str(std::move(src.tokenizer_json)));
  if (!src.tokenizer_config_json.empty())
    w.set("zaya.tokenizer_config_json", GgufValue::str(src.tokenizer_config_json));
  if (!src.generation_config_json.empty())
    w.set("zaya.generation_config_json", GgufValue::str(src.generation_config_json));
  if (!src.chat_template.empty())
    w.set("tokenizer.chat_template", GgufValue::str(src.chat_template));
  for (const auto& [key, v] : src.keep_keys) w.set(key, v);
  for (auto& [key, v] : ggml_vocab) w.set(key, std::move(v));
  ggml_vocab = {};
  for (size_t i = 0; i < tensors.size(); ++i)
    w.add_tensor(tensors[i].name, choice[i].type, tensors[i].ne);

  Progress::Options po;
  po.quiet = a.quiet;
  po.bytes = true;
  Progress progress("quantize", int64_t(src_bytes), "read", po);
  constexpr int64_t kChunkValues = int64_t(8) << 20;  // 32 MiB of f32 per block of rows
  std::vector<float> f32;
  std::vector<char> bytes;
  uint64_t done = 0;
  std::map<DType, std::pair<int64_t, uint64_t>> per_type;  // tensors, bytes
  uint64_t weights = 0, matrix_weights = 0, data_bytes = 0, matrix_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufOutTensor& o = tensors[i];
    const DType type = choice[i].type;
    const int64_t cols = o.ne[0];
    uint64_t tensor_bytes = 0;
    for (const ParamSpec* p : o.parts) {
      const Tensor t = src.tensor(*p);
      const int64_t rows = t.numel() / cols;
      if (t.dtype == type) {  // the type it has: the bytes as they are
        w.write_tensor(o.name, t.data, t.nbytes());
        tensor_bytes += t.nbytes();
        done += t.nbytes();
        progress.update(int64_t(done));
        continue;
      }
      const int64_t chunk = std::max<int64_t>(1, kChunkValues / cols);
      f32.resize(size_t(std::min(rows, chunk) * cols));
      bytes.resize(dtype_bytes(type, std::min(rows, chunk) * cols));
      for (int64_t r = 0; r < rows; r += chunk) {
        const int64_t n = std::min(chunk, rows - r);
        widen_rows(t, cols, r, n, f32.data());
        quant::quantize_matrix(type, f32.data(), bytes.data(), n, cols);
        const size_t nb = dtype_bytes(type, n * cols);
        w.write_tensor(o.name, bytes.data(), nb);
        tensor_bytes += nb;
        done += dtype_bytes(t.dtype, n * cols);
        progress.update(int64_t(done));
      }
    }
    int64_t numel = 1;
    for (int64_t d : o.ne) numel *= d;
    auto& [count, b] = per_type[type];
    ++count;
    b += tensor_bytes;
    weights += uint64_t(numel);
    data_bytes += tensor_bytes;
    if (is_matrix_role(descs[i].role)) {
      matrix_weights += uint64_t(numel);
      matrix_bytes += tensor_bytes;
    }
  }
  w.finish();
  progress.finish();

  std::error_code ec;
  const uint64_t file_bytes = fs::file_size(a.out, ec);
  fmt::print("quantize: wrote {} ({}{}): {} tensors\n", a.out, enum_word(a.type),
             a.blanket ? ", blanket" : ", mixed policy", tensors.size());
  fmt::print("  {:<8} {:>8} {:>18}\n", "type", "tensors", "bytes");
  for (const auto& [t, cb] : per_type)
    fmt::print("  {:<8} {:>8} {:>18}  {}\n", dtype_name(t), cb.first, grouped(cb.second),
               human_bytes(double(cb.second)));
  fmt::print("  file {} bytes ({})\n", grouped(file_bytes), human_bytes(double(file_bytes)));
  fmt::print("  bits per weight {:.3f} over {} weights; matrices {:.3f} over {}\n",
             8.0 * double(data_bytes) / double(std::max<uint64_t>(weights, 1)), grouped(weights),
             8.0 * double(matrix_bytes) / double(std::max<uint64_t>(matrix_weights, 1)),
             grouped(matrix_weights));
  return 0;
}

}  // namespace

Action add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "quantize", "Write a model as one GGUF file of quantized weights (mixed policy)");
  sub->add_option("--model", args->model,
                  "model directory (or anything --model takes) or FILE.gguf")
      ->required();
  add_enum_option(sub, "--type", args->type,
                  "the preset: q8_0, q6_k, q5_k_m or q4_k_m (attention and experts at this type)")
      ->required();
  sub->add_option("--keep", args->keep,
                  "PATTERN=TYPE: tensors whose GGUF name matches the regex get TYPE (f32 f16 bf16 "
                  "q8_0 q4_0 q5_0 q4_k q5_k q6_k iq4_xs); repeatable, the first match wins")
      ->allow_extra_args(false);
  sub->add_flag("--blanket", args->blanket,
                "no mixed policy: every matrix (router and embedding too) at the preset's type");
  sub->add_option("--out", args->out, "the GGUF file to write")->required();
  sub->add_flag("--force", args->force, "replace --out if it exists");
  sub->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json to embed (default: the model's own)");
  sub->add_flag("--quiet", args->quiet, "no progress or notes on stderr");
  return [args] { return run_quantize(*args); };
}

}  // namespace zaya::cli
