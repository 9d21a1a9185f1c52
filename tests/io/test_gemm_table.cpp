// The GEMM table's text format (io/gemm_table.h): round trips of every solution kind, the
// TunableOp spelling of zaya's row-major GEMMs, a line-numbered error for every malformed line,
// the validator check naming both values, and the untuned file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "io/gemm_table.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::gemm_table;
using zaya::test::error_of;
using zaya::test::expect_contains;

namespace {

const std::string kHead =
    "Validator,ZAYA_GEMM_TABLE_VERSION,1\n"
    "Validator,CUBLASLT_VERSION,130100\n"
    "Validator,GPU_NAME,NVIDIA H200\n"
    "Validator,GPU_ARCH,9.0\n"
    "Validator,GPU_RUNTIME,CUDA 13000\n";

Table sample() {
  Table t = parse_table(kHead, "head");
  Entry a;
  a.key = key_of_row_major(GemmDtype::F32, 2048, 512, 64, false, 64, true, 64, 512);
  a.solution.kind = SolutionKind::Tiled;
  a.time_ms = 0.0125;
  Entry b;
  b.key = key_of_row_major(GemmDtype::BF16, 7, 33, 31, true, 7, false, 33, 40);
  b.solution.kind = SolutionKind::BlasLt;
  for (size_t i = 0; i < 8; ++i) b.solution.algo[i] = 0x0123456789abcdefull * (i + 1) + i;
  b.solution.algo[7] = ~0ull;
  b.time_ms = 3.5;
  Entry c;
  c.key = key_of_row_major(GemmDtype::F32AsBF16, 1, 1, 1, true, 1, true, 1, 1);
  t.entries = {a, b, c};
  return t;
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_table(text, "t.csv"); });
}

}  // namespace

TEST(GemmTable, SpellsLinearForwardAsTunableOpDoes) {
  // y[T,O] = x[T,I] · wᵀ (w [O,I]): PyTorch's F.linear is gemm('t','n', O, T, I, w, I, x, I, y, O).
  const GemmKey k = key_of_row_major(GemmDtype::F32, 4096, 1024, 256, false, 256, true, 256, 1024);
  EXPECT_EQ(op_name(k), "GemmTunableOp_float_TN");
  EXPECT_EQ(params(k), "tn_1024_4096_256_ld_256_256_1024");
  const RowMajorGemm r = row_major_of(k);
  EXPECT_EQ(r.M, 4096);
  EXPECT_EQ(r.N, 1024);
  EXPECT_EQ(r.K, 256);
  EXPECT_EQ(r.lda, 256);
  EXPECT_EQ(r.ldb, 256);
  EXPECT_EQ(r.ldc, 1024);
  EXPECT_FALSE(r.a_transposed);
  EXPECT_TRUE(r.b_transposed);
  // dW = dyᵀ · x (A transposed): BLAS N,T.
  const GemmKey dw =
      key_of_row_major(GemmDtype::BF16, 1024, 256, 4096, true, 1024, false, 256, 256);
  EXPECT_EQ(op_name(dw), "GemmTunableOp_BFloat16_NT");
  EXPECT_EQ(params(dw), "nt_256_1024_4096_ld_256_1024_256");
}

TEST(GemmTable, RoundTripsEverySolution) {
  const Table t = sample();
  const std::string text = format_table(t);
  EXPECT_NE(
      text.find("GemmTunableOp_float_TN,tn_512_2048_64_ld_64_64_512,Gemm_Zaya_Tiled,0.0125\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("GemmTunableOp_floatAsBFloat16_TT,tt_1_1_1_ld_1_1_1,Default,0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(",Gemm_Cublaslt_0123456789abcdef_"), std::string::npos) << text;
  EXPECT_NE(text.find("_ffffffffffffffff,3.5\n"), std::string::npos) << text;
  const Table back = parse_table(text, "x");
  ASSERT_EQ(back.entries.size(), 3u);
  EXPECT_EQ(back.validators, t.validators);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.entries[i].key, t.entries[i].key) << i;
    EXPECT_EQ(back.entries[i].solution, t.entries[i].solution) << i;
    EXPECT_DOUBLE_EQ(back.entries[i].time_ms, t.entries[i].time_ms) << i;
    EXPECT_EQ(back.entries[i].line, int(6 + i)) << i;
  }
  EXPECT_EQ(format_table(back), text);
  // CRLF and blank lines are accepted.
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n\n") : std::string(1, c);
  EXPECT_EQ(format_table(parse_table(crlf, "crlf")), text);
}

