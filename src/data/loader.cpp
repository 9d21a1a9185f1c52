// TokenLoader (loader.h): the Feistel permutation of windows per epoch, reading a window across
// shard boundaries, the per-rank slice of each global batch and its state for checkpoints.
#include "data/loader.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/assert.h"
#include "core/rng.h"

namespace zaya {

void to_json(nlohmann::json& j, const LoaderState& s) {
  j = {{"epoch", s.epoch}, {"position", s.position}, {"windows", s.windows}};
}

void from_json(const nlohmann::json& j, LoaderState& s) {
  try {
    s.epoch = j.at("epoch").get<uint64_t>();
    s.position = j.at("position").get<uint64_t>();
    s.windows = j.value("windows", uint64_t(0));
  } catch (const nlohmann::json::exception& e) {
    fail("malformed data loader state {}: {}", j.dump(), e.what());
  }
}

uint64_t feistel_permute(uint64_t i, uint64_t n, uint64_t key) {
  ZAYA_ASSERT(i < n, "permute {} of {}", i, n);
  if (n <= 1) return i;
  // Smallest even bit count 2h with 2^(2h) ≥ n: the domain is at most 4n, so cycle walking
  // takes under 4 rounds of the network on average.
  int bits = 64 - std::countl_zero(n - 1);
  bits += bits & 1;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  uint64_t x = i;
  do {
    uint64_t l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = splitmix64(key ^ splitmix64(r ^ (round << 56))) & mask;
      const uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << half) | r;
  } while (x >= n);  // cycle walking: stays a bijection on [0, n)
  return x;
}

namespace {

// What to do about a split the manifest lacks, told from how the dataset was made.
std::string missing_split_hint(const DatasetManifest& m, const std::string& split) {
  if (split != "val") return "re-run `zaya data prepare`";
  if (m.val_fraction <= 0)
    return "it was prepared with --val-fraction 0; re-run `zaya data prepare` with "
           "--val-fraction 0.05, say, for a validation loss";
  if (m.cut_bytes == 0)  // written before documents were cut: whole documents only
    return fmt::format(
        "it was prepared with --val-fraction {} by a `zaya data prepare` that set only whole "
        "documents aside, and all {} went to train; re-run `zaya data prepare`, which now also "
        "sets aside the last {:g}% of a large document",
        m.val_fraction, m.splits.count("train") ? m.splits.at("train").documents : 0,
        m.val_fraction * 100);
  return fmt::format(
      "it was prepared with --val-fraction {}, but the corpus was too small to set any text "
      "aside; add text",
      m.val_fraction);
}

}  // namespace

TokenLoader::TokenLoader(const std::string& dataset_dir, const std::string& split, int64_t window,
                         uint64_t seed, int rank, int world, bool verify)
    : dir_(dataset_dir), split_(split), window_(window), seed_(seed), rank_(rank), world_(world) {
  if (window < 2) fail("data loader: window {} is too short (need seq_len + 1 ≥ 2 tokens)", window);
  if (world < 1 || rank < 0 || rank >= world)
    fail("data loader: rank {} is not in [0, {})", rank, world);
  manifest_ = read_manifest(dataset_dir);
  auto it = manifest_.splits.find(split);
  if (it == manifest_.splits.end() || it->second.shards.empty())
    fail("{}: the dataset has no \"{}\" split: {}", dataset_dir, split,
         missing_split_hint(manifest_, split));
  starts_.push_back(0);
  for (const ShardEntry& e : it->second.shards) {
    ShardFile f = ShardFile::open(dataset_dir + "/" + e.file, verify);
    if (f.size() != e.tokens || f.checksum() != e.checksum)
      fail(
          "{}: holds {} tokens with checksum {} but {} lists {} tokens with checksum {} (the "
          "shard does not belong to this dataset; re-run `zaya data prepare`)",
          f.path(), f.size(), hex64(f.checksum()), kManifestName, e.tokens, hex64(e.checksum));
    if (int64_t(f.vocab_size()) != manifest_.vocab_size)
      fail("{}: vocab size {} differs from the manifest's {}", f.path(), f.vocab_size(),
           manifest_.vocab_size);
    total_tokens_ += f.size();
    starts_.push_back(total_tokens_);
    shards_.push_back(std::move(f));
  }
  if (total_tokens_ < window)
    fail("{}: split \"{}\" has {} tokens, fewer than one window of {} (seq_len + 1); {}",
         dataset_dir, split, total_tokens_, window,
         split == "val" ? fmt::format("re-run `zaya data prepare` with a larger --val-fraction "
                                      "(it was {}), add text, or use a shorter seq_len",
                                      manifest_.val_fraction)
                        : std::string("use more data or a shorter seq_len"));
  windows_ = uint64_t(total_tokens_ - 1) / uint64_t(window - 1);
  state_.windows = windows_;
}

