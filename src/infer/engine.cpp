// Engine (see engine.h). One mutex guards the queue, the active list's membership and the
// cancellation flags; the forward pass and the callbacks run outside it, on the engine thread.
#include "infer/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
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

// One choice of a request: its own cache (choice 0's is the one the prompt is prefilled into; the
// others are copied from it once the prompt is in), sampler, text stream and processor.
struct Choice {
  int index = 0;
  std::unique_ptr<SequenceCache> cache;
  std::optional<Sampler> sampler;
  std::unique_ptr<TextStream> text;
  std::unique_ptr<LogitsProcessor> processor;
  std::vector<int32_t> history;  // prompt, then generated ids
  int64_t generated = 0;
  bool finished = false;  // its last event has been delivered
};

struct Sequence {
  uint64_t id = 0;
  GenerationRequest req;
  EventFn on_event;
  std::vector<std::unique_ptr<LogitsProcessor>> processors;  // made by submit, one per choice
  std::vector<Choice> choices;                               // all n, made at admission
  int64_t prompt_fed = 0;  // prompt tokens already run through the model (or restored)
  bool cancelled = false;  // the client asked to stop it (guarded by the engine mutex)
  std::chrono::steady_clock::time_point submitted;  // for the time to the first token

  // Batch slots it holds: its choices not yet done (all n before admission).
  int64_t live() const {
    if (choices.empty()) return req.n;
    int64_t k = 0;
    for (const Choice& c : choices) k += c.finished ? 0 : 1;
    return k;
  }
};

// log_softmax of one row of raw logits, its log-sum-exp taken in double (a float running sum over
// a large vocabulary drifts). NaN counts as -inf; +inf logits share all the probability.
struct LogSoftmax {
  double lse = 0;     // log Σ exp(l) over the finite logits
  int64_t n_inf = 0;  // how many logits are +inf (then they share the mass)

  void fit(std::span<const float> row) {
    float m = -std::numeric_limits<float>::infinity();
    n_inf = 0;
    for (float l : row) {
      if (l > m) m = l;
      if (std::isinf(l) && l > 0) ++n_inf;
    }
    if (n_inf > 0 || !std::isfinite(m)) {
      lse = 0;
      return;
    }
    double sum = 0;
    for (float l : row)
      if (l > -std::numeric_limits<float>::infinity()) sum += std::exp(double(l) - double(m));
    lse = double(m) + std::log(sum);
  }
  float at(float l) const {
    const float ninf = -std::numeric_limits<float>::infinity();
    if (n_inf > 0) return std::isinf(l) && l > 0 ? float(-std::log(double(n_inf))) : ninf;
    if (!(l > ninf)) return ninf;
    return float(double(l) - lse);
  }
};

// The k most likely ids of `row` with their logprobs, most likely first (ties → lower id).
std::vector<std::pair<int32_t, float>> top_ids(std::span<const float> row, int k,
                                               const LogSoftmax& ls) {
  std::vector<std::pair<float, int32_t>> best;  // (logit, id), sorted most likely first
  if (k <= 0) return {};
  best.reserve(size_t(k) + 1);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < row.size(); ++i) {
    const float l = std::isnan(row[i]) ? ninf : row[i];
    if (int(best.size()) == k && !(l > best.back().first)) continue;  // equal: the lower id stays
    auto it =
        std::upper_bound(best.begin(), best.end(), l,
                         [](float v, const std::pair<float, int32_t>& b) { return v > b.first; });
    best.insert(it, {l, int32_t(i)});
    if (int(best.size()) > k) best.pop_back();
  }
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(best.size());
  for (const auto& [l, id] : best) out.emplace_back(id, ls.at(l));
  return out;
}

using Clock = std::chrono::steady_clock;

// Buckets: seconds to the first token; sequences per step.
const std::vector<double> kTtftBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,  5,     10,   25,  50,   100};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
// The window of the tokens-per-second gauges.
constexpr double kRateWindowSeconds = 10;

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

