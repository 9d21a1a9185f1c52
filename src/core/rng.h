// Counter-based RNG: value = mix(seed, stream, counter). Any element of any stream can be drawn
// independently (no sequential state), so initialisation is identical for any thread count or
// rank layout. mix is SplitMix64's finaliser applied twice.
#pragma once
#include <cmath>
#include <cstdint>

// Host and device: the GPU backend draws the same values in its fill kernels.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define ZAYA_HD __host__ __device__
#else
#define ZAYA_HD
#endif

namespace zaya {

ZAYA_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct CounterRng {
  uint64_t seed = 0;
  uint64_t stream = 0;

  ZAYA_HD uint64_t bits(uint64_t counter) const {
    return splitmix64(splitmix64(seed ^ splitmix64(stream)) ^ counter);
  }
  // Uniform in (0, 1): 53 random bits, never exactly 0.
  ZAYA_HD double uniform(uint64_t counter) const {
    return (double(bits(counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  // Standard normal by Box-Muller on counters 2i and 2i+1.
  ZAYA_HD double normal(uint64_t i) const {
    double u1 = uniform(2 * i), u2 = uniform(2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  }
};

}  // namespace zaya
