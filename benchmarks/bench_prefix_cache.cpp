// Time to the first token of a chat's second turn, with and without the prefix cache
// (src/infer/prefix_cache.h), in one run on one random model. Turn 1 sends a history of H tokens
// and generates R greedy tokens; turn 2 re-sends the history, the reply and a new message of M
// tokens. With the cache, turn 2 resumes at the last block boundary the first turn's prefill
// reached; without it (a second engine, --prefix-cache-mb 0, the same prompt chunks), it prefills
// everything. Printed per run: prefill tokens the decoder ran for turn 2, its time to the first
// token (submit to the first token's event, engine-side: no HTTP), the two ratios, and whether both
// first tokens are the same id (the cache must not change them). usage: bench_prefix_cache
// CONFIG.json [history=2048] [block=256] [reply=16] [message=32]
//                           [dtype=bf16|f32]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/timer.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "io/zaya_config.h"

using namespace zaya;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<int32_t> random_ids(uint64_t seed, int64_t n, int64_t V) {
  std::vector<int32_t> ids;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids.push_back(int32_t(3 + x % uint64_t(V - 3)));
  }
  return ids;
}

struct Turn {
  std::vector<int32_t> ids;  // generated
  double ttft = 0;           // seconds, submit to the first token's event
  int64_t prefill = 0;       // prompt tokens the decoder ran
  int64_t reused = 0;        // prompt tokens restored from the cache
};

Turn run_turn(Engine& e, const std::vector<int32_t>& prompt, int64_t n) {
  const EngineStats before = e.stats();
  GenerationRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_new_tokens = n;
  r.sampling.ignore_eos = true;
  Turn t;
  bool done = false;
  const Clock::time_point t0 = Clock::now();
  e.submit(r, [&](const GenerationEvent& ev) {
    if (t.ttft == 0 && (!ev.ids.empty() || ev.done))
      t.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
    t.ids.insert(t.ids.end(), ev.ids.begin(), ev.ids.end());
    done = done || ev.done;
  });
  while (!done) e.step();
  const EngineStats after = e.stats();
  t.prefill = after.prompt_tokens - before.prompt_tokens;
  t.reused = after.prompt_tokens_cached - before.prompt_tokens_cached;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_prefix_cache CONFIG.json [history=2048] [block=256] [reply=16] "
                 "[message=32] [dtype=bf16|f32]\n");
    return 2;
  }
  const int64_t H = argc > 2 ? std::atoll(argv[2]) : 2048, B = argc > 3 ? std::atoll(argv[3]) : 256,
                R = argc > 4 ? std::atoll(argv[4]) : 16, M = argc > 5 ? std::atoll(argv[5]) : 32;
  const std::string dtype = argc > 6 ? argv[6] : "bf16";
  Timer load;
  const InferModel im =
      InferModel::random(load_config(argv[1]), 1, dtype == "f32" ? DType::F32 : DType::BF16);
  const int64_t V = im.config().vocab_size;
  std::printf("model %s, %s matrices, %.2f GiB, made in %.1f s\n", argv[1], dtype.c_str(),
              double(im.total_weight_bytes()) / double(1 << 30), load.seconds());
  std::printf("history %lld tokens, block %lld, reply %lld, message %lld\n", (long long)H,
              (long long)B, (long long)R, (long long)M);

  EngineOptions with;
  with.prefix_block = B;
  with.prefix_cache_bytes = int64_t(1) << 30;
  with.max_cache_bytes = int64_t(4) << 30;
  EngineOptions without = with;
  without.prefix_cache_bytes = 0;

  Engine cached(im, nullptr, with);
  std::vector<int32_t> prompt = random_ids(1, H, V);
  const Turn t1 = run_turn(cached, prompt, R);
  std::printf("turn 1: %lld prompt tokens prefilled, first token after %.2f s\n",
              (long long)t1.prefill, t1.ttft);
  prompt.insert(prompt.end(), t1.ids.begin(), t1.ids.end());
  const std::vector<int32_t> msg = random_ids(2, M, V);
  prompt.insert(prompt.end(), msg.begin(), msg.end());

  const Turn with2 = run_turn(cached, prompt, 1);
  Engine plain(im, nullptr, without);
  const Turn without2 = run_turn(plain, prompt, 1);
  const EngineStats cs = cached.stats();
  std::printf(
      "turn 2 (%zu prompt tokens):\n"
      "  without the cache: %lld tokens prefilled, first token after %.2f s\n"
      "  with the cache:    %lld tokens prefilled (%lld restored), first token after %.2f s\n"
      "  ratio: %.1fx fewer prefill tokens, %.1fx sooner (wall)\n"
      "  same first token: %s\n"
      "  prefix cache: %lld snapshots, %.1f MiB\n",
      prompt.size(), (long long)without2.prefill, without2.ttft, (long long)with2.prefill,
      (long long)with2.reused, with2.ttft, double(without2.prefill) / double(with2.prefill),
      without2.ttft / with2.ttft, with2.ids == without2.ids ? "yes" : "NO",
      (long long)cs.prefix.entries, double(cs.prefix.bytes) / double(1 << 20));
  return with2.ids == without2.ids ? 0 : 1;
}
