// TokenStaging (train/token_staging.h) on the CPU: one slot of ordinary memory holding B·T inputs
// then B·T targets (the GPU's slots: tests/ops/gpu/test_runtime.cpp).
#include "test_util.h"
#include "train/token_staging.h"

using namespace zaya;

TEST(TokenStaging, OneUnpinnedSlotOnTheCpu) {
  TokenStaging s(Device::Cpu, 5);
  EXPECT_EQ(s.slots(), 1);
  EXPECT_FALSE(s.pinned());
  const TokenStaging::Slot a = s.next();
  EXPECT_EQ(a.targets, a.inputs + 5);
  for (int i = 0; i < 5; ++i) a.inputs[i] = a.targets[i] = i;
  s.issued();
  const TokenStaging::Slot b = s.next();
  EXPECT_EQ(b.inputs, a.inputs);  // the CPU's copies are done when the forward returns
  EXPECT_EQ(b.targets[4], 4);
}

TEST(TokenStagingDeathTest, IssuedBeforeNextAsserts) {
  TokenStaging s(Device::Cpu, 3);
  EXPECT_DEATH(s.issued(), "issued before next");
}
