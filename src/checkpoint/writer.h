// Writing a checkpoint in three phases — the synchronous save_checkpoint (writer.cpp) and the
// AsyncCheckpointWriter (async_writer.cpp) are made of the same three, so both write the same
// bytes. Not part of the checkpoint API (checkpoint.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/checkpoint.h"

namespace zaya::dist {
class Group;
}

namespace zaya {

// Collective, on the caller's thread: rank 0 creates root/.tmp_step_NNNNNNNN_<its pid>/ with
// model/ and optimizer/ (removing a leftover of the same name); returns that path on every rank.
// A failure throws on every rank.
std::string begin_checkpoint(dist::Group& group, const std::string& root, int64_t step);

// This rank's files in `tmp`: its optimizer shard (it appears under its final name when complete);
// rank 0 also writes the model directory (write_model_dir, then d.model_files into it) and
// trainer_state.json.
void write_checkpoint_part(const std::string& tmp, int rank, int world,
                           const std::function<void(const std::string&)>& write_model_dir,
                           const CheckpointData& d);

// Rank 0: waits up to wait_s seconds for all `world` optimizer shards in tmp, writes the manifest
// last, renames tmp to root/step_NNNNNNNN (replacing an existing one) and prunes to keep_last.
// Returns the final path; on failure removes tmp and throws.
std::string finish_checkpoint(const std::string& root, const std::string& tmp, int64_t step,
                              int world, int keep_last, double wait_s);

}  // namespace zaya
