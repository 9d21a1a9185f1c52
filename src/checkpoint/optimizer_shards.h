// Optimizer state on disk: one safetensors file per rank
// (optimizer/optimizer_rankRRRRR.safetensors) holding F32 ranges of the global optimizer vector,
// with metadata that lets any number of ranks reassemble it (checkpoint.h describes the format).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace zaya {

// "optimizer_rank00003.safetensors".
std::string shard_file_name(int rank);

// Writes one rank's shard (durably, under its final name only when complete): its slices as
// stored tensors ("<name>" when whole, "<name>@<begin>" otherwise) with the global layout and
// their global offsets as metadata. Slices on a GPU go through host copies.
void write_optimizer_shard(const std::string& path, const OptimizerShard& shard, int rank,
                           int world);
// The bytes write_optimizer_shard writes for `shard` (only the slices' shapes are read: their
// views need no data).
uint64_t optimizer_shard_file_bytes(const OptimizerShard& shard, int rank, int world);
// The same for many shards of one global layout (zaya plan sizes every rank's): the layout's
// metadata is serialised once.
class OptimizerShardSizer {
 public:
  explicit OptimizerShardSizer(
      const std::vector<std::pair<std::string, std::vector<int64_t>>>& layout);
  ~OptimizerShardSizer();
  uint64_t bytes(const std::vector<OptimizerSlice>& slices, int rank, int world) const;

 private:
  struct Index;
  std::unique_ptr<Index> index_;
  uint64_t layout_bytes_ = 0;
};

// Reads the shards `shard_files` (paths relative to dir) and copies the state into the slices of
// `dest`, whatever number of ranks wrote it. Checks the shards against each other (format, world
// size, ranks, one layout, ranges that tile the global vector exactly) and against dest (every
// tensor present with the same shape, none extra); zaya::Error naming the file otherwise.
void load_optimizer_state(const std::string& dir, const std::vector<std::string>& shard_files,
                          const OptimizerShard& dest);

}  // namespace zaya
