// resolve_model_path (model_path.h): a model directory, a file inside one, a checkpoint or a run,
// tried in that order; what is none of them gets a message saying what was expected and, where a
// near path is one, which.
#include "checkpoint/model_path.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

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

bool is_checkpoint(const fs::path& p) {
  return checkpoint_step(p.string()) >= 0 && is_model_dir(p / "model");
}

bool is_run(const fs::path& p) {
  try {
    return !list_checkpoints(p.string()).empty();
  } catch (const Error&) {  // unreadable: not a run we can use
    return false;
  }
}

// What `p` is to --model, for a "did you mean": "" when it is none of the three.
std::string kind_of(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return "";
  if (is_model_dir(p)) return "a model directory";
  if (is_checkpoint(p)) return "a checkpoint";
  if (is_run(p)) return "a run";
  return "";
}

// Edit distance with adjacent transpositions (optimal string alignment): "kvj" is one edit from
// "kjv". Names are short, so the full table is nothing.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// Entries of directory `dir` (at most a few thousand: a huge folder is not searched further).
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it) && out.size() < 4096;
       it.increment(ec))
    out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string did_you_mean(const fs::path& p) {
  return fmt::format("did you mean {}? ({})", p.string(), kind_of(p));
}

// For an existing directory that is none of the three: a model/ inside it, or the models,
// checkpoints and runs directly inside it (a folder of runs). "" if none.
std::string near_existing(const fs::path& p) {
  if (is_model_dir(p / "model")) return did_you_mean(p / "model");
  std::vector<std::string> inside;
  for (const fs::path& e : entries(p))
    if (!kind_of(e).empty()) inside.push_back(e.string());
  if (inside.empty()) return "";
  if (inside.size() == 1) return did_you_mean(inside[0]);
  std::string list;
  for (size_t i = 0; i < inside.size() && i < 4; ++i) list += (i ? ", " : "") + inside[i];
  return fmt::format("{} holds {} models, checkpoints or runs, e.g. {}: name one", p.string(),
                     inside.size(), list);
}

// A usable path near the missing `p`: a sibling of the same step (step_150 for step_00000150) or
// a typo away, else its parent, else what its parent holds (near_existing), else (the parent
// missing too) the same one level up. "" if none.
std::string near_missing(const fs::path& p) {
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    return p.parent_path().empty() || parent == p ? "" : near_missing(parent);
  const std::string name = p.filename().string();
  const int64_t step = checkpoint_step(name);
  const size_t tolerance = std::max<size_t>(2, name.size() / 4);
  fs::path best;
  size_t best_distance = tolerance + 1;
  for (const fs::path& e : entries(parent)) {
    const std::string other = e.filename().string();
    const size_t d = step >= 0 && checkpoint_step(other) == step ? 0 : edit_distance(name, other);
    if (d < best_distance && !kind_of(e).empty()) best = e, best_distance = d;
  }
  if (!best.empty()) return did_you_mean(best);
  if (!kind_of(parent).empty()) return did_you_mean(parent);
  return near_existing(parent);  // e.g. runs/NAME/checkpoints beside the missing runs/NAME/final
}

// The model's short name: a checkpoint's model takes its run's name (runs/NAME/step_N/model), and
// a run kept in a folder named "checkpoints" (runs/NAME/checkpoints/step_N, as configs/*.toml set
// checkpoint.dir) the name of the folder above.
std::string model_name(const fs::path& dir) {
  const fs::path abs = fs::absolute(dir).lexically_normal();
  const fs::path d = abs.filename().empty() ? abs.parent_path() : abs;
  if (d.filename() != "model" || checkpoint_step(d.parent_path().string()) < 0)
    return d.filename().string();
  fs::path run = d.parent_path().parent_path();
  if (run.filename() == "checkpoints" && !run.parent_path().filename().empty())
    run = run.parent_path();
  return run.filename().empty() ? d.filename().string() : run.filename().string();
}

ModelPath found(const fs::path& dir, std::string note) {
  return {dir.string(), std::move(note), model_name(dir), ""};
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".gguf") return true;
  char magic[4] = {};
  std::ifstream f(path, std::ios::binary);
  return f.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

ModelPath resolve_model_path(const std::string& arg, const std::string& flag) {
  if (arg.empty())
    fail("{}: empty path; give a model directory, a GGUF file, a checkpoint or a run", flag);
  // "runs/x/" names runs/x: drop trailing separators (but keep "/" itself).
  std::string clean = arg;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  const fs::path p(clean);
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    const std::string hint = near_missing(p);
    fail("{} {}: no such file or directory{}", flag, arg, hint.empty() ? "" : "; " + hint);
  }
  if (is_gguf_file(clean))  // a whole model in one file
    return {"", "", fs::path(clean).stem().string(), clean};
  if (!fs::is_directory(p, ec)) {
    const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    if (is_model_dir(dir)) return found(dir, "the model directory of " + arg);
    const std::string hint = kind_of(dir).empty() ? "" : "; " + did_you_mean(dir);
    fail(
        "{} {}: a file that is not a GGUF file (it does not start with the magic \"GGUF\"), and "
        "its folder {} is not a model directory (no config.json){}",
        flag, arg, dir.string(), hint);
  }
  if (is_model_dir(p)) return found(p, "");
  if (is_checkpoint(p)) {
    const std::string bad = verify_checkpoint(clean);
    if (!bad.empty()) {
      const fs::path run = p.parent_path().empty() ? fs::path(".") : p.parent_path();
      fail(
          "{} {}: the checkpoint does not verify: {}; {} {} takes the newest checkpoint of the "
          "run that does",
          flag, arg, bad, flag, run.string());
    }
    return found(p / "model", "checkpoint " + clean + "'s model");
  }
  if (is_run(p)) {
    const std::string latest = find_latest_valid_checkpoint(clean);
    if (latest.empty())
      fail("{} {}: a run whose checkpoints all fail to verify (see the warnings above)", flag, arg);
    return found(
        fs::path(latest) / "model",
        fmt::format("the newest valid checkpoint of {}: step {}", clean, checkpoint_step(latest)));
  }
  const std::string hint = near_existing(p);
  fail(
      "{} {}: not a model directory (config.json + model.safetensors), a GGUF file, a "
      "checkpoint (step_N/ with model/ inside) or a run (a folder of step_N/ checkpoints){}",
      flag, arg, hint.empty() ? "" : "; " + hint);
}

std::string model_path_line(const ModelPath& p) {
  return p.note.empty() ? "" : fmt::format("model {} ({})", p.dir.empty() ? p.gguf : p.dir, p.note);
}

}  // namespace zaya
