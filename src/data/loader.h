// TokenLoader: training windows from a dataset directory's token shards (docs/cli.md).
//
// The split's shards are mapped and concatenated into one stream of N tokens. Window k is the
// W = T+1 tokens starting at k·T (stride T = W−1: consecutive windows share one token, so every
// token after the first is a next-token target exactly once per epoch); there are
// (N−1) / T windows, the tail shorter than a window is dropped.
//
// Each epoch visits every window once, in the order of a seeded permutation: a 4-round Feistel
// network with cycle walking (a bijection on [0, windows), O(1) memory, keyed by seed and epoch).
// Position p of the state is the number of global rows consumed in the current epoch. A call to
// next_batch(out, rows) on rank r of `world` reads the global batch of G = rows·world rows
// starting at p and returns its rows [r·rows, (r+1)·rows) — ranks are disjoint and together
// equal one rank reading G rows. Every rank advances the same state by G (an epoch boundary may
// fall inside a batch: the batch continues with the next epoch's order).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/shards.h"

namespace zaya {

// The read position: part of a checkpoint (serialize with to_json/from_json).
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t position = 0;  // global rows consumed in this epoch, < windows
  uint64_t windows = 0;   // total windows when saved (restore checks it; 0 = unknown)
  bool operator==(const LoaderState&) const = default;
};
void to_json(nlohmann::json& j, const LoaderState& s);
void from_json(const nlohmann::json& j, LoaderState& s);

// A bijection on [0, n) keyed by `key` (Feistel network + cycle walking). Exposed for tests.
uint64_t feistel_permute(uint64_t i, uint64_t n, uint64_t key);

class TokenLoader {
 public:
  // dataset_dir: written by `zaya data prepare`; split: "train" or "val"; window: T+1 tokens
  // (≥ 2); rank in [0, world). verify: check every shard's checksum on open (reads all data).
  TokenLoader(const std::string& dataset_dir, const std::string& split, int64_t window,
              uint64_t seed, int rank = 0, int world = 1, bool verify = true);

  // Writes rows × window tokens (row-major) for this rank and advances the state by rows·world.
  void next_batch(int32_t* out, int64_t rows);
  // The same rows split for next-token training: inputs[rows, W−1] are each window's first W−1
  // tokens and targets[rows, W−1] the W−1 after the first (the next token of each input).
  void next_batch(int32_t* inputs, int32_t* targets, int64_t rows);
  // Advances the state by `global_rows` rows (next_batch(·, rows) advances it by rows·world),
  // reading nothing: a skipped data window.
  void advance(uint64_t global_rows);
  // The tokens of window k (in stream order, not shuffled) into out[0, window).
  void read_window(int64_t k, int32_t* out) const;
  // Tokens [pos, pos + n) of the split's stream (the shards in order) into out[0, n).
  void read_tokens(int64_t pos, int64_t n, int32_t* out) const;
  // The stream index of the window at global row g of epoch e (the permutation).
  int64_t window_at(uint64_t epoch, uint64_t g) const;

  LoaderState state() const { return state_; }
  void restore(const LoaderState& s);  // throws Error if it does not fit this dataset

  int64_t total_windows() const { return int64_t(windows_); }
  int64_t total_tokens() const { return total_tokens_; }
  int64_t window() const { return window_; }
  const DatasetManifest& manifest() const { return manifest_; }

 private:
  DatasetManifest manifest_;
  std::string dir_, split_;
  std::vector<ShardFile> shards_;
  std::vector<int64_t> starts_;  // starts_[i] = first stream index of shard i; back() = N
  int64_t window_ = 0, total_tokens_ = 0;
  uint64_t windows_ = 0, seed_ = 0;
  int rank_ = 0, world_ = 1;
  LoaderState state_;
  std::vector<int32_t> window_buf_;  // [rows, W] scratch of the split next_batch
};

}  // namespace zaya
