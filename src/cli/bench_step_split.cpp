// `zaya bench step`'s temporary dataset and its split of a step by op family (bench_step.h).
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cli/bench_step.h"
#include "core/assert.h"
#include "core/rng.h"
#include "data/shards.h"

namespace zaya::cli::bench_step {

namespace {

constexpr const char* kGemms = "GEMMs (linear + MoE experts + LM head)";

// The op families of the split (by op name); an op not listed is "other ops".
const char* op_family(const std::string& op) {
  static const std::vector<std::pair<const char*, const char*>> prefixes = {
      {"linear_", "GEMMs (linear)"},
      {"attention_", "attention"},
      {"cca_conv", "CCA conv/qk/rope"},
      {"qk_mean", "CCA conv/qk/rope"},
      {"value_shift", "CCA conv/qk/rope"},
      {"l2norm_scale", "CCA conv/qk/rope"},
      {"rope_", "CCA conv/qk/rope"},
      {"moe_", "MoE experts + dispatch"},
      {"router_", "router + EDA"},
      {"eda_", "router + EDA"},
      {"gelu_", "router + EDA"},
      {"silu_mul", "router + EDA"},
      {"count_classes", "router + EDA"},
      {"rmsnorm_", "norms + residual"},
      {"merge_rmsnorm", "norms + residual"},
      {"residual_merge", "norms + residual"},
      {"embedding_", "norms + residual"},
      {"xent_", "LM head loss"},
      {"lm_head_", "LM head loss"},
      {"count_scored", "LM head loss"},
      {"shift_targets", "LM head loss"},
      {"newton_schulz", "optimizer"},
      {"adamw_", "optimizer"},
      {"muon_", "optimizer"},
      {"balance_", "optimizer"},
      {"sum_squares", "optimizer"},
      {"sum", "LM head loss"},
      {"scale", "optimizer"},
      {"fill", "memory (fill/copy)"},
      {"copy", "memory (fill/copy)"},
      {"convert", "memory (fill/copy)"},
      {"gather_rows", "memory (fill/copy)"},
      {"scatter_rows", "memory (fill/copy)"},
      {"concat_cols", "memory (fill/copy)"},
      {"zero_where_class", "memory (fill/copy)"},
  };
  for (const auto& [prefix, family] : prefixes)
    if (op.rfind(prefix, 0) == 0) return family;
  return "other ops";
}

}  // namespace

std::string family_of(const std::string& entry, bool gemm_regions) {
  const size_t slash = entry.find('/');
  const std::string family = op_family(entry.substr(0, slash));
  if (!gemm_regions) return family;
  const bool gemm_op =
      family == "GEMMs (linear)" || family == "MoE experts + dispatch" || family == "LM head loss";
  if (slash != std::string::npos)  // a region: the GEMMs of a GEMM op, else its op's family
    return gemm_op && entry.substr(slash + 1) == "gemm" ? kGemms : family;
  if (family == "GEMMs (linear)") return kGemms;  // linear's own work around its GEMM (bias)
  if (family == "MoE experts + dispatch") return "MoE dispatch";  // sort, gather, SiLU, combine
  return family;
}

void Split::add(const std::vector<ops::profile::OpTime>& ops, double wall, double comm) {
  for (const auto& o : ops) {
    entries_[o.op].first += o.calls;
    entries_[o.op].second += o.seconds;
    ops_ += o.seconds;
  }
  wall_ += wall;
  comm_ += comm;
  ++steps_;
}

bool Split::has_gemm_regions() const {
  return std::any_of(entries_.begin(), entries_.end(), [](const auto& e) {
    return e.first.size() > 5 && e.first.compare(e.first.size() - 5, 5, "/gemm") == 0;
  });
}

std::vector<std::pair<std::string, double>> Split::families() const {
  const bool regions = has_gemm_regions();
  std::map<std::string, double> by_family;
  for (const auto& [name, cs] : entries_) by_family[family_of(name, regions)] += cs.second;
  std::vector<std::pair<std::string, double>> out(by_family.begin(), by_family.end());
  // Collectives run outside ops (the optimizer calls the group between its ops).
  out.emplace_back("communication", comm_);
  out.emplace_back("outside ops", std::max(0.0, wall_ - ops_ - comm_));
  std::sort(out.begin(), out.end(),
            [](const auto& x, const auto& y) { return x.second > y.second; });
  return out;
}

SyntheticDataset::SyntheticDataset(int64_t vocab, int64_t train_tokens, uint64_t seed) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "zaya-bench-step-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) fail("bench step: cannot create a temporary directory in {}", tmpl);
  dir_ = tmpl;
  DatasetManifest m;
  m.vocab_size = vocab;
  m.eos_id = 0;
  m.files = 1;
  const std::pair<std::string, int64_t> splits[] = {{"train", train_tokens}, {"val", 4096}};
  for (size_t k = 0; k < 2; ++k) {
    const auto& [split, n] = splits[k];
    const CounterRng rng{seed, 17 + k};
    std::vector<uint32_t> tokens(static_cast<size_t>(n));
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = uint32_t(rng.uniform(i) * double(vocab)) % uint32_t(vocab);
    const std::string file = split + "_000000.bin";
    write_shard(dir_ + "/" + file, tokens, uint32_t(vocab));
    SplitInfo s;
    s.documents = 1;
    s.tokens = n;
    s.shards.push_back({file, n, token_checksum(tokens.data(), tokens.size())});
    m.splits[split] = s;
  }
  write_manifest(dir_, m);
}

SyntheticDataset::~SyntheticDataset() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace zaya::cli::bench_step
