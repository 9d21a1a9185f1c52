// Engine: continuous batching over one model. Requests are queued from any thread; the thread that
// runs step()/run() admits them (up to max_batch at once), prefills their prompts, then decodes one
// token per active sequence per step — a new request joins the running batch at the next step, a
// finished one leaves it. Output goes to each request's callback, on the engine thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/enum_words.h"
#include "infer/sampler.h"

namespace zaya {

class InferModel;
class Tokenizer;

struct EngineOptions {
  int64_t max_batch = 8;        // sequences decoded together
  int64_t max_context = 0;      // prompt + generated tokens per sequence; 0 = the model's limit
  int64_t prefill_chunk = 512;  // prompt tokens per sequence per step (long prompts take several)
  // Bytes one sequence's KV cache may take at most (0: half the physical memory); max_context is
  // lowered to what fits.
  int64_t max_cache_bytes = 0;
  // The ids that end a sequence (EOS; a model's generation_config.json may list several); empty:
  // config.json's eos_token_id.
  std::vector<int32_t> eos_ids = {};
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // ≥ 1 id, each < vocab
  SamplingParams sampling;
};

// Why a request ended: stop (EOS or a stop string), length (max_new_tokens or the context),
// cancelled (the client went away or the server stops). None: not ended yet.
enum class FinishReason { None, Stop, Length, Cancelled };
template <>
struct EnumWords<FinishReason> {
  static constexpr std::pair<FinishReason, std::string_view> words[] = {
      {FinishReason::None, ""},
      {FinishReason::Stop, "stop"},
      {FinishReason::Length, "length"},
      {FinishReason::Cancelled, "cancelled"}};
};

struct GenerationEvent {
  std::string text;          // newly emitted text (empty without a tokenizer)
  std::vector<int32_t> ids;  // newly generated ids
  bool done = false;         // the last event of the request
  FinishReason finish_reason = FinishReason::None;  // set on the last event
  int64_t prompt_tokens = 0;                        // filled on every event
  int64_t completion_tokens = 0;
};

using EventFn = std::function<void(const GenerationEvent&)>;

struct EngineStats {
  int64_t prompt_tokens = 0, decode_tokens = 0;  // totals so far
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t steps = 0;
};

class Engine {
 public:
  // tok may be null (ids only: then stop strings are refused and events carry no text).
  Engine(const InferModel& model, const Tokenizer* tok, EngineOptions opt = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Validates (throws zaya::Error: empty prompt, id out of range, prompt + max tokens
  // beyond the context, bad sampling parameters, stop strings without a tokenizer) and queues.
  // on_event runs on the engine thread; its last call has done = true (exactly once).
  uint64_t submit(GenerationRequest req, EventFn on_event);
  // Thread-safe. Ends a request early (e.g. its client went away): done with "cancelled".
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
