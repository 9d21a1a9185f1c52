// The checkpoints under a run's root: listing them by step, pruning to keep_last, finding the one
// to resume or roll back to, and cleaning what interrupted writers left (the public side is in
// checkpoint.h).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zaya {

// The step of a directory named step_<digits>, or -1.
int64_t parse_step_name(const std::string& name);

// step_* directories under root, newest first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& root);

// Deletes all but the newest keep_last complete checkpoints with a step ≤ `step` (keep_last 0:
// none); torn ones (no manifest) are neither counted nor removed, later steps are left alone.
void prune_checkpoints(const std::string& root, int64_t step, int keep_last);

// Removes a directory tree, logging (not throwing) a failure.
void remove_all_quietly(const std::string& path);

}  // namespace zaya
