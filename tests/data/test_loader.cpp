// data/loader: windows over a multi-shard stream, seeded per-epoch permutations (every window
// once per epoch), exact resume, disjoint ranks whose union is the one-rank global batch, and
// clear errors for corrupted or too-small data.
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "data/loader.h"
#include "data/shards.h"
#include "io/file.h"
#include "test_util.h"

using namespace zaya;
using zaya::test::expect_error;
using zaya::test::ScratchDir;

namespace {

constexpr int64_t kVocab = 1 << 20;

// A dataset whose train stream is 0, 1, 2, … N−1 split over shards of the given sizes, so a
// window identifies itself by its first token.
void make_dataset(const std::string& dir, std::vector<int64_t> shard_sizes,
                  std::vector<int64_t> val_sizes = {}, DatasetManifest m = {}) {
  std::filesystem::create_directories(dir);
  m.vocab_size = kVocab;
  m.eos_id = 0;
  auto add_split = [&](const std::string& name, const std::vector<int64_t>& sizes) {
    SplitInfo s;
    uint32_t next = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<uint32_t> t(static_cast<size_t>(sizes[i]));
      std::iota(t.begin(), t.end(), next);
      next += uint32_t(sizes[i]);
      const std::string file = fmt::format("{}_{:06}.bin", name, i);
      write_shard(dir + "/" + file, t, uint32_t(kVocab));
      s.shards.push_back({file, sizes[i], token_checksum(t.data(), t.size())});
      s.tokens += sizes[i];
    }
    s.documents = 1;
    m.splits[name] = s;
  };
  add_split("train", shard_sizes);
  if (!val_sizes.empty()) add_split("val", val_sizes);
  write_manifest(dir, m);
}

// First token of every row of the next `steps` batches.
std::vector<int32_t> run(TokenLoader& l, int64_t rows, int steps) {
  std::vector<int32_t> firsts, buf(size_t(rows * l.window()));
  for (int s = 0; s < steps; ++s) {
    l.next_batch(buf.data(), rows);
    for (int64_t r = 0; r < rows; ++r) firsts.push_back(buf[size_t(r * l.window())]);
  }
  return firsts;
}

}  // namespace

TEST(Loader, FeistelIsABijection) {
  for (uint64_t n : {1, 2, 3, 7, 64, 1000, 4097}) {
    for (uint64_t key : {0ull, 1ull, 0x9e3779b97f4a7c15ull}) {
      std::vector<char> hit(n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t p = feistel_permute(i, n, key);
        ASSERT_LT(p, n);
        EXPECT_FALSE(hit[p]) << "n " << n << " collides at " << p;
        hit[p] = 1;
      }
    }
  }
}

TEST(Loader, WindowsSpanShardsWithStrideT) {
  ScratchDir dir;
  make_dataset(dir.path, {100, 37, 1, 250});  // 388 tokens
  TokenLoader l(dir.path, "train", 9, 0);     // T = 8
  EXPECT_EQ(l.total_tokens(), 388);
  EXPECT_EQ(l.total_windows(), (388 - 1) / 8);
  std::vector<int32_t> w(9);
  for (int64_t k = 0; k < l.total_windows(); ++k) {
    l.read_window(k, w.data());
    for (int i = 0; i < 9; ++i) ASSERT_EQ(w[size_t(i)], int32_t(k * 8 + i)) << k;
  }
}

TEST(Loader, EveryWindowOncePerEpochAndSeedsDiffer) {
  ScratchDir dir;
  make_dataset(dir.path, {500, 500, 301});
  TokenLoader a(dir.path, "train", 11, 7);
  const int64_t n = a.total_windows();  // 130
  const int64_t rows = 7;               // epochs end inside batches
  const int steps = int(3 * n / rows) + 1;
  const std::vector<int32_t> seq = run(a, rows, steps);
  for (int e = 0; e < 3; ++e) {
    std::set<int32_t> epoch(seq.begin() + e * n, seq.begin() + (e + 1) * n);
    EXPECT_EQ(int64_t(epoch.size()), n) << "epoch " << e;
    EXPECT_EQ(*epoch.rbegin(), int32_t((n - 1) * 10));
  }
  EXPECT_NE(std::vector<int32_t>(seq.begin(), seq.begin() + n),
            std::vector<int32_t>(seq.begin() + n, seq.begin() + 2 * n))
      << "each epoch has its own order";

  TokenLoader same(dir.path, "train", 11, 7);
  EXPECT_EQ(run(same, rows, steps), seq);
  TokenLoader other(dir.path, "train", 11, 8);
  EXPECT_NE(run(other, rows, steps), seq);
  // Not the identity order.
  std::vector<int32_t> sorted(seq.begin(), seq.begin() + n);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, std::vector<int32_t>(seq.begin(), seq.begin() + n));
}

