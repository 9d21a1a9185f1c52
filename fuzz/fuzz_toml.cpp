// Fuzz target: a training config (TOML), loaded and validated.
#include "fuzz_util.h"
#include "train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::input_file(data, size, "train.toml");
  zaya::fuzz::expect_clean([&] {
    const zaya::TrainConfig c = zaya::load_train_config(path);
    zaya::validate_train_config(c);
    (void)zaya::train_config_to_toml(c);
  });
  return 0;
}
