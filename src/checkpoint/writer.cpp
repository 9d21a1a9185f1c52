// Writing a checkpoint: begin (the temporary directory, agreed by every rank), each rank's part,
// finish (manifest last, rename into place, prune), and save_checkpoint made of the three
// (writer.h, checkpoint.h).
#include "checkpoint/writer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "checkpoint/manifest.h"
#include "checkpoint/optimizer_shards.h"
#include "checkpoint/retention.h"
#include "core/assert.h"
#include "core/timer.h"
#include "dist/group.h"
#include "io/file.h"
#include "model/model.h"
#include "resilience/faults.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

// Every rank learns whether any rank failed; then all throw (a failed rank its own error).
void agree(dist::Group& g, const std::exception_ptr& error, int64_t step) {
  double failed = error ? 1.0 : 0.0;
  g.all_reduce(Tensor(&failed, {1}), dist::ReduceOp::Max);
  if (error) std::rethrow_exception(error);
  if (failed != 0) fail("checkpoint of step {} failed on another rank (see its error)", step);
}

}  // namespace

std::string begin_checkpoint(dist::Group& g, const std::string& root, int64_t step) {
  std::exception_ptr error;
  double pid = double(::getpid());
  const std::string name = checkpoint_dir_name(step);
  if (g.rank() == 0) {
    try {
      ZAYA_CHECK_INPUT(step >= 0, "checkpoint step must be non-negative, got {}", step);
      std::error_code ec;
      fs::create_directories(root, ec);
      if (ec) fail("cannot create checkpoint directory '{}': {}", root, ec.message());
      const std::string tmp = fmt::format("{}/.tmp_{}_{}", root, name, ::getpid());
      remove_all_quietly(tmp);  // a leftover of an earlier failed attempt by this process
      fs::create_directories(tmp + "/model", ec);
      if (!ec) fs::create_directories(tmp + "/optimizer", ec);
      if (ec) fail("cannot create '{}': {}", tmp, ec.message());
    } catch (...) {
      error = std::current_exception();
    }
  }
  agree(g, error, step);
  g.broadcast(Tensor(&pid, {1}), 0);
  return fmt::format("{}/.tmp_{}_{}", root, name, int64_t(pid));
}

void write_checkpoint_part(const std::string& tmp, int rank, int world,
                           const std::function<void(const std::string&)>& write_model_dir,
                           const CheckpointData& d) {
  write_optimizer_shard(tmp + "/optimizer/" + shard_file_name(rank), d.optimizer, rank, world);
  if (rank != 0) return;
  write_model_dir(tmp + "/model");
  for (const ModelFile& f : d.model_files) {
    ZAYA_CHECK_INPUT(!f.name.empty() && f.name.find('/') == std::string::npos && f.bytes,
                     "checkpoint model file '{}': a plain file name with contents", f.name);
    write_file(tmp + "/model/" + f.name, *f.bytes, {.atomic = false});
  }
  write_file(tmp + "/trainer_state.json", d.trainer_state.dump(2) + "\n", {.atomic = false});
}

std::string finish_checkpoint(const std::string& root, const std::string& tmp, int64_t step,
                              int world, int keep_last, double wait_s) {
  ZAYA_CHECK_INPUT(keep_last >= 0, "checkpoint keep_last must be non-negative, got {}", keep_last);
  const std::string name = checkpoint_dir_name(step);
  const std::string final_dir = root + "/" + name;
  std::error_code ec;
  try {
    // The other ranks' shards appear (renamed into place) when they are complete.
    Timer waited;
    for (int r = 0; r < world; ++r) {
      const std::string shard = tmp + "/optimizer/" + shard_file_name(r);
      while (!fs::exists(shard, ec)) {
        if (waited.seconds() > wait_s)
          fail("{}: rank {} did not write its optimizer shard within {:.0f} s", tmp, r, wait_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    fsync_path(tmp + "/optimizer", true);

    faults::at_checkpoint_write(step);  // kill@step:N:section:checkpoint: a torn checkpoint
    write_manifest(tmp, step, world);   // last: it is what makes the checkpoint complete
    fsync_path(tmp + "/model", true);
    fsync_path(tmp + "/optimizer", true);
    fsync_path(tmp, true);

    // Replace an existing checkpoint of this step by moving it aside first (a directory cannot be
    // renamed over a non-empty one); the old copy is deleted once the new one is in place.
    std::string old;
    if (fs::exists(final_dir, ec)) {
      old = fmt::format("{}/.old_{}_{}", root, name, ::getpid());
      remove_all_quietly(old);
      if (std::rename(final_dir.c_str(), old.c_str()) != 0)
        fail("cannot move the existing {} aside: {}", final_dir, errno_str());
    }
    if (std::rename(tmp.c_str(), final_dir.c_str()) != 0)
      fail("cannot rename {} to {}: {}", tmp, final_dir, errno_str());
    fsync_path(root, true);
    if (!old.empty()) remove_all_quietly(old);
  } catch (...) {
    remove_all_quietly(tmp);
    throw;
  }

  prune_checkpoints(root, step, keep_last);
  return final_dir;
}

std::string save_checkpoint(const std::string& root, int64_t step, const Model& m,
                            const CheckpointData& d, int keep_last) {
  return save_checkpoint(*dist::make_group("single"), root, step, m, d, keep_last);
}

std::string save_checkpoint(dist::Group& g, const std::string& root, int64_t step, const Model& m,
                            const CheckpointData& d, int keep_last) {
  ZAYA_CHECK_INPUT(keep_last >= 0, "checkpoint keep_last must be non-negative, got {}", keep_last);
  const std::string tmp = begin_checkpoint(g, root, step);
  std::exception_ptr error;
  try {
    write_checkpoint_part(
        tmp, g.rank(), g.size(), [&m](const std::string& dir) { m.save_dir(dir); }, d);
  } catch (...) {
    error = std::current_exception();
  }
  try {
    agree(g, error, step);
  } catch (...) {
    if (g.rank() == 0) remove_all_quietly(tmp);
    throw;
  }
  std::string path;
  if (g.rank() == 0) {
    try {
      path = finish_checkpoint(root, tmp, step, g.size(), keep_last, /*wait_s=*/0);
    } catch (...) {
      error = std::current_exception();
    }
  }
  agree(g, error, step);
  return root + "/" + checkpoint_dir_name(step);
}

}  // namespace zaya
