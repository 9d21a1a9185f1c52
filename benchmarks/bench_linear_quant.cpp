// linear_forward with block-quantized and F16 weights (ops/cpu/linear_quant.cpp, quant/dot.h):
// the decode GEMV (N = 1) against this machine's read bandwidth, and the prefill GEMM (N = 512)
// against OpenBLAS's sgemm on f32 weights of the same shape, all measured in the same run on all
// OpenMP threads.
// usage: bench_linear_quant [rounds=5] [buffer_mib=256] [types=all|q8_0,q4_k,…] [OxI …]
// Shapes O×I: the first is the GEMV's, each is a GEMM's; default 4096x2048 2048x2048 (an expert's
// fc1 and an attention projection of ZAYA1-8B).
// Built as build/<dir>/benchmarks/bench_linear_quant.
// GEMV: the weights are cycled through enough copies that each timed pass streams ≥ buffer_mib
// from memory; "GB/s" counts weight bytes read per second (the quantized bytes: what decode must
// stream), compared with the read-only bandwidth probe (perf/bandwidth.h). GEMM: "GFLOP/s" counts
// the model's 2·N·O·I flops per second (the same count for sgemm), so the ratio is the speed-up of
// the quantized layer over the f32 one. Every figure is the median over the rounds, which
// interleave all measurements (on a shared machine a quiet moment then benefits all of them).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/ops.h"
#include "perf/bandwidth.h"
#include "quant/dot.h"
#include "quant/formats.h"

using namespace zaya;

