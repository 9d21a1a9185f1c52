// The training config (train_config.h): the field table, TOML parsing, --set overrides, range
// checks, JSON and TOML printing — all driven by the one table.
#include "train/train_config.h"

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "core/assert.h"

namespace zaya {

ResumeFrom ResumeFrom::parse(std::string_view word) {
  if (word == "auto") return {};
  if (word == "none") return {Kind::None, ""};
  return {Kind::Dir, std::string(word)};
}

std::string ResumeFrom::word() const {
  switch (kind) {
    case Kind::Auto:
      return "auto";
    case Kind::None:
      return "none";
    case Kind::Dir:
      return dir;
  }
  return "?";
}

const std::vector<TrainField>& train_fields() {
  using C = TrainConfig;
  using O = OptimConfig;
  const double inf = std::numeric_limits<double>::infinity();
  const Range positive{0, inf, true, true}, non_negative{0, inf, false, true};
  const Range fraction_open{0, 1, true, false}, unit_open_right{0, 1, false, true};
  static const std::vector<TrainField> fields = {
      {"model.config", &C::model_config, "config.json of the architecture (new runs)"},
      {"model.init_from", &C::init_from, "model directory to start from instead of random init"},
      {"model.init_std", &C::init_std, "std of the normal init of matrices and embeddings",
       non_negative},
      {"data.dataset", &C::dataset, "directory written by `zaya data prepare`"},
      {"data.tokenizer", &C::tokenizer,
       "tokenizer.json: samples, checks, and a copy in every saved model directory ('' = the "
       "dataset's own, as its dataset.json records it)"},
      {"data.seq_len", &C::seq_len,
       "tokens the model reads per row (a window of seq_len + 1: inputs and next-token targets)",
       positive},
      {"train.micro_batch", &C::micro_batch,
       "rows per forward/backward on each rank (global batch = micro_batch × grad_accum × ranks)",
       positive},
      {"train.grad_accum", &C::grad_accum, "micro-batches per optimizer step", positive},
      {"train.steps", &C::steps, "optimizer steps in total", positive},
      {"train.seed", &C::seed, "seed of init and data order"},
      {"train.device", &C::device,
       "cpu | gpu: where parameters, gradients, optimizer state and activations live (gpu: one "
       "process, a GPU build)"},
      {"train.precision", &C::precision,
       "fp32 | bf16: GEMM inputs in bf16 with fp32 accumulation (bf16 needs train.device = gpu)"},
      {"train.activations", &C::activations,
       "auto | fp32 | bf16: storage of the activations saved for backward (auto: bf16 with "
       "train.precision = bf16, else fp32)"},
      {"train.gemm_table", &C::gemm_table,
       "GEMM table of `zaya tune gemm` to follow ('' = none; needs train.device = gpu)"},
      {"train.log_every", &C::log_every, "print a step line every N steps", positive},
      {"train.eval_every", &C::eval_every, "validation loss every N steps (0 = only at the end)",
       non_negative},
      {"train.eval_batches", &C::eval_batches,
       "validation micro-batches per evaluation (0 = no evaluation)", non_negative},
      {"train.sample_every", &C::sample_every, "print a sample every N steps (0 = at the end)",
       non_negative},
      {"train.sample_tokens", &C::sample_tokens, "tokens per sample", non_negative},
      {"train.sample_prompt", &C::sample_prompt, "prompt of the samples"},
      {"train.sample_temperature", &C::sample_temperature, "sampling temperature (0 = greedy)",
       non_negative},
      {"train.metrics", &C::metrics, "append one JSON object per step to this file ('' = none)"},
      {"train.anomaly_window", &C::anomaly_window,
       "accepted steps the loss / grad-norm z-scores are computed over (judged once full)",
       positive},
      {"train.anomaly_z", &C::anomaly_z,
       "z-score above which a loss or grad-norm spike skips the update (0 = only non-finite)",
       non_negative},
      {"train.anomaly_grad_ratio", &C::anomaly_grad_ratio,
       "a gradient-norm spike must also exceed this × the window's mean (0 = the z-score alone)",
       non_negative},
      {"train.anomaly_warmup", &C::anomaly_warmup,
       "steps before spikes are judged (early training moves too fast for a z-score; "
       "non-finite steps are always skipped)",
       non_negative},
      {"train.anomaly_rollback", &C::anomaly_rollback,
       "anomalies in a row that roll back to the previous checkpoint and skip their data (0 = "
       "never)",
       non_negative},
      {"train.straggler_factor", &C::straggler_factor,
       "a rank slower than this × the others' median compute time is a straggler",
       Range{1, inf, true, true}},
      {"train.straggler_steps", &C::straggler_steps,
       "consecutive slow steps before a rank is named a straggler", positive},
      {"optim.schedule", &O::schedule,
       "cosine | wsd | constant after linear warm-up (peak at step warmup, min_lr at the last "
       "step)"},
      {"optim.lr", &O::lr, "peak learning rate (Muon and AdamW share it: RMS-matched)", positive},
      {"optim.min_lr", &O::min_lr, "floor of the decay: the lr of the last step", non_negative},
      {"optim.warmup", &O::warmup, "linear warm-up steps (step k ≤ warmup runs at lr·k/warmup)",
       non_negative},
      {"optim.decay_fraction", &O::decay_fraction, "wsd: final fraction of steps that decays",
       fraction_open},
      {"optim.weight_decay", &O::weight_decay, "decoupled weight decay on matrices", non_negative},
      {"optim.grad_clip", &O::grad_clip, "clip the global gradient norm to this (0 = off)",
       non_negative},
      {"optim.use_muon", &O::use_muon, "Muon for hidden matrices (false: AdamW everywhere)"},
      {"optim.muon_momentum", &O::muon_momentum, "Muon momentum", unit_open_right},
      {"optim.muon_nesterov", &O::muon_nesterov, "Nesterov momentum in Muon"},
      {"optim.muon_ns_steps", &O::muon_ns_steps, "Newton–Schulz iterations", positive},
      {"optim.muon_symmetric", &O::muon_symmetric,
       "Newton–Schulz with symmetric rank-k products (half the work; same result)"},
      {"optim.muon_bf16", &O::muon_bf16,
       "Newton–Schulz's products with BF16 operands, F32 accumulation (needs train.device = gpu)"},
      {"optim.muon_rms_scale", &O::muon_rms_scale,
       "Muon update scale: rms_scale·√max(rows, cols) (AdamW RMS matching)", positive},
      {"optim.adam_beta1", &O::adam_beta1, "AdamW β1", unit_open_right},
      {"optim.adam_beta2", &O::adam_beta2, "AdamW β2", unit_open_right},
      {"optim.adam_eps", &O::adam_eps, "AdamW ε", positive},
      {"optim.zero_bucket_mb", &O::zero_bucket_mb,
       "ZeRO-1 bucket size, MiB of F32 gradients: with several ranks each bucket's reduce-scatter "
       "starts as soon as the backward has finished its layers (0 = one bucket, at the end)",
       non_negative},
      {"optim.balance_lr", &O::balance_lr, "learning rate of the balancing-bias AdamW",
       non_negative},
      {"optim.balance_beta1", &O::balance_beta1, "balancing-bias AdamW β1", unit_open_right},
      {"optim.balance_beta2", &O::balance_beta2, "balancing-bias AdamW β2", unit_open_right},
      {"optim.balance_eps", &O::balance_eps, "balancing-bias AdamW ε", positive},
      {"checkpoint.dir", &C::checkpoint_dir,
       "checkpoint root ('' = runs/<TOML file stem>; 'none' = no checkpoints)"},
      {"checkpoint.every", &C::checkpoint_every,
       "save every N steps and at the end (-1 = every 10% of train.steps; 0 = only at the end)",
       Range{-1, inf, false, true}},
      {"checkpoint.keep_last", &C::keep_last, "keep the newest N checkpoints (0 = all)",
       non_negative},
      {"checkpoint.resume", &C::resume, "auto (newest valid) | none | a checkpoint directory"},
      {"checkpoint.overwrite", &C::checkpoint_overwrite,
       "resume = none into a root holding checkpoints: delete them first (false = refuse)"},
      {"checkpoint.async", &C::async_checkpoint, "write checkpoints in the background"},
      {"checkpoint.layout", &C::checkpoint_layout,
       "original | native: layout (and semantics) of the saved model directory"},
  };
  return fields;
}

namespace {

const TrainField* find_field(const std::string& key) {
  for (const TrainField& f : train_fields())
    if (key == f.key) return &f;
  return nullptr;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& where) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const TrainField& f : train_fields()) {
    const size_t d = edit_distance(key, f.key);
    if (d < best_d) best_d = d, best = f.key;
  }
  if (best_d <= std::max<size_t>(3, key.size() / 3))
    fail("{}unknown key '{}' (did you mean '{}'?)", where, key, best);
  fail("{}unknown key '{}' (`zaya train --print-config` lists every key)", where, key);
}

