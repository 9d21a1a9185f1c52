// A tiny learnable dataset for training tests (shared by tests/train and tests/integration): 60
// short documents of a repeating pattern, tokenised byte by byte (ids < 256 < V = 512 of
// tiny.json).
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_train.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "test_util.h"
#include "train/train_config.h"

namespace zaya::test {

// Shards of the text files dir/docs/*.txt, tokenised byte by byte (ids < 256 < V = 512 of
// tiny.json), under dir/shards (returned).
inline std::string byte_shards(const ScratchDir& dir, double val_fraction) {
  PrepareOptions opt;
  opt.inputs = {dir / "docs/*.txt"};
  opt.out_dir = dir / "shards";
  opt.vocab_size = 512;
  opt.eos_id = 1;
  opt.bos_id = 2;
  opt.val_fraction = val_fraction;
  opt.quiet = true;
  prepare_shards(opt, [](std::string_view text) {
    std::vector<int32_t> ids;
    for (unsigned char ch : text) ids.push_back(int32_t(ch));
    return ids;
  });
  return dir / "shards";
}

// Writes the documents and their shards under dir; returns the shard directory.
inline std::string make_tiny_dataset(const ScratchDir& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir / "docs");
  for (int d = 0; d < 60; ++d) {
    std::ofstream f(dir / ("docs/" + std::to_string(1000 + d) + ".txt"));
    for (int i = 0; i < 12; ++i) f << "abcdefgh" << char('i' + (d + i) % 8) << " ";
  }
  return byte_shards(dir, 0.1);
}

// A dataset as `zaya data prepare --tokenizer` makes it: the tiny documents encoded by a BPE
// tokenizer of `vocab` tokens trained on them (saved as dir/tok_<vocab>.json), with BOS and EOS,
// in dir/shards_tok_<vocab>, whose dataset.json records the tokenizer and its XXH3.
struct TokenizedDataset {
  std::string shards, tokenizer;
};
inline TokenizedDataset make_tokenized_dataset(const ScratchDir& dir, int64_t vocab) {
  namespace fs = std::filesystem;
  if (!fs::exists(dir / "docs")) make_tiny_dataset(dir);
  std::vector<std::string> texts;
  for (const auto& e : fs::directory_iterator(dir / "docs")) {
    std::ifstream f(e.path());
    texts.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  const Tokenizer tok = train_bpe_on_texts(texts, vocab);
  TokenizedDataset d{dir / ("shards_tok_" + std::to_string(vocab)),
                     dir / ("tok_" + std::to_string(vocab) + ".json")};
  tok.save(d.tokenizer);
  PrepareOptions opt;
  opt.inputs = {dir / "docs/*.txt"};
  opt.out_dir = d.shards;
  opt.vocab_size = tok.vocab_size();
  opt.eos_id = tok.eos_id();
  opt.bos_id = tok.bos_id();
  opt.val_fraction = 0.1;
  opt.quiet = true;
  opt.tokenizer_path = d.tokenizer;
  prepare_shards(opt, [&tok](std::string_view text) { return tok.encode(text); });
  return d;
}

// A TOML run file of configs/tiny.json on `shards` (seq_len 16, evaluation only at the end):
// `train` holds more [train] lines ("key = value\n"), `rest` the sections after it.
inline void write_tiny_toml(const std::string& path, const std::string& shards,
                            const std::string& train, const std::string& rest = "") {
  std::ofstream(path) << "[model]\nconfig = \"" << ZAYA_TEST_FIXTURES << "/configs/tiny.json\"\n"
                      << "[data]\ndataset = \"" << shards << "\"\nseq_len = 16\n"
                      << "[train]\neval_every = 0\n"
                      << train << rest;
}

// A 20-step run of configs/tiny.json on `shards`: metrics and checkpoints (synchronous, saved
// only at the end) named after `name` under dir.
inline TrainConfig tiny_run(const ScratchDir& dir, const std::string& name,
                            const std::string& shards) {
  TrainConfig c;
  c.model_config = std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json";
  c.dataset = shards;
  c.seq_len = 16;
  c.micro_batch = 4;
  c.grad_accum = 2;
  c.steps = 20;
  c.optim.warmup = 3;
  c.optim.lr = 3e-3;
  c.optim.min_lr = 3e-4;
  c.eval_every = 0;
  c.eval_batches = 2;
  c.log_every = 5;
  c.metrics = dir / (name + ".jsonl");
  c.checkpoint_dir = dir / (name + "_ckpt");
  c.checkpoint_every = 0;
  c.async_checkpoint = false;
  c.keep_last = 0;
  return c;
}

// tiny_run, short: `steps` steps of 2 rows, one evaluation batch, a checkpoint at the end.
inline TrainConfig short_tiny_run(const ScratchDir& dir, const std::string& name,
                                  const std::string& shards, int64_t steps) {
  TrainConfig c = tiny_run(dir, name, shards);
  c.micro_batch = 2;
  c.grad_accum = 1;
  c.steps = steps;
  c.optim.warmup = 2;
  c.eval_batches = 1;
  c.log_every = 100;
  return c;
}

}  // namespace zaya::test
