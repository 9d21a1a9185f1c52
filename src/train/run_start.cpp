// Where a training run starts (run_start.h).
#include "train/run_start.h"

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/arena.h"
#include "core/assert.h"
#include "core/log.h"
#include "dist/group.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {

namespace fs = std::filesystem;

std::string pick_resume_dir(const TrainConfig& cfg, dist::Group& group) {
  if (cfg.resume.kind == ResumeFrom::Kind::None) return "";
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
    ZayaConfig rc = load_config((fs::path(resume_dir) / "model" / "config.json").string());
    if (rc.semantics != layout)
      fail(
          "checkpoint {} holds the {} layout but checkpoint.layout is '{}' (resume with the same "
          "layout, or `zaya convert` the model)",
          resume_dir, semantics_name(rc.semantics), semantics_name(layout));
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
