// GPU vs CPU: attention_forward (o, lse), attention_backward (dq, dk, dv; overwrite semantics:
// the outputs are prefilled) and attention_cached_forward (split-key decode and the flash path for
// longer prefill). Odd T crossing every tile size, head sizes from 4 to 128 (padded on the GPU),
// G = Hq/Hk in {1, 4}, B in {1, 2}, and the ZAYA1-base shape (8 query + 2 kv heads of 128).
// Sliding windows (window W: query t sees keys t − W + 1 … t) on both paths and the cached op: W =
// 1, W inside a tile, at and around the tile sizes (16, 32, 64), smaller and larger than T, odd T,
// GQA; W ≥ T bitwise equal to the unwindowed call; several GEMM score blocks; a ring cache holding
// only the window's positions equal to the whole cache.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

struct Shape {
  int64_t B, T, Hq, Hk, d;
  int64_t W = 0;  // the window (0: every earlier key)
  std::string str() const {
    return "B" + std::to_string(B) + " T" + std::to_string(T) + " Hq" + std::to_string(Hq) + " Hk" +
           std::to_string(Hk) + " d" + std::to_string(d) + " W" + std::to_string(W);
  }
};

// Every element of both sides within ±bound (outputs that are zero up to rounding, where an NMSE
// would compare rounding noise with rounding noise).
void expect_tiny(const DevicePair& p, double bound, const char* what) {
  const std::vector<double> a = p.gpu_values(), b = p.cpu_values();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i]) <= bound && std::fabs(b[i]) <= bound)) {
      ADD_FAILURE() << what << ": element " << i << " gpu " << a[i] << " cpu " << b[i];
      return;
    }
}

// Forward and backward of one shape, every output compared. The backward gets the CPU's o and
// lse on both sides, so it is compared on identical inputs.
void check_attention(const Shape& s, uint64_t seed) {
  SCOPED_TRACE(s.str());
  const DType f = DType::F32;
  DevicePair q = random_pair(f, {s.B, s.T, s.Hq, s.d}, seed);
  DevicePair k = random_pair(f, {s.B, s.T, s.Hk, s.d}, seed + 1);
  DevicePair v = random_pair(f, {s.B, s.T, s.Hk, s.d}, seed + 2);
  DevicePair o(f, {s.B, s.T, s.Hq, s.d}), lse(f, {s.B, s.Hq, s.T});
  ops::attention_forward(o.cpu, lse.cpu, q.cpu, k.cpu, v.cpu, s.W);
  ops::attention_forward(o.gpu, lse.gpu, q.gpu, k.gpu, v.gpu, s.W);
  expect_nmse(o, kGpuF32Nmse, "o");
  expect_nmse(lse, kGpuF32Nmse, "lse");

  o.upload();
  lse.upload();
  DevicePair dout = random_pair(f, {s.B, s.T, s.Hq, s.d}, seed + 3);
  // Prefilled with garbage: the backward overwrites.
  DevicePair dq = random_pair(f, {s.B, s.T, s.Hq, s.d}, seed + 4, 5.0);
  DevicePair dk = random_pair(f, {s.B, s.T, s.Hk, s.d}, seed + 5, 5.0);
  DevicePair dv = random_pair(f, {s.B, s.T, s.Hk, s.d}, seed + 6, 5.0);
  ops::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, q.cpu, k.cpu, v.cpu, o.cpu, lse.cpu,
                          s.W);
  ops::attention_backward(dq.gpu, dk.gpu, dv.gpu, dout.gpu, q.gpu, k.gpu, v.gpu, o.gpu, lse.gpu,
                          s.W);
  if (s.T == 1 || s.W == 1) {
    // One key per query: P = 1 and dS = dP − Δ = 0, so dq and dk are rounding noise on both sides.
    expect_tiny(dq, 1e-4, "dq");
    expect_tiny(dk, 1e-4, "dk");
  } else {
    expect_nmse(dq, kGpuF32Nmse, "dq");
    expect_nmse(dk, kGpuF32Nmse, "dk");
  }
  expect_nmse(dv, kGpuF32Nmse, "dv");
}

TEST(GpuAttention, ForwardBackwardOddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 100;
  for (int64_t T : odd_sizes())
    for (int64_t d : {4, 8, 16, 128})
      for (int64_t G : {1, 4})
        for (int64_t B : {1, 2}) {
          check_attention({B, T, 2 * G, 2, d}, seed);
          seed += 10;
        }
}

