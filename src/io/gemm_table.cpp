// The GEMM table's text format (gemm_table.h): writing, parsing with line-numbered errors, the
// validator check, the untuned file.
#include "io/gemm_table.h"

#include <charconv>
#include <cmath>
#include <map>

#include "core/assert.h"
#include "io/file.h"

namespace zaya::gemm_table {

namespace {

constexpr std::string_view kValidatorNames[] = {"ZAYA_GEMM_TABLE_VERSION", "CUBLASLT_VERSION",
                                                "GPU_NAME", "GPU_ARCH", "GPU_RUNTIME"};
constexpr std::string_view kTiled = "Gemm_Zaya_Tiled", kDefault = "Default",
                           kBlasLtPrefix = "Gemm_Cublaslt_";

// A located error: "SOURCE:LINE: WHAT (line: 'TEXT')".
struct Where {
  std::string_view source;
  int line;
  std::string_view text;
  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    zaya::fail("{}:{}: {} (line: '{}')", source, line, fmt::format(f, std::forward<Args>(args)...),
               text);
  }
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// Calls fn(line_number, line) for every non-blank line (a trailing \r dropped).
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  int number = 0;
  for (std::string_view line : split(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    fn(number, line);
  }
}

bool parse_int(std::string_view s, int64_t& v) {
  if (s.empty() || s.size() > 18) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_dtype(std::string_view name, GemmDtype& dt) {
  if (name == "float")
    dt = GemmDtype::F32;
  else if (name == "BFloat16")
    dt = GemmDtype::BF16;
  else if (name == "floatAsBFloat16")
    dt = GemmDtype::F32AsBF16;
  else
    return false;
  return true;
}

// op + params → key; both must spell the same transposes.
GemmKey parse_key(std::string_view op, std::string_view par, const Where& w) {
  constexpr std::string_view prefix = "GemmTunableOp_";
  if (op.substr(0, prefix.size()) != prefix)
    w.fail("op '{}' is not GemmTunableOp_<float|BFloat16|floatAsBFloat16>_<N|T><N|T>", op);
  const std::string_view rest = op.substr(prefix.size());
  const size_t us = rest.rfind('_');
  GemmKey key;
  if (us == std::string_view::npos || !parse_dtype(rest.substr(0, us), key.dtype))
    w.fail("op '{}': the dtype must be float, BFloat16 or floatAsBFloat16", op);
  const std::string_view tr = rest.substr(us + 1);
  auto letter = [](char c) { return c == 'N' ? 0 : c == 'T' ? 1 : -1; };
  if (tr.size() != 2 || letter(tr[0]) < 0 || letter(tr[1]) < 0)
    w.fail("op '{}': the transposes must be two of N/T (NN, NT, TN, TT)", op);
  key.trans_a = tr[0] == 'T', key.trans_b = tr[1] == 'T';
  // params: ab_m_n_k_ld_lda_ldb_ldc
  const std::vector<std::string_view> f = split(par, '_');
  const std::string want = fmt::format("{}{}", char(tr[0] + 32), char(tr[1] + 32));
  if (f.size() != 8 || f[4] != "ld")
    w.fail("params '{}' must be {}_M_N_K_ld_LDA_LDB_LDC", par, want);
  if (f[0] != want) w.fail("params '{}' start with '{}' but op {} says '{}'", par, f[0], op, want);
  int64_t v[6];
  const char* names[6] = {"m", "n", "k", "lda", "ldb", "ldc"};
  for (int i = 0; i < 6; ++i)
    if (!parse_int(f[size_t(i < 3 ? i + 1 : i + 2)], v[i]) || v[i] < 1)
      w.fail("params '{}': {} must be a whole number ≥ 1", par, names[i]);
  key.m = v[0], key.n = v[1], key.k = v[2], key.lda = v[3], key.ldb = v[4], key.ldc = v[5];
  // Column-major stored rows: A is m×k (k×m when transposed), B k×n (n×k), C m×n.
  const int64_t rows_a = key.trans_a ? key.k : key.m, rows_b = key.trans_b ? key.n : key.k;
  if (key.lda < rows_a)
    w.fail("params '{}': lda {} < {}, the rows of A as stored", par, key.lda, rows_a);
  if (key.ldb < rows_b)
    w.fail("params '{}': ldb {} < {}, the rows of B as stored", par, key.ldb, rows_b);
  if (key.ldc < key.m) w.fail("params '{}': ldc {} < m = {}", par, key.ldc, key.m);
  return key;
}

Solution parse_solution(std::string_view s, const Where& w) {
  Solution sol;
  if (s == kDefault) return sol;
  if (s == kTiled) {
    sol.kind = SolutionKind::Tiled;
    return sol;
  }
  if (s.substr(0, kBlasLtPrefix.size()) == kBlasLtPrefix) {
    const std::vector<std::string_view> words = split(s.substr(kBlasLtPrefix.size()), '_');
    if (words.size() != 8)
      w.fail(
          "solution '{}': a cuBLASLt algorithm is 8 words of 16 hex digits joined by '_', got {}",
          s, words.size());
    for (size_t i = 0; i < 8; ++i) {
      const std::string_view x = words[i];
      const auto [p, ec] = std::from_chars(x.data(), x.data() + x.size(), sol.algo[i], 16);
      if (x.size() != 16 || ec != std::errc() || p != x.data() + x.size())
        w.fail("solution '{}': word {} '{}' is not 16 hex digits", s, i + 1, x);
    }
    sol.kind = SolutionKind::BlasLt;
    return sol;
  }
  w.fail("solution '{}' must be Default, Gemm_Zaya_Tiled or Gemm_Cublaslt_<8 hex words>", s);
}

bool known_validator(std::string_view name) {
  for (std::string_view v : kValidatorNames)
    if (v == name) return true;
  return false;
}

void check_field(std::string_view what, std::string_view s) {
  if (s.find_first_of(",\r\n") != std::string_view::npos || s.empty())
    fail("GEMM table: {} '{}' cannot be written (empty, or a comma or line break in it)", what, s);
}

}  // namespace

GemmKey key_of_row_major(GemmDtype dtype, int64_t M, int64_t N, int64_t K, bool a_transposed,
                         int64_t lda, bool b_transposed, int64_t ldb, int64_t ldc) {
  // The library's first operand is B, its second A (gemm.h's column-major reading).
  return GemmKey{dtype, b_transposed, a_transposed, N, M, K, ldb, lda, ldc};
}

RowMajorGemm row_major_of(const GemmKey& k) {
  return RowMajorGemm{k.n, k.m, k.k, k.ldb, k.lda, k.ldc, k.trans_b, k.trans_a};
}

std::optional<GemmKey> nearest_key(const std::vector<GemmKey>& keys, const GemmKey& key) {
  std::optional<GemmKey> best;
  double best_ratio = 2.0;  // the farthest allowed
  int64_t best_value = 0;
  for (const GemmKey& c : keys) {
    if (c.dtype != key.dtype || c.trans_a != key.trans_a || c.trans_b != key.trans_b ||
        c.lda != key.lda || c.ldb != key.ldb || c.ldc != key.ldc)
      continue;
    const bool dm = c.m != key.m, dn = c.n != key.n, dk = c.k != key.k;
    if (int(dm) + int(dn) + int(dk) != 1) continue;  // the same key, or two dimensions apart
    const int64_t have = dm ? c.m : dn ? c.n : c.k, want = dm ? key.m : dn ? key.n : key.k;
    if (have <= 0 || want <= 0) continue;
    const double ratio = have > want ? double(have) / double(want) : double(want) / double(have);
    if (ratio < best_ratio || (ratio == best_ratio && have > best_value)) {
      best = c, best_ratio = ratio, best_value = have;
    }
  }
  return best;
}

std::string op_name(const GemmKey& k) {
  const char* dtype = k.dtype == GemmDtype::BF16        ? "BFloat16"
                      : k.dtype == GemmDtype::F32AsBF16 ? "floatAsBFloat16"
                                                        : "float";
  return fmt::format("GemmTunableOp_{}_{}{}", dtype, k.trans_a ? 'T' : 'N', k.trans_b ? 'T' : 'N');
}

std::string params(const GemmKey& k) {
  return fmt::format("{}{}_{}_{}_{}_ld_{}_{}_{}", k.trans_a ? 't' : 'n', k.trans_b ? 't' : 'n', k.m,
                     k.n, k.k, k.lda, k.ldb, k.ldc);
}

std::string solution_name(const Solution& s) {
  switch (s.kind) {
    case SolutionKind::Default:
      return std::string(kDefault);
    case SolutionKind::Tiled:
      return std::string(kTiled);
    case SolutionKind::BlasLt:
      break;
  }
  std::string out(kBlasLtPrefix);
  for (size_t i = 0; i < 8; ++i) out += (i ? "_" : "") + hex64(s.algo[i]);
  return out;
}

std::string format_table(const Table& t) {
  std::string out;
  for (const Validator& v : t.validators) {
    check_field("validator name", v.name);
    check_field("validator " + v.name + " value", v.value);
    out += fmt::format("Validator,{},{}\n", v.name, v.value);
  }
  std::map<GemmKey, size_t> seen;
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const Entry& e = t.entries[i];
    if (!seen.emplace(e.key, i).second)
      fail("GEMM table: {},{} appears twice", op_name(e.key), params(e.key));
    out += fmt::format("{},{},{},{:.6g}\n", op_name(e.key), params(e.key),
                       solution_name(e.solution), e.time_ms);
  }
  return out;
}

Table parse_table(std::string_view text, std::string_view source) {
  Table t;
  std::map<GemmKey, int> seen;
  for_each_line(text, [&](int number, std::string_view line) {
    const Where w{source, number, line};
    const std::vector<std::string_view> f = split(line, ',');
    if (f[0] == "Validator") {
      if (f.size() != 3) w.fail("a validator line is Validator,NAME,VALUE ({} fields)", f.size());
      if (!t.entries.empty())
        w.fail("validator {} after the first GEMM line: validators come first", f[1]);
      if (!known_validator(f[1]))
        w.fail(
            "unknown validator '{}' (known: ZAYA_GEMM_TABLE_VERSION, CUBLASLT_VERSION, "
            "GPU_NAME, GPU_ARCH, GPU_RUNTIME)",
            f[1]);
      for (const Validator& v : t.validators)
        if (v.name == f[1]) w.fail("validator {} given twice", f[1]);
      if (f[1] == "ZAYA_GEMM_TABLE_VERSION" && f[2] != std::to_string(kVersion))
        w.fail("table version {} is not this zaya's {}: retune (zaya tune gemm)", f[2], kVersion);
      t.validators.push_back({std::string(f[1]), std::string(f[2])});
      return;
    }
    if (f.size() != 4) w.fail("a GEMM line is op,params,solution,time_ms ({} fields)", f.size());
    Entry e;
    e.key = parse_key(f[0], f[1], w);
    e.solution = parse_solution(f[2], w);
    const std::string ms(f[3]);
    char* end = nullptr;
    e.time_ms = ms.empty() ? NAN : std::strtod(ms.c_str(), &end);
    if (ms.empty() || end != ms.c_str() + ms.size() || !std::isfinite(e.time_ms) || e.time_ms < 0)
      w.fail("time_ms '{}' must be a number ≥ 0", f[3]);
    e.line = number;
    if (const auto [it, fresh] = seen.emplace(e.key, number); !fresh)
      w.fail("{},{} was already given on line {}", f[0], f[1], it->second);
    t.entries.push_back(e);
  });
  for (std::string_view name : kValidatorNames) {
    bool have = false;
    for (const Validator& v : t.validators) have = have || v.name == name;
    if (!have)
      fail(
          "{}: no 'Validator,{},…' line: a GEMM table starts with its five validators (made by "
          "zaya tune gemm)",
          source, name);
  }
  return t;
}

void check_validators(const Table& t, const std::vector<Validator>& running,
                      std::string_view source) {
  for (const Validator& r : running)
    for (const Validator& v : t.validators)
      if (v.name == r.name && v.value != r.value)
        fail(
            "{}: validator {} is '{}' in the table but '{}' here: the table was tuned for "
            "another library or device; retune it here (zaya tune gemm) or drop it "
            "(train.gemm_table)",
            source, v.name, v.value, r.value);
}

Table load_table(const std::string& path) {
  return parse_table(read_text_file(path, "GEMM table"), path);
}

void save_table(const std::string& path, const Table& t) {
  write_file(path, format_table(t));
}

std::string format_untuned(const std::vector<GemmKey>& keys) {
  std::string out;
  for (const GemmKey& k : keys) out += op_name(k) + "," + params(k) + "\n";
  return out;
}

std::vector<GemmKey> parse_untuned(std::string_view text, std::string_view source) {
  std::vector<GemmKey> keys;
  for_each_line(text, [&](int number, std::string_view line) {
    const Where w{source, number, line};
    const std::vector<std::string_view> f = split(line, ',');
    if (f.size() != 2) w.fail("an untuned line is op,params ({} fields)", f.size());
    keys.push_back(parse_key(f[0], f[1], w));
  });
  return keys;
}

}  // namespace zaya::gemm_table
