// Training checkpoints (docs/training.md). One checkpoint is a directory root/step_NNNNNNNN/:
//   model/config.json, model/model.safetensors   a normal model directory (Model::load_dir)
//   model/tokenizer.json, tokenizer_config.json, generation_config.json
//                                                the files CheckpointData::model_files gives
//                                                (the trainer's: what makes model/ a whole model)
//   optimizer/optimizer_rank00000.safetensors    optimizer state, one shard per rank
//   trainer_state.json                           where the run stands (trainer_state.h)
//   manifest.json                                per file: relative path, bytes, XXH3-64 (hex)
// It is written under root/.tmp_step_NNNNNNNN_<pid>/, every file and directory fsynced, then
// renamed into place, so a step_* directory is either complete or detectably torn; the manifest is
// written last and a checkpoint without one (or whose files disagree with it) is skipped.
//
// Optimizer state is a global flat F32 vector: the tensors of OptimizerShard::layout, concatenated
// in order. Each shard stores F32 ranges of that vector and its metadata records the global layout
// (name, offset, shape of every tensor), its ranges (stored tensor, global offset, length), its
// rank and the world size, so state written by N ranks can be reassembled by any number of ranks:
// a loading rank copies the overlap of every stored range with each slice it asks for.
//
// N ranks (ZeRO-1): save is collective. Rank 0 creates the temporary directory (named after its
// pid; the name is broadcast), every rank writes optimizer/optimizer_rankRRRRR.safetensors with its
// own slices in parallel (under a temporary name, fsynced, then renamed), rank 0 writes the model
// directory and trainer_state.json once, and — after every shard is in place — the manifest with a
// checksum for every file, then renames the directory. The ranges of all shards must tile the
// global vector exactly (replicated state is written by rank 0 only).
//
// The code: writer.cpp (the three phases of a save, writer.h; async_writer.cpp runs the same
// phases on a background thread), reader.cpp (load_checkpoint), manifest.{h,cpp},
// optimizer_shards.{h,cpp}, retention.{h,cpp} (listing, pruning, finding, cleaning), and
// trainer_state.{h,cpp} (what trainer_state.json holds, validated in one place).
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace zaya {

class Model;
struct ZayaConfig;
namespace dist {
class Group;
}

// Elements [begin, begin + data.numel()) of the flattened global optimizer tensor `tensor`; data is
// an F32 view (a whole tensor may keep its shape).
struct OptimizerSlice {
  std::string tensor;
  int64_t begin = 0;
  Tensor data;
};

// A rank's part of the optimizer state: the global layout (every tensor's name and shape, in
// order; the same on every rank) and the slices this rank holds.
struct OptimizerShard {
  std::vector<std::pair<std::string, std::vector<int64_t>>> layout;
  std::vector<OptimizerSlice> slices;
  // One process holding every tensor whole: the layout is their names and shapes.
  static OptimizerShard whole(const std::vector<std::pair<std::string, Tensor>>& tensors);
};

// A file saved into the model directory beside the weights (rank 0's; its bytes are shared, not
// copied, by an asynchronous save's snapshot).
struct ModelFile {
  std::string name;  // a plain file name inside model/
  std::shared_ptr<const std::string> bytes;
};

struct CheckpointData {
  nlohmann::json trainer_state;        // step, data position, rng, config, metrics: opaque here
  OptimizerShard optimizer;            // this rank's optimizer state
  std::vector<ModelFile> model_files;  // written into model/ by rank 0 (covered by the manifest)
};

// "step_00000042" (8 digits; more when the step needs them).
std::string checkpoint_dir_name(int64_t step);
// The step of a checkpoint directory (a path ending in step_<digits>), or −1.
int64_t checkpoint_step(const std::string& dir);

// Writes root/step_NNNNNNNN/ atomically (see the top of this file), replacing an existing
// checkpoint of the same step, then deletes all but the newest keep_last complete checkpoints with
// a step ≤ `step` (keep_last 0 = keep all; checkpoints of later steps are left alone). Returns the
// final path. Throws zaya::Error naming the path on any I/O failure (the temporary is removed).
std::string save_checkpoint(const std::string& root, int64_t step, const Model& m,
                            const CheckpointData& d, int keep_last);
// The same, collective over `group` (see the top of this file): every rank passes its own
// optimizer shard; the path is returned on every rank once the checkpoint is complete, and a
// failure on any rank throws on every rank.
std::string save_checkpoint(dist::Group& group, const std::string& root, int64_t step,
                            const Model& m, const CheckpointData& d, int keep_last);

// "" if the checkpoint directory verifies (manifest present and parseable, every listed file
// present with the recorded size and XXH3-64), else the reason, naming the bad file.
std::string verify_checkpoint(const std::string& dir);

// Newest step_* under root (of a step < before_step) that verifies; logs a warning naming each
// skipped (torn or corrupted) one and why. "" if there is none (or root does not exist).
std::string find_latest_valid_checkpoint(const std::string& root, int64_t before_step = INT64_MAX);

// Removes every step_* under root of a step after `step` (a rollback's discarded future),
// logging each; returns how many.
int discard_checkpoints_after(const std::string& root, int64_t step);

// resume = "auto": find_latest_valid_checkpoint, except that a root holding step_* directories
// none of which verifies is a zaya::Error (training from step 0 would overwrite them); "" only
// when root holds no checkpoint at all.
std::string find_resume_checkpoint(const std::string& root);

// At start-up: removes the .tmp_step_* directories (and .old_step_* copies) under root that
// writers no longer running left behind (a kill mid-write), logging each with its size; an
// .old_step_N copy whose step_N is missing (killed mid-replacement) is renamed back instead. A
// directory whose writer (by the pid in its name) still runs is left alone. Returns the number
// removed.
int remove_stale_checkpoint_temps(const std::string& root);

// The fields in which two model configs differ: "hidden_size = 128 (A) vs 64 (B); …", with A and
// B the names given; "" when they are equal.
std::string config_difference(const ZayaConfig& a, const ZayaConfig& b, const std::string& a_name,
                              const std::string& b_name);

// Verifies `dir` (zaya::Error naming the bad file otherwise), loads the weights into m (the
// checkpoint's config must equal m's: a mismatch names the differing fields), reads
// trainer_state.json (as JSON: parse_trainer_state of trainer_state.h validates it) and copies the
// optimizer state bit for bit into the destination's slices, whatever number of ranks wrote it. The
// destination's layout must be the checkpoint's: every tensor present with the same shape, and no
// tensor of the checkpoint missing.
void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const OptimizerShard& optimizer_dest);
// One process: every tensor whole (OptimizerShard::whole).
void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const std::vector<std::pair<std::string, Tensor>>& optimizer_dest);