TEST(GemmTable, SavesAndLoadsAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gemm_table_" + std::to_string(::getpid())))
          .string();
  save_table(path, sample());
  EXPECT_EQ(format_table(load_table(path)), format_table(sample()));
  std::filesystem::remove(path);
  expect_contains(error_of([&] { load_table(path); }), path);
}

TEST(GemmTable, EveryMalformedLineIsALineNumberedError) {
  const std::string ok = "GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,1\n";
  struct Case {
    std::string line, expect;
  };
  const Case cases[] = {
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default", "op,params,solution,time_ms (3 fields)"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,1,2", "(5 fields)"},
      {"GemmOp_float_TN,tn_4_8_2_ld_2_2_4,Default,1", "op 'GemmOp_float_TN' is not"},
      {"GemmTunableOp_half_TN,tn_4_8_2_ld_2_2_4,Default,1", "dtype must be float, BFloat16 or"},
      {"GemmTunableOp_float_TX,tn_4_8_2_ld_2_2_4,Default,1", "two of N/T"},
      {"GemmTunableOp_float_TNN,tn_4_8_2_ld_2_2_4,Default,1", "two of N/T"},
      {"GemmTunableOp_float_TN,nt_4_8_2_ld_2_2_4,Default,1", "start with 'nt' but op"},
      {"GemmTunableOp_float_TN,tn_4_8_2,Default,1", "must be tn_M_N_K_ld_LDA_LDB_LDC"},
      {"GemmTunableOp_float_TN,tn_4_8_2_xx_2_2_4,Default,1", "must be tn_M_N_K_ld_LDA_LDB_LDC"},
      {"GemmTunableOp_float_TN,tn_4_x_2_ld_2_2_4,Default,1", "n must be a whole number"},
      {"GemmTunableOp_float_TN,tn_0_8_2_ld_2_2_4,Default,1", "m must be a whole number ≥ 1"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_-4,Default,1", "ldc must be"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_1_2_4,Default,1", "lda 1 < 2, the rows of A"},
      {"GemmTunableOp_float_NN,nn_4_8_2_ld_4_1_4,Default,1", "ldb 1 < 2, the rows of B"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_3,Default,1", "ldc 3 < m = 4"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Fast,1", "solution 'Fast' must be"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Gemm_Cublaslt_00,1", "8 words of 16 hex"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Gemm_Cublaslt_"
       "000000000000000g_0000000000000000_0000000000000000_0000000000000000_0000000000000000_"
       "0000000000000000_0000000000000000_0000000000000000,1",
       "word 1 '000000000000000g' is not 16 hex digits"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,", "time_ms '' must be a number"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,-1", "time_ms '-1'"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,nan", "time_ms 'nan'"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,1ms", "time_ms '1ms'"},
      {"GemmTunableOp_float_TN,tn_4_8_2_ld_2_2_4,Default,2", "already given on line 6"},
      {"Validator,GPU_NAME,x", "after the first GEMM line"},
  };
  for (const Case& c : cases) {
    const std::string msg = parse_error(kHead + ok + c.line + "\n");
    expect_contains(msg, "t.csv:7: ");
    expect_contains(msg, c.expect);
    expect_contains(msg, "(line: '" + c.line + "')");
  }
  // Validator lines.
  expect_contains(parse_error("Validator,GPU_NAME\n"),
                  "t.csv:1: a validator line is Validator,NAME,VALUE");
  expect_contains(parse_error("Validator,COLOUR,red\n"), "t.csv:1: unknown validator 'COLOUR'");
  expect_contains(parse_error(kHead + "Validator,GPU_NAME,y\n"),
                  "t.csv:6: validator GPU_NAME given twice");
  expect_contains(parse_error("Validator,ZAYA_GEMM_TABLE_VERSION,2\n"),
                  "t.csv:1: table version 2 is not this zaya's 1");
  expect_contains(parse_error(ok), "t.csv: no 'Validator,ZAYA_GEMM_TABLE_VERSION,…' line");
  expect_contains(parse_error(kHead.substr(0, kHead.find("Validator,GPU_RUNTIME"))),
                  "no 'Validator,GPU_RUNTIME,…' line");
}

