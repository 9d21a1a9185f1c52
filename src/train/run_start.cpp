// Where a training run starts (run_start.h).
#include "train/run_start.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/retention.h"
#include "core/arena.h"
#include "core/assert.h"
#include "core/log.h"
#include "dist/group.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {

namespace fs = std::filesystem;

void check_run_files(const TrainConfig& cfg) {
  std::error_code ec;
  const auto file = [&](const char* key, const std::string& path) {
    if (path.empty()) return;
    if (fs::is_directory(path, ec))
      fail("{}: {} is a directory, not a file", key_source(cfg, key), path);
    if (!std::ifstream(path))
      fail("{}: cannot open {}: {}", key_source(cfg, key), path, std::strerror(errno));
  };
  const auto dir = [&](const char* key, const std::string& path) {
    if (path.empty()) return;
    if (!fs::exists(path, ec))
      fail("{}: cannot open {}: No such file or directory", key_source(cfg, key), path);
    if (!fs::is_directory(path, ec)) fail("{}: {} is not a directory", key_source(cfg, key), path);
  };
  file("model.config", cfg.model_config);
  dir("model.init_from", cfg.init_from);
  dir("data.dataset", cfg.dataset);
  file("data.tokenizer", cfg.tokenizer);
  file("train.gemm_table", cfg.gemm_table);
  if (cfg.resume.kind == ResumeFrom::Kind::Dir) dir("checkpoint.resume", cfg.resume.dir);
}

std::string pick_resume_dir(const TrainConfig& cfg, dist::Group& group) {
  if (cfg.resume.kind == ResumeFrom::Kind::None) {
    if (cfg.checkpoint_dir.empty()) return "";
    // A fresh start beside another run's checkpoints would mix the two runs under one root.
    double refused = 0;
    std::string why;
    if (group.rank() == 0) {
      const auto old = list_checkpoints(cfg.checkpoint_dir);  // newest first
      if (!old.empty() && !cfg.checkpoint_overwrite) {
        refused = 1;
        why = fmt::format(
            "{} starts a new run, but checkpoint.dir {} already holds {} checkpoint(s) of an "
            "earlier run ({}{}): a new run would write beside them and a later resume = \"auto\" "
            "could pick theirs. Resume them (checkpoint.resume = \"auto\"), choose another "
            "checkpoint.dir, or set checkpoint.overwrite = true to delete them first",
            key_source(cfg, "checkpoint.resume"), cfg.checkpoint_dir, old.size(),
            fs::path(old.back().second).filename().string(),
            old.size() > 1 ? " … " + fs::path(old.front().second).filename().string() : "");
      } else if (!old.empty()) {
        for (const auto& [step, path] : old) remove_all_quietly(path);
        log_info(
            "checkpoint: deleted the {} checkpoint(s) of an earlier run under {} "
            "(checkpoint.resume = \"none\", checkpoint.overwrite = true)",
            old.size(), cfg.checkpoint_dir);
      }
    }
    group.broadcast(Tensor(&refused, {1}), 0);
    if (refused != 0)
      fail("{}", group.rank() == 0 ? why : "rank 0 refused to start (see its error)");
    return "";
  }
  if (cfg.resume.kind == ResumeFrom::Kind::Dir) return cfg.resume.dir;
  if (cfg.checkpoint_dir.empty()) return "";
  double step = -1;  // -2: rank 0 refused (checkpoints exist, none verifies)
  std::string refused;
  if (group.rank() == 0) {
    try {
      const std::string latest = find_resume_checkpoint(cfg.checkpoint_dir);
      if (!latest.empty()) step = double(checkpoint_step(latest));
    } catch (const Error& e) {
      step = -2, refused = e.what();
    }
  }
  group.broadcast(Tensor(&step, {1}), 0);
  if (step == -2) fail("{}", group.rank() == 0 ? refused : "rank 0 found no checkpoint to resume");
  return step < 0 ? "" : cfg.checkpoint_dir + "/" + checkpoint_dir_name(int64_t(step));
}

Device train_device(const TrainConfig& cfg, const dist::Group& group) {
  if (cfg.device == Device::Cpu) return Device::Cpu;
  if (group.backend() != dist::Backend::Single && group.backend() != dist::Backend::Nccl)
    fail(
        "train.device = gpu needs the NCCL group, this run has the {} group: launch "
        "`zaya train` with mpirun/srun (it picks nccl for train.device = gpu), or run one process "
        "(this run has {} ranks)",
        enum_word(group.backend()), group.size());
  if (!gpu::available()) fail("train.device = gpu: {}", gpu::describe());
  return Device::Gpu;
}

std::unique_ptr<Model> make_model(const TrainConfig& cfg, const std::string& resume_dir,
                                  Device device) {
  // checkpoint.layout picks the saved layout and so the semantics trained with (a resumed
  // checkpoint already has them).
  const Semantics layout = cfg.checkpoint_layout;
  if (!resume_dir.empty()) {
    const std::string saved = (fs::path(resume_dir) / "model" / "config.json").string();
    ZayaConfig rc = load_config(saved);
    if (rc.semantics != layout)
      fail(
          "checkpoint {} holds the {} layout but checkpoint.layout is '{}' (resume with the same "
          "layout, or `zaya convert` the model)",
          resume_dir, semantics_name(rc.semantics), semantics_name(layout));
    // A resumed run trains the checkpoint's model: a model.config that says otherwise is a change
    // of architecture the run would silently ignore.
    // Compared as the checkpoint's layout writes them (a native file has no room for some
    // original fields), `extra` (the fields kept verbatim, which do not change the model) aside.
    if (!cfg.model_config.empty()) {
      ZayaConfig want = with_semantics(load_config(cfg.model_config), layout);
      want.extra = rc.extra;
      const std::string diff = config_to_json(want) == config_to_json(rc)
                                   ? ""
                                   : config_difference(rc, want, "checkpoint", "model.config");
      if (!diff.empty())
        fail(
            "{} is not the model of the checkpoint it resumes, {}: {}. A resumed run continues "
            "the checkpoint's model: to train the new one start a new run (another checkpoint.dir, "
            "or checkpoint.resume = \"none\" with checkpoint.overwrite = true); to continue, "
            "restore model.config",
            key_source(cfg, "model.config"), saved, diff);
    }
    return std::make_unique<Model>(rc, device);
  }
  if (!cfg.init_from.empty()) {
    auto src = std::make_unique<Model>(Model::load_dir(cfg.init_from, device));
    if (src->config().semantics == layout) return src;
    log_info("warning: {} holds the {} layout; training it with {} semantics (checkpoint.layout)",
             cfg.init_from, semantics_name(src->config().semantics), semantics_name(layout));
    auto m = std::make_unique<Model>(with_semantics(src->config(), layout), device);
    const int64_t total = int64_t(src->layout().total);  // same parameter layout
    device_copy(Tensor(m->params(), {total}).on(device), Tensor(src->params(), {total}).on(device));
    return m;
  }
  auto m = std::make_unique<Model>(with_semantics(load_config(cfg.model_config), layout), device);
  m->init_random(uint64_t(cfg.seed), cfg.init_std);  // the same bits on every rank
  return m;
}

}  // namespace zaya
