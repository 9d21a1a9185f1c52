// Shared test helpers: the tolerance table (docs/testing.md), random fills, closeness checks, a
// central-difference numerical gradient in double, and an environment variable set for a scope.
#pragma once
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/assert.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "test_paths.h"

namespace zaya::test {

// An environment variable set (or, with nullptr, unset) for a scope; the old value comes back at
// its end.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  void set(const char* value) {
    if (value)
      setenv(name_.c_str(), value, 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// ---- tolerances (one table for the whole suite) ----
inline constexpr double kOpAbs = 1e-5, kOpRel = 1e-5;  // CPU f32 op vs double reference
inline constexpr double kGradRelDouble = 1e-6;         // backward vs numerical, double
inline constexpr double kGradRelFloat = 1e-3;          // backward vs numerical, float
inline constexpr double kModelLogitRel = 1e-4;         // tiny model logits vs twin (of max |logit|)
inline constexpr double kModelLossAbs = 1e-5;          // tiny model loss vs twin
inline constexpr double kModelGradRelL2 = 1e-3;        // tiny model grads vs twin, relative L2
inline constexpr double kNumericalStep = 1e-6;         // central-difference step (double)

// Deterministic normal fill with a per-test seed.
template <class T>
void fill_normal(std::vector<T>& v, uint64_t seed, double scale = 1.0, double mean = 0.0) {
  CounterRng rng{seed, 0};
  for (size_t i = 0; i < v.size(); ++i) v[i] = T(mean + scale * rng.normal(i));
}
template <class T>
std::vector<T> randn(size_t n, uint64_t seed, double scale = 1.0, double mean = 0.0) {
  std::vector<T> v(n);
  fill_normal(v, seed, scale, mean);
  return v;
}

// Element-wise conversion between vector types.
template <class T, class U>
std::vector<T> cast(const std::vector<U>& v) {
  return std::vector<T>(v.begin(), v.end());
}
// Normal values exactly representable in f32, held as double: the f32 op and the double
// reference see the same input.
inline std::vector<double> randn_f32(size_t n, uint64_t seed, double scale = 1.0,
                                     double mean = 0.0) {
  return cast<double>(randn<float>(n, seed, scale, mean));
}

// Max over i of |a-b| / (abs + rel·|b|) must be ≤ 1.
template <class A, class B>
void expect_close(const A* a, const B* b, size_t n, double abs_tol, double rel_tol,
                  const char* what = "") {
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < n; ++i) {
    double diff = std::fabs(double(a[i]) - double(b[i]));
    double ratio = diff / (abs_tol + rel_tol * std::fabs(double(b[i])));
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;  // NaN-safe
  }
  EXPECT_LE(worst_ratio, 1.0) << what << ": element " << worst << " got " << double(a[worst])
                              << " want " << double(b[worst]);
}
template <class A, class B>
void expect_close(const std::vector<A>& a, const std::vector<B>& b, double abs_tol, double rel_tol,
                  const char* what = "") {
  ASSERT_EQ(a.size(), b.size()) << what;
  expect_close(a.data(), b.data(), a.size(), abs_tol, rel_tol, what);
}

// ‖a − b‖₂ / max(‖b‖₂, tiny).
template <class A, class B>
double rel_l2(const A* a, const B* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// Numerical gradient of f with respect to x[0..n) by central differences (x is restored).
inline std::vector<double> numerical_grad(const std::function<double()>& f, double* x, size_t n,
                                          double step = kNumericalStep) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) {
    double keep = x[i];
    x[i] = keep + step;
    double up = f();
    x[i] = keep - step;
    double down = f();
    x[i] = keep;
    g[i] = (up - down) / (2 * step);
  }
  return g;
}

// Checks an analytic gradient against the numerical one: relative L2 ≤ tol.
inline void expect_grad_close(const std::vector<double>& analytic,
                              const std::vector<double>& numerical, double tol,
                              const char* what = "") {
  ASSERT_EQ(analytic.size(), numerical.size()) << what;
  double r = rel_l2(analytic.data(), numerical.data(), analytic.size());
  EXPECT_LE(r, tol) << what << ": relative L2 error " << r;
}

// Σ a_i b_i in double: the scalar loss "⟨dy, y⟩" used to turn a backward into a gradient check.
template <class A, class B>
double dot(const std::vector<A>& a, const std::vector<B>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// A fresh directory under the test temp dir (unique even across parallel test processes),
// removed afterwards.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::path(testing::TempDir()) / "zaya_XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path = tmpl;
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Runs f, which must throw zaya::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a zaya::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& part : parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nmissing: " << part;
  }
}

// The odd sizes every op is exercised on (docs/adding-an-op.md).
inline const std::vector<int64_t> kOddSizes = {1, 7, 31, 33, 257};

// The message of the zaya::Error that f throws (a test failure if it throws none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a zaya::Error";
  return "";
}

inline void expect_contains(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nmissing: " << part;
}

}  // namespace zaya::test