TEST(GemmTable, ValidatorMismatchNamesBothValuesAndTheWayOut) {
  const Table t = sample();
  std::vector<Validator> running = t.validators;
  EXPECT_NO_THROW(check_validators(t, running, "t.csv"));
  running[2].value = "NVIDIA H100 80GB HBM3";
  const std::string msg = error_of([&] { check_validators(t, running, "t.csv"); });
  expect_contains(msg,
                  "t.csv: validator GPU_NAME is 'NVIDIA H200' in the table but "
                  "'NVIDIA H100 80GB HBM3' here");
  expect_contains(msg, "retune it here (zaya tune gemm) or drop it");
}

TEST(GemmTable, FormatRejectsWhatItCannotWrite) {
  Table t = sample();
  t.validators[2].value = "a,b";
  expect_contains(error_of([&] { format_table(t); }),
                  "validator GPU_NAME value 'a,b' cannot be written");
  t = sample();
  t.entries.push_back(t.entries[0]);
  expect_contains(error_of([&] { format_table(t); }),
                  "GemmTunableOp_float_TN,tn_512_2048_64_ld_64_64_512 appears twice");
}

TEST(GemmTable, UntunedFileRoundTrips) {
  const Table t = sample();
  std::vector<GemmKey> keys;
  for (const Entry& e : t.entries) keys.push_back(e.key);
  const std::string text = format_untuned(keys);
  EXPECT_EQ(text.substr(0, text.find('\n')), "GemmTunableOp_float_TN,tn_512_2048_64_ld_64_64_512");
  EXPECT_EQ(parse_untuned(text, "u"), keys);
  expect_contains(error_of([&] { parse_untuned(text + "GemmTunableOp_float_TN\n", "u.csv"); }),
                  "u.csv:4: an untuned line is op,params (1 fields)");
}

TEST(GemmTable, NearestKeyStandsInForAnExpertsOtherRowCount) {
  // An expert's forward at the tuned (balanced) row count 512 and its dW, whose K is the rows.
  const GemmKey fwd = key_of_row_major(GemmDtype::F32, 512, 1024, 256, false, 256, true, 256, 1024);
  const GemmKey dw = key_of_row_major(GemmDtype::F32, 1024, 256, 512, true, 1024, false, 256, 256);
  const GemmKey fwd_300 =
      key_of_row_major(GemmDtype::F32, 300, 1024, 256, false, 256, true, 256, 1024);
  const std::vector<GemmKey> keys = {fwd, dw, fwd_300};
  auto rows = [](GemmKey k, int64_t M) { return k.n = M, k; };  // row-major M is BLAS n
  auto depth = [](GemmKey k, int64_t K) { return k.k = K, k; };
  EXPECT_EQ(nearest_key(keys, rows(fwd, 517)), fwd);
  EXPECT_EQ(nearest_key(keys, rows(fwd, 1024)), fwd);     // a factor of 2 exactly
  EXPECT_EQ(nearest_key(keys, rows(fwd, 390)), fwd_300);  // 1.30x from 300, 1.31x from 512
  EXPECT_EQ(nearest_key(keys, rows(fwd, 150)), fwd_300);
  EXPECT_EQ(nearest_key(keys, rows(fwd, 1025)), std::nullopt);  // beyond 2x of every line
  EXPECT_EQ(nearest_key(keys, rows(fwd, 149)), std::nullopt);
  EXPECT_EQ(nearest_key(keys, depth(dw, 700)), dw);
  // A tie by ratio goes to the larger: 2x below 600 and 2x above 150 (lines at 600 and 150).
  const std::vector<GemmKey> tie = {rows(fwd, 150), rows(fwd, 600)};
  EXPECT_EQ(nearest_key(tie, rows(fwd, 300)), rows(fwd, 600));
  // Only one dimension may differ; dtype, transposes and strides never.
  GemmKey two = rows(depth(fwd, 300), 500);
  EXPECT_EQ(nearest_key(keys, two), std::nullopt);
  GemmKey other = rows(fwd, 517);
  other.dtype = GemmDtype::BF16;
  EXPECT_EQ(nearest_key(keys, other), std::nullopt);
  other = rows(fwd, 517), other.ldc = 1040;
  EXPECT_EQ(nearest_key(keys, other), std::nullopt);
  other = rows(fwd, 517), other.trans_a = !other.trans_a;
  EXPECT_EQ(nearest_key(keys, other), std::nullopt);
  EXPECT_EQ(nearest_key({}, fwd), std::nullopt);
}
