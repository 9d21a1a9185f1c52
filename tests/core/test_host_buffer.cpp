// Host buffers (core/host_buffer.h): whole pages, zeroed, movable.
#include "core/host_buffer.h"
#include "test_util.h"

using namespace zaya;

TEST(HostBuffer, WholePagesZeroedAndMovable) {
  HostBuffer empty;
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  HostBuffer small(100, /*pin=*/true, "test memory");
  EXPECT_EQ(small.size(), 4096u);  // whole 4 KiB pages below 2 MiB
  if (!gpu::available()) {
    EXPECT_FALSE(small.pinned());  // no device to lock it for
  }
  for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(small.data()[i], 0) << i;
  HostBuffer big((size_t(2) << 20) + 1, false, "test memory");
  EXPECT_EQ(big.size(), size_t(4) << 20);  // whole 2 MiB pages from 2 MiB up
  small.data()[5] = 42;
  char* p = small.data();
  HostBuffer moved(std::move(small));
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.data()[5], 42);
  EXPECT_EQ(small.data(), nullptr);
  moved = std::move(big);  // the old memory goes with `big`
  EXPECT_EQ(moved.size(), size_t(4) << 20);
}