struct Engine::Impl {
  const InferModel& model;
  const Tokenizer* tok;
  EngineOptions opt;
  Decoder decoder;
  PrefixCache prefix;  // engine thread only; its stats are copied into `stats` after each step
  const Clock::time_point started = Clock::now();
  std::vector<float> logits;
  std::vector<float> work, raw;  // one choice's copy of a shared row; the raw row for logprobs

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> queue;
  std::vector<std::unique_ptr<Sequence>> active;
  std::vector<uint64_t> cancels;
  uint64_t next_id = 1;
  EngineStats stats;
  // Per step: when it ended, its prompt and decode tokens (the last kRateWindowSeconds).
  struct StepTokens {
    Clock::time_point at;
    int64_t prompt = 0, generated = 0;
  };
  std::deque<StepTokens> recent;
  int64_t generated_in_step = 0;  // tokens drawn in the current step (engine thread)
  std::atomic<int64_t> finished_by[4] = {0, 0, 0, 0};  // choices ended, by FinishReason

  Impl(const InferModel& m, const Tokenizer* t, EngineOptions o)
      : model(m),
        tok(t),
        opt(o),
        decoder(m),
        prefix(m.config(), PrefixCacheOptions{o.prefix_cache_bytes, o.prefix_block, {}}) {
    stats.batch_sizes = Histogram(kBatchBounds);
    stats.ttft = Histogram(kTtftBounds);
    stats.prefix = prefix.stats();
  }

  void finish(Sequence& s, Choice* ch, int index, GenerationEvent ev, FinishReason reason) {
    finished_by[size_t(reason)].fetch_add(1, std::memory_order_relaxed);
    ev.done = true;
    ev.index = index;
    ev.finish_reason = reason;
    ev.prompt_tokens = int64_t(s.req.prompt.size());
    ev.completion_tokens = ch ? ch->generated : 0;
    if (ch) ch->finished = true;
    s.on_event(ev);
  }
  // Ends every choice not yet done (all n before admission) with `reason`.
  void finish_all(Sequence& s, FinishReason reason) {
    if (s.choices.empty()) {
      for (int i = 0; i < s.req.n; ++i) finish(s, nullptr, i, {}, reason);
      return;
    }
    for (Choice& ch : s.choices)
      if (!ch.finished) finish(s, &ch, ch.index, {}, reason);
  }
  // One step of one choice from its row of logits (modified in place).
  void advance(Sequence& s, Choice& ch, std::span<float> row);
};

void Engine::Impl::advance(Sequence& s, Choice& ch, std::span<float> row) {
  const SamplingParams& sp = s.req.sampling;
  LogSoftmax ls;
  if (sp.top_logprobs >= 0) {
    ls.fit(row);
    raw.assign(row.begin(), row.end());
  }
  ch.sampler->process(row, ch.history);
  if (ch.processor) {
    ch.processor->apply(row);
    const float ninf = -std::numeric_limits<float>::infinity();
    if (std::none_of(row.begin(), row.end(), [&](float l) { return l > ninf; })) {
      // The constraint allows nothing (a grammar with no way on): end the choice, draw nothing.
      log_debug("engine: request {} choice {}: the logits processor forbade every token; stopped",
                s.id, ch.index);
      GenerationEvent ev;
      if (ch.text) ev.text = ch.text->flush();
      finish(s, &ch, ch.index, std::move(ev), FinishReason::Stop);
      return;
    }
  }
  const int32_t next = ch.sampler->draw(row);
  if (ch.processor) ch.processor->accept(next);
  ch.history.push_back(next);
  ++ch.generated;
  ++generated_in_step;
  GenerationEvent ev;
  ev.index = ch.index;
  FinishReason reason = FinishReason::None;
  const bool eos = std::find(opt.eos_ids.begin(), opt.eos_ids.end(), next) != opt.eos_ids.end() &&
                   !sp.ignore_eos;
  const bool stop_id = std::find(sp.stop_ids.begin(), sp.stop_ids.end(), next) != sp.stop_ids.end();
  if (eos || stop_id) {
    reason = FinishReason::Stop;  // EOS or a stop id ends the text and is not part of it
    if (ch.text) ev.text = ch.text->flush();
  } else {
    ev.ids.push_back(next);
    if (sp.top_logprobs >= 0)
      ev.logprobs.push_back({next, ls.at(raw[size_t(next)]), top_ids(raw, sp.top_logprobs, ls)});
    if (ch.text) {
      TextStream::Delta delta = ch.text->push(next);
      ev.text = std::move(delta.text);
      if (delta.stopped) reason = FinishReason::Stop;
    }
    if (reason == FinishReason::None && ch.generated >= sp.max_new_tokens) {
      reason = FinishReason::Length;
      if (ch.text) ev.text += ch.text->flush();
    }
  }
  ev.prompt_tokens = int64_t(s.req.prompt.size());
  ev.completion_tokens = ch.generated;
  if (reason != FinishReason::None)
    finish(s, &ch, ch.index, std::move(ev), reason);
  else
    s.on_event(ev);
}