TEST(Loader, StateRestoreResumesExactly) {
  ScratchDir dir;
  make_dataset(dir.path, {1000});
  TokenLoader a(dir.path, "train", 17, 3);
  run(a, 5, 23);  // crosses an epoch (62 windows)
  const LoaderState saved = a.state();
  EXPECT_EQ(saved.epoch, 1u);
  const nlohmann::json j = saved;  // through JSON, as a checkpoint stores it
  const std::vector<int32_t> rest = run(a, 5, 30);

  TokenLoader b(dir.path, "train", 17, 3);
  b.restore(j.get<LoaderState>());
  EXPECT_EQ(b.state(), saved);
  EXPECT_EQ(run(b, 5, 30), rest);

  LoaderState bad = saved;
  bad.position = uint64_t(b.total_windows());
  expect_error([&] { b.restore(bad); }, {"past the", "windows"});
  TokenLoader c(dir.path, "train", 33, 3);  // another sequence length: other windows
  expect_error([&] { c.restore(saved); }, {"sequence length changed"});
  expect_error([&] { nlohmann::json{{"epoch", 1}}.get<LoaderState>(); }, {"data loader state"});
}

TEST(Loader, RanksAreDisjointAndUnionIsTheGlobalBatch) {
  ScratchDir dir;
  make_dataset(dir.path, {400, 333});
  const int world = 3;
  const int64_t rows = 4, window = 6;
  TokenLoader global(dir.path, "train", window, 11, 0, 1);
  std::vector<TokenLoader> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(dir.path, "train", window, 11, r, world);
  const int64_t G = rows * world;
  std::vector<int32_t> want(size_t(G * window)), got(size_t(rows * window));
  for (int step = 0; step < 40; ++step) {  // 146 windows: several epochs, boundaries mid-batch
    global.next_batch(want.data(), G);
    std::set<int32_t> firsts;
    for (int r = 0; r < world; ++r) {
      ranks[size_t(r)].next_batch(got.data(), rows);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + r * rows * window))
          << "step " << step << " rank " << r;
      for (int64_t i = 0; i < rows; ++i) firsts.insert(got[size_t(i * window)]);
      EXPECT_EQ(ranks[size_t(r)].state(), global.state());
    }
    EXPECT_EQ(int64_t(firsts.size()), G) << "ranks overlap at step " << step;
  }
}

TEST(Loader, ValSplitAndErrors) {
  ScratchDir dir;
  make_dataset(dir.path, {100, 100}, {50});
  TokenLoader val(dir.path, "val", 10, 0);
  EXPECT_EQ(val.total_tokens(), 50);
  expect_error([&] { TokenLoader(dir.path, "test", 10, 0); }, {"no \"test\" split"});
  expect_error([&] { TokenLoader(dir.path, "val", 51, 0); },
               {"split \"val\" has 50 tokens", "fewer than one window of 51"});
  expect_error([&] { TokenLoader(dir.path, "train", 1, 0); }, {"window 1"});
  expect_error([&] { TokenLoader(dir.path, "train", 10, 0, 2, 2); }, {"rank 2"});
  ScratchDir empty;
  expect_error([&] { TokenLoader(empty.path, "train", 10, 0); }, {"no dataset.json"});
}

