// The host→device path of a training step without host synchronisation (label gpu): asynchronous
// copies with their Fence, the trainer's page-locked token slots taking turns, and the routing
// counts summed on the device until to_host().
#include <set>

#include "gpu_test_util.h"
#include "io/zaya_config.h"
#include "model/activations.h"
#include "train/balance.h"
#include "train/token_staging.h"

namespace zaya::test {
namespace {

TEST(GpuAsyncCopy, CopyLandsOnceTheFenceHasPassed) {
  ZAYA_REQUIRE_GPU();
  TokenStaging staging(Device::Gpu, 1000);  // page-locked host memory where the driver allows
  DevicePair d(DType::I32, {1000});
  const TokenStaging::Slot slot = staging.next();
  for (int i = 0; i < 1000; ++i) slot.inputs[i] = 3 * i + 1;
  device_copy_async(d.gpu, Tensor(slot.inputs, {1000}));
  staging.issued();
  staging.next();  // the other slot
  staging.next();  // this one again: waits for the copy's fence
  const std::vector<double> got = d.gpu_values();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[size_t(i)], 3 * i + 1) << i;
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