// The storage of a key, whichever struct holds it.
template <class T>
T& ref(TrainConfig& c, T TrainConfig::*p) {
  return c.*p;
}
template <class T>
T& ref(TrainConfig& c, T OptimConfig::*p) {
  return c.optim.*p;
}
template <class T>
const T& ref(const TrainConfig& c, T TrainConfig::*p) {
  return c.*p;
}
template <class T>
const T& ref(const TrainConfig& c, T OptimConfig::*p) {
  return c.optim.*p;
}

// Sets a field from a TOML node, checking its type.
void set_from_node(TrainConfig& c, const TrainField& f, const toml::node& n,
                   const std::string& where) {
  std::visit(
      [&](auto ptr) {
        auto& v = ref(c, ptr);
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!n.is_string()) fail("{}key '{}' must be a string", where, f.key);
          v = *n.value<std::string>();
        } else if constexpr (std::is_same_v<T, ResumeFrom>) {
          if (!n.is_string()) fail("{}key '{}' must be a string", where, f.key);
          v = ResumeFrom::parse(*n.value<std::string>());
        } else if constexpr (WordEnum<T>) {
          if (!n.is_string()) fail("{}key '{}' must be {}", where, f.key, enum_choices<T>());
          const std::string word = *n.value<std::string>();
          const std::optional<T> k = parse_enum<T>(word);
          if (!k) fail("{}key '{}' must be {}, got '{}'", where, f.key, enum_choices<T>(), word);
          v = *k;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (!n.is_integer()) fail("{}key '{}' must be an integer", where, f.key);
          v = *n.value<int64_t>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!n.is_number()) fail("{}key '{}' must be a number", where, f.key);
          v = *n.value<double>();
        } else {
          if (!n.is_boolean()) fail("{}key '{}' must be true or false", where, f.key);
          v = *n.value<bool>();
        }
      },
      f.ptr);
}

