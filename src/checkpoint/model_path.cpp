// resolve_model_path (model_path.h): a model directory, a checkpoint, a run or a file inside a
// model directory, tried in that order.
#include "checkpoint/model_path.h"

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "checkpoint/retention.h"
#include "core/assert.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

bool is_model_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "config.json", ec);
}

}  // namespace

ModelPath resolve_model_path(const std::string& arg) {
  const fs::path p(arg);
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    // A near miss: the parent exists, so say what it holds that could be meant.
    const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    if (fs::is_directory(parent, ec) && is_model_dir(parent))
      fail("--model {}: no such file or directory (did you mean {}?)", arg, parent.string());
    fail("--model {}: no such file or directory", arg);
  }
  if (fs::is_regular_file(p, ec)) {
    const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    if (is_model_dir(dir)) return {dir.string(), "the model directory of " + arg};
    fail("--model {}: a file, and its folder {} is not a model directory (no config.json)", arg,
         dir.string());
  }
  if (is_model_dir(p)) return {arg, ""};
  if (checkpoint_step(arg) >= 0 && is_model_dir(p / "model")) {
    const std::string bad = verify_checkpoint(arg);
    if (!bad.empty()) fail("--model {}: the checkpoint does not verify: {}", arg, bad);
    return {(p / "model").string(), "checkpoint " + arg + "'s model"};
  }
  if (!list_checkpoints(arg).empty()) {
    const std::string latest = find_latest_valid_checkpoint(arg);
    if (latest.empty())
      fail("--model {}: a run whose checkpoints all fail to verify (see the warnings above)", arg);
    return {(fs::path(latest) / "model").string(), "the newest valid checkpoint of " + arg +
                                                       ": step " +
                                                       std::to_string(checkpoint_step(latest))};
  }
  fail(
      "--model {}: not a model directory (no config.json), a checkpoint (step_N/model/) or a run "
      "(step_N/ checkpoints)",
      arg);
}

}  // namespace zaya
