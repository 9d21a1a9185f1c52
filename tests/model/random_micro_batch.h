// A random micro-batch for the model tests (test_model_transformer_head, test_model_activations).
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace zaya::test {

// A random micro-batch of n tokens for the model tests: ids in [1, V), targets in [0, V) except at
// the positions p with p % ignore_every == ignore_at, which are ignored (−1).
inline void random_micro_batch(uint64_t seed, int64_t n, int64_t V, int64_t ignore_every,
                               int64_t ignore_at, std::vector<int32_t>& ids,
                               std::vector<int32_t>& targets) {
  CounterRng rng{seed, 0};
  ids.resize(size_t(n));
  targets.resize(size_t(n));
  for (int64_t p = 0; p < n; ++p) {
    ids[size_t(p)] = int32_t(1 + rng.bits(uint64_t(2 * p)) % uint64_t(V - 1));
    targets[size_t(p)] =
        p % ignore_every == ignore_at ? -1 : int32_t(rng.bits(uint64_t(2 * p + 1)) % uint64_t(V));
  }
}

}  // namespace zaya::test
