// The byte-equality check of `zaya plan` against a real run (tests/cli/test_plan.cpp on one
// process, test_plan_mpi.cpp on 2 and 3 ranks): the same training TOML is planned for a
// one-node cluster of N GPUs and trained by N processes; every byte figure the plan prints must
// equal what the run reports — its start-up memory line, its first step's ZeRO-1 collective line
// and the sizes its checkpoint's manifest lists.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_util.h"
#include "test_util.h"
#include "train/tiny_data.h"

namespace zaya::test {

// A one-node cluster of `gpus` GPUs (rates that make no byte figure depend on them).
inline std::string write_one_node_cluster(const ScratchDir& dir, int gpus) {
  const std::string path = dir / ("cluster" + std::to_string(gpus) + ".toml");
  std::ofstream(path) << "nodes = 1\ngpus_per_node = " << gpus
                      << "\ngpu_memory_gb = 80\nbf16_tflops = 989\nfp32_tflops = 67\n"
                         "hbm_tbyte_per_s = 3.35\nintra_node_gbyte_per_s = 450\n"
                         "network_gbit_per_s = 400\ntopology = \"single-node\"\n"
                         "storage_write_gbyte_per_s = 10\nhost_copy_gbyte_per_s = 25\n";
  return path;
}

// The numbers after each `label ` in the line of `log` that contains `anchor`.
inline std::vector<uint64_t> figures(const std::string& log, const std::string& anchor,
                                     const std::vector<std::string>& labels) {
  const size_t at = log.find(anchor);
  EXPECT_NE(at, std::string::npos) << "no '" << anchor << "' in:\n" << log;
  if (at == std::string::npos) return std::vector<uint64_t>(labels.size(), 0);
  const std::string line = log.substr(at, log.find('\n', at) - at);
  std::vector<uint64_t> out;
  for (const std::string& label : labels) {
    std::smatch m;
    const bool found = std::regex_search(line, m, std::regex(label + " ([0-9]+)"));
    EXPECT_TRUE(found) << "no '" << label << " N' in: " << line;
    out.push_back(found ? std::stoull(m[1].str()) : 0);
  }
  return out;
}

// Plans and trains the tiny model on `ranks` processes (2 steps, a synchronous checkpoint at the
// end) with the extra `sets`, and compares every byte figure.
inline void expect_plan_matches_run(const ScratchDir& dir, const std::string& name, int ranks,
                                    const std::vector<std::string>& sets) {
  const std::string shards =
      std::filesystem::exists(dir / "shards") ? dir / "shards" : make_tiny_dataset(dir);
  const std::string toml = dir / (name + ".toml");
  write_tiny_toml(
      toml, shards, "micro_batch = 2\ngrad_accum = 2\nsteps = 2\neval_batches = 0\n",
      "[checkpoint]\nasync = false\nevery = 0\ndir = \"" + dir / (name + "_ckpt") + "\"\n");
  std::string set_args;
  for (const std::string& s : sets) set_args += " --set " + s;

  const CliResult plan = run_zaya_in(dir.path, "plan --json --model " + toml + " --cluster " +
                                                   write_one_node_cluster(dir, ranks) + set_args);
  ASSERT_EQ(plan.code, 0) << plan.err;
  const nlohmann::json p = nlohmann::json::parse(plan.out);
  ASSERT_EQ(p.at("cluster").at("ranks").get<int>(), ranks);

  const std::string launcher =
      ranks == 1
          ? ""
          : std::string(ZAYA_MPIRUN) + " " + ZAYA_MPIRUN_FLAGS + " -np " + std::to_string(ranks) +
                " -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS " + "-x ZAYA_DIST_TIMEOUT ";
  const std::string log_path = dir / (name + ".log");
  const std::string cmd = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ZAYA_DIST_TIMEOUT=60 " +
                          launcher + ZAYA_BINARY + " train --config " + toml + set_args + " >" +
                          log_path + " 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  const std::string log = slurp(log_path);
  ASSERT_EQ(status, 0) << cmd << "\n" << log;

  // The start-up memory line: each figure the largest rank's.
  const nlohmann::json& mem = p.at("memory_per_gpu");
  const std::vector<uint64_t> m = figures(log, "train: memory per rank",
                                          {"weights", "gradients", "optimizer state", "ZeRO bucket",
                                           "ZeRO shard", "Muon scratch", "activations"});
  const char* keys[] = {"weights",    "gradients",    "optimizer_state", "zero_bucket",
                        "zero_shard", "muon_scratch", "activations"};
  for (size_t i = 0; i < m.size(); ++i)
    EXPECT_EQ(mem.at(keys[i]).get<uint64_t>(), m[i]) << name << ": " << keys[i];
  if (ranks > 1) {
    EXPECT_GT(mem.at("zero_bucket").get<uint64_t>(), 0u);
  }

  // The first step's ZeRO-1 collective buffers.
  const nlohmann::json& coll = p.at("collectives_per_step");
  const std::vector<uint64_t> c =
      figures(log, "train: ZeRO-1 collectives of step 1", {"reduce-scatter", "all-gather"});
  EXPECT_EQ(coll.at("reduce_scatter_bytes").get<uint64_t>(), c[0]) << name;
  EXPECT_EQ(coll.at("all_gather_bytes").get<uint64_t>(), c[1]) << name;

  // The checkpoint's files as its manifest lists them.
  const std::string step = dir / (name + "_ckpt") + "/step_00000002";
  const nlohmann::json manifest = nlohmann::json::parse(slurp(step + "/manifest.json"));
  std::map<std::string, uint64_t> sizes;
  for (const nlohmann::json& f : manifest.at("files"))
    sizes[f.at("path").get<std::string>()] = f.at("bytes").get<uint64_t>();
  const nlohmann::json& ck = p.at("checkpoint");
  ASSERT_TRUE(ck.at("model_files_exact").get<bool>());
  for (const nlohmann::json& f : ck.at("model_files")) {
    const std::string rel = "model/" + f.at("file").get<std::string>();
    ASSERT_TRUE(sizes.count(rel)) << rel << " is not in " << step << "/manifest.json";
    EXPECT_EQ(f.at("bytes").get<uint64_t>(), sizes.at(rel)) << name << ": " << rel;
  }
  const nlohmann::json& shard_bytes = ck.at("optimizer_shard_bytes");
  ASSERT_EQ(shard_bytes.size(), size_t(ranks));
  for (int r = 0; r < ranks; ++r) {
    char rel[64];
    std::snprintf(rel, sizeof rel, "optimizer/optimizer_rank%05d.safetensors", r);
    ASSERT_TRUE(sizes.count(rel)) << rel << " is not in " << step << "/manifest.json";
    EXPECT_EQ(shard_bytes[size_t(r)].get<uint64_t>(), sizes.at(rel)) << name << ": " << rel;
  }
}

}  // namespace zaya::test
