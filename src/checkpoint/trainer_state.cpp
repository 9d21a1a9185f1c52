// TrainerState's JSON form and its validation (trainer_state.h).
#include "checkpoint/trainer_state.h"

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/assert.h"

namespace zaya {

using json = nlohmann::json;

void to_json(json& j, const DataWindow& w) {
  j = {{"step", w.step}, {"data", w.at}, {"rows", w.rows}};
}

namespace {

// An integer field of `j` in [lo, hi]; `fallback` when absent and not required.
int64_t integer(const json& j, const char* key, int64_t lo, int64_t hi, bool required,
                int64_t fallback, const std::string& path) {
  if (!j.contains(key)) {
    if (required) fail("{}: \"{}\" is missing", path, key);
    return fallback;
  }
  const json& v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) ||
      v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    fail("{}: \"{}\" is {} (expected an integer in [{}, {}])", path, key, v.dump(), lo, hi);
  return v.get<int64_t>();
}

std::vector<DataWindow> windows(const json& j, const char* key, const std::string& path) {
  std::vector<DataWindow> out;
  if (!j.contains(key)) return out;
  if (!j.at(key).is_array()) fail("{}: \"{}\" must be an array", path, key);
  for (const json& w : j.at(key)) {
    if (!w.is_object() || !w.contains("data"))
      fail("{}: a data window of \"{}\" must be {{\"step\", \"data\", \"rows\"}}, got {}", path,
           key, w.dump());
    DataWindow d;
    d.step = integer(w, "step", 0, int64_t(1) << 53, true, 0, path);
    d.rows = integer(w, "rows", 0, int64_t(1) << 40, true, 0, path);
    d.at = w.at("data").get<LoaderState>();
    out.push_back(d);
  }
  return out;
}

}  // namespace

TrainerState parse_trainer_state(const json& j, const std::string& path) {
  constexpr int64_t kMaxStep = int64_t(1) << 53;
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  TrainerState s;
  s.step = integer(j, "step", 0, kMaxStep, true, 0, path);
  const std::string dir = std::filesystem::path(path).parent_path().filename().string();
  const int64_t named = checkpoint_step(dir);
  if (named >= 0 && named != s.step)
    fail("{}: \"step\" is {} but the directory is {} (a checkpoint of step {})", path, s.step, dir,
         named);
  s.optimizer_steps = integer(j, "optimizer_steps", 0, kMaxStep, true, 0, path);
  s.skipped = integer(j, "skipped", 0, s.step, false, 0, path);
  s.world_size = integer(j, "world_size", 1, int64_t(1) << 24, false, 1, path);
  s.global_batch_rows = integer(j, "global_batch_rows", 1, int64_t(1) << 40, false, 0, path);
  if (!j.contains("data")) fail("{}: \"data\" is missing", path);
  s.data = j.at("data").get<LoaderState>();
  s.config = j.value("config", json::object());
  s.anomaly = j.value("anomaly", json::object());
  s.anomalous = windows(j, "anomalous", path);
  s.skip_data = windows(j, "skip_data", path);
  return s;
}

void to_json(json& j, const TrainerState& s) {
  j = {{"step", s.step},
       {"optimizer_steps", s.optimizer_steps},
       {"data", s.data},
       {"skipped", s.skipped},
       {"world_size", s.world_size},
       {"global_batch_rows", s.global_batch_rows},
       {"config", s.config},
       {"anomaly", s.anomaly},
       {"anomalous", s.anomalous},
       {"skip_data", s.skip_data}};
}

void from_json(const json& j, TrainerState& s) {
  s = parse_trainer_state(j, "trainer_state.json");
}

}  // namespace zaya
