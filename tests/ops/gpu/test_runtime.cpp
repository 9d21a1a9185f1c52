// The host→device path of a training step without host synchronisation (label gpu): asynchronous
// copies with their Fence, the trainer's page-locked token slots taking turns, and the routing
// counts summed on the device until to_host().
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "gpu_test_util.h"
#include "io/zaya_config.h"
#include "model/activations.h"
#include "train/balance.h"
#include "train/token_staging.h"

namespace zaya::test {
namespace {

// Queues at least `ms` milliseconds of GPU work (elementwise passes over `mem`, a device buffer
// that must outlive them; their length and count calibrated here), so that what is issued next
// runs that much later.
void keep_the_gpu_busy(const Buffer& mem, double ms) {
  using clock = std::chrono::steady_clock;
  const int64_t kMax = int64_t(mem.size() / sizeof(float));
  const Tensor all = Tensor(static_cast<float*>(mem.data()), {kMax}).on(Device::Gpu);
  int64_t n = 4096;
  double pass_ms = 0;
  for (;; n *= 2) {
    gpu::synchronize();
    const auto t0 = clock::now();
    ops::scale(all.prefix({n}), 0.5);
    gpu::synchronize();
    pass_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (pass_ms >= ms / 4 || n == kMax) break;
  }
  const int passes = int(std::ceil(ms / std::max(pass_ms, 1e-3)));
  for (int k = 0; k < passes; ++k) ops::scale(all.prefix({n}), 0.5);
  std::printf("keeping the GPU busy: %d passes over %lld floats (%.3f ms each)\n", passes,
              static_cast<long long>(n), pass_ms);
}

// The host reuses a token slot as soon as next() hands it back, so the copy issued from it must
// have read it by then: next() waits for the slot's Fence. The copy is queued behind ~20 ms of GPU
// work, and the slot is overwritten the moment next() returns; only then is the device read back
// (a read-back waits for the stream, so reading before the overwrite could not tell a fence that
// waited from one that did not). A Fence whose wait() returns early lets the overwrite reach the
// device (on a GPU, from page-locked memory: pageable memory is staged when the copy is issued).
TEST(GpuAsyncCopy, CopyLandsOnceTheFenceHasPassed) {
  ZAYA_REQUIRE_GPU();
  constexpr int64_t n = 1 << 16;
  TokenStaging staging(Device::Gpu, n);  // page-locked host memory where the driver allows
  std::printf("token slots page-locked: %s\n", staging.pinned() ? "yes" : "no");
  DevicePair d(DType::I32, {n});
  const TokenStaging::Slot slot = staging.next();
  for (int32_t i = 0; i < n; ++i) slot.inputs[i] = 3 * i + 1;
  const Buffer busy(size_t(64) << 20, Device::Gpu);
  keep_the_gpu_busy(busy, 20);
  device_copy_async(d.gpu, Tensor(slot.inputs, {n}));
  staging.issued();
  staging.next();                                   // the other slot
  const TokenStaging::Slot again = staging.next();  // this one again: waits for the copy's fence
  ASSERT_EQ(again.inputs, slot.inputs);
  for (int32_t i = 0; i < n; ++i) again.inputs[i] = -7;  // the next micro-batch's tokens
  const std::vector<double> got = d.gpu_values();
  int64_t overwritten = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (got[size_t(i)] != double(3 * i + 1)) {
      ++overwritten;
      if (first < 0) first = i;
    }
  EXPECT_EQ(overwritten, 0) << overwritten << " of " << n
                            << " tokens reached the device after the host overwrote their slot "
                               "(first: element "
                            << first << " = " << (first < 0 ? 0 : got[size_t(first)])
                            << "): next() did not wait for the copy";
  gpu::Fence never_recorded;
  never_recorded.wait();  // returns at once
}

TEST(GpuAsyncCopy, TokenSlotsTakeTurns) {
  ZAYA_REQUIRE_GPU();
  TokenStaging s(Device::Gpu, 7);
  ASSERT_EQ(s.slots(), TokenStaging::kSlots);
  std::set<int32_t*> seen;
  for (int k = 0; k < 2 * TokenStaging::kSlots; ++k) {
    const TokenStaging::Slot slot = s.next();
    EXPECT_EQ(slot.targets, slot.inputs + 7);
    slot.inputs[0] = slot.targets[6] = k;
    s.issued();
    seen.insert(slot.inputs);
  }
  EXPECT_EQ(seen.size(), size_t(TokenStaging::kSlots));
}

// Two forward passes' choices counted on the device equal the CPU's counts after to_host(), and
// not before (add() leaves the host buffer alone).
TEST(GpuAsyncCopy, RoutingCountsComeToTheHostOnce) {
  ZAYA_REQUIRE_GPU();
  const ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
  Activations cpu(c, 2, 16), dev(c, 2, 16, Device::Gpu);
  RoutingCounts on_cpu(c), on_gpu(c, Device::Gpu);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const int64_t K = int64_t(on_cpu.layer(i).size());
    if (K == 0) continue;  // attention
    const Tensor ch = cpu.layers[size_t(i)].moe.choice.prefix({32});
    for (int64_t n = 0; n < 32; ++n) ch.ptr<int32_t>()[n] = int32_t((n * 7 + i) % K);
    device_copy(dev.layers[size_t(i)].moe.choice.prefix({32}), ch);
  }
  on_cpu.clear();
  on_gpu.clear();
  for (int k = 0; k < 2; ++k) {
    on_cpu.add(c, cpu);
    on_gpu.add(c, dev);
  }
  for (double v : on_gpu.flat()) EXPECT_EQ(v, 0.0);  // still on the device
  on_gpu.to_host();
  const std::vector<double> a(on_cpu.flat().begin(), on_cpu.flat().end()),
      b(on_gpu.flat().begin(), on_gpu.flat().end());
  EXPECT_EQ(a, b);
  double total = 0;
  for (double v : a) total += v;
  EXPECT_GT(total, 0.0);
}

}  // namespace
}  // namespace zaya::test
