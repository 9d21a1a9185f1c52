// tune_gemms of gemm_table_runtime.h: per key, the default, our tiled kernel and the cuBLASLt
// heuristic's candidates, each checked against the default's result and timed on rotating
// buffers. Host code.
//
// Buffers: operands 64-byte aligned exactly (the arena's guarantee for every tensor the model
// passes, so an algorithm picked here accepts the model's pointers), filled with N(0,1) values;
// as many sets as make ≥ 256 MiB in all (more than the L2 of any current GPU; at least 1, at most
// 64), call r using set r mod S, so a timed call does not find its operands in L2 (small GEMMs
// whose 64 sets fit in L2 still do). Timing: one warm-up call, then `reps` calls between two
// synchronisations on a host clock (launch overhead included, as in a training step). Timings mean
// something only where this runs on a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "core/assert.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/timer.h"
#include "ops/gpu/gemm_blaslt.h"
#include "ops/gpu/gemm_table_runtime.h"

namespace zaya::gpu {

using gemm_table::GemmDtype;
using gemm_table::GemmKey;
using gemm_table::Solution;
using gemm_table::SolutionKind;

namespace {

constexpr size_t kRotateBytes = size_t(256) << 20;
constexpr size_t kMaxSets = 64;
constexpr double kMinGain = 0.01;  // a candidate must beat the default by 1% to replace it

struct Sizes {
  size_t a, b, c;  // bytes of the stored operands
};

Sizes sizes_of(const Gemm& g) {
  const size_t e = g.a.dtype == DType::BF16 ? 2 : 4;
  const int64_t rows_a = g.a.transposed ? g.K : g.M, rows_b = g.b.transposed ? g.N : g.K;
  return {size_t(rows_a * g.a.ld) * e, size_t(rows_b * g.b.ld) * e, size_t(g.M * g.ldc) * 4};
}

// Device memory whose pointer is 64-byte aligned and no more.
struct Aligned64 {
  Buffer buf;
  void* p = nullptr;
  explicit Aligned64(size_t bytes) : buf(bytes + 128, Device::Gpu) {
    auto* base = static_cast<unsigned char*>(buf.data());
    p = reinterpret_cast<uintptr_t>(base) % 128 == 0 ? base + 64 : base;
  }
};

struct Set {
  Aligned64 a, b, c;
  Set(const Sizes& s) : a(s.a), b(s.b), c(s.c) {}
};

// N(0,1) values in g's operand dtype, as bytes.
std::vector<unsigned char> host_values(size_t bytes, DType t, uint64_t seed) {
  std::vector<unsigned char> out(bytes);
  const CounterRng rng{seed, 11};
  if (t == DType::BF16) {
    auto* p = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < bytes / 2; ++i) p[i] = f32_to_bf16(float(rng.normal(i)));
  } else {
    auto* p = reinterpret_cast<float*>(out.data());
    for (size_t i = 0; i < bytes / 4; ++i) p[i] = float(rng.normal(i));
  }
  return out;
}

std::vector<float> download(const Gemm& g) {
  std::vector<float> out(size_t(g.M * g.ldc));
  copy(out.data(), Device::Cpu, g.c, Device::Gpu, out.size() * 4);
  return out;
}

// ‖got − ref‖₂ / ‖ref‖₂ over C's M×N elements (0/0 = 0; a NaN anywhere: infinite).
double rel_error(const std::vector<float>& got, const std::vector<float>& ref, const Gemm& g) {
  double num = 0, den = 0;
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t n = 0; n < g.N; ++n) {
      const double r = ref[size_t(m * g.ldc + n)], x = got[size_t(m * g.ldc + n)];
      if (!std::isfinite(x)) return INFINITY;
      num += (x - r) * (x - r), den += r * r;
    }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

struct Candidate {
  Solution solution;
  // Runs g; false where the candidate cannot take it.
  std::function<bool(const Gemm&)> run;
};

// g: the shape with the pointers the candidates run on (the heuristic is told their alignment).
std::vector<Candidate> candidates_of(const Gemm& g, int count) {
  std::vector<Candidate> out;
  // The default first: gemm() with no table (tune_gemms checks none is loaded).
  out.push_back({Solution{}, [](const Gemm& x) {
                   gemm(x);
                   return true;
                 }});
  // Our tiled kernel, where it is not the default already.
  if (gemm_engine_for(g) != GemmEngine::Tiled)
    out.push_back({Solution{SolutionKind::Tiled, {}}, [](const Gemm& x) {
                     gemm_tiled(x);
                     return true;
                   }});
  for (const BlasLtAlgo& algo : blaslt_heuristic(g, count))
    out.push_back({Solution{SolutionKind::BlasLt, algo},
                   [algo](const Gemm& x) { return gemm_blaslt_algo(x, algo); }});
  return out;
}

Gemm on(const Gemm& g, const Set& s) {
  Gemm x = g;
  x.a.data = s.a.p, x.b.data = s.b.p, x.c = static_cast<float*>(s.c.p);
  return x;
}

GemmTuneResult tune_one(const GemmKey& key, const GemmTuneOptions& o) {
  const Gemm g = gemm_of_key(key);
  const Sizes sz = sizes_of(g);
  const size_t set_bytes = sz.a + sz.b + sz.c;
  const size_t n_sets = std::clamp<size_t>((kRotateBytes + set_bytes - 1) / set_bytes, 1, kMaxSets);
  std::vector<Set> sets;
  sets.reserve(n_sets);
  const std::vector<unsigned char> ha = host_values(sz.a, g.a.dtype, 1),
                                   hb = host_values(sz.b, g.b.dtype, 2);
  for (size_t i = 0; i < n_sets; ++i) {
    sets.emplace_back(sz);
    copy(sets.back().a.p, Device::Gpu, ha.data(), Device::Cpu, sz.a);
    copy(sets.back().b.p, Device::Gpu, hb.data(), Device::Cpu, sz.b);
  }
  // Another summation order in f32; float operands rounded to bf16 by another rounding (the tiled
  // kernel's nearest-even, cuBLASLt's FAST_16BF conversion) differ at bf16's precision.
  const double tol = key.dtype == GemmDtype::F32    ? 1e-5
                     : key.dtype == GemmDtype::BF16 ? 1e-3
                                                    : 1e-2;
  GemmTuneResult r;
  r.key = key;
  std::vector<float> ref;
  const Gemm first = on(g, sets[0]);
  // C holds NaN before each candidate's checked call, so one that leaves part of C unwritten
  // fails its check instead of passing on the previous candidate's result.
  const std::vector<unsigned char> nan_c(sz.c, 0xFF);
  for (const Candidate& c : candidates_of(first, o.candidates)) {
    copy(first.c, Device::Gpu, nan_c.data(), Device::Cpu, sz.c);
    if (!c.run(first)) continue;  // cannot take these pointers: not a candidate
    const std::vector<float> got = download(first);
    const bool is_default = c.solution.kind == SolutionKind::Default;
    if (is_default) ref = got;
    if (!is_default && !(rel_error(got, ref, g) <= tol)) {
      ++r.rejected;
      continue;
    }
    synchronize();
    const Timer t;
    for (int i = 0; i < o.reps; ++i) c.run(on(g, sets[size_t(i) % n_sets]));
    synchronize();
    const double ms = t.seconds() * 1e3 / o.reps;
    ++r.timed;
    if (is_default) {
      r.default_ms = r.best_ms = ms;
    } else if (ms < r.best_ms && ms < r.default_ms * (1 - kMinGain)) {
      r.best_ms = ms;
      r.best = c.solution;
    }
  }
  return r;
}

}  // namespace