int64_t TokenLoader::window_at(uint64_t epoch, uint64_t g) const {
  const uint64_t key = CounterRng{seed_, epoch}.bits(0x5A5941544F4Bull);  // per (seed, epoch)
  return int64_t(feistel_permute(g, windows_, key));
}

void TokenLoader::read_window(int64_t k, int32_t* out) const {
  ZAYA_ASSERT(k >= 0 && uint64_t(k) < windows_, "window {} of {}", k, windows_);
  read_tokens(k * (window_ - 1), window_, out);
}

void TokenLoader::read_tokens(int64_t pos, int64_t n, int32_t* out) const {
  ZAYA_ASSERT(pos >= 0 && n >= 0 && pos + n <= total_tokens_, "tokens [{}, {}) of {}", pos, pos + n,
              total_tokens_);
  if (n == 0) return;
  // The shard holding `pos`: the last start ≤ pos.
  size_t s = size_t(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
  while (n > 0) {
    const int64_t off = pos - starts_[s];
    const int64_t take = std::min(n, shards_[s].size() - off);
    // Tokens are < vocab size ≤ INT32_MAX (checked on open), so u32 → i32 keeps the value.
    std::memcpy(out, shards_[s].tokens() + off, size_t(take) * sizeof(int32_t));
    out += take;
    pos += take;
    n -= take;
    ++s;
  }
}

void TokenLoader::next_batch(int32_t* out, int64_t rows) {
  ZAYA_ASSERT(rows >= 0, "rows {}", rows);
  const uint64_t first = state_.position + uint64_t(rank_) * uint64_t(rows);
  for (int64_t j = 0; j < rows; ++j) {
    const uint64_t g = first + uint64_t(j);
    read_window(window_at(state_.epoch + g / windows_, g % windows_), out + j * window_);
  }
  advance(uint64_t(rows) * uint64_t(world_));
}

void TokenLoader::advance(uint64_t global_rows) {
  const uint64_t advanced = state_.position + global_rows;
  state_.epoch += advanced / windows_;
  state_.position = advanced % windows_;
}

void TokenLoader::next_batch(int32_t* inputs, int32_t* targets, int64_t rows) {
  const int64_t T = window_ - 1;
  window_buf_.resize(size_t(rows * window_));
  next_batch(window_buf_.data(), rows);
  for (int64_t j = 0; j < rows; ++j) {
    const int32_t* w = window_buf_.data() + j * window_;
    std::copy(w, w + T, inputs + j * T);
    std::copy(w + 1, w + 1 + T, targets + j * T);
  }
}

void TokenLoader::restore(const LoaderState& s) {
  if (s.windows != 0 && s.windows != windows_)
    fail(
        "{}: the saved data position was taken on {} windows but split \"{}\" now has {} (the "
        "dataset or the sequence length changed)",
        dir_, s.windows, split_, windows_);
  if (s.position >= windows_)
    fail("{}: saved data position {} is past the {} windows of split \"{}\"", dir_, s.position,
         windows_, split_);
  state_ = s;
  state_.windows = windows_;
}

}  // namespace zaya
