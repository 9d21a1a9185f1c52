// `zaya data prepare`: text → token shards (docs/cli.md; format in data/shards.h).
//
// Input: files matched by glob(3) patterns, in sorted order per pattern (duplicates dropped,
// directories skipped). A file ending in ".jsonl" holds one document per line, a JSON object
// with a string "text" field (blank lines are skipped); any other file is one document.
// Each document becomes [BOS] tokens… EOS (BOS only when bos_id ≥ 0); empty documents are
// skipped and counted.
//
// Split: a document goes to "val" when the XXH3 hash of its text falls below val_fraction —
// deterministic and independent of order, so identical documents never straddle the split.
// With val_fraction > 0 and at least two documents each split gets at least one (the last
// document of the other split is moved over when a split would be empty).
//
// Parallel and deterministic: the inputs are cut into pieces (a text file, or ~1 MiB of whole
// JSONL lines) that are parsed and encoded in parallel, then written strictly in input order —
// the output bytes are identical for any thread count. Shards hold exactly shard_tokens tokens
// (the last one fewer); a document may span two shards.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

// Text → token ids (no BOS/EOS). Called concurrently from several threads.
using EncodeFn = std::function<std::vector<int32_t>(std::string_view)>;

struct PrepareOptions {
  std::vector<std::string> inputs;  // glob(3) patterns
  std::string out_dir;              // created if missing
  int64_t vocab_size = 0;           // every id must be < vocab_size
  int32_t eos_id = -1;              // appended to every document (required)
  int32_t bos_id = -1;              // ≥ 0: prepended to every document
  double val_fraction = 0.005;      // in [0, 1)
  int64_t shard_tokens = int64_t(64) << 20;
  int threads = 0;             // 0: OpenMP's default (all cores)
  bool quiet = false;          // no progress output
  std::string tokenizer_path;  // recorded in the manifest with its checksum (optional)
};

struct PrepareStats {
  int64_t files = 0, input_bytes = 0;
  int64_t documents = 0, empty_documents = 0;
  int64_t train_documents = 0, val_documents = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_shards = 0, val_shards = 0;
  double seconds = 0;
};

// Writes out_dir/{train,val}_NNNNNN.bin and out_dir/dataset.json (last, so a dataset with a
// manifest is complete). Throws zaya::Error: no file matched, every document empty, an
// unreadable file, a malformed JSONL line (file:line), a token id outside the vocabulary.
PrepareStats prepare_shards(const PrepareOptions& opt, const EncodeFn& encode);

// The files the patterns match (see above); throws Error naming a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns);

}  // namespace zaya