Engine::Engine(const InferModel& model, const Tokenizer* tok, EngineOptions opt)
    : impl_(std::make_unique<Impl>(model, tok, opt)) {
  const int64_t limit = model.config().max_position_embeddings;
  if (opt.max_context <= 0 || opt.max_context > limit) impl_->opt.max_context = limit;
  // One sequence's KV cache at the full context must fit the cache budget: a model that claims a
  // context of 2^40 tokens is served with the context that fits (a request never allocates more).
  // The cache's real size (SequenceCache::kv_bytes): the full sub-layers grow with the context,
  // the windowed ones stop at their window. It grows with the context, so the largest context
  // that fits is found by bisection.
  const ZayaConfig& c = model.config();
  const int64_t budget = opt.max_cache_bytes > 0 ? opt.max_cache_bytes : default_cache_budget();
  // Each position costs the full sub-layers' bytes_per_token at least: bounding the search by it
  // also keeps kv_bytes far from overflow for a model that claims a huge context.
  const int64_t per_token = SequenceCache::bytes_per_token(c);
  int64_t lo = 1, hi = impl_->opt.max_context;  // kv_bytes(lo) fits, or lo = 1
  if (per_token > 0) hi = std::max<int64_t>(1, std::min(hi, budget / per_token));
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (SequenceCache::kv_bytes(c, mid) <= budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (impl_->opt.max_context > lo) {
    log_info(
        "engine: context lowered from {} to {} tokens (a sequence's KV cache, {} bytes/token "
        "plus {} bytes of windowed sub-layers, within {} bytes)",
        impl_->opt.max_context, lo, per_token, SequenceCache::window_bytes(c), budget);
    impl_->opt.max_context = lo;
  }
  if (impl_->opt.eos_ids.empty()) impl_->opt.eos_ids = {int32_t(model.config().eos_token_id)};
  ZAYA_CHECK_INPUT(opt.max_batch >= 1, "max batch must be at least 1, not {}", opt.max_batch);
  ZAYA_CHECK_INPUT(opt.prefill_chunk >= 1, "prefill chunk must be at least 1, not {}",
                   opt.prefill_chunk);
  ZAYA_CHECK_INPUT(opt.prefix_block >= 1, "prefix cache block must be at least 1 token, not {}",
                   opt.prefix_block);
}

Engine::~Engine() = default;

int64_t Engine::max_context() const {
  return impl_->opt.max_context;
}

EngineStats Engine::stats() const {
  const Impl& I = *impl_;
  std::lock_guard<std::mutex> lock(I.mu);
  EngineStats st = I.stats;
  for (size_t r = 0; r < 4; ++r) st.finished[r] = I.finished_by[r].load(std::memory_order_relaxed);
  st.running = int64_t(I.active.size());
  st.queued = int64_t(I.queue.size());
  const Clock::time_point now = Clock::now();
  st.window_seconds =
      std::min(kRateWindowSeconds, std::chrono::duration<double>(now - I.started).count());
  int64_t prompt = 0, decode = 0;
  for (const Impl::StepTokens& t : I.recent)
    if (std::chrono::duration<double>(now - t.at).count() <= kRateWindowSeconds)
      prompt += t.prompt, decode += t.generated;
  if (st.window_seconds > 0) {
    st.prompt_tokens_per_second = double(prompt) / st.window_seconds;
    st.generated_tokens_per_second = double(decode) / st.window_seconds;
  }
  return st;
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
  if (req.n < 1 || req.n > 8) fail("n (the number of choices) must be in [1, 8]; got {}", req.n);
  for (const auto& [id, bias] : req.sampling.logit_bias)
    if (id >= V) fail("logit_bias token id {} is outside the vocabulary [0, {})", id, V);
  for (int32_t id : req.sampling.stop_ids)
    if (id >= V) fail("stop token id {} is outside the vocabulary [0, {})", id, V);
  auto s = std::make_unique<Sequence>();
  if (req.make_processor)
    for (int i = 0; i < req.n; ++i) s->processors.push_back(req.make_processor());
  s->req = std::move(req);
  s->on_event = std::move(on_event);
  s->submitted = Clock::now();
  std::lock_guard<std::mutex> lock(I.mu);
  ++I.stats.submitted;
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
    // Admission in order, while the next request's choices fit the free slots; a request with
    // more choices than max_batch goes alone into an empty batch (so it never waits forever).
    int64_t used = 0;
    for (const auto& s : I.active) used += s->live();
    while (!I.queue.empty()) {
      Sequence& next = *I.queue.front();
      const bool runs = !next.cancelled && next.req.sampling.max_new_tokens > 0;
      if (runs && used > 0 && used + next.req.n > I.opt.max_batch) break;
      std::unique_ptr<Sequence> s = std::move(I.queue.front());
      I.queue.pop_front();
      if (s->cancelled)
        ending.emplace_back(std::move(s), FinishReason::Cancelled);
      else if (s->req.sampling.max_new_tokens == 0)
        ending.emplace_back(std::move(s), FinishReason::Length);
      else {
        used += s->req.n;
        I.active.push_back(std::move(s));
      }
    }
  }
  for (auto& [s, reason] : ending) I.finish_all(*s, reason);

  // Admit new requests (their choices: sampler, text stream, processor; choice 0's cache); build
  // this step's items: the next prompt chunk while prefilling (choice 0's cache), else the last
  // generated token of every choice still running.
  std::vector<std::pair<Sequence*, Choice*>> run;  // Choice null: a prompt chunk
  std::vector<DecodeItem> items;
  int64_t prompt_cached = 0;  // prompt tokens restored from the prefix cache this step
  for (auto& sp : I.active) {
    Sequence& s = *sp;
    const int64_t P = int64_t(s.req.prompt.size());
    if (s.choices.empty()) {
      s.choices.resize(size_t(s.req.n));
      for (int i = 0; i < s.req.n; ++i) {
        Choice& ch = s.choices[size_t(i)];
        ch.index = i;
        ch.sampler.emplace(s.req.sampling, uint64_t(i));
        if (I.tok) ch.text = std::make_unique<TextStream>(*I.tok, s.req.sampling.stop);
        if (size_t(i) < s.processors.size()) ch.processor = std::move(s.processors[size_t(i)]);
        ch.history = s.req.prompt;
      }
      s.choices[0].cache = std::make_unique<SequenceCache>(c, P + s.req.sampling.max_new_tokens);
      // Resume from the longest cached prefix (at most P − 1 tokens: the last is run for logits).
      s.prompt_fed = I.prefix.restore(s.req.prompt, *s.choices[0].cache);
      prompt_cached += s.prompt_fed;
    }
    if (s.prompt_fed < P) {
      // A chunk ends at the next block boundary (see engine.h: the same chunks with the cache).
      const int64_t B = I.opt.prefix_block;
      const int64_t L = std::min({I.opt.prefill_chunk, P - s.prompt_fed, B - s.prompt_fed % B});
      items.push_back(
          {s.choices[0].cache.get(),
           std::span<const int32_t>(s.req.prompt).subspan(size_t(s.prompt_fed), size_t(L))});
      s.prompt_fed += L;
      run.emplace_back(&s, nullptr);
    } else {
      for (Choice& ch : s.choices) {
        if (ch.finished) continue;
        items.push_back({ch.cache.get(), std::span<const int32_t>(&ch.history.back(), 1)});
        run.emplace_back(&s, &ch);
      }
    }
  }
  if (items.empty()) {
    if (prompt_cached > 0) {  // (not reached: a restore leaves ≥ 1 prompt token to run)
      std::lock_guard<std::mutex> lock(I.mu);
      I.stats.prompt_tokens_cached += prompt_cached;
    }
    return !ending.empty();
  }

  Timer timer;
  I.logits.resize(items.size() * size_t(V));
  I.decoder.forward(items, Tensor(I.logits.data(), {int64_t(items.size()), V}));
  const double secs = timer.seconds();
  int64_t prompt_tokens = 0, decode_tokens = 0;
  I.generated_in_step = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    auto [sq, ch] = run[k];
    Sequence& s = *sq;
    (ch ? decode_tokens : prompt_tokens) += int64_t(items[k].tokens.size());
    std::span<float> row(I.logits.data() + k * size_t(V), size_t(V));
    if (ch) {
      I.advance(s, *ch, row);
      continue;
    }
    // A prompt chunk that ended at a block boundary: snapshot the state there.
    const SequenceCache& pc = *s.choices[0].cache;
    if (I.prefix.enabled() && pc.length() % I.opt.prefix_block == 0)
      I.prefix.capture(s.req.prompt, pc);
    if (s.prompt_fed < int64_t(s.req.prompt.size())) continue;  // more prompt chunks to go
    const double ttft =
        std::chrono::duration<double>(Clock::now() - s.submitted).count();  // drawn below
    {
      std::lock_guard<std::mutex> lock(I.mu);
      I.stats.ttft.observe(ttft);
    }
    // The prompt is in: copy its cache into the other choices, each drawing its first token from
    // the same row (a copy of it, as drawing modifies the row; the last choice takes the row).
    const int64_t cap = s.choices[0].cache->capacity();
    for (size_t i = 1; i < s.choices.size(); ++i) {
      s.choices[i].cache = std::make_unique<SequenceCache>(c, cap);
      s.choices[i].cache->copy_from(*s.choices[0].cache);
    }
    for (size_t i = 0; i < s.choices.size(); ++i) {
      if (i + 1 < s.choices.size()) {
        I.work.assign(row.begin(), row.end());
        I.advance(s, s.choices[i], I.work);
      } else {
        I.advance(s, s.choices[i], row);
      }
    }
  }
  std::lock_guard<std::mutex> lock(I.mu);
  I.stats.steps += 1;
  I.stats.prompt_tokens += prompt_tokens;
  I.stats.prompt_tokens_cached += prompt_cached;
  I.stats.decode_tokens += decode_tokens;
  I.stats.generated_tokens += I.generated_in_step;
  I.stats.batch = int64_t(items.size());
  I.stats.batch_sizes.observe(double(items.size()));
  I.stats.prefix = I.prefix.stats();
  const Clock::time_point now = Clock::now();
  I.recent.push_back({now, prompt_tokens, I.generated_in_step});
  while (!I.recent.empty() &&
         std::chrono::duration<double>(now - I.recent.front().at).count() > kRateWindowSeconds)
    I.recent.pop_front();
  (prompt_tokens > 0 ? I.stats.prefill_seconds : I.stats.decode_seconds) += secs;
  for (auto it = I.active.begin(); it != I.active.end();)
    if ((*it)->live() == 0) {
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