// The field's value as a JSON value (enums by name).
nlohmann::json field_json(const TrainConfig& c, const TrainField& f) {
  return std::visit(
      [&](auto ptr) -> nlohmann::json {
        const auto& v = ref(c, ptr);
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (WordEnum<T>)
          return std::string(enum_word(v));
        else if constexpr (std::is_same_v<T, ResumeFrom>)
          return v.word();
        else
          return v;
      },
      f.ptr);
}

// The value of a field as text (a string unquoted).
std::string field_text(const TrainConfig& c, const TrainField& f) {
  const nlohmann::json v = field_json(c, f);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

void walk(TrainConfig& c, const toml::table& t, const std::string& prefix,
          const std::string& file) {
  const std::string where = file + ": ";
  for (const auto& [k, node] : t) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      walk(c, *sub, key, file);
      continue;
    }
    const TrainField* f = find_field(key);
    if (!f) unknown_key(key, where);
    set_from_node(c, *f, node, where);
    c.sources[key] = KeySource{file, field_text(c, *f)};
  }
}

// The string a path key holds (for checkpoint.resume: its directory; null when it names none).
std::string* path_value(TrainConfig& c, const std::string& key) {
  if (key == "checkpoint.resume")
    return c.resume.kind == ResumeFrom::Kind::Dir ? &c.resume.dir : nullptr;
  if (key == "checkpoint.dir" && c.checkpoint_dir == "none") return nullptr;
  const TrainField* f = find_field(key);
  return &(c.*std::get<std::string TrainConfig::*>(f->ptr));
}

}  // namespace

