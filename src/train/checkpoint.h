// Training checkpoints (system.md §2). One checkpoint is a directory root/step_NNNNNNNN/:
//   model/config.json, model/model.safetensors   a normal model directory (Model::load_dir)
//   optimizer/optimizer_rank00000.safetensors    optimizer state, one shard per rank
//   trainer_state.json                           step, data position, RNG, config, metrics
//   manifest.json                                per file: relative path, bytes, XXH3-64 (hex)
// It is written under root/.tmp_step_NNNNNNNN_<pid>/, every file and directory fsynced, then
// renamed into place, so a step_* directory is either complete or detectably torn; the manifest is
// written last and a checkpoint without one (or whose files disagree with it) is skipped.
//
// Optimizer state is a global flat F32 vector: the named tensors of CheckpointData, concatenated
// in order. Each shard stores F32 ranges of that vector and its metadata records the global layout
// (name, offset, shape of every tensor), its ranges (stored tensor, global offset, length), its
// rank and the world size, so state written by N ranks can be reassembled by any number of ranks.
// Today one process writes one shard holding every tensor whole.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace zaya {

class Model;

struct CheckpointData {
  nlohmann::json trainer_state;  // step, data position, rng, config, metrics: opaque here
  std::vector<std::pair<std::string, Tensor>> optimizer_state;  // named F32 tensors, in order
};

// "step_00000042" (8 digits; more when the step needs them).
std::string checkpoint_dir_name(int64_t step);

// Writes root/step_NNNNNNNN/ atomically (see the top of this file), replacing an existing
// checkpoint of the same step, then deletes all but the newest keep_last complete checkpoints with
// a step ≤ `step` (keep_last 0 = keep all; checkpoints of later steps are left alone). Returns the
// final path. Throws zaya::Error naming the path on any I/O failure (the temporary is removed).
std::string save_checkpoint(const std::string& root, int64_t step, const Model& m,
                            const CheckpointData& d, int keep_last);

// "" if the checkpoint directory verifies (manifest present and parseable, every listed file
// present with the recorded size and XXH3-64), else the reason, naming the bad file.
std::string verify_checkpoint(const std::string& dir);

// Newest step_* under root that verifies; logs a warning naming each skipped (torn or corrupted)
// one and why. "" if there is none (or root does not exist).
std::string find_latest_valid_checkpoint(const std::string& root);

// Verifies `dir` (zaya::Error naming the bad file otherwise), loads the weights into m (the
// checkpoint's config must equal m's: a mismatch names the differing fields), parses
// trainer_state.json and copies the optimizer state bit for bit into the caller's tensors, matched
// by name. Every destination must exist in the checkpoint with the same shape, and every tensor of
// the checkpoint must have a destination.
void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const std::vector<std::pair<std::string, Tensor>>& optimizer_dest);

// Asynchronous save. save() snapshots the parameters and optimizer tensors into staging memory
// owned by the writer (a parallel memcpy on the caller's thread into huge-page-backed, pre-faulted
// memory kept for the next save: it costs one extra copy of params + optimizer state) and writes
// the checkpoint on a background thread, byte-identical to save_checkpoint. A save first waits for
// the previous one. wait() joins and rethrows a background failure as zaya::Error (save() does
// too, for the previous save).
class AsyncCheckpointWriter {
 public:
  explicit AsyncCheckpointWriter(std::string root, int keep_last);
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;
  ~AsyncCheckpointWriter();  // waits; a background failure is logged, not thrown

  // Optional, once at start-up: allocates and faults in the staging memory for this model and
  // optimizer state in the background, so that the first save() stalls no longer than later ones
  // (first-touch page faults of a fresh buffer cost far more than the copy itself).
  void prepare(const Model& m, const CheckpointData& d);
  void save(int64_t step, const Model& m, const CheckpointData& d);
  void wait();
  // Seconds the last save() blocked its caller (waiting for the previous save + the snapshot).
  double last_stall_seconds() const { return last_stall_; }
  // Path written by the last completed save ("" before one completes).
  const std::string& last_path() const { return last_path_; }

  struct Staging;  // the snapshot: config, layout, params and optimizer tensors (async_writer.cpp)

 private:
  std::string root_;
  int keep_last_;
  std::thread worker_;
  std::exception_ptr error_;
  std::string error_what_;  // "save of step N" or "staging allocation"
  double last_stall_ = 0;
  std::string last_path_, pending_path_;
  std::unique_ptr<Staging> staging_;
};

}  // namespace zaya
