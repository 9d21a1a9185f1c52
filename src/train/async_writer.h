// Internals shared by checkpoint.cpp and async_writer.cpp (not part of the checkpoint API).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "train/checkpoint.h"

namespace zaya {

// save_checkpoint with the model directory written by `write_model_dir(dir)` (Model::save_dir for
// a synchronous save, the staged copy for an asynchronous one).
std::string save_checkpoint_with(const std::string& root, int64_t step,
                                 const std::function<void(const std::string&)>& write_model_dir,
                                 const CheckpointData& d, int keep_last);

}  // namespace zaya
