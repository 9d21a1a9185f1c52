// ops/precision.h on the CPU: the words, fp32 only (BF16 is a clear error), the scope restores.
#include <gtest/gtest.h>

#include "ops/precision.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::ops;
using namespace zaya::test;

TEST(MatmulPrecision, WordsRoundTrip) {
  for (MatmulPrecision p : {MatmulPrecision::F32, MatmulPrecision::BF16})
    EXPECT_EQ(parse_matmul_precision(matmul_precision_name(p)), p);
  EXPECT_STREQ(matmul_precision_name(MatmulPrecision::BF16), "bf16");
  expect_error([] { parse_matmul_precision("fp16"); }, {"fp16", "fp32 or bf16"});
}

TEST(MatmulPrecision, TheCpuHasFp32Only) {
  EXPECT_EQ(matmul_precision(Device::Cpu), MatmulPrecision::F32);
  set_matmul_precision(Device::Cpu, MatmulPrecision::F32);
  expect_error([] { set_matmul_precision(Device::Cpu, MatmulPrecision::BF16); },
               {"bf16", "CPU", "fp32 only"});
  expect_error([] { MatmulPrecisionScope s(Device::Cpu, MatmulPrecision::BF16); }, {"fp32 only"});
  EXPECT_EQ(matmul_precision(Device::Cpu), MatmulPrecision::F32);
  {
    const MatmulPrecisionScope s(Device::Cpu, MatmulPrecision::F32);
    EXPECT_EQ(matmul_precision(Device::Cpu), MatmulPrecision::F32);
  }
}