// The hint for a missing or short val split says what actually happened and what to do.
TEST(Loader, MissingValSplitHintTellsTheTruth) {
  ScratchDir none, old, small, tiny;
  DatasetManifest m;
  m.val_fraction = 0;
  make_dataset(none.path, {100}, {}, m);
  expect_error([&] { TokenLoader(none.path, "val", 10, 0); },
               {"no \"val\" split", "prepared with --val-fraction 0;",
                "re-run `zaya data prepare` with --val-fraction"});
  // An older dataset (no cut_bytes): whole documents only, all went to train.
  m.val_fraction = 0.05;
  make_dataset(old.path, {100}, {}, m);
  expect_error([&] { TokenLoader(old.path, "val", 10, 0); },
               {"--val-fraction 0.05", "whole documents", "all 1 went to train",
                "re-run `zaya data prepare`", "last 5% of a large document"});
  // This version cut what it could and found nothing: the corpus is too small.
  m.cut_bytes = 5120;
  make_dataset(tiny.path, {100}, {}, m);
  expect_error([&] { TokenLoader(tiny.path, "val", 10, 0); }, {"too small", "add text"});
  // A split shorter than a window: a larger fraction, more text or a shorter seq_len.
  make_dataset(small.path, {100}, {20}, m);
  expect_error([&] { TokenLoader(small.path, "val", 33, 0); },
               {"split \"val\" has 20 tokens", "fewer than one window of 33",
                "larger --val-fraction (it was 0.05)", "shorter seq_len"});
}

TEST(Loader, ReadTokensCrossesShards) {
  ScratchDir dir;
  make_dataset(dir.path, {7, 1, 12});
  const TokenLoader l(dir.path, "train", 2, 0);
  std::vector<int32_t> got(12);
  l.read_tokens(5, 12, got.data());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(got[size_t(i)], 5 + i);  // the stream is 0, 1, 2, …
  l.read_tokens(0, 0, got.data());                                // nothing: no error
}

TEST(Loader, CorruptedOrMissingShardNamesTheFile) {
  ScratchDir dir;
  make_dataset(dir.path, {100, 100});
  const std::string shard = dir / "train_000001.bin";
  std::string b = read_text_file(shard, "shard");
  b[64 + 4 * 10] ^= 1;
  std::ofstream(shard, std::ios::binary).write(b.data(), std::streamsize(b.size()));
  expect_error([&] { TokenLoader(dir.path, "train", 10, 0); }, {shard, "checksum mismatch"});

  make_dataset(dir.path, {100, 100});
  std::filesystem::resize_file(shard, 64 + 4 * 99);
  expect_error([&] { TokenLoader(dir.path, "train", 10, 0); }, {shard, "truncated"});

  make_dataset(dir.path, {100, 100});
  std::vector<uint32_t> other(100, 5);  // a valid shard, but not the one the manifest lists
  write_shard(shard, other, uint32_t(kVocab));
  expect_error([&] { TokenLoader(dir.path, "train", 10, 0); }, {shard, "does not belong"});

  std::filesystem::remove(shard);
  expect_error([&] { TokenLoader(dir.path, "train", 10, 0); }, {shard, "cannot open"});
}

// The training split of a batch: inputs are each window's first W−1 tokens, targets the next
// token of each input; the rows and the advance are those of the unsplit call.
TEST(Loader, InputsAndTargetsAreTheWindowShiftedByOne) {
  ScratchDir dir;
  make_dataset(dir.path, {50, 31});
  TokenLoader whole(dir.path, "train", 9, 5), split(dir.path, "train", 9, 5);
  const int64_t rows = 3, T = 8;
  std::vector<int32_t> windows(size_t(rows * 9)), in(size_t(rows * T)), tgt(in.size());
  for (int step = 0; step < 4; ++step) {
    whole.next_batch(windows.data(), rows);
    split.next_batch(in.data(), tgt.data(), rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(in[size_t(r * T + t)], windows[size_t(r * 9 + t)]);
        EXPECT_EQ(tgt[size_t(r * T + t)], windows[size_t(r * 9 + t + 1)]);
        EXPECT_EQ(tgt[size_t(r * T + t)], in[size_t(r * T + t)] + 1);  // the stream is 0, 1, 2 …
      }
    EXPECT_EQ(whole.state(), split.state());
  }
}
