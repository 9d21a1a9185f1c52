// zaya generate --model M [--prompt TEXT | --prompt-ids "1 2 3"] [--max-new-tokens N]
//               [--temperature T --top-k K --top-p P --min-p M --repetition-penalty R --seed S]
//               [--stop STR ...] [--ids] [--num-samples N] [--no-bos] [--ignore-eos]
//               [--max-context N] [--tokenizer FILE] [--quiet]
// M is anything open_model_source takes (a model directory, a checkpoint, a run, a file in a
// model directory, a GGUF file); the tokenizer, the context and the special ids come from the
// model (infer/model_source.h, infer/model_files.h). Streams generated text to stdout as it is
// decoded (one sample), or prints each of N samples — decoded together as one batch, seeds S …
// S+N−1 — when it ends. --ids prints the generated ids (one line per sample, space-separated)
// instead of text. What it picked, and the prompt and decode rates, go to stderr; --quiet drops
// those and keeps the text.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/tokenizer.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "infer/model_files.h"
#include "infer/model_source.h"

namespace zaya::cli {

namespace {

struct GenerateArgs {
  std::string model, prompt, prompt_ids, tokenizer;
  SamplingFlags flags;  // --temperature … (sampling_flags.h); flags.values holds the others
  SamplingParams& sampling = flags.values;
  int64_t num_samples = 1, max_batch = 8, max_context = 0;
  bool max_new_tokens_given = false;  // --max-new-tokens on the command line (else: what fits)
  bool ids = false, no_bos = false, quiet = false, bf16 = false, echo = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v > INT32_MAX)
      fail("--prompt-ids: '{}' is not a token id (non-negative integers separated by spaces)",
           word);
    ids.push_back(int32_t(v));
  }
  return ids;
}

int run_generate(GenerateArgs& a) {
  if (a.quiet) set_log_level(LogLevel::Quiet);
  if (a.prompt.empty() == a.prompt_ids.empty())
    fail("give exactly one of --prompt TEXT or --prompt-ids \"1 2 3\"");
  a.sampling.validate();  // before the (possibly slow) model load
  const ModelSource src = open_model_source(a.model);
  if (const std::string line = src.line(); !line.empty()) log_info("generate: {}", line);
  const ModelExtras& extras = src.extras;
  a.sampling = resolve_sampling(a.flags, default_sampling(extras));
  a.sampling.validate();

  // The tokenizer: --tokenizer, else the model's; needed for text in or out. Read before the
  // weights, so that a missing one costs no load.
  const bool need_tok = !a.prompt.empty() || !a.ids || !a.sampling.stop.empty();
  SourceTokenizer st = need_tok ? src.require_tokenizer(a.tokenizer, "use --prompt-ids with --ids")
                                : src.load_tokenizer(a.tokenizer);
  std::unique_ptr<Tokenizer> tok = std::move(st.tok);
  const std::string& tok_path = st.origin;

  Timer load_timer;
  const InferModel model = src.load_weights(a.bf16);
  const ZayaConfig& c = model.config();
  const ContextLimit ctx = choose_context(c, extras, a.max_context);
  std::vector<std::string> warnings = ctx.warnings;
  if (tok) warnings.push_back(tokenizer_fit_warning(*tok, tok_path, c, extras.vocab_size_origin));
  for (const std::string& w : warnings)
    if (!w.empty()) fmt::print(stderr, "zaya: warning: {}\n", w);

  std::vector<int32_t> prompt;
  if (!a.prompt_ids.empty()) {
    prompt = parse_ids(a.prompt_ids);
  } else {
    const int32_t bos = bos_id(c, extras, tok.get());
    if (!a.no_bos && bos >= 0) prompt.push_back(bos);
    tok->encode(a.prompt, prompt);
  }

  // The context bounds prompt + generated tokens: a prompt that does not fit is refused naming
  // both numbers; --max-new-tokens defaults to what fits (at most 128).
  const int64_t P = int64_t(prompt.size());
  const std::string raise =
      ctx.tokens < ctx.max_positions
          ? fmt::format(" (--max-context up to {}, max_position_embeddings, goes further)",
                        ctx.max_positions)
          : "";
  if (P >= ctx.tokens)
    fail("the prompt has {} tokens, but the model's context is {} tokens ({}); shorten it{}", P,
         ctx.tokens, ctx.source, raise);
  if (!a.max_new_tokens_given) {
    a.sampling.max_new_tokens = std::min(a.sampling.max_new_tokens, ctx.tokens - P);
  } else if (a.sampling.max_new_tokens > ctx.tokens - P) {
    fail(
        "the prompt ({} tokens) plus --max-new-tokens ({}) exceeds the model's context of {} "
        "tokens ({}); at most {} new tokens fit{}",
        P, a.sampling.max_new_tokens, ctx.tokens, ctx.source, ctx.tokens - P, raise);
  }

  EngineOptions eo;
  eo.max_batch = a.max_batch;
  eo.max_context = ctx.tokens;
  eo.eos_ids = eos_ids(c, extras, tok.get());
  Engine engine(model, tok.get(), eo);
  const int64_t N = a.num_samples;
  std::vector<std::string> texts(static_cast<size_t>(N));
  std::vector<std::vector<int32_t>> out_ids(static_cast<size_t>(N));
  std::vector<FinishReason> reasons(static_cast<size_t>(N));
  int64_t finished = 0;
  const bool stream = N == 1 && !a.ids;
  for (int64_t k = 0; k < N; ++k) {
    GenerationRequest req;
    req.prompt = prompt;
    req.sampling = a.sampling;
    req.sampling.seed = a.sampling.seed + uint64_t(k);
    engine.submit(std::move(req), [&, k](const GenerationEvent& ev) {
      out_ids[size_t(k)].insert(out_ids[size_t(k)].end(), ev.ids.begin(), ev.ids.end());
      if (stream) {
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
      } else {
        texts[size_t(k)] += ev.text;
      }
      if (ev.done) reasons[size_t(k)] = ev.finish_reason, ++finished;
    });
  }
  // The status line first, whole, on stderr; then (--echo) the prompt and the text on stdout, so
  // a terminal shows the status on a line of its own.
  log_info(
      "generate: {} ({} sub-layers, {} weights), context {}, prompt {} tokens, loaded in {:.2f}s",
      src.path, c.num_layers(), dtype_name(model.matrix_dtype()), engine.max_context(), P,
      load_timer.seconds());
  std::fflush(stderr);
  if (stream && a.echo) {
    std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
    std::fflush(stdout);
  }
  while (finished < N) engine.step();

  for (int64_t k = 0; k < N; ++k) {
    if (a.ids) {
      std::string line;
      for (int32_t id : out_ids[size_t(k)]) line += (line.empty() ? "" : " ") + std::to_string(id);
      std::printf("%s\n", line.c_str());
    } else if (stream) {
      std::printf("\n");
    } else {
      std::printf("--- sample %lld (seed %llu)\n%s\n", (long long)k,
                  (unsigned long long)(a.sampling.seed + uint64_t(k)), texts[size_t(k)].c_str());
    }
  }
  std::fflush(stdout);
  const EngineStats s = engine.stats();
  log_info(
      "generate: prompt {} tokens at {:.1f} tokens/s; decode {} tokens at {:.1f} tokens/s "
      "({} sequence{}, finished: {})",
      s.prompt_tokens, s.prefill_seconds > 0 ? double(s.prompt_tokens) / s.prefill_seconds : 0.0,
      s.decode_tokens, s.decode_seconds > 0 ? double(s.decode_tokens) / s.decode_seconds : 0.0, N,
      N == 1 ? "" : "s", enum_word(reasons.front()));
  return 0;
}

}  // namespace

