// Fuzz target: what `zaya supervise` reads that others write (resilience/): a rank's heartbeat
// record (hang_detector.h), the run directory's attempt line as a rank's fencing watchdog reads it
// (fence.h), and an mpirun hostfile an elastic restart derives from (elastic.h). None may crash or
// throw anything but a zaya::Error, whatever the bytes.
#include "fuzz_util.h"
#include "resilience/elastic.h"
#include "resilience/fence.h"
#include "resilience/hang_detector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zaya::fuzz::expect_clean([&] { (void)zaya::parse_heartbeat(text); });
  zaya::fuzz::expect_clean([&] {
    (void)zaya::fence::fence_reason(text, 2);
    (void)zaya::fence::recorded_attempt(text);
  });
  zaya::fuzz::expect_clean([&] {
    int removed = 0, kept = 0;
    (void)zaya::derive_hostfile(text, {{"zmh3", {"10.78.0.13"}}}, removed, kept);
  });
  return 0;
}
