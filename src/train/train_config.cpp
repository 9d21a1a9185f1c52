#include "train/train_config.h"

#include <toml++/toml.h>
#include <algorithm>
#include <map>

#include "core/assert.h"

namespace zaya {

const std::vector<TrainField>& train_fields() {
  using C = TrainConfig;
  static const std::vector<TrainField> fields = {
      {"model.config", &C::model_config, "config.json of the architecture (new runs)"},
      {"model.init_from", &C::init_from, "model directory to start from instead of random init"},
      {"model.init_std", &C::init_std, "std of the normal init of matrices and embeddings"},
      {"data.dataset", &C::dataset, "directory written by `zaya data prepare`"},
      {"data.tokenizer", &C::tokenizer, "tokenizer.json used to print samples ('' = none)"},
      {"data.seq_len", &C::seq_len,
       "tokens the model reads per row (a window of seq_len + 1: inputs and next-token targets)"},
      {"train.micro_batch", &C::micro_batch,
       "rows per forward/backward on each rank (global batch = micro_batch × grad_accum × ranks)"},
      {"train.grad_accum", &C::grad_accum, "micro-batches per optimizer step"},
      {"train.steps", &C::steps, "optimizer steps in total"},
      {"train.seed", &C::seed, "seed of init and data order"},
      {"train.log_every", &C::log_every, "print a step line every N steps"},
      {"train.eval_every", &C::eval_every, "validation loss every N steps (0 = only at the end)"},
      {"train.eval_batches", &C::eval_batches,
       "validation micro-batches per evaluation (0 = no evaluation)"},
      {"train.sample_every", &C::sample_every, "print a sample every N steps (0 = at the end)"},
      {"train.sample_tokens", &C::sample_tokens, "tokens per sample"},
      {"train.sample_prompt", &C::sample_prompt, "prompt of the samples"},
      {"train.sample_temperature", &C::sample_temperature, "sampling temperature (0 = greedy)"},
      {"train.metrics", &C::metrics, "append one JSON object per step to this file ('' = none)"},
      {"optim.schedule", &C::schedule,
       "cosine | wsd | constant after linear warm-up (peak at step warmup, min_lr at the last "
       "step)"},
      {"optim.lr", &C::lr, "peak learning rate (Muon and AdamW share it: RMS-matched)"},
      {"optim.min_lr", &C::min_lr, "floor of the decay: the lr of the last step"},
      {"optim.warmup", &C::warmup, "linear warm-up steps (step k ≤ warmup runs at lr·k/warmup)"},
      {"optim.decay_fraction", &C::decay_fraction, "wsd: final fraction of steps that decays"},
      {"optim.weight_decay", &C::weight_decay, "decoupled weight decay on matrices"},
      {"optim.grad_clip", &C::grad_clip, "clip the global gradient norm to this (0 = off)"},
      {"optim.use_muon", &C::use_muon, "Muon for hidden matrices (false: AdamW everywhere)"},
      {"optim.muon_momentum", &C::muon_momentum, "Muon momentum (Nesterov)"},
      {"optim.muon_ns_steps", &C::muon_ns_steps, "Newton–Schulz iterations"},
      {"optim.adam_beta1", &C::adam_beta1, "AdamW β1"},
      {"optim.adam_beta2", &C::adam_beta2, "AdamW β2"},
      {"optim.adam_eps", &C::adam_eps, "AdamW ε"},
      {"optim.balance_lr", &C::balance_lr, "learning rate of the balancing-bias AdamW"},
      {"checkpoint.dir", &C::checkpoint_dir, "checkpoint root ('' = no checkpoints)"},
      {"checkpoint.every", &C::checkpoint_every, "save every N steps (0 = only at the end)"},
      {"checkpoint.keep_last", &C::keep_last, "keep the newest N checkpoints (0 = all)"},
      {"checkpoint.resume", &C::resume, "auto (newest valid) | none | a checkpoint directory"},
      {"checkpoint.async", &C::async_checkpoint, "write checkpoints in the background"},
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

// Sets a field from a TOML node, checking its type.
void set_from_node(TrainConfig& c, const TrainField& f, const toml::node& n,
                   const std::string& where) {
  std::visit(
      [&](auto ptr) {
        using T = std::remove_cvref_t<decltype(c.*ptr)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!n.is_string()) fail("{}key '{}' must be a string", where, f.key);
          c.*ptr = *n.value<std::string>();
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (!n.is_integer()) fail("{}key '{}' must be an integer", where, f.key);
          c.*ptr = *n.value<int64_t>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!n.is_number()) fail("{}key '{}' must be a number", where, f.key);
          c.*ptr = *n.value<double>();
        } else {
          if (!n.is_boolean()) fail("{}key '{}' must be true or false", where, f.key);
          c.*ptr = *n.value<bool>();
        }
      },
      f.ptr);
}

