// TrainConfig: every key of a training TOML file, listed once. The field table drives parsing,
// `--set key=value` overrides, range checks, printing (`zaya train --print-config`), the JSON copy
// kept in checkpoints, and the "unknown key, did you mean …?" check.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/device.h"
#include "core/enum_words.h"
#include "io/zaya_config.h"
#include "ops/precision.h"
#include "train/optim_config.h"

namespace zaya {

// train.activations: how the activations saved for backward are stored (model/activations.h;
// bf16: the large ones a sub-layer reads only itself as bf16 copies, about a third less memory;
// auto: bf16 when train.precision is bf16, else fp32). bf16 works on the CPU too.
enum class ActivationsSetting { Auto, Fp32, Bf16 };
template <>
struct EnumWords<ActivationsSetting> {
  static constexpr std::pair<ActivationsSetting, std::string_view> words[] = {
      {ActivationsSetting::Auto, "auto"},
      {ActivationsSetting::Fp32, "fp32"},
      {ActivationsSetting::Bf16, "bf16"}};
};

// checkpoint.resume: the newest valid checkpoint under checkpoint.dir ("auto"), a fresh start
// ("none"), or the checkpoint directory it names.
struct ResumeFrom {
  enum class Kind { Auto, None, Dir };
  Kind kind = Kind::Auto;
  std::string dir;                                 // Kind::Dir only
  static ResumeFrom parse(std::string_view word);  // "auto" | "none" | a directory
  std::string word() const;
  bool operator==(const ResumeFrom&) const = default;
};

struct TrainConfig {
  // [model]
  std::string model_config;  // config.json of the architecture (used when not resuming)
  std::string init_from;     // optional model directory to start from instead of random init
  double init_std = 0.02;
  // [data]
  std::string dataset;    // directory written by `zaya data prepare`
  std::string tokenizer;  // tokenizer.json (for samples); empty: no samples
  int64_t seq_len = 256;  // tokens the model reads per row (a window of seq_len + 1)
  // [train]
  int64_t micro_batch = 8;
  int64_t grad_accum = 1;
  int64_t steps = 1000;
  int64_t seed = 1234;
  // Where the parameters, gradients, optimizer state and activations live (gpu: one process per
  // GPU, a build with a GPU backend on a machine with a GPU; fp32 like the CPU).
  Device device = Device::Cpu;
  // The GEMM inputs' precision (bf16: rounded to bf16, fp32 accumulation and outputs; master
  // weights, optimizer state, norms, softmax, router and loss stay fp32). bf16 needs a GPU.
  ops::MatmulPrecision precision = ops::MatmulPrecision::F32;
  ActivationsSetting activations = ActivationsSetting::Auto;
  // A GEMM table of `zaya tune gemm` (io/gemm_table.h) loaded at start; needs train.device = gpu.
  std::string gemm_table;
  int64_t log_every = 1;
  int64_t eval_every = 100;
  int64_t eval_batches = 4;  // 0: no evaluation
  int64_t sample_every = 0;  // 0: only at the end
  int64_t sample_tokens = 64;
  std::string sample_prompt = "";
  double sample_temperature = 0.8;
  std::string metrics;  // JSON Lines file; empty: none
  // Fault handling (train/anomaly.h, train/straggler.h)
  int64_t anomaly_window = 32;
  double anomaly_z = 6;           // 0: only non-finite steps are anomalies
  int64_t anomaly_rollback = 3;   // anomalies in a row that roll back (0: never)
  double straggler_factor = 1.5;  // × the other ranks' median compute time
  int64_t straggler_steps = 5;
  // [optim]
  OptimConfig optim;
  // [checkpoint]
  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every = 0;
  int64_t keep_last = 3;
  ResumeFrom resume;
  bool async_checkpoint = true;
  // original (ZAYA1-base's layout) | native (transformers' own ZAYA): the model directory's layout,
  // and so the semantics the model trains with (docs/checkpoint-layouts.md).
  Semantics checkpoint_layout = Semantics::Original;
};

// A key's storage: a TrainConfig member or a member of its [optim] section.
using FieldPtr =
    std::variant<std::string TrainConfig::*, int64_t TrainConfig::*, double TrainConfig::*,
                 bool TrainConfig::*, Device TrainConfig::*, ops::MatmulPrecision TrainConfig::*,
                 ActivationsSetting TrainConfig::*, Semantics TrainConfig::*,
                 ResumeFrom TrainConfig::*, int64_t OptimConfig::*, double OptimConfig::*,
                 bool OptimConfig::*, ScheduleKind OptimConfig::*>;

// The values a numeric key accepts: lo..hi, each end open or closed.
struct Range {
  double lo, hi;
  bool lo_open = false, hi_open = false;
};

struct TrainField {
  const char* key;  // "section.name"
  FieldPtr ptr;
  const char* doc;
  std::optional<Range> range = {};
};
const std::vector<TrainField>& train_fields();

// Parses a TOML file; unknown keys, wrong types and bad values throw zaya::Error naming the key.
TrainConfig load_train_config(const std::string& path);
// Applies one "section.name=value" override (value parsed by the field's type).
void apply_override(TrainConfig& c, const std::string& assignment);
// Every key against its range, and the checks across keys; throws zaya::Error naming the key.
void validate_train_config(const TrainConfig& c);
nlohmann::json train_config_to_json(const TrainConfig& c);
// The inverse of train_config_to_json (a checkpoint's copy); unknown keys are errors.
TrainConfig train_config_from_json(const nlohmann::json& j);
// TOML text with one documented line per key (for --print-config and docs/training.md).
std::string train_config_to_toml(const TrainConfig& c);

}  // namespace zaya
