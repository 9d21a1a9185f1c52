// Fuzz target: a model config.json (parse, validate; a valid one is written back and re-read).
#include "fuzz_util.h"
#include "io/zaya_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::input_file(data, size, "config.json");
  zaya::fuzz::expect_clean([&] {
    const zaya::ZayaConfig c = zaya::load_config(path);
    if (!(zaya::config_from_json(zaya::config_to_json(c)) == c)) std::abort();  // round trip
  });
  return 0;
}
