// Checkpoint save: synchronous save time vs the training stall of an asynchronous save
// (the target: a stall ≤ 1/10 of a synchronous save).
// usage: bench_checkpoint [DIR=a fresh directory under $TMPDIR or /tmp] [reps=3]
// The model is ~75M parameters (hidden 512, 8 CCA + 8 MoE sub-layers of 8 experts, vocab 32768)
// with optimizer-sized extra state (2 × params, as AdamW's two moments). The async stall is
// measured with the staging memory prepared at start-up (AsyncCheckpointWriter::prepare) and the
// previous save finished, as when saves are many steps apart; the first save is shown separately.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/timer.h"
#include "io/zaya_config.h"
#include "model/model.h"

using namespace zaya;

namespace {

ZayaConfig bench_config() {
  nlohmann::json layers = nlohmann::json::array(), q = layers, g = layers, ffn = layers, r = layers;
  for (int i = 0; i < 8; ++i) {
    layers.push_back("a"), q.push_back(4), g.push_back(2), ffn.push_back(0), r.push_back(0);
    layers.push_back(8), q.push_back(0), g.push_back(0), ffn.push_back(1024), r.push_back(64);
  }
  return config_from_json({{"hidden_size", 512},
                           {"vocab_size", 32768},
                           {"num_attention_heads", 8},
                           {"num_key_value_heads", 2},
                           {"zaya_layers", layers},
                           {"cca_num_q_heads", q},
                           {"num_query_groups_list", g},
                           {"ffn_hidden_size_list", ffn},
                           {"zaya_mlp_expansion", r}});
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string root;
  if (argc > 1) {
    root = argv[1];
  } else {
    const char* tmpdir = getenv("TMPDIR");
    std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/zaya_bench_ckpt_XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      return 1;
    }
    root = tmpl;
  }
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;

  Model m(bench_config());
  m.init_random(1);
  const size_t n = m.layout().total;
  // Optimizer-sized state: two moments, one F32 tensor each per parameter tensor.
  std::vector<float> moments(2 * n);
  for (size_t i = 0; i < n; ++i) moments[i] = 0.1f * m.params()[i], moments[n + i] = 1e-4f;
  CheckpointData d;
  d.trainer_state = {{"step", 0}, {"data_position", 0}};
  std::vector<std::pair<std::string, Tensor>> state;
  for (int k = 0; k < 2; ++k)
    for (const ParamSpec& s : m.layout().specs)
      state.emplace_back(fmt::format("adamw.{}.{}", k ? "v" : "m", s.name),
                         Tensor(moments.data() + k * n + s.offset, {s.numel()}));
  d.optimizer = OptimizerShard::whole(state);
  const double gb = double(3 * n * sizeof(float)) / 1e9;
  std::printf("params %.1fM, checkpoint %.2f GB (params + 2x optimizer state), dir %s\n",
              double(n) / 1e6, gb, root.c_str());

  std::vector<double> sync_s;
  for (int r = 0; r < reps; ++r) {
    d.trainer_state["step"] = r;
    Timer t;
    save_checkpoint(root + "/sync", r, m, d, 1);
    sync_s.push_back(t.seconds());
  }

  AsyncCheckpointWriter writer(root + "/async", 1);
  Timer prepare_t;
  writer.prepare(m, d);  // at start-up, in the background
  writer.wait();         // (training steps would run here)
  const double prepare_s = prepare_t.seconds();
  Timer first_total;
  writer.save(0, m, d);
  const double first_stall = writer.last_stall_seconds();
  writer.wait();
  const double first_write = first_total.seconds();
  std::vector<double> stall_s, total_s;
  for (int r = 1; r <= reps; ++r) {
    d.trainer_state["step"] = r;
    Timer t;
    writer.save(r, m, d);
    stall_s.push_back(writer.last_stall_seconds());
    writer.wait();  // training would run here; a save many steps later finds this one done
    total_s.push_back(t.seconds());
  }

  const double sync = median(sync_s), stall = median(stall_s);
  std::printf("sync save          %8.3f s  (%.2f GB/s; median of %d)\n", sync, gb / sync, reps);
  std::printf("async total        %8.3f s  (background write, median)\n", median(total_s));
  std::printf("async stall        %8.3f s  (snapshot copy, %.2f GB/s; median)\n", stall,
              gb / stall);
  std::printf(
      "async first stall  %8.3f s  (after prepare(), which took %.3f s in the background; "
      "first write %.3f s)\n",
      first_stall, prepare_s, first_write);
  std::printf("stall / sync ratio %8.3f  (target <= 0.100)  first save: %.3f\n", stall / sync,
              first_stall / sync);

  if (argc <= 1) std::filesystem::remove_all(root);
  return 0;
}
