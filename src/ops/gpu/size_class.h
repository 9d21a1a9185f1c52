// The GPU caching allocator's size classes (ops/gpu/runtime.cpp), host-only arithmetic so that the
// CPU test suite checks them (tests/ops/gpu/test_size_class.cpp) in every build.
//
// A freed block is cached under its class and handed to the next request of the same class, so a
// class is coarse where sizes vary from step to step and fine where blocks are large:
// - up to 1 MiB: 512-byte granules;
// - up to 1 GiB: quarters of the next power of two p (slack < p/4, under half of a request just
//   above a power of two): MoE scratch, sized by how many tokens the router sends to each expert,
//   changes every step and still reuses its blocks;
// - above 1 GiB: 1/32 of p (slack < p/32 ≤ 6.25% of the request): the weights, gradients,
//   optimizer state and activation arena, allocated once. Quarters there made a 16.7 GiB buffer
//   (gpu-step-bench with 38 sub-layers: 4 × 4.48e9 bytes) a 24 GiB block; now 17 GiB.
#pragma once
#include <cstddef>

namespace zaya::gpu {

inline constexpr size_t kSmallClassLimit = size_t(1) << 20;  // 512-byte granules up to here
inline constexpr size_t kLargeClassStart = size_t(1) << 30;  // 1/32 granules above here

constexpr size_t size_class(size_t bytes) {
  if (bytes <= kSmallClassLimit) return (bytes + 511) & ~size_t(511);
  if (bytes > (size_t(1) << 62)) return bytes;  // no device has that: the request fails as asked
  size_t p = kSmallClassLimit;
  while (p < bytes) p <<= 1;
  const size_t granule = bytes > kLargeClassStart ? p / 32 : p / 4;
  return (bytes + granule - 1) / granule * granule;
}

}  // namespace zaya::gpu
