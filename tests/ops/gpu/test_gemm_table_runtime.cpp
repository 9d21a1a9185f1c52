// The GEMM tuning table on the GPU (ops/gpu/gemm_table_runtime.h), through the whole model
// (tests/fixtures/model/tiny_a, forward + backward on the device):
// - the recording of a pass lists exactly the GEMMs model/gemm_shapes.h derives from the config
//   (expert GEMMs up to their routed row count), in fp32 and in bf16 matmul precision;
// - a table whose solutions are Default gives the very same loss and gradients as no table, one
//   of Gemm_Zaya_Tiled the same within rounding (bit-equal where the default is the tiled kernel:
//   the emulator, HIP);
// - an expert's GEMM whose row count routing moved off the tuned (balanced) one runs the nearest
//   line (gemm_table::nearest_key), within rounding, and gemm_table_stats counts it;
// - a tuned table (tune_gemms: on a CUDA GPU, cuBLASLt candidates too) changes the loss and
//   gradients by rounding only, and its gain is printed (the device check of scripts/gpu_check.sh);
// - foreign validators and a cuBLASLt algorithm the library rejects are clear errors;
// - `zaya tune gemm` writes a table that loads.
// Every test skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "cli_util.h"
#include "gpu_test_util.h"
#include "io/gemm_table.h"
#include "io/token_lines.h"
#include "model/activations.h"
#include "model/gemm_shapes.h"
#include "model/transformer.h"
#include "ops/gpu/gemm_table_runtime.h"
#include "ops/precision.h"
#include "twin_cases.h"

using namespace zaya;
using namespace zaya::test;
using gemm_table::GemmKey;
using gemm_table::SolutionKind;

namespace {

struct Pass {
  double loss = 0;
  std::vector<float> grads;
};

const std::string kCase = "tiny_a";

Pass forward_backward(Model& m, const TokenLines& tl) {
  Pass r;
  m.zero_grads();
  Activations a(m.config(), tl.rows, tl.cols, m.device());
  r.loss = model_forward(m, a, tl.ids.data());
  model_backward(m, a, 1.0 / double(tl.rows * (tl.cols - 1)));
  Buffer staging;
  const float* g = m.host_grads(staging);
  r.grads.assign(g, g + m.layout().total);
  return r;
}

struct Fixture {
  Model model = Model::load_dir(case_dir(kCase).string(), Device::Gpu);
  TokenLines tl =
      read_token_lines(case_dir(kCase).string() + "/tokens.txt", model.config().vocab_size);
};

// The keys a pass runs, from the recording.
std::vector<GemmKey> recorded_keys(Fixture& f, const ScratchDir& d) {
  gpu::set_gemm_recording(d / "untuned.csv");
  forward_backward(f.model, f.tl);
  EXPECT_GT(gpu::write_gemm_recording(), 0);
  gpu::set_gemm_recording("");  // stopped: nothing written at exit
  return gemm_table::parse_untuned(slurp(d / "untuned.csv"), "untuned.csv");
}

gemm_table::Table table_of(const std::vector<GemmKey>& keys, SolutionKind kind) {
  gemm_table::Table t;
  t.validators = gpu::gemm_table_validators();
  for (const GemmKey& k : keys) t.entries.push_back({k, {kind, {}}, 0.0, 0});
  return t;
}

// Loss within 1e-5 relative, the gradient arena within 1e-4 relative L2 (rounding of another
// summation order in f32).
void expect_rounding_only(const Pass& got, const Pass& want, const std::string& what) {
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::max(1.0, std::fabs(want.loss))) << what;
  ASSERT_EQ(got.grads.size(), want.grads.size());
  EXPECT_LE(rel_l2(got.grads.data(), want.grads.data(), want.grads.size()), 1e-4) << what;
}

// Row-major sizes of a key with the expert row count (M or K) blanked.
GemmKey blank_rows(GemmKey k, char which) {
  // Row-major M is BLAS n; row-major K is BLAS k.
  if (which == 'M') k.n = 0;
  if (which == 'K') k.k = 0;
  return k;
}

