// Engine (see engine.h). One mutex guards the queue, the active list's membership and the
// cancellation flags; the forward pass and the callbacks run outside it, on the engine thread.
#include "infer/engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include <unistd.h>

#include "core/assert.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/tokenizer.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/infer_model.h"
#include "infer/text_stream.h"

namespace zaya {

namespace {

// Half the machine's physical memory (sysconf), or 1 GiB where it cannot be read.
int64_t default_cache_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return int64_t(1) << 30;
  return int64_t(pages) / 2 * int64_t(page);
}

struct Sequence {
  uint64_t id = 0;
  GenerationRequest req;
  EventFn on_event;
  std::unique_ptr<SequenceCache> cache;
  std::optional<Sampler> sampler;
  std::unique_ptr<TextStream> text;
  std::vector<int32_t> history;  // prompt, then generated ids
  int64_t prompt_fed = 0;        // prompt tokens already run through the model
  int64_t generated = 0;
  bool cancelled = false;  // the client asked to stop it (guarded by the engine mutex)
  bool finished = false;   // its last event has been delivered
};

}  // namespace

struct Engine::Impl {
  const InferModel& model;
  const Tokenizer* tok;
  EngineOptions opt;
  Decoder decoder;
  std::vector<float> logits;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> queue;
  std::vector<std::unique_ptr<Sequence>> active;
  std::vector<uint64_t> cancels;
  uint64_t next_id = 1;
  EngineStats stats;

  Impl(const InferModel& m, const Tokenizer* t, EngineOptions o)
      : model(m), tok(t), opt(o), decoder(m) {}

  static void finish(Sequence& s, GenerationEvent ev, FinishReason reason) {
    ev.done = true;
    ev.finish_reason = reason;
    ev.prompt_tokens = int64_t(s.req.prompt.size());
    ev.completion_tokens = s.generated;
    s.on_event(ev);
  }
};

Engine::Engine(const InferModel& model, const Tokenizer* tok, EngineOptions opt)
    : impl_(std::make_unique<Impl>(model, tok, opt)) {
  const int64_t limit = model.config().max_position_embeddings;
  if (opt.max_context <= 0 || opt.max_context > limit) impl_->opt.max_context = limit;
  // One sequence's KV cache at the full context must fit the cache budget: a model that claims a
  // context of 2^40 tokens is served with the context that fits (a request never allocates more).
  const int64_t per_token = std::max<int64_t>(1, SequenceCache::bytes_per_token(model.config()));
  const int64_t budget = opt.max_cache_bytes > 0 ? opt.max_cache_bytes : default_cache_budget();
  const int64_t fits = std::max<int64_t>(1, budget / per_token);
  if (impl_->opt.max_context > fits) {
    log_info(
        "engine: context lowered from {} to {} tokens (a sequence's KV cache, {} bytes/token, "
        "within {} bytes)",
        impl_->opt.max_context, fits, per_token, budget);
    impl_->opt.max_context = fits;
  }
  if (impl_->opt.eos_ids.empty()) impl_->opt.eos_ids = {int32_t(model.config().eos_token_id)};
  ZAYA_CHECK_INPUT(opt.max_batch >= 1, "max batch must be at least 1, not {}", opt.max_batch);
  ZAYA_CHECK_INPUT(opt.prefill_chunk >= 1, "prefill chunk must be at least 1, not {}",
                   opt.prefill_chunk);
}

Engine::~Engine() = default;

