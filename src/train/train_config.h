// TrainConfig: every key of a training TOML file, listed once. The field table drives parsing,
// `--set key=value` overrides, range checks, printing (`zaya train --print-config`), the JSON copy
// kept in checkpoints, and the "unknown key, did you mean …?" check.
// Paths: a relative path written in the TOML file is read from the file's folder (so a run file
// works from any directory); a --set value is read as given (from the current directory). Every
// key remembers where it was set (TrainConfig::sources), so an error names the key, its value as
// written and the file (key_source). docs/training.md states these rules.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
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

// Where a key's value came from: the TOML file ("" for --set) and the text written there.
struct KeySource {
  std::string file;     // the TOML file; "" when the value came from --set
  std::string written;  // the value as written (before a relative path was resolved)
};

struct TrainConfig {
  // [model]
  std::string model_config;  // config.json of the architecture (used when not resuming)
  std::string init_from;     // optional model directory to start from instead of random init
  double init_std = 0.02;
  // [data]
  std::string dataset;  // directory written by `zaya data prepare`
  // tokenizer.json: samples, the checks against the model and the dataset, and the copy in every
  // saved model directory; empty: the dataset's own (dataset.json records it) when that file is
  // still there unchanged, else none (no samples, no tokenizer.json in the model directory).
  std::string tokenizer;
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
  double anomaly_z = 6;            // 0: only non-finite steps are anomalies
  int64_t anomaly_warmup = 100;    // steps before spikes are judged (non-finite: always)
  double anomaly_grad_ratio = 10;  // a gradient-norm spike also exceeds this × the window mean
  int64_t anomaly_rollback = 3;    // anomalies in a row that roll back (0: never)
  double straggler_factor = 1.5;   // × the other ranks' median compute time
  int64_t straggler_steps = 5;
  // [optim]
  OptimConfig optim;
  // [checkpoint]
  // The checkpoint root; "" or "none": no checkpoints (checkpoint_root). In a TOML file "" is the
  // default and `zaya train` makes it runs/<TOML file stem>/ (apply_run_defaults).
  std::string checkpoint_dir;
  // Save every N steps and at the end; 0: only at the end; -1 (the default): every 10% of
  // train.steps (checkpoint_interval). A stop signal always saves (train/stop_signal.h).
  int64_t checkpoint_every = -1;
  int64_t keep_last = 3;
  ResumeFrom resume;
  // resume = "none" into a root that already holds step_* checkpoints: false refuses (they are
  // another run's, and a later resume = "auto" would pick them); true deletes them first.
  bool checkpoint_overwrite = false;
  bool async_checkpoint = true;
  // original (ZAYA1-base's layout) | native (transformers' own ZAYA): the model directory's layout,
  // and so the semantics the model trains with (docs/checkpoint-layouts.md).
  Semantics checkpoint_layout = Semantics::Original;

  // Not a key: where each key set by the TOML file or --set came from (for error messages).
  std::map<std::string, KeySource> sources;
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

// Parses a TOML file; unknown keys, wrong types and bad values throw zaya::Error naming the key,
// a file that cannot be read names the file and why. A relative path in a path key (path_keys)
// is resolved against the file's folder.
TrainConfig load_train_config(const std::string& path);
// Applies one "section.name=value" override (value parsed by the field's type; a path is kept as
// given, relative to the current directory).
void apply_override(TrainConfig& c, const std::string& assignment);
// What `zaya train --config FILE` adds after the overrides: checkpoint.dir "" becomes
// runs/<FILE's stem> (relative to the current directory).
void apply_run_defaults(TrainConfig& c, const std::string& toml_path);
// The keys whose values are file or directory paths.
const std::vector<std::string>& path_keys();
// A key with its value as written and where: `model.config = model.json (in configs/x.toml)`,
// `… (--set)`, or `key = value` for a value set in code.
std::string key_source(const TrainConfig& c, const std::string& key);
// The checkpoint root ("" when checkpoints are off: checkpoint.dir "" or "none").
std::string checkpoint_root(const TrainConfig& c);
// Steps between checkpoints: checkpoint.every, with -1 resolved to every 10% of train.steps
// (rounded up, at least 1); 0: only at the end.
int64_t checkpoint_interval(const TrainConfig& c);
// Every key against its range, and the checks across keys; throws zaya::Error naming the key.
void validate_train_config(const TrainConfig& c);
nlohmann::json train_config_to_json(const TrainConfig& c);
// The inverse of train_config_to_json (a checkpoint's copy); unknown keys are errors.
TrainConfig train_config_from_json(const nlohmann::json& j);
// TOML text with one documented line per key (for --print-config and docs/training.md).
std::string train_config_to_toml(const TrainConfig& c);

}  // namespace zaya
