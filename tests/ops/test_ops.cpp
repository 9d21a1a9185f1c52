// The device seam (ops/ops.cpp): a Gpu tensor in a CPU-only build reaches ops/gpu/no_gpu.cpp and
// fails with its clear error (ops and memory alike; in a GPU build, ZAYA_HAS_GPU_BACKEND, those
// cases skip, and GPU memory on a machine without a device is a zaya::Error instead), mixed
// devices are rejected before any backend runs, views keep their device, and Cpu tensors still
// compute.
#include <gtest/gtest.h>

#include "core/arena.h"
#include "ops/ops.h"
#include "test_skips.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::test;

namespace {

// A host vector labelled as GPU memory: no op may touch it (each must fail first).
Tensor on_gpu(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  Tensor t(v.data(), dims);
  t.device = Device::Gpu;
  return t;
}

const std::string kNoGpu = "this build has no GPU backend: configure with -DZAYA_GPU=CUDA or HIP";

// The no-GPU-backend errors exist only in a CPU-only build (a GPU build would run the kernels on
// these host vectors labelled as GPU memory).
#ifdef ZAYA_HAS_GPU_BACKEND
#define ZAYA_REQUIRE_CPU_ONLY_BUILD() ZAYA_SKIP(GpuPresent) << "this build has a GPU backend"
#else
#define ZAYA_REQUIRE_CPU_ONLY_BUILD() (void)0
#endif

}  // namespace

TEST(Dispatch, GpuTensorsGetTheNoGpuError) {
  ZAYA_REQUIRE_CPU_ONLY_BUILD();
  std::vector<float> x(6, 1.0f), y(6, 7.0f);
  expect_error(
      [&] {
        ops::gelu_forward(on_gpu(y, {2, 3}), on_gpu(x, {2, 3}));
      },
      {"gelu_forward", kNoGpu});
  std::vector<float> w(9, 0.5f);
  expect_error(
      [&] {
        ops::linear_forward(on_gpu(y, {2, 3}), on_gpu(x, {2, 3}), on_gpu(w, {3, 3}), {});
      },
      {"linear_forward", kNoGpu});
  for (float v : y) EXPECT_EQ(v, 7.0f);  // nothing was written
}

TEST(Dispatch, GpuMemoryGetsTheNoGpuError) {
  ZAYA_REQUIRE_CPU_ONLY_BUILD();
  expect_error([] { Buffer b(256, Device::Gpu); }, {"allocating GPU memory", kNoGpu});
  expect_error([] { Arena a(256, Device::Gpu); }, {kNoGpu});
  std::vector<float> host(4, 1.0f), dev(4);
  expect_error([&] { device_copy(on_gpu(dev, {4}), Tensor(host.data(), {4})); },
               {"copying GPU memory", kNoGpu});
  expect_error([&] { device_fill_zero(on_gpu(dev, {4})); }, {"clearing GPU memory", kNoGpu});
}

// Without a device (a CPU-only build, or a GPU build on a machine without a GPU), asking for GPU
// memory is a clear zaya::Error, and gpu::describe() says why there is none.
TEST(Dispatch, GpuMemoryWithoutADeviceIsAnError) {
  if (gpu::available()) ZAYA_SKIP(GpuPresent) << gpu::describe();
  EXPECT_FALSE(gpu::describe().empty());
  expect_error([] { Buffer b(256, Device::Gpu); }, {});
}

TEST(Dispatch, ViewsKeepTheDevice) {
  std::vector<float> v(12);
  const Tensor t = on_gpu(v, {4, 3});
  EXPECT_EQ(t.view({12}).device, Device::Gpu);
  EXPECT_EQ(t.prefix({2, 2}).device, Device::Gpu);
  EXPECT_EQ(t.rows(1, 3).device, Device::Gpu);
  Arena a(1024);
  EXPECT_EQ(a.device(), Device::Cpu);
  EXPECT_EQ(a.alloc(DType::F32, {3}).device, Device::Cpu);
  EXPECT_EQ(Tensor().device, Device::Cpu);
}

TEST(Dispatch, CpuTensorsStillCompute) {
  std::vector<float> x = {-1.0f, 0.0f, 2.0f}, y(3, 9.0f);
  ops::gelu_forward(Tensor(y.data(), {3}), Tensor(x.data(), {3}));
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 2.0 * 0.97724986805182, 1e-6);
  std::vector<float> src = {1, 2, 3, 4}, dst(4, 0.0f);
  device_copy(Tensor(dst.data(), {2, 2}), Tensor(src.data(), {4}));
  EXPECT_EQ(dst, src);
  device_fill_zero(Tensor(dst.data(), {4}).rows(1, 3));
  EXPECT_EQ(dst, (std::vector<float>{1, 0, 0, 4}));
}

using DispatchDeathTest = ::testing::Test;

TEST_F(DispatchDeathTest, MixedDevicesAreRejected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> x(6, 1.0f), y(6);
  // An undefined (absent) tensor has no device and does not count.
  EXPECT_DEATH(ops::gelu_forward(Tensor(y.data(), {2, 3}), on_gpu(x, {2, 3})),
               "gelu_forward: tensors on different devices \\(cpu and gpu\\)");
  std::vector<float> w(9);
  EXPECT_DEATH(
      ops::linear_forward(on_gpu(y, {2, 3}), on_gpu(x, {2, 3}), Tensor(w.data(), {3, 3}), {}),
      "linear_forward: tensors on different devices \\(gpu and cpu\\)");
}