TEST(GpuAttention, OtherHeadSizes) {
  ZAYA_REQUIRE_GPU();
  // Every padded head size (16, 32, 64, 128, 256) with d below and at it.
  uint64_t seed = 2000;
  for (int64_t d : {24, 32, 48, 64, 96, 200, 256}) {
    check_attention({1, 65, 4, 2, d}, seed);
    seed += 10;
  }
}

TEST(GpuAttention, Zaya1BaseShape) {
  ZAYA_REQUIRE_GPU();
  check_attention({1, 512, 8, 2, 128}, 3000);
}

// ZAYA_GPU_ATTENTION=gemm: the same checks through GEMMs over score blocks.
TEST(GpuAttention, GemmPathOddSizesAndZaya1BaseShape) {
  ZAYA_REQUIRE_GPU();
  const ScopedEnv gemm("ZAYA_GPU_ATTENTION", "gemm");
  uint64_t seed = 5000;
  for (int64_t T : odd_sizes())
    for (int64_t d : {4, 16, 128})
      for (int64_t G : {1, 4}) {
        check_attention({2, T, 2 * G, 2, d}, seed);
        seed += 10;
      }
  check_attention({1, 512, 8, 2, 128}, 6000);
}

// 8200 positions: score blocks of 2^26 / 8200 = 8184 query rows, so two blocks per head.
TEST(GpuAttention, GemmPathInTwoScoreBlocks) {
  ZAYA_REQUIRE_GPU();
  const ScopedEnv gemm("ZAYA_GPU_ATTENTION", "gemm");
  check_attention({1, 8200, 1, 1, 4}, 7000);
}

TEST(GpuAttention, UnknownPathIsAnError) {
  ZAYA_REQUIRE_GPU();
  const ScopedEnv bogus("ZAYA_GPU_ATTENTION", "fastest");
  DevicePair q = random_pair(DType::F32, {1, 3, 1, 4}, 1);
  DevicePair o(DType::F32, {1, 3, 1, 4}), lse(DType::F32, {1, 1, 3});
  EXPECT_THROW(ops::attention_forward(o.gpu, lse.gpu, q.gpu, q.gpu, q.gpu), Error);
}

// attention_cached_forward: L new queries at the end of a cache of S positions.
void check_cached(int64_t L, int64_t S, int64_t Hq, int64_t Hk, int64_t d, uint64_t seed,
                  int64_t W = 0) {
  SCOPED_TRACE("L" + std::to_string(L) + " S" + std::to_string(S) + " Hq" + std::to_string(Hq) +
               " Hk" + std::to_string(Hk) + " d" + std::to_string(d) + " W" + std::to_string(W));
  const DType f = DType::F32;
  DevicePair q = random_pair(f, {L, Hq, d}, seed);
  DevicePair k = random_pair(f, {S, Hk, d}, seed + 1);
  DevicePair v = random_pair(f, {S, Hk, d}, seed + 2);
  DevicePair o = random_pair(f, {L, Hq, d}, seed + 3, 5.0);  // overwritten
  ops::attention_cached_forward(o.cpu, q.cpu, k.cpu, v.cpu, W);
  ops::attention_cached_forward(o.gpu, q.gpu, k.gpu, v.gpu, W);
  expect_nmse(o, kGpuF32Nmse, "o");
  if (W == 0 || L + W - 1 >= S) return;
  // A ring cache holds only the positions the queries' windows reach, S − L − W + 1 … S − 1, in
  // order: the same result as the whole cache, on the GPU.
  const int64_t keep = L + W - 1, row_bytes = Hk * d * int64_t(sizeof(float));
  auto tail = [&](const DevicePair& p) {
    Tensor t(nullptr, f, {keep, Hk, d});
    t.device = Device::Gpu;
    t.data = static_cast<char*>(p.gpu.data) + (S - keep) * row_bytes;
    return t;
  };
  DevicePair ring(f, {L, Hq, d});
  ops::attention_cached_forward(ring.gpu, q.gpu, tail(k), tail(v), W);
  const std::vector<double> a = ring.gpu_values(), b = o.gpu_values();
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) err += (a[i] - b[i]) * (a[i] - b[i]), ref += b[i] * b[i];
  EXPECT_LE(err, kGpuF32Nmse * ref) << "ring cache of " << keep << " positions";
}

