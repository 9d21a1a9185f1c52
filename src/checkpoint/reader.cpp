// Loading a checkpoint: verify it, load the weights (the model's config must be the checkpoint's),
// read trainer_state.json, reassemble the optimizer state (checkpoint.h); config_difference.
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/checkpoint.h"
#include "checkpoint/manifest.h"
#include "checkpoint/optimizer_shards.h"
#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"
#include "io/model_dir.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {

using json = nlohmann::json;

std::string config_difference(const ZayaConfig& a, const ZayaConfig& b, const std::string& a_name,
                              const std::string& b_name) {
  json ja = config_to_json(a), jb = config_to_json(b);
  std::string out;
  std::set<std::string> keys;
  for (const auto& [k, v] : ja.items()) keys.insert(k);
  for (const auto& [k, v] : jb.items()) keys.insert(k);
  for (const std::string& k : keys) {
    json va = ja.contains(k) ? ja[k] : json(), vb = jb.contains(k) ? jb[k] : json();
    if (va != vb)
      out += fmt::format("{}{} = {} ({}) vs {} ({})", out.empty() ? "" : "; ", k, va.dump(), a_name,
                         vb.dump(), b_name);
  }
  if (out.empty() && !(a == b)) return "the configs differ";
  return out;
}

void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const std::vector<std::pair<std::string, Tensor>>& optimizer_dest) {
  load_checkpoint(dir, m, trainer_state, OptimizerShard::whole(optimizer_dest));
}

void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const OptimizerShard& optimizer_dest) {
  if (std::string why = verify_checkpoint(dir); !why.empty())
    fail("checkpoint {} is torn or corrupted: {}; resume from an earlier checkpoint", dir, why);
  std::vector<std::pair<std::string, FileDigest>> files;
  read_manifest(dir, files);

  const std::string model_dir = dir + "/model";
  ZayaConfig cfg = load_config(model_dir + "/config.json");
  if (!(cfg == m.config()))
    fail("checkpoint {} was written for a different model config: {}", dir,
         config_difference(cfg, m.config(), "checkpoint", "model"));
  m.load_weights(open_model_tensors(model_dir, cfg), model_dir);

  const std::string state_path = dir + "/trainer_state.json";
  try {
    trainer_state = parse_json(read_text_file(state_path, "trainer state"));
  } catch (const JsonError& e) {
    fail("{}: not valid JSON: {}", state_path, e.what());
  }

  std::vector<std::string> shards;
  for (const auto& [rel, d] : files)
    if (rel.rfind("optimizer/", 0) == 0) shards.push_back(rel);
  load_optimizer_state(dir, shards, optimizer_dest);
}

}  // namespace zaya
