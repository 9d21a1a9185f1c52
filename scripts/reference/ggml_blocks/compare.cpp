// Our quantizers (src/quant/formats.cpp) against GGML's reference quantizers on a larger input than
// the test fixture's: 256 rows of 4096 values, the four kinds of rows of ggml_blocks.c at seven
// scales. Prints, per block type, the relative RMS error of both, their ratio overall, the worst
// row's ratio, how many rows came out worse than GGML's, and the single-thread quantizing time of
// both. A development tool (compare.sh builds and runs it), not part of the build or CI.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "quant/formats.h"
extern "C" {
#include "ggml.h"
}

namespace {

uint64_t state = 0x636f6d7061726521ull;
double uniform01() {  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return double((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
double gaussian() {
  const double u = std::max(uniform01(), 1e-300), v = uniform01();
  return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
}

}  // namespace

int main() {
  using zaya::DType;
  struct Pair {
    DType ours;
    ggml_type theirs;
  };
  const Pair pairs[] = {{DType::Q8_0, GGML_TYPE_Q8_0},    {DType::Q4_0, GGML_TYPE_Q4_0},
                        {DType::Q5_0, GGML_TYPE_Q5_0},    {DType::Q4_K, GGML_TYPE_Q4_K},
                        {DType::Q5_K, GGML_TYPE_Q5_K},    {DType::Q6_K, GGML_TYPE_Q6_K},
                        {DType::IQ4_XS, GGML_TYPE_IQ4_XS}};
  const int rows = 256, cols = 4096;
  std::vector<float> x(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const double scale = 0.01 * (1 + r % 7);
    for (int c = 0; c < cols; ++c) {
      double v;
      switch (r % 4) {
        case 0:
          v = gaussian();
          break;
        case 1:
          v = 2 * uniform01() - 1 + 0.3;
          break;
        case 2:
          v = gaussian() * (uniform01() < 0.01 ? 20 : 1);
          break;
        default:
          v = gaussian() * std::exp(0.75 * gaussian());
          break;
      }
      x[size_t(r) * cols + c] = float(scale * v);
    }
  }
  std::printf("%-7s %11s %11s %7s %9s %10s %9s %9s\n", "type", "ours", "GGML's", "ratio",
              "worst row", "rows worse", "ours ms", "GGML ms");
  for (const Pair& p : pairs) {
    const size_t row_bytes = zaya::dtype_bytes(p.ours, cols);
    std::vector<uint8_t> a(row_bytes * rows), b(a.size());
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rows; ++r)
      zaya::quant::quantize_row(p.ours, x.data() + size_t(r) * cols, a.data() + r * row_bytes,
                                cols);
    const auto t1 = std::chrono::steady_clock::now();
    ggml_quantize_chunk(p.theirs, x.data(), b.data(), 0, rows, cols, nullptr);
    const auto t2 = std::chrono::steady_clock::now();
    std::vector<float> ya(x.size()), yb(x.size());
    zaya::quant::dequantize_matrix(p.ours, a.data(), ya.data(), rows, cols);
    zaya::quant::dequantize_matrix(p.ours, b.data(), yb.data(), rows, cols);
    double ea = 0, eb = 0, xx = 0, worst = 0;
    int worse = 0;
    for (int r = 0; r < rows; ++r) {
      double ra = 0, rb = 0;
      for (int c = 0; c < cols; ++c) {
        const size_t i = size_t(r) * cols + c;
        ra += (double(ya[i]) - x[i]) * (double(ya[i]) - x[i]);
        rb += (double(yb[i]) - x[i]) * (double(yb[i]) - x[i]);
        xx += double(x[i]) * x[i];
      }
      ea += ra;
      eb += rb;
      worst = std::max(worst, std::sqrt(ra / rb));
      worse += ra > rb;
    }
    using ms = std::chrono::duration<double, std::milli>;
    std::printf("%-7s %11.4e %11.4e %7.4f %9.4f %6d/%d %9.0f %9.0f\n",
                std::string(zaya::dtype_name(p.ours)).c_str(), std::sqrt(ea / xx),
                std::sqrt(eb / xx), std::sqrt(ea / eb), worst, worse, rows, ms(t1 - t0).count(),
                ms(t2 - t1).count());
  }
}
