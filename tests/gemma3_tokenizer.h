// The real Gemma 3 tokenizer.json (ZAYA1's, 33 MB, not committed): where the tests find it and one
// loaded copy per test process. scripts/fetch_gemma3_tokenizer.sh puts it in
// build/tokenizer-cache (scripts/setup.sh runs it). Without it the tests that need it skip naming
// the script — not an allowed skip reason (tests/test_skips.h), so CI fails instead.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "test_paths.h"

namespace zaya::test {

// $ZAYA_GEMMA3_TOKENIZER, else $ZAYA_CACHE/gemma3/tokenizer.json, else the repository's
// build/tokenizer-cache/gemma3/tokenizer.json.
inline std::string gemma3_tokenizer_path() {
  if (const char* p = std::getenv("ZAYA_GEMMA3_TOKENIZER")) return p;
  if (const char* c = std::getenv("ZAYA_CACHE")) return std::string(c) + "/gemma3/tokenizer.json";
  return (std::filesystem::path(ZAYA_TEST_FIXTURES) /
          "../../build/tokenizer-cache/gemma3/tokenizer.json")
      .lexically_normal()
      .string();
}

// The skip message of a test that needs the Gemma 3 tokenizer and does not find it.
inline std::string gemma3_missing_message() {
  return "Gemma 3 tokenizer.json not found at " + gemma3_tokenizer_path() +
         "; run scripts/fetch_gemma3_tokenizer.sh (scripts/setup.sh does)";
}

// The tokenizer, loaded on first use; null when the file is missing.
inline const Tokenizer* gemma3_tokenizer() {
  static const std::optional<Tokenizer> tok = []() -> std::optional<Tokenizer> {
    if (!std::filesystem::exists(gemma3_tokenizer_path())) return std::nullopt;
    return Tokenizer::load(gemma3_tokenizer_path());
  }();
  return tok ? &*tok : nullptr;
}

// The documents of the Gemma 3 test corpus (committed: tests/fixtures/tokenizer/
// gemma3_corpus.jsonl, one JSON string a line): whitespace runs, specials, bytes, scripts, code.
inline std::vector<std::string> gemma3_corpus() {
  std::vector<std::string> docs;
  std::ifstream f(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/gemma3_corpus.jsonl");
  for (std::string line; std::getline(f, line);)
    docs.push_back(nlohmann::json::parse(line).get<std::string>());
  return docs;
}

}  // namespace zaya::test