TEST(GpuAttention, CachedForward) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 4000;
  for (int64_t L : {1, 3, 17, 65})
    for (int64_t S : {int64_t(0), int64_t(1), int64_t(256), int64_t(257), int64_t(1100)})
      for (int64_t d : {4, 16, 128})
        for (int64_t G : {1, 4}) {
          check_cached(L, L + S, 2 * G, 2, d, seed);
          seed += 10;
        }
}

TEST(GpuAttention, CachedLongDecode) {
  ZAYA_REQUIRE_GPU();
  // A long decode cache in the ZAYA1-base shape.
  check_cached(1, 4097, 8, 2, 128, 5000);
  check_cached(3, 2050, 8, 2, 128, 5010);
}

}  // namespace

namespace {

// Windowed forward and backward, flash path: W = 1, inside a 16-row tile, at and around the key
// tile (32, 64), smaller and larger than T; odd T; G in {1, 4}; head sizes padded and not.
TEST(GpuAttention, WindowedOddSizes) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 8000;
  for (int64_t T : {1, 7, 33, 130})
    for (int64_t W : {1, 5, 31, 64, 65, 200})
      for (int64_t G : {1, 4}) {
        check_attention({1 + (W % 2), T, 2 * G, 2, W < 64 ? 16 : 24, W}, seed);
        seed += 10;
      }
  check_attention({1, 257, 8, 2, 128, 100}, seed);  // ZAYA1-base's heads, several skipped tiles
}

// The GEMM path's windowed score blocks: the same windows, and blocks of max(256, W) rows, so
// T = 600 spans several blocks whose keys start inside the sequence.
TEST(GpuAttention, WindowedGemmPath) {
  ZAYA_REQUIRE_GPU();
  const ScopedEnv gemm("ZAYA_GPU_ATTENTION", "gemm");
  uint64_t seed = 9000;
  for (int64_t T : {7, 33, 130})
    for (int64_t W : {1, 5, 64, 200})
      for (int64_t G : {1, 4}) {
        check_attention({2, T, 2 * G, 2, 16, W}, seed);
        seed += 10;
      }
  for (int64_t W : {1, 17, 300}) {
    check_attention({1, 600, 2, 1, 8, W}, seed);
    seed += 10;
  }
}

// W ≥ T is the causal mask: bit-identical to the unwindowed call on both paths.
TEST(GpuAttention, WindowCoveringEverythingIsCausal) {
  ZAYA_REQUIRE_GPU();
  for (const char* path : {"flash", "gemm"}) {
    const ScopedEnv env("ZAYA_GPU_ATTENTION", path);
    const DType f = DType::F32;
    const int64_t B = 1, T = 45, Hq = 4, Hk = 2, d = 16;
    DevicePair q = random_pair(f, {B, T, Hq, d}, 11), k = random_pair(f, {B, T, Hk, d}, 12);
    DevicePair v = random_pair(f, {B, T, Hk, d}, 13);
    DevicePair o(f, {B, T, Hq, d}), lse(f, {B, Hq, T}), o2(f, {B, T, Hq, d}), lse2(f, {B, Hq, T});
    ops::attention_forward(o.gpu, lse.gpu, q.gpu, k.gpu, v.gpu, 0);
    ops::attention_forward(o2.gpu, lse2.gpu, q.gpu, k.gpu, v.gpu, T);
    EXPECT_EQ(o.gpu_values(), o2.gpu_values()) << path;
    EXPECT_EQ(lse.gpu_values(), lse2.gpu_values()) << path;
  }
}

// The cached op with a window: decode (L ≤ 64, chunks from each query's window start) and the
// flash path (L > 64), windows inside one chunk, across chunks and beyond the cache; a ring cache
// of the window's positions gives the same output.
TEST(GpuAttention, CachedWindowed) {
  ZAYA_REQUIRE_GPU();
  uint64_t seed = 10000;
  for (int64_t L : {1, 3, 65})
    for (int64_t S : {int64_t(0), int64_t(300), int64_t(700)})
      for (int64_t W : {1, 7, 256, 300, 2000})
        for (int64_t G : {1, 4}) {
          check_cached(L, L + S, 2 * G, 2, 16, seed, W);
          seed += 10;
        }
  check_cached(1, 4097, 8, 2, 128, seed, 4097 - 1024);  // ZAYA1's heads, a long windowed decode
}

}  // namespace
