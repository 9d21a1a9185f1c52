// zaya data prepare --tokenizer tokenizer.json --input GLOB [--input GLOB …] --out DIR
//                   [--val-fraction F] [--shard-tokens N] [--threads N] [--no-bos] [--quiet]
// Text files (one document each) or JSON Lines (a "text" field per line) → uint32 token shards
// + dataset.json (formats in data/shards.h, behaviour in data/prepare.h). Prints a summary.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "data/prepare.h"

#if __has_include("data/tokenizer.h")
#include "data/tokenizer.h"
#define ZAYA_HAVE_TOKENIZER 1
#else
#define ZAYA_HAVE_TOKENIZER 0
#endif

namespace zaya::cli {

namespace {

struct DataPrepareArgs {
  std::string tokenizer;
  PrepareOptions opt;
  bool no_bos = false;
};

int run_data_prepare(DataPrepareArgs& args) {
  PrepareOptions& opt = args.opt;
  opt.tokenizer_path = args.tokenizer;
  expand_inputs(opt.inputs);  // a pattern that matches nothing fails before the tokenizer loads
#if ZAYA_HAVE_TOKENIZER
  const Tokenizer tok = Tokenizer::load(args.tokenizer);
  opt.vocab_size = tok.vocab_size();
  opt.eos_id = tok.eos_id();
  if (opt.eos_id < 0)
    fail("{}: the tokenizer has no <eos> token to separate documents", args.tokenizer);
  opt.bos_id = args.no_bos ? -1 : tok.bos_id();
  const PrepareStats s =
      prepare_shards(opt, [&tok](std::string_view text) { return tok.encode(text); });
#else
  fail("data prepare: this build has no tokenizer (src/data/tokenizer.h); cannot encode {}",
       args.tokenizer);
  PrepareStats s;
#endif
  std::printf("data prepare: %lld files, %lld documents (%lld empty skipped) -> %s\n",
              (long long)s.files, (long long)s.documents, (long long)s.empty_documents,
              opt.out_dir.c_str());
  std::printf("  train: %lld documents, %lld tokens in %lld shards\n", (long long)s.train_documents,
              (long long)s.train_tokens, (long long)s.train_shards);
  std::printf("  val:   %lld documents, %lld tokens in %lld shards\n", (long long)s.val_documents,
              (long long)s.val_tokens, (long long)s.val_shards);
  return 0;
}

}  // namespace

Action add_data_command(CLI::App& app) {
  auto args = std::make_shared<DataPrepareArgs>();
  CLI::App* data = app.add_subcommand("data", "Dataset tools");
  data->require_subcommand(1);
  CLI::App* sub = data->add_subcommand(
      "prepare", "Tokenize text files or JSON Lines into uint32 token shards + dataset.json");
  sub->add_option("--tokenizer", args->tokenizer, "tokenizer.json (Hugging Face format)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--input", args->opt.inputs,
                  "glob of input files (repeatable): *.jsonl = one JSON object with a \"text\" "
                  "field per line, any other file = one document")
      ->required();
  sub->add_option("--out", args->opt.out_dir, "output directory (created if missing)")->required();
  sub->add_option("--val-fraction", args->opt.val_fraction,
                  "fraction of documents for the validation split (by a hash of the text)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999999));
  sub->add_option("--shard-tokens", args->opt.shard_tokens, "tokens per shard file")
      ->capture_default_str()
      ->check(positive_number());
  sub->add_option("--threads", args->opt.threads, "encoding threads (default: all cores)")
      ->check(non_negative_number());
  sub->add_flag("--no-bos", args->no_bos, "do not prepend BOS to each document");
  sub->add_flag("--quiet", args->opt.quiet, "no progress output");
  return [args] { return run_data_prepare(*args); };
}

}  // namespace zaya::cli