const std::vector<std::string>& path_keys() {
  static const std::vector<std::string> keys = {
      "model.config",     "model.init_from", "data.dataset",   "data.tokenizer",
      "train.gemm_table", "train.metrics",   "checkpoint.dir", "checkpoint.resume"};
  return keys;
}

TrainConfig load_train_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("--config {}: a directory, not a TOML file", path);
  // toml++ reports an unreadable file as invalid TOML at 0:0: say what is wrong with the file.
  if (!std::ifstream(path)) fail("cannot open {}: {}", path, std::strerror(errno));
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    fail("{}:{}:{}: invalid TOML: {}", path, src.begin.line, src.begin.column, e.description());
  }
  TrainConfig c;
  walk(c, table, "", path);
  // Relative paths in the file are the file's: resolved against its folder (kept relative when
  // the folder is, and lexically normalised: configs/../data/x is data/x).
  const fs::path folder = fs::path(path).parent_path();
  if (!folder.empty())
    for (const std::string& key : path_keys()) {
      std::string* v = c.sources.count(key) ? path_value(c, key) : nullptr;
      if (v && !v->empty() && fs::path(*v).is_relative())
        *v = (folder / *v).lexically_normal().string();
    }
  validate_train_config(c);
  return c;
}

void apply_override(TrainConfig& c, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("--set '{}': expected key=value (e.g. --set optim.lr=1e-3)", assignment);
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  const TrainField* f = find_field(key);
  if (!f) unknown_key(key, "--set: ");
  // Parse the value as a TOML value so types follow TOML (strings may be unquoted).
  toml::table t;
  try {
    t = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    t = toml::table{{"v", value}};
  }
  const toml::node* n = t.get("v");
  const bool wants_string = std::visit(
      [](auto ptr) {
        using T = std::remove_cvref_t<decltype(ref(std::declval<TrainConfig&>(), ptr))>;
        return std::is_same_v<T, std::string> || std::is_same_v<T, ResumeFrom> || WordEnum<T>;
      },
      f->ptr);
  if (wants_string && !n->is_string()) t.insert_or_assign("v", value), n = t.get("v");
  const bool wants_double = std::holds_alternative<double TrainConfig::*>(f->ptr) ||
                            std::holds_alternative<double OptimConfig::*>(f->ptr);
  if (wants_double && n->is_integer())
    t.insert_or_assign("v", double(*n->value<int64_t>())), n = t.get("v");
  set_from_node(c, *f, *n, "--set: ");
  c.sources[key] = KeySource{"", field_text(c, *f)};
}

void apply_run_defaults(TrainConfig& c, const std::string& toml_path) {
  if (c.checkpoint_dir.empty() && !toml_path.empty())
    c.checkpoint_dir = "runs/" + std::filesystem::path(toml_path).stem().string();
}

std::string key_source(const TrainConfig& c, const std::string& key) {
  const TrainField* f = find_field(key);
  ZAYA_ASSERT(f != nullptr, "key_source: no key {}", key);
  const auto it = c.sources.find(key);
  if (it == c.sources.end()) return fmt::format("{} = {}", key, field_text(c, *f));
  const KeySource& s = it->second;
  return s.file.empty() ? fmt::format("{} = {} (--set)", key, s.written)
                        : fmt::format("{} = {} (in {})", key, s.written, s.file);
}

std::string checkpoint_root(const TrainConfig& c) {
  return c.checkpoint_dir == "none" ? std::string() : c.checkpoint_dir;
}

