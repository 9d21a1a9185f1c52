// The PyTorch twin's committed model cases (tests/fixtures/model/<case>/: config.json,
// model.safetensors, tokens.txt, expected.safetensors), shared by the CPU and GPU model tests.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace zaya::test {

// The case names (directories holding expected.safetensors) of tests/fixtures/<folder>, sorted:
// "model", or "model_swa" for the cases with sliding-window layers.
inline std::vector<std::string> twin_cases(const char* folder = "model") {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  const fs::path root = fs::path(ZAYA_TEST_FIXTURES) / folder;
  if (fs::is_directory(root))
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && fs::exists(e.path() / "expected.safetensors"))
        names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline std::filesystem::path case_dir(const std::string& name) {
  return std::filesystem::path(ZAYA_TEST_FIXTURES) / "model" / name;
}

}  // namespace zaya::test
