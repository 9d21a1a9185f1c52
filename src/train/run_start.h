// Where a training run starts: the device it trains on, the checkpoint it resumes, and the model
// it begins with (a checkpoint's config, train.init_from's weights, or a random init).
#pragma once
#include <memory>
#include <string>

#include "core/device.h"
#include "train/train_config.h"

namespace zaya {

namespace dist {
class Group;
}
class Model;

// Every file and directory a key names exists (model.config, model.init_from, data.dataset,
// data.tokenizer, train.gemm_table, checkpoint.resume's directory); zaya::Error naming the key,
// its value as written, the TOML file and why otherwise. No collective.
void check_run_files(const TrainConfig& cfg);

// Collective. The newest valid checkpoint of the run (rank 0 verifies, every rank gets the same
// answer), or the one checkpoint.resume names; "" to start fresh. A root whose checkpoints all
// fail to verify is a zaya::Error (resume = "none" starts over). resume = "none" into a root that
// holds step_* directories is a zaya::Error naming them, unless checkpoint.overwrite: then rank 0
// deletes them first (they are another run's: a later resume = "auto" must not pick them).
std::string pick_resume_dir(const TrainConfig& cfg, dist::Group& group);

// train.device: the CPU, or the GPU on a machine that has one — one process, or one per GPU with
// the NCCL group (the mpi group cannot move the optimizer's GPU buckets); zaya::Error otherwise.
Device train_device(const TrainConfig& cfg, const dist::Group& group);

// The model on `device`, trained with checkpoint.layout's semantics: a resumed checkpoint's
// architecture (its weights are loaded with the optimizer state, load_checkpoint), else
// train.init_from's weights, else model.config with a random init (the same bits on every rank).
// Resuming, a model.config that differs from the checkpoint's config is a zaya::Error naming the
// differing fields (the run would silently continue the old model).
std::unique_ptr<Model> make_model(const TrainConfig& cfg, const std::string& resume_dir,
                                  Device device);

}  // namespace zaya
