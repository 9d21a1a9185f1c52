// Fuzz target: a cluster file of `zaya plan` (TOML), parsed and checked (plan/cluster.h).
#include "fuzz_util.h"
#include "plan/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zaya::fuzz::expect_clean([&] { (void)zaya::parse_cluster(text, "cluster.toml"); });
  return 0;
}
