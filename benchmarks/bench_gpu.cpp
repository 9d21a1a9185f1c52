// GPU kernels against the device's own ceilings, measured in the same run, through the public op
// API on Device::Gpu tensors: the device copy bandwidth (device_copy GPU→GPU); rmsnorm_forward and
// the merge + RMSNorm, fused (merge_rmsnorm_forward) and unfused (residual_merge_forward then
// rmsnorm_forward), in GB/s against that copy; GEMM TFLOP/s at ZAYA1-base's shapes for our tiled
// kernel and cuBLASLt (ops/gpu/gemm.h), F32 and BF16, against the peak = the best cuBLASLt BF16
// rate on a square GEMM; attention forward and backward TFLOP/s; Muon's Newton–Schulz (5 steps)
// at ZAYA1-base's matrix shapes, symmetric (ops/gpu/syrk.h) against the same iteration through
// general GEMMs (cuBLASLt on NVIDIA), F32 and BF16 operands: both rates, their ratio (the
// target: ≥ 1.3x) and the results' deviations.
// usage: bench_gpu [--json FILE] [--reps N=9] [--tokens N=8192] [--rows N=65536] [--attn-batch B=1]
//                  [--only copy,norm,gemm,attention,muon]
// Built as build/<dir>/benchmarks/bench_gpu. Without a GPU (or in a build without a GPU backend) it
// says why and exits 0. Exit 1 when a measurement failed (its error is in the table and JSON).
//
// Timing: one warm-up call, one timed call to size a sample (enough calls for ≥ 2 ms), then the
// median over `reps` samples, each gpu::synchronize(), k calls, gpu::synchronize() on the host
// clock; a measurement gets at most ~3 s (fewer samples for slow calls, at least one).
// Bytes are the fewest each op must move (every input read once, every output written once; the
// copy counts read + written), so fused and unfused merge + norm share one byte count and their
// GB/s compare as speeds. The norms run on `rows` rows of 2048 (several times the L2: no cache
// hits between repeats). GEMM FLOPs 2·M·N·K (C[M,N] = A[M,K]·Bᵀ, B stored [N,K] as linear's w);
// attention counts the useful causal work as bench_attention does (forward 2, backward 5 products
// of 2·(T(T+1)/2)·d per batch row and query head). Inputs are random (never zeros).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/assert.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "ops/gpu/gemm.h"
#include "ops/ops.h"

using namespace zaya;

