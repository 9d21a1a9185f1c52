// The manifest (manifest.h): a truncated or missing file is detected, naming it.
#include <gtest/gtest.h>

#include "checkpoint/checkpoint_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using namespace zaya::test;

TEST(Checkpoint, TruncatedOrMissingFileIsDetected) {
  ScratchDir dir;
  Model m = tiny_model(1);
  OptState opt(2);
  const std::string path = save_checkpoint(dir.path, 1, m, make_data(1, opt), 0);
  fs::resize_file(path + "/model/model.safetensors", 100);
  EXPECT_NE(verify_checkpoint(path).find("model.safetensors"), std::string::npos);
  fs::remove(path + "/model/model.safetensors");
  EXPECT_NE(verify_checkpoint(path).find("missing"), std::string::npos);
  std::ofstream(path + "/manifest.json") << "{ not json";
  EXPECT_NE(verify_checkpoint(path).find("manifest.json"), std::string::npos);
}
}  // namespace
}  // namespace zaya
