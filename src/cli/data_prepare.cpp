// zaya data prepare --tokenizer tokenizer.json --input GLOB [--input GLOB …] --out DIR
//                   [--val-fraction F] [--shard-tokens N] [--threads N] [--no-bos] [--quiet]
// Text files (one document each) or JSON Lines (a "text" field per line) → uint32 token shards
// + dataset.json (formats in data/shards.h, behaviour in data/prepare.h). Progress and a warning
// about a small validation split go to stderr (--quiet: none), the summary to stdout.
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/output.h"
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
  if (opt.quiet) set_log_level(LogLevel::Quiet);
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
  const double pct = opt.val_fraction * 100;
  print_result("data prepare: {} files, {} documents ({} empty skipped) -> {}", s.files,
               s.documents, s.empty_documents, opt.out_dir);
  print_result("  train: {} documents, {} tokens in {} shards", s.train_documents, s.train_tokens,
               s.train_shards);
  print_result("  val:   {} documents, {} tokens in {} shards", s.val_documents, s.val_tokens,
               s.val_shards);
  if (s.cut_documents > 0 && s.cut_documents == s.documents)
    print_result("  split: the last {:g}% of the tokens of every document went to val", pct);
  else if (s.cut_documents > 0)
    print_result(
        "  split: the last {:g}% of the tokens of the {} documents of {} bytes or more went to val "
        "(they are cut in two); the other documents went whole, by a hash of their text",
        pct, s.cut_documents, s.cut_bytes);
  const std::string warning = small_val_warning(s, opt.val_fraction);
  if (!warning.empty()) log_info("data prepare: warning: {}", warning);
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
                  "share of the text for the validation split: whole documents by a hash of "
                  "their text; a large document is cut, its last share to validation")
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