// Asynchronous save. save() snapshots the parameters and optimizer tensors into staging memory
// owned by the writer (a parallel memcpy on the caller's thread into huge-page-backed, pre-faulted
// memory kept for the next save: it costs one extra copy of params + optimizer state) and writes
// the checkpoint on a background thread, byte-identical to save_checkpoint. A save first waits for
// the previous one. wait() joins and rethrows a background failure as zaya::Error (save() does
// too, for the previous save).
// With a group, save() is collective (the temporary directory is agreed on the caller's thread);
// each rank's thread writes its shard, and rank 0's thread (which alone snapshots the parameters)
// waits for every shard file before writing the manifest. A rank whose background write fails
// reports it from its next wait()/save(); rank 0 gives up waiting for a missing shard after
// shard_wait_s seconds.
class AsyncCheckpointWriter {
 public:
  explicit AsyncCheckpointWriter(std::string root, int keep_last);
  AsyncCheckpointWriter(dist::Group& group, std::string root, int keep_last,
                        double shard_wait_s = 600);
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
  // Path written by the last completed save ("" before one completes; rank 0 only).
  const std::string& last_path() const { return last_path_; }

  struct Staging;  // the snapshot: config, layout, params and optimizer tensors (async_writer.cpp)

 private:
  AsyncCheckpointWriter(std::unique_ptr<dist::Group> own_group, dist::Group* group,
                        std::string root, int keep_last, double shard_wait_s);
  std::unique_ptr<dist::Group> own_group_;  // the single group of the one-process constructor
  dist::Group& group_;
  std::string root_;
  int keep_last_;
  double shard_wait_s_;
  std::thread worker_;
  std::exception_ptr error_;
  std::string error_what_;  // "save of step N" or "staging allocation"
  double last_stall_ = 0;
  std::string last_path_, pending_path_;
  std::unique_ptr<Staging> staging_;
};

}  // namespace zaya
