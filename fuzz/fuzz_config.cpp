// Fuzz target: the JSON files of a model directory — config.json (parse, validate; a valid one is
// written back and re-read), and tokenizer_config.json and generation_config.json
// (io/model_extras.h) from the same bytes.
#include "fuzz_util.h"
#include "io/model_extras.h"
#include "io/zaya_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::input_file(data, size, "config.json");
  zaya::fuzz::expect_clean([&] {
    const zaya::ZayaConfig c = zaya::load_config(path);
    if (!(zaya::config_from_json(zaya::config_to_json(c)) == c)) std::abort();  // round trip
  });
  zaya::fuzz::expect_clean([&] {
    zaya::ModelExtras x;
    zaya::read_tokenizer_config(path, x);
    if (x.model_max_length < 0 || x.model_max_length >= zaya::kNoModelMaxLength) std::abort();
  });
  zaya::fuzz::expect_clean([&] {
    zaya::ModelExtras x;
    zaya::read_generation_config(path, x);
    for (int64_t id : x.eos_token_ids)
      if (id < 0) std::abort();
  });
  return 0;
}
