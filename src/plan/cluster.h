// A training cluster as `zaya plan` sees it (docs/plan.md): one TOML file of top-level keys, every
// one required except `name`. Rates are the hardware's peak figures in the units the key names
// (decimal: 1 GB = 1e9 bytes, 1 Gbit = 1e9 bits); the planner applies its stated MFU to the FLOP
// rates only. A missing key, a value of the wrong type, a non-positive or non-finite value, an
// unknown key or a topology that contradicts the node count is a zaya::Error naming the file and
// the key.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/enum_words.h"

namespace zaya {

// How the GPUs of different nodes reach each other (what the collective formulas assume):
// single-node: no network (nodes = 1); rails-only: GPU k of every node shares a rail (a switch)
// with GPU k of the others and nothing else, so a collective goes hierarchically (inside each
// node, then across nodes along the rails); fat-tree: every GPU reaches every other at its full
// network rate, so a flat ring over all GPUs is possible too.
enum class Topology { SingleNode, RailsOnly, FatTree };
template <>
struct EnumWords<Topology> {
  static constexpr std::pair<Topology, std::string_view> words[] = {
      {Topology::SingleNode, "single-node"},
      {Topology::RailsOnly, "rails-only"},
      {Topology::FatTree, "fat-tree"}};
};

// The most GPUs a cluster file may describe.
constexpr int64_t kMaxGpus = 65536;

struct Cluster {
  std::string name;  // optional; for the report
  int64_t nodes = 0;
  int64_t gpus_per_node = 0;
  double gpu_memory_gb = 0;           // per GPU
  double bf16_tflops = 0;             // dense BF16 matrix peak per GPU
  double fp32_tflops = 0;             // dense FP32 matrix peak per GPU
  double hbm_tbyte_per_s = 0;         // per GPU
  double intra_node_gbyte_per_s = 0;  // per GPU, one direction, to the node's other GPUs
  double network_gbit_per_s = 0;      // per GPU, one direction, to other nodes
  Topology topology = Topology::SingleNode;
  double storage_write_gbyte_per_s = 0;  // the shared file system's aggregate write rate
  double host_copy_gbyte_per_s = 0;      // per GPU, device to host (an asynchronous snapshot)

  int64_t gpus() const { return nodes * gpus_per_node; }
};

// Parses cluster TOML `text`; `source` (the file) names it in every message.
Cluster parse_cluster(const std::string& text, const std::string& source);
// Reads and parses the file `path` (a file that cannot be read names the file and why).
Cluster load_cluster(const std::string& path);

}  // namespace zaya
