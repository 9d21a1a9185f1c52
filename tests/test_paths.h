// Where tests find their data and the zaya binary: compile-time paths into the source and build
// trees (tests/CMakeLists.txt: ZAYA_TEST_FIXTURES, ZAYA_BINARY), which the environment overrides for a
// test executable that runs away from them (the GPU bundle of scripts/bundle_gpu.sh):
//   ZAYA_TEST_FIXTURES_DIR  a copy of tests/fixtures    ZAYA_BINARY_PATH  a zaya binary
// After this header, ZAYA_TEST_FIXTURES and ZAYA_BINARY are those run-time values (const char*), so
// every `std::string(ZAYA_TEST_FIXTURES) + …`, `fs::path(ZAYA_TEST_FIXTURES)` and `<< ZAYA_BINARY` reads
// them unchanged. Included by test_util.h and cli_util.h.
#pragma once
#include <cstdlib>

namespace zaya::test {

// $name when set and non-empty, else fallback.
inline const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace zaya::test

// (The function bodies below expand the compile-time values: they are read before the #undef.)
#ifdef ZAYA_TEST_FIXTURES
namespace zaya::test {
inline const char* test_fixtures_dir() {
  static const char* const dir = env_or("ZAYA_TEST_FIXTURES_DIR", ZAYA_TEST_FIXTURES);
  return dir;
}
}  // namespace zaya::test
#undef ZAYA_TEST_FIXTURES
#define ZAYA_TEST_FIXTURES (::zaya::test::test_fixtures_dir())
#endif

#ifdef ZAYA_BINARY
namespace zaya::test {
inline const char* zaya_binary() {
  static const char* const path = env_or("ZAYA_BINARY_PATH", ZAYA_BINARY);
  return path;
}
}  // namespace zaya::test
#undef ZAYA_BINARY
#define ZAYA_BINARY (::zaya::test::zaya_binary())
#endif