// The recording of one pass against training_gemms(dtype).
void expect_recording_matches_config(gemm_table::GemmDtype dtype) {
  ScratchDir d;
  Fixture f;
  const std::vector<GemmKey> rec = recorded_keys(f, d);
  const std::vector<GemmUse> uses = training_gemms(f.model.config(), f.tl.rows * f.tl.cols, dtype);
  std::set<GemmKey> exact, expert;  // the derived keys; expert ones with rows blanked
  for (const GemmUse& u : uses)
    (u.expert_rows ? expert : exact)
        .insert(u.expert_rows ? blank_rows(u.key, u.expert_rows) : u.key);
  std::set<GemmKey> seen_exact, seen_expert;
  for (const GemmKey& k : rec) {
    if (exact.count(k)) {
      seen_exact.insert(k);
      continue;
    }
    bool matched = false;
    for (char which : {'M', 'K'})
      if (expert.count(blank_rows(k, which))) {
        seen_expert.insert(blank_rows(k, which));
        matched = true;
      }
    EXPECT_TRUE(matched) << "recorded but not derived: " << gemm_table::op_name(k) << ","
                         << gemm_table::params(k);
  }
  for (const GemmKey& k : exact)
    EXPECT_TRUE(seen_exact.count(k))
        << "derived but not run: " << gemm_table::op_name(k) << "," << gemm_table::params(k);
  EXPECT_EQ(seen_expert, expert) << "an expert GEMM family derived but never run";
}

}  // namespace

TEST(GpuGemmTable, RecordingMatchesTheShapesDerivedFromTheConfig) {
  ZAYA_REQUIRE_GPU();
  expect_recording_matches_config(gemm_table::GemmDtype::F32);
}

TEST(GpuGemmTable, Bf16PrecisionRecordingMatchesTheShapesDerivedFromTheConfig) {
  ZAYA_REQUIRE_GPU();
  const ops::MatmulPrecisionScope bf16(Device::Gpu, ops::MatmulPrecision::BF16);
  expect_recording_matches_config(gemm_table::GemmDtype::F32AsBF16);
}

TEST(GpuGemmTable, DefaultAndTiledTablesChangeNothingBeyondRounding) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  Fixture f;
  const std::vector<GemmKey> keys = recorded_keys(f, d);
  const Pass plain = forward_backward(f.model, f.tl);

  gemm_table::save_table(d / "default.csv", table_of(keys, SolutionKind::Default));
  EXPECT_EQ(gpu::load_gemm_table(d / "default.csv"), int64_t(keys.size()));
  const Pass with_default = forward_backward(f.model, f.tl);
  EXPECT_EQ(with_default.loss, plain.loss);
  EXPECT_EQ(with_default.grads, plain.grads);

  gemm_table::save_table(d / "tiled.csv", table_of(keys, SolutionKind::Tiled));
  EXPECT_EQ(gpu::load_gemm_table(d / "tiled.csv"), int64_t(keys.size()));
  const Pass with_tiled = forward_backward(f.model, f.tl);
  gpu::clear_gemm_table();
  EXPECT_FALSE(gpu::gemm_table_loaded());
  expect_rounding_only(with_tiled, plain, "Gemm_Zaya_Tiled table");
  if (gpu::gemm_table_validators()[1].value == "none") {  // no cuBLASLt: the default is tiled
    EXPECT_EQ(with_tiled.loss, plain.loss);
    EXPECT_EQ(with_tiled.grads, plain.grads);
  }
  // Without the table, the pass is the plain one again.
  EXPECT_EQ(forward_backward(f.model, f.tl).grads, plain.grads);
}

TEST(GpuGemmTable, TunedTableKeepsTheLossAndPrintsItsGain) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  Fixture f;
  const std::vector<GemmKey> keys = recorded_keys(f, d);
  const Pass plain = forward_backward(f.model, f.tl);
  double def = 0, best = 0;
  int changed = 0, rejected = 0;
  gemm_table::Table t;
  t.validators = gpu::gemm_table_validators();
  for (const gpu::GemmTuneResult& r : gpu::tune_gemms(keys, {4, 3}, nullptr)) {
    EXPECT_GE(r.timed, 1);
    rejected += r.rejected;  // a candidate whose result differs is left out, not a failure
    EXPECT_LE(r.best_ms, r.default_ms);
    def += r.default_ms, best += r.best_ms;
    changed += r.best.kind != SolutionKind::Default;
    t.entries.push_back({r.key, r.best, r.best_ms, 0});
  }
  gemm_table::save_table(d / "tuned.csv", t);
  gpu::load_gemm_table(d / "tuned.csv");
  const Pass tuned = forward_backward(f.model, f.tl);
  gpu::clear_gemm_table();
  expect_rounding_only(tuned, plain, "tuned table");
  std::printf(
      "tuned table: %zu GEMMs, %d not Default, %d candidates rejected; loss %.9g → %.9g; Σ ms "
      "%.4f → %.4f (gain %.1f%%)\n",
      keys.size(), changed, rejected, plain.loss, tuned.loss, def, best,
      def > 0 ? 100 * (1 - best / def) : 0.0);
}

