// Arenas (core/arena.h): aligned, zeroed, bounded allocations.
#include "core/arena.h"
#include "test_util.h"

using namespace zaya;

TEST(Arena, AllocationsAreAlignedZeroedAndBounded) {
  Arena arena(1024);
  Tensor a = arena.alloc(DType::F32, {3});
  Tensor b = arena.alloc(DType::F64, {5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 64, 0u);
  EXPECT_EQ(arena.used(), 128u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.ptr<double>()[i], 0.0);
  EXPECT_DEATH(arena.alloc(DType::F32, {1000}), "arena overflow");
}
