// `zaya data prepare`: text → token shards (docs/cli.md; format in data/shards.h).
//
// Input: files matched by glob(3) patterns, in sorted order per pattern (duplicates dropped,
// directories skipped). A file ending in ".jsonl" holds one document per line, a JSON object
// with a string "text" field (blank lines are skipped); any other file is one document.
// Each document becomes [BOS] tokens… EOS (BOS only when bos_id ≥ 0); empty documents are
// skipped and counted.
//
// Split: most documents go to "val" whole, when the XXH3 hash of their text falls below
// val_fraction — deterministic and independent of order, so identical documents never straddle
// the split. A document that is large both for the split and in itself is cut instead: when its
// text is over an eighth of the validation target (val_fraction × the input bytes, kCutShare) and
// its val_fraction share is at least kCutMinValBytes of text, its last val_fraction of tokens
// (rounded, at least 1, never all) goes to "val" and the rest to "train", each as a document of
// its own ([BOS] tokens… EOS). Sending such a document whole to one side would distort the split:
// one text file (one document) would give no validation split at any fraction, and two files
// would send a whole file to "val". The rule looks at one document and the input size only, so
// it stays deterministic, order-independent and streaming, and identical documents are cut
// identically (the same text on the same side).
// With val_fraction > 0 the splits are never empty when they can be filled: when "train" would be
// empty the last "val" document moves to it, and when "val" would be empty the last "train"
// document moves to it (two or more documents) or is cut as above (one document of ≥ 2 tokens).
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

// A document is cut by token range when its text is over (val_fraction × input bytes) / kCutShare
// bytes and val_fraction × its bytes ≥ kCutMinValBytes (see above).
inline constexpr double kCutShare = 8;
inline constexpr double kCutMinValBytes = 256;

struct PrepareStats {
  int64_t files = 0, input_bytes = 0;
  int64_t documents = 0, empty_documents = 0;
  // Documents of each split: a cut document counts once in each (its two parts).
  int64_t train_documents = 0, val_documents = 0;
  int64_t cut_documents = 0;  // documents cut by token range (see above)
  int64_t cut_bytes = 0;      // the size over which a document may be cut (0: none is)
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_shards = 0, val_shards = 0;
  double seconds = 0;
};

// Writes out_dir/{train,val}_NNNNNN.bin and out_dir/dataset.json (last, so a dataset with a
// manifest is complete). Throws zaya::Error: no file matched, every document empty, an
// unreadable file, a malformed JSONL line (file:line), a token id outside the vocabulary.
PrepareStats prepare_shards(const PrepareOptions& opt, const EncodeFn& encode);

// The validation split's size is judged in windows of this many tokens + 1 (zaya train reads
// windows of seq_len + 1 tokens): a split under kSmallValWindows of them gets a warning.
inline constexpr int64_t kSmallValSeqLen = 1024;
inline constexpr int64_t kSmallValWindows = 4;

// A warning when val_fraction > 0 but the validation split is smaller than kSmallValWindows
// windows of kSmallValSeqLen (its loss would be noisy, or there is none); empty when it is not.
std::string small_val_warning(const PrepareStats& s, double val_fraction);

// The files the patterns match (see above); throws Error naming a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns);

}  // namespace zaya