namespace {

struct Options {
  std::string json;
  int reps = 9;
  int64_t tokens = 8192, rows = 65536, attn_batch = 1;
  std::string only = "copy,norm,gemm,attention,muon";
};

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Median seconds per call of f (see the header for the method).
double time_median(const std::function<void()>& f, int reps, double budget_s = 3.0) {
  f();  // warm-up: module load, handles, allocator
  gpu::synchronize();
  double t0 = now_s();
  f();
  gpu::synchronize();
  const double one = std::max(now_s() - t0, 1e-7);
  if (one > budget_s / 2) return one;  // slow: that call is the one sample
  const int k = std::clamp(int(2e-3 / one), 1, 1000);
  const int samples = std::clamp(int(budget_s / (one * k)), 1, reps);
  std::vector<double> v;
  for (int s = 0; s < samples; ++s) {
    gpu::synchronize();
    t0 = now_s();
    for (int i = 0; i < k; ++i) f();
    gpu::synchronize();
    v.push_back((now_s() - t0) / k);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// 2^24 normal values (F32 and their BF16 roundings), made once: random() uploads slices of them.
struct HostRandom {
  static constexpr int64_t kN = int64_t(1) << 24;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  HostRandom() : f32(size_t(kN)), bf16(size_t(kN)) {
    const CounterRng rng{20261201, 11};
    for (int64_t i = 0; i < kN; ++i) {
      f32[size_t(i)] = float(rng.normal(uint64_t(i)));
      bf16[size_t(i)] = f32_to_bf16(f32[size_t(i)]);
    }
  }
  static const HostRandom& get() {
    static const HostRandom r;
    return r;
  }
};

// Device tensors of one benchmark, freed together.
struct GpuTensors {
  std::vector<Buffer> mem;
  Tensor make(DType dtype, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dtype, dims);
    mem.emplace_back(t.nbytes() + 64, Device::Gpu);
    t.data = mem.back().data();
    t.device = Device::Gpu;
    return t;
  }
  // Normal values (F32 or BF16): consecutive slices of HostRandom from an offset that depends
  // on `seed`; scaled (F32 vectors of the norms) on the host.
  Tensor random(DType dtype, std::initializer_list<int64_t> dims, uint64_t seed,
                double scale = 1.0) {
    Tensor t = make(dtype, dims);
    const HostRandom& r = HostRandom::get();
    const size_t esize = dtype_size(dtype);
    const void* host = dtype == DType::BF16 ? (const void*)r.bf16.data() : r.f32.data();
    int64_t from = int64_t(seed * 7919) % HostRandom::kN;
    if (scale != 1.0) {
      ZAYA_ASSERT(dtype == DType::F32 && t.numel() <= HostRandom::kN - from, "bench_gpu: scale");
      std::vector<float> v(r.f32.begin() + from, r.f32.begin() + from + t.numel());
      for (float& x : v) x = float(scale * x);
      device_copy(t, Tensor(v.data(), {t.numel()}));
      return t;
    }
    for (int64_t at = 0, n = t.numel(); at < n;) {
      const int64_t len = std::min(HostRandom::kN - from, n - at);
      Tensor dst((char*)t.data + size_t(at) * esize, dtype, {len});
      dst.device = Device::Gpu;
      device_copy(dst, Tensor((char*)host + size_t(from) * esize, dtype, {len}));
      at += len, from = 0;
    }
    return t;
  }
};

struct Row {
  std::string group, name, shape, engine, dtype, unit, reference;  // reference: copy or peak
  std::string error;
  double rate = 0, fraction = 0, fraction_f32 = 0;
  bool ok = false;
  Row(std::string g, std::string n, std::string s, std::string e, std::string d, std::string u,
      std::string r)
      : group(std::move(g)),
        name(std::move(n)),
        shape(std::move(s)),
        engine(std::move(e)),
        dtype(std::move(d)),
        unit(std::move(u)),
        reference(std::move(r)) {}
};

struct Report {
  std::vector<Row> rows;
  double copy_gbs = 0, peak_tflops = 0, f32_square_tflops = 0;
  std::string peak_source = "cuBLASLt BF16 square";
  std::vector<std::string> notes;  // printed after the table (the Newton–Schulz comparisons)
  nlohmann::json muon = nlohmann::json::array();
};

// Runs one measurement; a failure (an op that throws, a GPU error) becomes the row's error.
void measure(Report& rep, Row row, const std::function<double()>& run_and_rate) {
  try {
    row.rate = run_and_rate();
    row.ok = row.rate > 0;
    if (!row.ok && row.error.empty()) row.error = "not available";
  } catch (const std::exception& e) {
    row.error = e.what();
    std::replace(row.error.begin(), row.error.end(), '\n', ' ');
  }
  std::fprintf(stderr, "bench_gpu: %-10s %-34s %-8s %-5s %s\n", row.group.c_str(), row.name.c_str(),
               row.engine.c_str(), row.dtype.c_str(),
               row.ok ? (std::to_string(row.rate) + " " + row.unit).c_str() : row.error.c_str());
  rep.rows.push_back(row);
}

// Makes a benchmark's inputs; a failure (no memory, a GPU error) becomes the failed row `row`.
bool make_inputs(Report& rep, Row row, const std::function<void()>& make) {
  try {
    make();
    return true;
  } catch (const std::exception& e) {
    const std::string why = e.what();
    measure(rep, std::move(row), [&]() -> double { throw std::runtime_error(why); });
    return false;
  }
}

bool wanted(const Options& o, const char* group) {
  return ("," + o.only + ",").find(std::string(",") + group + ",") != std::string::npos;
}

void bench_copy(Report& rep, const Options& o) {
  GpuTensors g;
  const int64_t n = int64_t(1) << 28;  // 1 GiB of F32 each way
  Row row{"copy", "device_copy GPU→GPU", "1 GiB", "", "F32", "GB/s", "copy"};
  measure(rep, row, [&] {
    const Tensor src = g.random(DType::F32, {n}, 1), dst = g.make(DType::F32, {n});
    const double t = time_median([&] { device_copy(dst, src); }, o.reps);
    return 2.0 * double(src.nbytes()) / t * 1e-9;
  });
  if (rep.rows.back().ok) rep.copy_gbs = rep.rows.back().rate;
}

void bench_norm(Report& rep, const Options& o) {
  const int64_t N = o.rows, D = 2048;
  const float eps = 1e-5f;
  const std::string shape = "[" + std::to_string(N) + ",2048]";
  const double row_bytes = double(N) * D * 4;
  GpuTensors g;
  Tensor x, w, y, rstd, o_, hp, ao, bo, ar, br, h;
  if (!make_inputs(rep, {"norm", "norm inputs", shape, "", "F32", "GB/s", "copy"}, [&] {
        x = g.random(DType::F32, {N, D}, 2), w = g.random(DType::F32, {D}, 3, 0.2);
        y = g.make(DType::F32, {N, D}), rstd = g.make(DType::F32, {N});
        o_ = g.random(DType::F32, {N, D}, 4), hp = g.random(DType::F32, {N, D}, 5);
        ao = g.random(DType::F32, {D}, 6), bo = g.random(DType::F32, {D}, 7, 0.1);
        ar = g.random(DType::F32, {D}, 8), br = g.random(DType::F32, {D}, 9, 0.1);
        h = g.make(DType::F32, {N, D});
      }))
    return;
  measure(rep, {"norm", "rmsnorm_forward", shape, "", "F32", "GB/s", "copy"}, [&] {
    const double t = time_median([&] { ops::rmsnorm_forward(y, rstd, x, w, eps); }, o.reps);
    return (2 * row_bytes + double(N + D) * 4) / t * 1e-9;
  });
  // Fused and unfused share the fused op's byte count (read o, hp; write h, x; the small vectors).
  const double merge_bytes = 4 * row_bytes + double(N + 5 * D) * 4;
  double t_fused = 0, t_unfused = 0;
  measure(rep, {"norm", "merge_rmsnorm_forward (fused)", shape, "", "F32", "GB/s", "copy"}, [&] {
    t_fused = time_median(
        [&] { ops::merge_rmsnorm_forward(h, y, rstd, o_, hp, ao, bo, ar, br, w, eps); }, o.reps);
    return merge_bytes / t_fused * 1e-9;
  });
  measure(rep, {"norm", "residual_merge + rmsnorm (unfused)", shape, "", "F32", "GB/s", "copy"},
          [&] {
            t_unfused = time_median(
                [&] {
                  ops::residual_merge_forward(h, o_, hp, ao, bo, ar, br);
                  ops::rmsnorm_forward(y, rstd, h, w, eps);
                },
                o.reps);
            return merge_bytes / t_unfused * 1e-9;
          });
  if (t_fused > 0 && t_unfused > 0)
    std::printf("fused merge + RMSNorm: %.2fx the speed of the unfused pair\n",
                t_unfused / t_fused);
}

#ifdef ZAYA_HAS_GPU_BACKEND
struct GemmShape {
  const char* name;
  int64_t M, N, K;
};

// C[M,N] = A[M,K]·Bᵀ with B stored [N,K] (linear's y = x·wᵀ), both operands of one dtype.
gpu::Gemm make_gemm(GpuTensors& g, const GemmShape& s, DType dtype) {
  const Tensor a = g.random(dtype, {s.M, s.K}, 20), b = g.random(dtype, {s.N, s.K}, 21),
               c = g.make(DType::F32, {s.M, s.N});
  gpu::Gemm gm;
  gm.M = s.M, gm.N = s.N, gm.K = s.K;
  gm.a = {a.data, dtype, s.K, false};
  gm.b = {b.data, dtype, s.K, true};
  gm.c = static_cast<float*>(c.data), gm.ldc = s.N;
  return gm;
}

double gemm_tflops(const gpu::Gemm& gm, gpu::GemmEngine engine, int reps) {
  if (engine == gpu::GemmEngine::BlasLt && !gpu::gemm_blaslt(gm)) return 0;  // not available
  const double t = time_median(
      [&] {
        if (engine == gpu::GemmEngine::BlasLt)
          gpu::gemm_blaslt(gm);
        else
          gpu::gemm_tiled(gm);
      },
      reps);
  return 2.0 * double(gm.M) * double(gm.N) * double(gm.K) / t * 1e-12;
}

// Every engine on one shape and dtype (the operands made once).
void gemm_rows(Report& rep, const GemmShape& s, DType dt, int reps) {
  const std::string shape =
      std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
  struct Engine {
    const char* name;
    gpu::GemmEngine e;
  };
  const Engine engines[] = {{"cublaslt", gpu::GemmEngine::BlasLt},
                            {"tiled", gpu::GemmEngine::Tiled}};
  const std::string dtype(dtype_name(dt));
  GpuTensors g;
  gpu::Gemm gm;
  if (!make_inputs(rep, {"gemm", s.name, shape, "inputs", dtype, "TFLOP/s", "peak"},
                   [&] { gm = make_gemm(g, s, dt); }))
    return;
  for (const Engine& en : engines)
    measure(rep, {"gemm", s.name, shape, en.name, dtype, "TFLOP/s", "peak"},
            [&] { return gemm_tflops(gm, en.e, reps); });
}

void bench_gemm(Report& rep, const Options& o) {
  const int64_t T = o.tokens, per_expert = std::max<int64_t>(1, o.tokens / 16);
  const std::vector<GemmShape> shapes = {
      {"CCA q‖k 2048→1280", T, 1280, 2048},
      {"CCA values 2048→256", T, 256, 2048},
      {"CCA out 1024→2048", T, 2048, 1024},
      {"expert up 2048→4096 (all tokens)", T, 4096, 2048},
      {"expert up 2048→4096 (1/16 tokens)", per_expert, 4096, 2048},
      {"expert down 2048→2048 (1/16)", per_expert, 2048, 2048},
      {"LM head 2048→262272", T, 262272, 2048},
  };
  const GemmShape square{"square 8192³", 8192, 8192, 8192};
  const DType dtypes[] = {DType::BF16, DType::F32};
  // The peak first: every other GEMM row is a fraction of it.
  for (const DType dt : dtypes) gemm_rows(rep, square, dt, o.reps);
  auto square_rate = [&](const char* engine, DType dt) {
    for (const Row& r : rep.rows)
      if (r.group == "gemm" && r.engine == engine && r.dtype == dtype_name(dt) && r.ok)
        return r.rate;
    return 0.0;
  };
  rep.peak_tflops = square_rate("cublaslt", DType::BF16);
  if (rep.peak_tflops == 0) {
    rep.peak_tflops = square_rate("tiled", DType::BF16);
    rep.peak_source = "tiled BF16 square (cuBLASLt unavailable)";
  }
  rep.f32_square_tflops = std::max(square_rate("cublaslt", DType::F32), 0.0);
  for (const GemmShape& s : shapes)
    for (const DType dt : dtypes) gemm_rows(rep, s, dt, o.reps);
}
#endif

void bench_attention(Report& rep, const Options& o) {
  const int64_t B = o.attn_batch, T = 4096, Hq = 8, Hk = 2, d = 128;
  const std::string shape = "B" + std::to_string(B) + " T4096 8+2x128";
  const double gemm = 2.0 * (double(T) * double(T + 1) / 2) * double(d) * double(B * Hq);
  GpuTensors g;
  Tensor q, k, v, out, lse, dout, dq, dk, dv;
  if (!make_inputs(rep, {"attention", "attention inputs", shape, "", "F32", "TFLOP/s", "peak"},
                   [&] {
                     q = g.random(DType::F32, {B, T, Hq, d}, 30),
                     k = g.random(DType::F32, {B, T, Hk, d}, 31);
                     v = g.random(DType::F32, {B, T, Hk, d}, 32);
                     dout = g.random(DType::F32, {B, T, Hq, d}, 33);
                     out = g.make(DType::F32, {B, T, Hq, d}), lse = g.make(DType::F32, {B, Hq, T});
                     dq = g.make(DType::F32, {B, T, Hq, d}), dk = g.make(DType::F32, {B, T, Hk, d});
                     dv = g.make(DType::F32, {B, T, Hk, d});
                   }))
    return;
  measure(rep, {"attention", "attention_forward", shape, "", "F32", "TFLOP/s", "peak"}, [&] {
    const double t = time_median([&] { ops::attention_forward(out, lse, q, k, v); }, o.reps);
    return 2 * gemm / t * 1e-12;
  });
  measure(rep, {"attention", "attention_backward", shape, "", "F32", "TFLOP/s", "peak"}, [&] {
    ops::attention_forward(out, lse, q, k, v);  // o and lse of these inputs
    const double t =
        time_median([&] { ops::attention_backward(dq, dk, dv, dout, q, k, v, out, lse); }, o.reps);
    return 5 * gemm / t * 1e-12;
  });
}

// Newton–Schulz (5 steps) on ZAYA1-base's Muon matrices: the symmetric path against the plain one,
// each rated by the plain iteration's FLOPs (5 · 2·(2m²n + m³), m ≤ n the sides), so the ratio of
// the rates is the speed-up. Deviations: max |sym − plain| at one dtype and, for BF16, the relative
// Frobenius error of the symmetric BF16 result against the plain F32 one
// (tests/ops/gpu/test_muon.cpp's tolerance: 2 · 5 · 2^-8 = 0.039). Each measurement gets ~0.7 s
// (the group ~20 s; unmeasured).
void bench_muon(Report& rep, const Options& o) {
  struct Shape {
    const char* name;
    int64_t e, rows, cols;
  };
  const Shape shapes[] = {{"attention q_proj", 1, 1024, 2048},
                          {"attention o_proj", 1, 2048, 1024},
                          {"expert fc2", 1, 2048, 2048},
                          {"expert fc1", 1, 4096, 2048},
                          {"16 experts' fc2 (batched)", 16, 2048, 2048}};
  const int steps = 5;
  for (const Shape& sh : shapes) {
    const std::string shape = (sh.e > 1 ? std::to_string(sh.e) + "x" : "") +
                              std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
    const double m = double(std::min(sh.rows, sh.cols)), n = double(std::max(sh.rows, sh.cols));
    const double flops = double(sh.e) * steps * 2 * (2 * m * m * n + m * m * m);
    GpuTensors g;
    Tensor in, out;
    if (!make_inputs(rep, {"muon", "newton_schulz inputs", shape, "", "F32", "TFLOP/s", "peak"},
                     [&] {
                       in = sh.e > 1 ? g.random(DType::F32, {sh.e, sh.rows, sh.cols}, 40)
                                     : g.random(DType::F32, {sh.rows, sh.cols}, 40);
                       out = in;
                       out.data = g.make(DType::F32, {in.numel()}).data;
                     }))
      continue;
    // The result of one call, on the host.
    auto result = [&](bool symmetric, bool bf16) {
      std::vector<float> h(size_t(in.numel()));
      ops::newton_schulz(out, in, steps, symmetric, bf16);
      device_copy(Tensor(h.data(), {in.numel()}),
                  Tensor(static_cast<float*>(out.data), {in.numel()}).on(Device::Gpu));
      return h;
    };
    const std::vector<float> ref = result(false, false);  // plain F32
    for (const bool bf16 : {false, true}) {
      const char* dtype = bf16 ? "BF16" : "F32";
      double t[2] = {0, 0};  // plain, symmetric
      for (const bool symmetric : {false, true})
        measure(rep, {"muon", sh.name, shape, symmetric ? "sym" : "gemm", dtype, "TFLOP/s", "peak"},
                [&] {
                  t[symmetric] = time_median(
                      [&] { ops::newton_schulz(out, in, steps, symmetric, bf16); }, o.reps, 0.7);
                  return flops / t[symmetric] * 1e-12;
                });
      if (t[0] <= 0 || t[1] <= 0) continue;
      const std::vector<float> sym = result(true, bf16), plain = bf16 ? result(false, true) : ref;
      double dev = 0, num = 0, den = 0;
      for (size_t i = 0; i < sym.size(); ++i) {
        dev = std::max(dev, std::fabs(double(sym[i]) - double(plain[i])));
        num += (double(sym[i]) - ref[i]) * (double(sym[i]) - ref[i]),
            den += double(ref[i]) * ref[i];
      }
      const double rel = std::sqrt(num / std::max(den, 1e-300));
      char line[256];
      std::snprintf(
          line, sizeof line,
          "newton_schulz %-26s %-14s %-4s sym %8.3f ms  gemm %8.3f ms  ratio %.2fx "
          "(target >= 1.3x)  max|sym-gemm| %.1e  rel. error vs F32 gemm %.1e (BF16 limit 3.9e-2)",
          sh.name, shape.c_str(), dtype, t[1] * 1e3, t[0] * 1e3, t[0] / t[1], dev, rel);
      rep.notes.push_back(line);
      rep.muon.push_back({{"name", sh.name},
                          {"shape", shape},
                          {"dtype", dtype},
                          {"sym_ms", t[1] * 1e3},
                          {"gemm_ms", t[0] * 1e3},
                          {"ratio", t[0] / t[1]},
                          {"max_abs_sym_minus_gemm", dev},
                          {"rel_error_vs_f32_gemm", rel}});
    }
  }
}

// Fractions of the run's references, the table on stdout, the JSON file.
int finish(Report& rep, const Options& o) {
  int failed = 0;
  for (Row& r : rep.rows) {
    if (!r.ok) {
      ++failed;
      continue;
    }
    const double ref = r.reference == "copy" ? rep.copy_gbs : rep.peak_tflops;
    r.fraction = ref > 0 ? r.rate / ref : 0;
    if (r.unit == "TFLOP/s" && r.dtype == "F32" && rep.f32_square_tflops > 0)
      r.fraction_f32 = r.rate / rep.f32_square_tflops;
  }
  std::printf("device: %s\n", gpu::describe().c_str());
  std::printf(
      "copy bandwidth %.0f GB/s (read + written); peak %.1f TFLOP/s (%s); F32 square "
      "cuBLASLt %.1f TFLOP/s\n",
      rep.copy_gbs, rep.peak_tflops, rep.peak_source.c_str(), rep.f32_square_tflops);
  std::printf("%-10s %-35s %-20s %-8s %-5s %10s %-8s %7s %-5s %7s\n", "group", "what", "shape",
              "engine", "dtype", "rate", "unit", "of ref", "ref", "of f32");
  for (const Row& r : rep.rows) {
    if (!r.ok) {
      std::printf("%-10s %-35s %-20s %-8s %-5s FAILED: %s\n", r.group.c_str(), r.name.c_str(),
                  r.shape.c_str(), r.engine.c_str(), r.dtype.c_str(), r.error.c_str());
      continue;
    }
    char f32[16] = "";
    if (r.fraction_f32 > 0) std::snprintf(f32, sizeof f32, "%6.1f%%", 100 * r.fraction_f32);
    std::printf("%-10s %-35s %-20s %-8s %-5s %10.2f %-8s %6.1f%% %-5s %7s\n", r.group.c_str(),
                r.name.c_str(), r.shape.c_str(), r.engine.c_str(), r.dtype.c_str(), r.rate,
                r.unit.c_str(), 100 * r.fraction, r.reference.c_str(), f32);
  }
  for (const std::string& line : rep.notes) std::printf("%s\n", line.c_str());
  if (!o.json.empty()) {
    nlohmann::json j;
    j["device"] = gpu::describe();
    j["copy_gbs"] = rep.copy_gbs;
    j["peak_tflops"] = rep.peak_tflops;
    j["peak_source"] = rep.peak_source;
    j["f32_square_tflops"] = rep.f32_square_tflops;
    j["tokens"] = o.tokens;
    j["norm_rows"] = o.rows;
    j["failed"] = failed;
    j["newton_schulz"] = rep.muon;
    for (const Row& r : rep.rows)
      j["results"].push_back({{"group", r.group},
                              {"name", r.name},
                              {"shape", r.shape},
                              {"engine", r.engine},
                              {"dtype", r.dtype},
                              {"ok", r.ok},
                              {"rate", r.rate},
                              {"unit", r.unit},
                              {"reference", r.reference},
                              {"fraction", r.fraction},
                              {"fraction_of_f32_square", r.fraction_f32},
                              {"error", r.error}});
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  if (failed) std::printf("bench_gpu: %d measurement(s) FAILED\n", failed);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json" && has_value)
      o.json = argv[++i];
    else if (a == "--reps" && has_value)
      o.reps = std::atoi(argv[++i]);
    else if (a == "--tokens" && has_value)
      o.tokens = std::atoll(argv[++i]);
    else if (a == "--rows" && has_value)
      o.rows = std::atoll(argv[++i]);
    else if (a == "--attn-batch" && has_value)
      o.attn_batch = std::atoll(argv[++i]);
    else if (a == "--only" && has_value)
      o.only = argv[++i];
    else
      o.reps = 0;  // usage below
  }
  if (o.reps < 1 || o.tokens < 1 || o.rows < 1 || o.attn_batch < 1) {
    std::fprintf(stderr,
                 "usage: bench_gpu [--json FILE] [--reps N=9] [--tokens N=8192] [--rows N=65536] "
                 "[--attn-batch B=1] [--only copy,norm,gemm,attention,muon]\n");
    return 2;
  }
  if (!gpu::available()) {
    std::printf("bench_gpu: skipped: %s\n", gpu::describe().c_str());
    return 0;
  }
  Report rep;
  if (wanted(o, "copy")) bench_copy(rep, o);
  if (wanted(o, "norm")) bench_norm(rep, o);
#ifdef ZAYA_HAS_GPU_BACKEND
  if (wanted(o, "gemm")) bench_gemm(rep, o);
#endif
  if (wanted(o, "attention")) bench_attention(rep, o);
  if (wanted(o, "muon")) bench_muon(rep, o);
  return finish(rep, o);
}