Gemm gemm_of_key(const GemmKey& key) {
  const gemm_table::RowMajorGemm r = gemm_table::row_major_of(key);
  const DType t = key.dtype == GemmDtype::BF16 ? DType::BF16 : DType::F32;  // F32AsBF16: F32
  Gemm g;
  g.M = r.M, g.N = r.N, g.K = r.K;
  g.a = GemmOperand{nullptr, t, r.lda, r.a_transposed};
  g.b = GemmOperand{nullptr, t, r.ldb, r.b_transposed};
  g.ldc = r.ldc;
  g.bf16_inputs = key.dtype == GemmDtype::F32AsBF16;
  return g;
}

std::vector<GemmTuneResult> tune_gemms(const std::vector<GemmKey>& keys,
                                       const GemmTuneOptions& options,
                                       const std::function<void(const GemmTuneResult&)>& done) {
  ZAYA_CHECK_INPUT(options.reps >= 1 && options.candidates >= 0,
                   "GEMM tuning: reps must be ≥ 1 and candidates ≥ 0 (got {} and {})", options.reps,
                   options.candidates);
  ZAYA_CHECK_INPUT(!gemm_table_loaded(),
                   "GEMM tuning measures the default against the candidates: unload the GEMM "
                   "table first");
  std::vector<GemmTuneResult> out;
  for (const GemmKey& key : keys) {
    out.push_back(tune_one(key, options));
    if (done) done(out.back());
  }
  return out;
}

}  // namespace zaya::gpu
