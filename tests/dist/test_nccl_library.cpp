// The host-only parts of the NCCL group (CPU suite): loading a shared library at run time and the
// errors when it is missing (ZAYA_NCCL_LIB=/nonexistent) or lacks a symbol; make_group("nccl")
// in a build without a GPU backend; make_group_for's choice outside a launcher.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/assert.h"
#include "dist/nccl.h"

using namespace zaya;

namespace {

// The message of the zaya::Error `f` throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Sets (or, with nullptr, unsets) an environment variable for a scope, restoring the old value.
struct EnvVar {
  std::string name, old;
  bool had;
  EnvVar(const char* n, const char* value) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    value ? setenv(n, value, 1) : unsetenv(n);
  }
  ~EnvVar() { had ? setenv(name.c_str(), old.c_str(), 1) : unsetenv(name.c_str()); }
};

}  // namespace

TEST(NcclLibrary, AMissingLibraryNamesWhatWasTried) {
  const EnvVar env("ZAYA_NCCL_LIB", "/nonexistent/libnccl.so.2");
  const std::string e = error_of([] { dist::open_nccl_library(); });
  EXPECT_NE(e.find("cannot load the NCCL library (ZAYA_NCCL_LIB)"), std::string::npos) << e;
  EXPECT_NE(e.find("tried /nonexistent/libnccl.so.2 ("), std::string::npos) << e;
  EXPECT_NE(e.find("Point ZAYA_NCCL_LIB at libnccl.so.2"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
}

TEST(NcclLibrary, EveryCandidateIsNamedWithItsReason) {
  const std::string e = error_of([] {
    SharedLibrary::open_first({"/nonexistent/a.so", "libzaya-no-such-library.so.7"}, "the test lib",
                              "Install it.");
  });
  EXPECT_NE(e.find("cannot load the test lib: tried /nonexistent/a.so ("), std::string::npos) << e;
  EXPECT_NE(e.find("; libzaya-no-such-library.so.7 ("), std::string::npos) << e;
  EXPECT_NE(e.find("). Install it."), std::string::npos) << e;
}

TEST(NcclLibrary, SymbolsResolveAndAMissingOneIsNamed) {
  const SharedLibrary m =
      SharedLibrary::open_first({"/nonexistent/libm.so", "libm.so.6"}, "libm", "");
  EXPECT_EQ(m.path(), "libm.so.6");
  auto cosine = reinterpret_cast<double (*)(double)>(m.symbol("cos"));
  EXPECT_EQ(cosine(0.0), 1.0);
  const std::string e = error_of([&] { m.symbol("zaya_no_such_symbol"); });
  EXPECT_NE(e.find("libm (libm.so.6) has no symbol zaya_no_such_symbol"), std::string::npos) << e;
}

// Only builds without a GPU backend have this error to test (the GPU builds run the NCCL group in
// tests/integration/test_nccl_*_mpirun.cpp).
#if !defined(ZAYA_HAS_GPU_BACKEND)
TEST(NcclGroup, WithoutAGpuBackendItIsAClearError) {
  const std::string e = error_of([] { dist::make_group("nccl"); });
  EXPECT_NE(e.find("this build has no GPU backend, so no NCCL group"), std::string::npos) << e;
  EXPECT_NE(e.find("cmake --preset cuda"), std::string::npos) << e;
}
#endif

TEST(NcclGroup, OutsideALauncherEveryDeviceGetsTheSingleGroup) {
  // Outside a launcher even when this test runs under one: its variables unset for the scope.
  const EnvVar ompi("OMPI_COMM_WORLD_SIZE", nullptr), pmi("PMI_SIZE", nullptr),
      pmix("PMIX_RANK", nullptr);
  EXPECT_EQ(dist::make_group_for(Device::Cpu)->backend(), dist::Backend::Single);
  EXPECT_EQ(dist::make_group_for(Device::Gpu)->backend(), dist::Backend::Single);
}