namespace {

struct Shape {
  int64_t O, I;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds per call of y[N,O] = x[N,I]·wᵀ over the weight copies (one pass).
double time_linear(std::vector<std::vector<uint8_t>>& copies, DType t, const Shape& s, int64_t N,
                   std::vector<float>& x, std::vector<float>& y) {
  const double t0 = omp_get_wtime();
  for (auto& w : copies)
    ops::linear_forward(Tensor(y.data(), {N, s.O}), Tensor(x.data(), {N, s.I}),
                        Tensor((void*)w.data(), t, {s.O, s.I}), Tensor{});
  return (omp_get_wtime() - t0) / double(copies.size());
}

double time_sgemm(const std::vector<float>& w, const Shape& s, int64_t N, std::vector<float>& x,
                  std::vector<float>& y) {
  const double t0 = omp_get_wtime();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(N), int(s.O), int(s.I), 1.0f, x.data(),
              int(s.I), w.data(), int(s.I), 0.0f, y.data(), int(s.O));
  return omp_get_wtime() - t0;
}

DType parse_type(const std::string& s) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                  DType::IQ4_XS, DType::F16, DType::BF16}) {
    std::string n(dtype_name(t));
    for (auto& c : n) c = char(std::tolower(c));
    if (n == s) return t;
  }
  std::fprintf(stderr, "bench_linear_quant: unknown type %s\n", s.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const long long buffer_mib = argc > 2 ? std::atoll(argv[2]) : 256;
  std::vector<DType> types = {DType::Q8_0, DType::Q4_0, DType::Q5_0,   DType::Q4_K,
                              DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::F16};
  if (argc > 3 && std::string(argv[3]) != "all") {
    types.clear();
    const std::string list = argv[3];
    for (size_t p = 0; p <= list.size();) {
      const size_t q = std::min(list.find(',', p), list.size());
      types.push_back(parse_type(list.substr(p, q - p)));
      p = q + 1;
    }
  }
  std::vector<Shape> shapes = {{4096, 2048}, {2048, 2048}};
  if (argc > 4) shapes.clear();
  for (int a = 4; a < argc; ++a) {
    long long o = 0, i = 0;
    if (std::sscanf(argv[a], "%lldx%lld", &o, &i) != 2 || o < 1 || i < 256 || i % 256) {
      std::fprintf(stderr, "bench_linear_quant: shape %s is not OxI, I a multiple of 256\n",
                   argv[a]);
      return 2;
    }
    shapes.push_back({o, i});
  }
  if (rounds < 1 || buffer_mib < 1) {
    std::fprintf(stderr,
                 "usage: bench_linear_quant [rounds ≥ 1] [buffer_mib ≥ 1] [types] [OxI …]\n");
    return 2;
  }
  const size_t buffer = size_t(buffer_mib) << 20;
  const Shape gemv = shapes[0];
  const int64_t kPrefill = 512;
  int64_t max_oi = 0, max_o = 0, max_i = 0;
  for (const Shape& g : shapes) {
    max_oi = std::max(max_oi, g.O * g.I);
    max_o = std::max(max_o, g.O);
    max_i = std::max(max_i, g.I);
  }
  std::vector<float> src(static_cast<size_t>(max_oi));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = float((i * 2654435761u) % 2001) * 1e-3f - 1.0f;  // spread values in [−1, 1]
  std::vector<float> x(size_t(kPrefill * max_i)), y(size_t(kPrefill * max_o));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 40503u) % 1001) * 2e-3f - 1.0f;

  std::printf("threads=%d buffer=%zu MiB rounds=%d isa=%s\n", omp_get_max_threads(), buffer >> 20,
              rounds, std::string(quant::isa_name(quant::active_isa())).c_str());
  std::vector<double> reads;
  for (int r = 0; r < rounds; ++r) reads.push_back(measure_read_bandwidth(buffer, 2));
  std::vector<std::vector<double>> sg(shapes.size());
  for (int r = 0; r < rounds + 1; ++r)
    for (size_t g = 0; g < shapes.size(); ++g) {
      const double t = time_sgemm(src, shapes[g], kPrefill, x, y);             // src as f32 weights
      if (r) sg[g].push_back(2.0 * kPrefill * shapes[g].O * shapes[g].I / t);  // r = 0: warm-up
    }
  const double read = median(reads);
  std::printf("read bandwidth (read-only, median) %7.2f GB/s\n", read * 1e-9);
  for (size_t g = 0; g < shapes.size(); ++g)
    std::printf("sgemm N=%lld [%lld,%lld] (OpenBLAS, f32 weights) %7.1f GFLOP/s\n",
                (long long)kPrefill, (long long)shapes[g].O, (long long)shapes[g].I,
                median(sg[g]) * 1e-9);
  std::printf("GEMV N=1 [%lld,%lld]; GEMM N=%lld: GFLOP/s and the ratio to sgemm, per shape\n",
              (long long)gemv.O, (long long)gemv.I, (long long)kPrefill);
  std::printf("%-7s %10s %9s %8s %10s", "type", "GEMV us", "GB/s", "/read", "cached");
  for (const Shape& g : shapes)
    std::printf(" | %5lldx%-5lld %7s", (long long)g.O, (long long)g.I, "/sgemm");
  std::printf("\n");
  for (DType t : types) {
    // Every shape's weights are the first rows of the largest (rows are independent); the GEMV
    // cycles through copies of its shape's.
    std::vector<uint8_t> big(dtype_bytes(t, max_oi));
    for (const Shape& g : shapes)
      if (g.O * g.I == max_oi) {
        quant::quantize_matrix(t, src.data(), big.data(), g.O, g.I);
        break;
      }
    const size_t bytes = dtype_bytes(t, gemv.O * gemv.I);
    std::vector<std::vector<uint8_t>> copies(std::max<size_t>(1, (buffer + bytes - 1) / bytes));
    for (auto& c : copies) c.assign(big.begin(), big.begin() + ptrdiff_t(bytes));
    std::vector<std::vector<std::vector<uint8_t>>> gw(shapes.size());
    for (size_t g = 0; g < shapes.size(); ++g)
      gw[g].assign(
          1, std::vector<uint8_t>(
                 big.begin(), big.begin() + ptrdiff_t(dtype_bytes(t, shapes[g].O * shapes[g].I))));
    // The same GEMV on ~384 KB of rows, repeated: the weights stay in the caches, so its rate is
    // the kernel's compute ceiling ("cached" GB/s); above the read bandwidth, the GEMV is bound
    // by memory, not by arithmetic.
    const Shape small = {std::max<int64_t>(8, int64_t((384 << 10) / dtype_bytes(t, gemv.I))),
                         gemv.I};
    std::vector<uint8_t> cached(big.begin(),
                                big.begin() + ptrdiff_t(dtype_bytes(t, small.O * small.I)));
    std::vector<double> tv, tc;
    std::vector<std::vector<double>> gf(shapes.size());
    time_linear(copies, t, gemv, 1, x, y);  // warm-up
    for (int r = 0; r < rounds; ++r) {
      tv.push_back(time_linear(copies, t, gemv, 1, x, y));
      const double t0 = omp_get_wtime();
      for (int k = 0; k < 64; ++k)
        ops::linear_forward(Tensor(y.data(), {1, small.O}), Tensor(x.data(), {1, small.I}),
                            Tensor((void*)cached.data(), t, {small.O, small.I}), Tensor{});
      tc.push_back((omp_get_wtime() - t0) / 64);
      for (size_t g = 0; g < shapes.size(); ++g)
        gf[g].push_back(2.0 * kPrefill * shapes[g].O * shapes[g].I /
                        time_linear(gw[g], t, shapes[g], kPrefill, x, y));
    }
    const double tm = median(tv), gbs = double(bytes) / tm;
    const std::string name(dtype_name(t));
    std::printf("%-7s %10.1f %9.2f %7.1f%% %10.2f", name.c_str(), tm * 1e6, gbs * 1e-9,
                100 * gbs / read, double(cached.size()) / median(tc) * 1e-9);
    for (size_t g = 0; g < shapes.size(); ++g)
      std::printf(" | %11.1f %6.2fx", median(gf[g]) * 1e-9, median(gf[g]) / median(sg[g]));
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
