// zaya tokenizer-train --input GLOB [--input GLOB ...] --vocab-size N --out tokenizer.json
// Learns a byte-fallback BPE tokenizer of exactly N tokens from text files (data/bpe_train.h)
// and writes it in Gemma 3's tokenizer.json format. Progress on stderr (--quiet: none), the
// "wrote" line on stdout; input without text is an error (exit 1), not an empty tokenizer.
#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/output.h"
#include "data/bpe_train.h"

namespace zaya::cli {

namespace {

struct TrainArgs {
  std::vector<std::string> inputs;
  std::string out;
  int64_t vocab_size = 0;
  BpeTrainOptions opt;
  bool quiet = false;
};

// Files matching the patterns, sorted within each pattern, duplicates removed.
std::vector<std::string> expand(const std::vector<std::string>& patterns) {
  std::vector<std::string> files;
  for (const std::string& p : patterns) {
    glob_t g{};
    const int rc = ::glob(p.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
      globfree(&g);
      fail("--input '{}' matches no files", p);
    }
    if (rc != 0) {
      globfree(&g);
      fail("--input '{}': cannot expand the pattern", p);
    }
    for (size_t i = 0; i < g.gl_pathc; ++i)
      if (std::find(files.begin(), files.end(), g.gl_pathv[i]) == files.end())
        files.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return files;
}

int run_train(TrainArgs& a) {
  if (a.quiet) set_log_level(LogLevel::Quiet);
  // Cheap checks first, so a mistake costs no training time.
  ZAYA_CHECK_INPUT(a.vocab_size >= bpe_min_vocab_size(),
                   "--vocab-size {} is too small: a trained tokenizer needs at least {}",
                   a.vocab_size, bpe_min_vocab_size());
  const std::filesystem::path parent = std::filesystem::absolute(a.out).parent_path();
  ZAYA_CHECK_INPUT(std::filesystem::is_directory(parent), "--out {}: directory {} does not exist",
                   a.out, parent.string());
  const std::vector<std::string> files = expand(a.inputs);
  for (const std::string& f : files)
    ZAYA_CHECK_INPUT(std::filesystem::is_regular_file(f), "{}: not a readable file", f);
  a.opt.progress = !a.quiet;
  log_info("tokenizer-train: {} file(s), vocabulary {}", files.size(), a.vocab_size);
  const Tokenizer tok = train_bpe(files, a.vocab_size, a.opt);
  tok.save(a.out);
  print_result("tokenizer-train: wrote {} ({} tokens)", a.out, tok.vocab_size());
  return 0;
}

}  // namespace

Action add_tokenizer_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenizer-train", "Learn a byte-fallback BPE tokenizer (Gemma 3 format) from text files");
  sub->add_option("--input", args->inputs, "text files (glob patterns; repeatable)")->required();
  sub->add_option("--vocab-size", args->vocab_size, "tokens in the vocabulary, exactly")
      ->required()
      ->check(positive_number());
  sub->add_option("--out", args->out, "tokenizer.json to write")->required();
  sub->add_option("--min-frequency", args->opt.min_frequency,
                  "pairs seen fewer times are never merged (default 2)")
      ->check(positive_number());
  sub->add_option("--max-token-chars", args->opt.max_token_chars,
                  "longest merged token, in characters (default 24)")
      ->check(positive_number());
  sub->add_flag("--quiet", args->quiet, "no progress output");
  return [args] { return run_train(*args); };
}

}  // namespace zaya::cli