TEST(GpuGemmTable, ExpertGemmsOffTheTunedRowCountRunTheNearestLine) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  Fixture f;
  const std::vector<GemmKey> ran = recorded_keys(f, d);
  const Pass plain = forward_backward(f.model, f.tl);
  // The lines `zaya tune gemm` writes: the config's GEMMs, an expert's at the balanced row count.
  std::vector<GemmKey> tuned;
  for (const GemmShape& s : distinct_gemms(
           training_gemms(f.model.config(), f.tl.rows * f.tl.cols, gemm_table::GemmDtype::F32)))
    tuned.push_back(s.key);
  int stand_ins = 0, defaults = 0;  // keys the pass ran that the table lacks
  for (const GemmKey& k : ran)
    if (std::find(tuned.begin(), tuned.end(), k) == tuned.end())
      ++(gemm_table::nearest_key(tuned, k) ? stand_ins : defaults);
  ASSERT_GT(stand_ins, 0) << "no expert of " << kCase << " is routed off the balanced row count";
  gemm_table::save_table(d / "balanced.csv", table_of(tuned, SolutionKind::Tiled));
  gpu::load_gemm_table(d / "balanced.csv");
  const Pass with_table = forward_backward(f.model, f.tl);
  const gpu::GemmTableStats s = gpu::gemm_table_stats();
  gpu::clear_gemm_table();
  EXPECT_GT(s.exact, 0);
  EXPECT_GT(s.nearest, 0);
  EXPECT_LE(s.exact + s.nearest, s.calls);
  if (defaults == 0) {
    EXPECT_EQ(s.exact + s.nearest, s.calls);
  }
  EXPECT_EQ(gpu::gemm_table_stats().calls, 0);  // cleared with the table
  expect_rounding_only(with_table, plain, "balanced Gemm_Zaya_Tiled table");
  std::printf(
      "balanced table: %d keys run by the nearest line, %d by the default; calls %lld: "
      "%lld exact, %lld nearest\n",
      stand_ins, defaults, (long long)s.calls, (long long)s.exact, (long long)s.nearest);
}

TEST(GpuGemmTable, ForeignValidatorsAndRejectedAlgorithmsAreClearErrors) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  gemm_table::Table t = table_of(
      {gemm_table::key_of_row_major(gemm_table::GemmDtype::F32, 8, 8, 8, false, 8, true, 8, 8)},
      SolutionKind::Tiled);
  t.validators[2].value = "Some Other GPU";
  gemm_table::save_table(d / "foreign.csv", t);
  expect_error([&] { gpu::load_gemm_table(d / "foreign.csv"); },
               {"validator GPU_NAME is 'Some Other GPU' in the table but '", "retune it here"});
  t.validators = gpu::gemm_table_validators();
  t.entries[0].solution.kind = SolutionKind::BlasLt;
  t.entries[0].solution.algo.fill(~0ull);
  gemm_table::save_table(d / "bad_algo.csv", t);
  expect_error([&] { gpu::load_gemm_table(d / "bad_algo.csv"); },
               {"bad_algo.csv:6: GemmTunableOp_float_TN,tn_8_8_8_ld_8_8_8: its cuBLASLt algorithm "
                "cannot run here",
                "retune (zaya tune gemm) or drop the line"});
  EXPECT_FALSE(gpu::gemm_table_loaded());
}

TEST(GpuGemmTable, ZayaTuneGemmWritesATableThatLoads) {
  ZAYA_REQUIRE_GPU();
  ScratchDir d;
  const std::string config = case_dir(kCase).string() + "/config.json";
  const CliResult r =
      run_zaya_in(d.path, "tune gemm --config " + config +
                              " --tokens 18 --reps 2 --candidates 2 --out " + (d / "table.csv"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("total per micro-batch (Σ uses × ms): default "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GemmTunableOp_float_TN,tn_48_18_64_ld_64_64_48"), std::string::npos)
      << r.out;
  const gemm_table::Table t = gemm_table::load_table(d / "table.csv");
  const std::vector<GemmShape> shapes =
      distinct_gemms(training_gemms(load_config(config), 18, gemm_table::GemmDtype::F32));
  EXPECT_EQ(t.entries.size(), shapes.size());
  EXPECT_EQ(gpu::load_gemm_table(d / "table.csv"), int64_t(shapes.size()));
  gpu::clear_gemm_table();
  expect_user_error(run_zaya_in(d.path, "tune gemm --config " + config + " --precision fp16"),
                    "--precision must be fp32 or bf16, got 'fp16'");
}