Action add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a model");
  sub->add_option("--model", a->model,
                  "model directory, GGUF file, checkpoint (step_N), run (its newest valid "
                  "checkpoint) or a file in a model directory")
      ->required();
  sub->add_option("--prompt", a->prompt, "prompt text (BOS is prepended unless --no-bos)");
  sub->add_option("--prompt-ids", a->prompt_ids, "prompt as token ids, e.g. \"2 651 1234\"");
  sub->add_option_function<int64_t>(
      "--max-new-tokens",
      [a](int64_t n) {
        a->sampling.max_new_tokens = n;
        a->max_new_tokens_given = true;
      },
      "tokens to generate at most (default 128, or what fits the context)");
  sub->add_option("--max-context", a->max_context,
                  "prompt + generated tokens at most (default: the trained context; up to "
                  "max_position_embeddings)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  add_sampling_options(sub, a->flags);
  sub->add_option("--stop", a->sampling.stop, "stop string (repeatable; not printed)");
  sub->add_option("--num-samples", a->num_samples, "samples decoded together, seeds S, S+1, …")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  sub->add_option("--max-batch", a->max_batch, "sequences decoded together at most")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (default: DIR/tokenizer.json, or the GGUF file's)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--ids", a->ids, "print generated token ids instead of text");
  sub->add_flag("--no-bos", a->no_bos, "do not prepend BOS to a text prompt");
  sub->add_flag("--ignore-eos", a->sampling.ignore_eos, "keep generating past EOS");
  sub->add_flag("--quiet", a->quiet, "no load/rate lines on stderr (the text is still printed)");
  sub->add_flag("--echo", a->echo,
                "print the prompt text before the generated text (one streamed text sample)");
  sub->add_flag(
      "--bf16", a->bf16,
      "hold F32 matrices and conv weights as bf16 (rounded at load: half the bytes per token)");
  return [a] { return run_generate(*a); };
}

}  // namespace zaya::cli
