// GEMM tuning tables: the text format only (no GPU, compiled in every build). The
// layout is PyTorch TunableOp's results CSV:
//
//   Validator,ZAYA_GEMM_TABLE_VERSION,1
//   Validator,CUBLASLT_VERSION,130100            (cublasLtGetVersion(), or "none")
//   Validator,GPU_NAME,NVIDIA H200
//   Validator,GPU_ARCH,9.0                       (compute capability; gfx name on AMD)
//   Validator,GPU_RUNTIME,CUDA 13000             (cudaRuntimeGetVersion(); HIP …; "none")
//   GemmTunableOp_float_TN,tn_2048_4096_512_ld_512_512_2048,Gemm_Zaya_Tiled,0.0123
//
// Validators first, then one line `op,params,solution,time_ms` per tuned GEMM. A GEMM is spelled
// exactly as TunableOp spells the BLAS call behind it, in the column-major view cuBLASLt gets
// (gemm_blaslt.cpp): zaya's row-major C[M,N] = op(A)·op(B) is the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ, so transa/lda are B's, transb/ldb are A's, m = N, n = M. Thus op
// `GemmTunableOp_<dtype>_<TRANSA><TRANSB>` and params `<transa><transb>_<m>_<n>_<k>_ld_<lda>_
// <ldb>_<ldc>` (TunableOp's current GemmParams signature; its older one stopped at `_<k>`), and
// zaya's linear forward y = x·wᵀ (x [T,I], w [O,I]) is `GemmTunableOp_float_TN,
// tn_O_T_I_ld_I_I_O`, the very line PyTorch writes for F.linear on the same tensors. The strides
// are part of the key because they change the algorithm that fits. dtype is that of A and B
// (`float` or `BFloat16`; C is always f32 here, unlike TunableOp's BFloat16 GEMMs), one dtype for
// both (mixed-dtype GEMMs are not tabulated), or `floatAsBFloat16`: float operands rounded to
// bf16 as they enter the product (Gemm::bf16_inputs, train.precision = bf16; not a TunableOp
// spelling: TunableOp has no such mode).
//
// Solutions: `Default` (what gemm() picks without a table), `Gemm_Zaya_Tiled` (our tiled kernel),
// `Gemm_Cublaslt_` + the 8 uint64 words of the cublasLtMatmulAlgo_t, 16 lowercase hex digits
// each, joined by `_` (re-checked with cublasLtMatmulAlgoCheck when a table is loaded).
// time_ms: the solution's measured time when tuned (informative).
//
// The untuned file (`--record-untuned`, TunableOp's untuned-results idea) has `op,params` lines
// only, no validators.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::gemm_table {

inline constexpr int kVersion = 1;

enum class GemmDtype : uint8_t { F32, BF16, F32AsBF16 };

// One GEMM as the BLAS sees it (column-major; see above).
struct GemmKey {
  GemmDtype dtype = GemmDtype::F32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  auto operator<=>(const GemmKey&) const = default;
};

// The key of zaya's row-major gemm (gemm.h: C[M,N] = op(A)·op(B), A's and B's row strides and
// transposes, C's row stride), and back.
GemmKey key_of_row_major(GemmDtype dtype, int64_t M, int64_t N, int64_t K, bool a_transposed,
                         int64_t lda, bool b_transposed, int64_t ldb, int64_t ldc);
struct RowMajorGemm {
  int64_t M, N, K, lda, ldb, ldc;
  bool a_transposed, b_transposed;
};
RowMajorGemm row_major_of(const GemmKey& key);

// The key of `keys` that stands in for `key` where a table has no line of its own: the same GEMM
// (dtype, transposes, strides) but for one of m, n, k — the one an expert's row count sets, which
// routing changes every step (n: an expert's forward and dX GEMMs; k: its dW) — the nearest to
// key's by ratio, within a factor of 2 (a tie goes to the larger). std::nullopt where none is.
std::optional<GemmKey> nearest_key(const std::vector<GemmKey>& keys, const GemmKey& key);

std::string op_name(const GemmKey& key);  // GemmTunableOp_float_TN
std::string params(const GemmKey& key);   // tn_m_n_k_ld_lda_ldb_ldc

enum class SolutionKind : uint8_t { Default, Tiled, BlasLt };
struct Solution {
  SolutionKind kind = SolutionKind::Default;
  std::array<uint64_t, 8> algo{};  // BlasLt: the cublasLtMatmulAlgo_t words
  bool operator==(const Solution&) const = default;
};
std::string solution_name(const Solution& s);

struct Validator {
  std::string name, value;
  bool operator==(const Validator&) const = default;
};

struct Entry {
  GemmKey key;
  Solution solution;
  double time_ms = 0;
  int line = 0;  // where it was read (0: made in code)
};

struct Table {
  std::vector<Validator> validators;
  std::vector<Entry> entries;  // no two with one key
};

// The text of a table (validators, then entries in order); zaya::Error for a name or value the
// format cannot hold (a comma or a line break) and for a repeated key.
std::string format_table(const Table& t);
// Parses a table; every malformed line is a zaya::Error "SOURCE:LINE: …" saying what was expected.
// Blank lines are skipped. Validator names must be the five above, each once.
Table parse_table(std::string_view text, std::string_view source);
// Every validator of the table equals the running one (`running`: the five, from the GPU side);
// else zaya::Error naming the validator, both values and the ways out.
void check_validators(const Table& t, const std::vector<Validator>& running,
                      std::string_view source);

Table load_table(const std::string& path);
void save_table(const std::string& path, const Table& t);

// The untuned file: one `op,params` line per key.
std::string format_untuned(const std::vector<GemmKey>& keys);
std::vector<GemmKey> parse_untuned(std::string_view text, std::string_view source);

}  // namespace zaya::gemm_table
