// Fuzz target: a token shard (header, size, checksum, token range), opened with and without the
// payload scan; and the same bytes as a dataset manifest (dataset.json).
#include <filesystem>

#include "data/shards.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::input_file(data, size, "shard.bin");
  for (bool verify : {true, false})
    zaya::fuzz::expect_clean([&] {
      const zaya::ShardFile s = zaya::ShardFile::open(path, verify);
      uint64_t sum = 0;
      for (int64_t i = 0; i < s.size(); ++i) sum += s.tokens()[i];
      (void)sum;
    });
  const std::filesystem::path dir = std::filesystem::path(path).string() + "_dataset";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(path, dir / "dataset.json",
                             std::filesystem::copy_options::overwrite_existing);
  zaya::fuzz::expect_clean([&] { (void)zaya::read_manifest(dir.string()); });
  return 0;
}
