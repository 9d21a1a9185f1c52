// Internals shared by checkpoint.cpp and async_writer.cpp (not part of the checkpoint API).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/checkpoint.h"

namespace zaya::dist {
class Group;
}

namespace zaya {

// The three phases of a (collective) checkpoint save; save_checkpoint and AsyncCheckpointWriter
// are made of them.
//
// Collective, on the caller's thread: rank 0 creates root/.tmp_step_NNNNNNNN_<its pid>/ with
// model/ and optimizer/ (removing a leftover of the same name); returns that path on every rank.
// A failure throws on every rank.
std::string begin_checkpoint(dist::Group& group, const std::string& root, int64_t step);

// This rank's files in `tmp`: its optimizer shard (a .partial file, fsynced, renamed into place);
// rank 0 also writes the model directory (write_model_dir) and trainer_state.json.
void write_checkpoint_part(const std::string& tmp, int rank, int world,
                           const std::function<void(const std::string&)>& write_model_dir,
                           const CheckpointData& d);

// Rank 0: waits up to wait_s seconds for all `world` optimizer shards in tmp, writes the manifest
// last, renames tmp to root/step_NNNNNNNN (replacing an existing one) and prunes to keep_last.
// Returns the final path; on failure removes tmp and throws.
std::string finish_checkpoint(const std::string& root, const std::string& tmp, int64_t step,
                              int world, int keep_last, double wait_s);

// Removes a directory tree, logging (not throwing) a failure.
void remove_all_quietly(const std::string& path);

}  // namespace zaya