int64_t checkpoint_interval(const TrainConfig& c) {
  if (c.checkpoint_every >= 0) return c.checkpoint_every;
  return std::max<int64_t>(1, (c.steps + 9) / 10);
}

namespace {

bool in_range(double v, const Range& r) {
  return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

std::string range_text(const Range& r) {
  if (std::isinf(r.hi)) return r.lo == 0 && r.lo_open ? "positive" : fmt::format("≥ {}", r.lo);
  return fmt::format("in {}{}, {}{}", r.lo_open ? "(" : "[", r.lo, r.hi, r.hi_open ? ")" : "]");
}

}  // namespace

void validate_train_config(const TrainConfig& c) {
  for (const TrainField& f : train_fields()) {
    std::visit(
        [&](auto ptr) {
          const auto& v = ref(c, ptr);
          using T = std::remove_cvref_t<decltype(v)>;
          // Every real-valued key finite (optim.lr = inf would run, and end NaN with exit 0).
          if constexpr (std::is_same_v<T, double>)
            if (!std::isfinite(v)) fail("key '{}' must be a finite number, got {}", f.key, v);
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>)
            if (f.range && !in_range(double(v), *f.range))
              fail("key '{}' must be {}, got {}", f.key, range_text(*f.range), v);
        },
        f.ptr);
  }
  if (!(c.optim.min_lr <= c.optim.lr))
    fail("key 'optim.min_lr' must be in [0, optim.lr], got {}", c.optim.min_lr);
  if (c.precision == ops::MatmulPrecision::BF16 && c.device != Device::Gpu)
    fail(
        "key 'train.precision' = bf16 needs train.device = gpu (the CPU trains in fp32); set "
        "train.precision = fp32 or train.device = gpu");
  if (!c.gemm_table.empty() && c.device != Device::Gpu)
    fail(
        "key 'train.gemm_table' needs train.device = gpu (it tunes GPU GEMMs); drop the key or "
        "set train.device = gpu");
  if (c.optim.muon_bf16 && c.device != Device::Gpu)
    fail(
        "key 'optim.muon_bf16' = true needs train.device = gpu (the CPU's Newton–Schulz is F32); "
        "set optim.muon_bf16 = false or train.device = gpu");
  if (c.dataset.empty()) fail("key 'data.dataset' is required (a `zaya data prepare` output)");
  if (c.model_config.empty() && c.init_from.empty())
    fail("key 'model.config' (or 'model.init_from') is required");
}

nlohmann::json train_config_to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const TrainField& f : train_fields()) j[f.key] = field_json(c, f);
  return j;
}

TrainConfig train_config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) fail("training config: expected a JSON object of keys");
  TrainConfig c;
  for (const auto& [key, value] : j.items()) {
    const TrainField* f = find_field(key);
    if (!f) unknown_key(key, "training config: ");
    toml::table t;
    if (value.is_string())
      t.insert("v", value.get<std::string>());
    else if (value.is_boolean())
      t.insert("v", value.get<bool>());
    else if (value.is_number_integer())
      t.insert("v", value.get<int64_t>());
    else if (value.is_number())
      t.insert("v", value.get<double>());
    else
      fail("training config: key '{}' has a {} value", key, value.type_name());
    if ((std::holds_alternative<double TrainConfig::*>(f->ptr) ||
         std::holds_alternative<double OptimConfig::*>(f->ptr)) &&
        value.is_number_integer())
      t.insert_or_assign("v", value.get<double>());
    set_from_node(c, *f, *t.get("v"), "training config: ");
  }
  return c;
}

std::string train_config_to_toml(const TrainConfig& c) {
  std::string out, section;
  for (const TrainField& f : train_fields()) {
    const std::string key = f.key, sec = key.substr(0, key.find('.'));
    if (sec != section) out += (section.empty() ? "[" : "\n[") + sec + "]\n", section = sec;
    const nlohmann::json v = field_json(c, f);
    const std::string value = v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump();
    out += fmt::format("{} = {}  # {}\n", key.substr(sec.size() + 1), value, f.doc);
  }
  return out;
}

}  // namespace zaya