int64_t Engine::max_context() const {
  return impl_->opt.max_context;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

uint64_t Engine::submit(GenerationRequest req, EventFn on_event) {
  Impl& I = *impl_;
  const int64_t V = I.model.config().vocab_size, ctx = I.opt.max_context;
  req.sampling.validate();
  if (req.prompt.empty()) fail("the prompt is empty: give at least one token");
  for (int32_t id : req.prompt)
    if (id < 0 || id >= V) fail("prompt token id {} is outside the vocabulary [0, {})", id, V);
  const int64_t P = int64_t(req.prompt.size()), want = req.sampling.max_new_tokens;
  if (want > ctx - P)  // not P + want > ctx: that overflows for want near INT64_MAX
    fail("the prompt ({} tokens) plus max_new_tokens ({}) exceeds the context of {} tokens", P,
         want, ctx);
  if (!I.tok && !req.sampling.stop.empty())
    fail("stop strings need a tokenizer (none was loaded with the model)");
  auto s = std::make_unique<Sequence>();
  s->req = std::move(req);
  s->on_event = std::move(on_event);
  std::lock_guard<std::mutex> lock(I.mu);
  s->id = I.next_id++;
  const uint64_t id = s->id;
  I.queue.push_back(std::move(s));
  I.cv.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cancels.push_back(id);
  impl_->cv.notify_all();
}

void Engine::wake() {
  impl_->cv.notify_all();
}

bool Engine::step() {
  Impl& I = *impl_;
  const ZayaConfig& c = I.model.config();
  const int64_t V = c.vocab_size;
  std::vector<std::unique_ptr<Sequence>> ended;  // finished outside the lock
  std::vector<std::pair<std::unique_ptr<Sequence>, FinishReason>> ending;
  {
    std::lock_guard<std::mutex> lock(I.mu);
    for (uint64_t id : I.cancels) {
      for (auto& s : I.active)
        if (s->id == id) s->cancelled = true;
      for (auto& s : I.queue)
        if (s->id == id) s->cancelled = true;
    }
    I.cancels.clear();
    for (auto it = I.active.begin(); it != I.active.end();)
      if ((*it)->cancelled) {
        ending.emplace_back(std::move(*it), FinishReason::Cancelled);
        it = I.active.erase(it);
      } else {
        ++it;
      }
    while (!I.queue.empty() && int64_t(I.active.size()) < I.opt.max_batch) {
      std::unique_ptr<Sequence> s = std::move(I.queue.front());
      I.queue.pop_front();
      if (s->cancelled)
        ending.emplace_back(std::move(s), FinishReason::Cancelled);
      else if (s->req.sampling.max_new_tokens == 0)
        ending.emplace_back(std::move(s), FinishReason::Length);
      else
        I.active.push_back(std::move(s));
    }
  }
  for (auto& [s, reason] : ending) Impl::finish(*s, {}, reason);

  // Admit new sequences (cache, sampler, text stream); build this step's items: the next prompt
  // chunk while prefilling, else the last generated token.
  std::vector<Sequence*> run;
  std::vector<DecodeItem> items;
  std::vector<char> is_prompt;
  for (auto& sp : I.active) {
    Sequence& s = *sp;
    const int64_t P = int64_t(s.req.prompt.size());
    if (!s.cache) {
      s.cache = std::make_unique<SequenceCache>(c, P + s.req.sampling.max_new_tokens);
      s.sampler.emplace(s.req.sampling);
      if (I.tok) s.text = std::make_unique<TextStream>(*I.tok, s.req.sampling.stop);
      s.history = s.req.prompt;
    }
    run.push_back(&s);
    if (s.prompt_fed < P) {
      const int64_t L = std::min(I.opt.prefill_chunk, P - s.prompt_fed);
      items.push_back(
          {s.cache.get(),
           std::span<const int32_t>(s.req.prompt).subspan(size_t(s.prompt_fed), size_t(L))});
      s.prompt_fed += L;
      is_prompt.push_back(1);
    } else {
      items.push_back({s.cache.get(), std::span<const int32_t>(&s.history.back(), 1)});
      is_prompt.push_back(0);
    }
  }
  if (items.empty()) return !ending.empty();

  Timer timer;
  I.logits.resize(items.size() * size_t(V));
  I.decoder.forward(items, Tensor(I.logits.data(), {int64_t(items.size()), V}));
  const double secs = timer.seconds();
  int64_t prompt_tokens = 0, decode_tokens = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    Sequence& s = *run[k];
    (is_prompt[k] ? prompt_tokens : decode_tokens) += int64_t(items[k].tokens.size());
    if (s.prompt_fed < int64_t(s.req.prompt.size())) continue;  // more prompt chunks to go
    std::span<float> row(I.logits.data() + k * size_t(V), size_t(V));
    const int32_t next = s.sampler->sample(row, s.history);
    s.history.push_back(next);
    ++s.generated;
    GenerationEvent ev;
    FinishReason reason = FinishReason::None;
    const bool eos =
        std::find(I.opt.eos_ids.begin(), I.opt.eos_ids.end(), next) != I.opt.eos_ids.end();
    if (eos && !s.req.sampling.ignore_eos) {
      reason = FinishReason::Stop;  // EOS ends the text and is not part of it
      if (s.text) ev.text = s.text->flush();
    } else {
      ev.ids.push_back(next);
      if (s.text) {
        TextStream::Delta delta = s.text->push(next);
        ev.text = std::move(delta.text);
        if (delta.stopped) reason = FinishReason::Stop;
      }
      if (reason == FinishReason::None && s.generated >= s.req.sampling.max_new_tokens) {
        reason = FinishReason::Length;
        if (s.text) ev.text += s.text->flush();
      }
    }
    ev.prompt_tokens = int64_t(s.req.prompt.size());
    ev.completion_tokens = s.generated;
    if (reason != FinishReason::None) {
      Impl::finish(s, std::move(ev), reason);
      s.finished = true;
    } else {
      s.on_event(ev);
    }
  }
  std::lock_guard<std::mutex> lock(I.mu);
  I.stats.steps += 1;
  I.stats.prompt_tokens += prompt_tokens;
  I.stats.decode_tokens += decode_tokens;
  (prompt_tokens > 0 ? I.stats.prefill_seconds : I.stats.decode_seconds) += secs;
  for (auto it = I.active.begin(); it != I.active.end();)
    if ((*it)->finished) {
      ended.push_back(std::move(*it));  // freed after the lock is released
      it = I.active.erase(it);
    } else {
      ++it;
    }
  return true;
}

void Engine::run(const std::atomic<bool>& stop) {
  Impl& I = *impl_;
  while (!stop.load()) {
    if (step()) continue;
    std::unique_lock<std::mutex> lock(I.mu);
    I.cv.wait_for(lock, std::chrono::milliseconds(100), [&] {
      return stop.load() || !I.queue.empty() || !I.cancels.empty() || !I.active.empty();
    });
  }
}

}  // namespace zaya