void walk(TrainConfig& c, const toml::table& t, const std::string& prefix,
          const std::string& where) {
  for (const auto& [k, node] : t) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      walk(c, *sub, key, where);
      continue;
    }
    const TrainField* f = find_field(key);
    if (!f) unknown_key(key, where);
    set_from_node(c, *f, node, where);
  }
}

}  // namespace

TrainConfig load_train_config(const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    fail("{}:{}:{}: invalid TOML: {}", path, src.begin.line, src.begin.column, e.description());
  }
  TrainConfig c;
  walk(c, table, "", path + ": ");
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
  if (std::holds_alternative<std::string TrainConfig::*>(f->ptr) && !n->is_string())
    t.insert_or_assign("v", value), n = t.get("v");
  if (std::holds_alternative<double TrainConfig::*>(f->ptr) && n->is_integer())
    t.insert_or_assign("v", double(*n->value<int64_t>())), n = t.get("v");
  set_from_node(c, *f, *n, "--set: ");
}

void validate_train_config(const TrainConfig& c) {
  auto positive = [](int64_t v, const char* key) {
    if (v <= 0) fail("key '{}' must be positive, got {}", key, v);
  };
  auto non_negative = [](double v, const char* key) {
    if (!(v >= 0)) fail("key '{}' must be ≥ 0, got {}", key, v);
  };
  positive(c.seq_len, "data.seq_len");
  positive(c.micro_batch, "train.micro_batch");
  positive(c.grad_accum, "train.grad_accum");
  positive(c.steps, "train.steps");
  positive(c.log_every, "train.log_every");
  non_negative(double(c.eval_batches), "train.eval_batches");
  positive(c.muon_ns_steps, "optim.muon_ns_steps");
  non_negative(double(c.eval_every), "train.eval_every");
  non_negative(double(c.sample_every), "train.sample_every");
  non_negative(double(c.sample_tokens), "train.sample_tokens");
  non_negative(c.sample_temperature, "train.sample_temperature");
  non_negative(double(c.warmup), "optim.warmup");
  non_negative(c.weight_decay, "optim.weight_decay");
  non_negative(c.grad_clip, "optim.grad_clip");
  non_negative(double(c.checkpoint_every), "checkpoint.every");
  non_negative(double(c.keep_last), "checkpoint.keep_last");
  if (!(c.lr > 0)) fail("key 'optim.lr' must be positive, got {}", c.lr);
  if (!(c.min_lr >= 0 && c.min_lr <= c.lr))
    fail("key 'optim.min_lr' must be in [0, optim.lr], got {}", c.min_lr);
  if (c.schedule != "cosine" && c.schedule != "wsd" && c.schedule != "constant")
    fail("key 'optim.schedule' must be cosine, wsd or constant, got '{}'", c.schedule);
  if (!(c.decay_fraction > 0 && c.decay_fraction <= 1))
    fail("key 'optim.decay_fraction' must be in (0, 1], got {}", c.decay_fraction);
  if (!(c.muon_momentum >= 0 && c.muon_momentum < 1))
    fail("key 'optim.muon_momentum' must be in [0, 1), got {}", c.muon_momentum);
  if (c.dataset.empty()) fail("key 'data.dataset' is required (a `zaya data prepare` output)");
  if (c.model_config.empty() && c.init_from.empty())
    fail("key 'model.config' (or 'model.init_from') is required");
}

nlohmann::json train_config_to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const TrainField& f : train_fields())
    std::visit([&](auto ptr) { j[f.key] = c.*ptr; }, f.ptr);
  return j;
}

std::string train_config_to_toml(const TrainConfig& c) {
  std::string out, section;
  for (const TrainField& f : train_fields()) {
    const std::string key = f.key, sec = key.substr(0, key.find('.'));
    if (sec != section) out += (section.empty() ? "[" : "\n[") + sec + "]\n", section = sec;
    std::string value;
    std::visit(
        [&](auto ptr) {
          using T = std::remove_cvref_t<decltype(c.*ptr)>;
          if constexpr (std::is_same_v<T, std::string>)
            value = nlohmann::json(c.*ptr).dump();
          else if constexpr (std::is_same_v<T, bool>)
            value = c.*ptr ? "true" : "false";
          else if constexpr (std::is_same_v<T, double>)
            value = fmt::format("{}", c.*ptr);
          else
            value = std::to_string(c.*ptr);
        },
        f.ptr);
    out += fmt::format("{} = {}  # {}\n", key.substr(sec.size() + 1), value, f.doc);
  }
  return out;
}

}  // namespace zaya
