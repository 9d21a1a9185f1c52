// Engine: continuous batching over one model. Requests are queued from any thread; the thread that
// runs step()/run() admits them (up to max_batch at once), prefills their prompts, then decodes one
// token per active sequence per step — a new request joins the running batch at the next step, a
// finished one leaves it. Output goes to each request's callback, on the engine thread.
//
// A request of n choices is prefilled once; its cache is then copied into n sequences that decode
// in the same steps, each with its own sampler (choice i draws from RNG stream i of the request's
// seed, sampler.h: choice 0 is exactly what the request gives with n = 1), LogitsProcessor, stop
// strings and token budget, and each ending with its own done event. max_batch counts sequences:
// requests are admitted in order while their n fits the free slots; one larger than max_batch is
// admitted alone once the batch is empty, so it can never block the queue.
// Per choice and step: raw logits → [logprobs] → Sampler::process (bias, penalties) →
// LogitsProcessor::apply (mask) → Sampler::draw → LogitsProcessor::accept(id). A mask that forbids
// every id ends the choice (stop) instead of drawing.
//
// Prefix cache (prefix_cache.h, with prefix_cache_bytes > 0): an admitted request resumes from the
// longest cached block-aligned prefix of its prompt and prefills only the rest; while a prompt is
// prefilled, the state at every block boundary it reaches is captured. Prompt chunks never cross a
// block boundary (a chunk ends at the next multiple of prefix_block, with the cache or without),
// so a prompt runs through the same chunks whether it resumes at a boundary or starts at 0: the
// cache changes no bits. Only prefill is captured, not decode: a generated token's K/V comes from
// a one-row step, whose bits may differ from the same token prefilled in a chunk, so a snapshot
// taken in decode could make the next turn's output depend on whether it hit the cache.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/enum_words.h"
#include "infer/prefix_cache.h"
#include "infer/sampler.h"

namespace zaya {

class InferModel;
class Tokenizer;

struct EngineOptions {
  int64_t max_batch = 8;        // sequences decoded together
  int64_t max_context = 0;      // prompt + generated tokens per sequence; 0 = the model's limit
  int64_t prefill_chunk = 512;  // prompt tokens per sequence per step (long prompts take several)
  // The prefix cache's bound in bytes (0: no prefix cache) and its block: snapshots are taken at
  // multiples of prefix_block tokens, and prompt chunks end at them (with the cache or without).
  int64_t prefix_cache_bytes = 0;
  int64_t prefix_block = 256;
  // Bytes one sequence's KV cache may take at most (0: half the physical memory); max_context is
  // lowered to what fits.
  int64_t max_cache_bytes = 0;
  // The ids that end a sequence (EOS; a model's generation_config.json may list several); empty:
  // config.json's eos_token_id.
  std::vector<int32_t> eos_ids = {};
};

// Constrains one choice's output (e.g. a grammar): apply is called on every step's logits after
// the bias and penalties, before temperature and filtering, and sets -inf on the ids it forbids;
// accept is then told the id that was drawn. Runs on the engine thread.
struct LogitsProcessor {
  virtual ~LogitsProcessor() = default;
  virtual void apply(std::span<float> logits) = 0;
  virtual void accept(int32_t id) = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // ≥ 1 id, each < vocab
  SamplingParams sampling;
  int n = 1;  // 1..8 choices from one prompt, prefilled once, decoded in the same batch
  // Called once per choice (by submit, on the caller's thread); empty, or a null result: none.
  std::function<std::unique_ptr<LogitsProcessor>()> make_processor;
};

// Why a choice ended: stop (EOS, a stop id, a stop string, or a LogitsProcessor that forbade every
// id), length (max_new_tokens or the context), cancelled (the client went away or the server
// stops). None: not ended yet.
enum class FinishReason { None, Stop, Length, Cancelled };
template <>
struct EnumWords<FinishReason> {
  static constexpr std::pair<FinishReason, std::string_view> words[] = {
      {FinishReason::None, ""},
      {FinishReason::Stop, "stop"},
      {FinishReason::Length, "length"},
      {FinishReason::Cancelled, "cancelled"}};
};

// A generated id's log-probability under the model's own distribution: log_softmax of the raw
// logits (before bias, penalties, mask and temperature), and the `top_logprobs` most likely ids
// with theirs (most likely first, ties → lower id).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

struct GenerationEvent {
  using TokenLogprob = zaya::TokenLogprob;
  std::string text;                    // newly emitted text (empty without a tokenizer)
  std::vector<int32_t> ids;            // newly generated ids
  std::vector<TokenLogprob> logprobs;  // one per id of `ids` when sampling.top_logprobs ≥ 0
  int index = 0;                       // the choice (0 … n−1) this event belongs to
  bool done = false;  // the last event of the choice; the request ends when all n have it
  FinishReason finish_reason = FinishReason::None;  // set on the last event
  int64_t prompt_tokens = 0;                        // filled on every event
  int64_t completion_tokens = 0;
};

using EventFn = std::function<void(const GenerationEvent&)>;

// Counts of observations per bucket: counts[i] those ≤ bounds[i] and > bounds[i − 1]; the last
// count, those above every bound.
struct Histogram {
  std::vector<double> bounds;   // increasing upper bounds
  std::vector<int64_t> counts;  // bounds.size() + 1
  double sum = 0;
  int64_t count = 0;
  Histogram() = default;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v);
};

struct EngineStats {
  // Totals so far. prompt_tokens: prompt tokens run through the model; prompt_tokens_cached:
  // those restored from the prefix cache instead (a prompt's length is the sum of the two);
  // decode_tokens: tokens run in decode steps; generated_tokens: tokens drawn (each choice's first
  // comes from its prompt's last step, the rest from decode steps).
  int64_t prompt_tokens = 0, prompt_tokens_cached = 0, decode_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t steps = 0;
  int64_t submitted = 0;  // requests accepted by submit
  // Choices ended, by FinishReason (index: the enum's value; a request of n choices counts n).
  int64_t finished[4] = {0, 0, 0, 0};
  int64_t running = 0, queued = 0;  // requests admitted and not done; waiting for admission
  int64_t batch = 0;      // sequences (prompt chunks and decoding choices) in the last step
  Histogram batch_sizes;  // sequences per step
  Histogram ttft;         // seconds from submit to a request's first token
  // Tokens per second over the last window_seconds (or since the engine started, if sooner).
  double prompt_tokens_per_second = 0, generated_tokens_per_second = 0, window_seconds = 0;
  PrefixCacheStats prefix;
};

class Engine {
 public:
  // tok may be null (ids only: then stop strings are refused and events carry no text).
  Engine(const InferModel& model, const Tokenizer* tok, EngineOptions opt = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Validates (throws zaya::Error: empty prompt, id out of range — prompt, logit_bias
  // or stop_ids —, prompt + max tokens beyond the context, bad sampling parameters, n outside
  // 1..8, stop strings without a tokenizer), makes the choices' processors and queues. on_event
  // runs on the engine thread; each choice's last event has done = true (exactly once).
  uint64_t submit(GenerationRequest req, EventFn on_event);
  // Thread-safe. Ends a request early (e.g. its client went away): every choice not yet done ends
  // with "cancelled".
  void cancel(uint64_t id);
  // One step: admit, prefill, decode one token each. Returns false when there was nothing to do.
  bool step();
  // Steps until `stop` becomes true, sleeping while idle (submit and wake() wake it).
  void run(const std::atomic<bool>& stop);
  void wake();

  int64_t max_context() const;
  EngineStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaya
