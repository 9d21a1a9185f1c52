// The cluster file (cluster.h): TOML by toml++, then one table of keys that drives the type, range
// and presence checks, so every message names the file and the key.
#include "plan/cluster.h"

#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <variant>
#include <vector>

#include "core/assert.h"

namespace zaya {

namespace {

struct ClusterKey {
  const char* key;
  std::variant<std::string Cluster::*, int64_t Cluster::*, double Cluster::*, Topology Cluster::*>
      ptr;
  bool required = true;
};

const std::vector<ClusterKey>& cluster_keys() {
  using C = Cluster;
  static const std::vector<ClusterKey> keys = {
      {"name", &C::name, false},
      {"nodes", &C::nodes},
      {"gpus_per_node", &C::gpus_per_node},
      {"gpu_memory_gb", &C::gpu_memory_gb},
      {"bf16_tflops", &C::bf16_tflops},
      {"fp32_tflops", &C::fp32_tflops},
      {"hbm_tbyte_per_s", &C::hbm_tbyte_per_s},
      {"intra_node_gbyte_per_s", &C::intra_node_gbyte_per_s},
      {"network_gbit_per_s", &C::network_gbit_per_s},
      {"topology", &C::topology},
      {"storage_write_gbyte_per_s", &C::storage_write_gbyte_per_s},
      {"host_copy_gbyte_per_s", &C::host_copy_gbyte_per_s},
  };
  return keys;
}

std::string key_list() {
  std::string out;
  for (const ClusterKey& k : cluster_keys()) out += (out.empty() ? "" : ", ") + std::string(k.key);
  return out;
}

void set_key(Cluster& c, const ClusterKey& k, const toml::node& n, const std::string& source) {
  std::visit(
      [&](auto ptr) {
        auto& v = c.*ptr;
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!n.is_string()) fail("{}: key '{}' must be a string", source, k.key);
          v = *n.value<std::string>();
        } else if constexpr (std::is_same_v<T, Topology>) {
          const std::optional<std::string> word = n.value<std::string>();
          const std::optional<Topology> t = word ? parse_enum<Topology>(*word) : std::nullopt;
          if (!n.is_string() || !t)
            fail("{}: key '{}' must be {}{}", source, k.key, enum_choices<Topology>(),
                 word ? ", got '" + *word + "'" : std::string());
          v = *t;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (!n.is_integer()) fail("{}: key '{}' must be an integer", source, k.key);
          v = *n.value<int64_t>();
          if (v < 1) fail("{}: key '{}' must be at least 1, got {}", source, k.key, v);
        } else {
          if (!n.is_number()) fail("{}: key '{}' must be a number", source, k.key);
          v = *n.value<double>();
          if (!std::isfinite(v) || v <= 0)
            fail("{}: key '{}' must be a positive finite number, got {}", source, k.key, v);
        }
      },
      k.ptr);
}

}  // namespace

Cluster parse_cluster(const std::string& text, const std::string& source) {
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    fail("{}:{}:{}: invalid TOML: {}", source, src.begin.line, src.begin.column, e.description());
  }
  Cluster c;
  std::set<std::string> seen;
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    const ClusterKey* found = nullptr;
    for (const ClusterKey& ck : cluster_keys())
      if (key == ck.key) found = &ck;
    if (!found)
      fail("{}: unknown key '{}' (a cluster file has the top-level keys {})", source, key,
           key_list());
    set_key(c, *found, node, source);
    seen.insert(key);
  }
  for (const ClusterKey& ck : cluster_keys())
    if (ck.required && !seen.count(ck.key))
      fail("{}: key '{}' is missing (a cluster file has the top-level keys {})", source, ck.key,
           key_list());
  if (c.topology == Topology::SingleNode && c.nodes != 1)
    fail("{}: key 'topology' is single-node but key 'nodes' is {} (use rails-only or fat-tree)",
         source, c.nodes);
  // The planner lays out every rank's ZeRO-1 shard: a bound keeps that quick.
  if (c.nodes > kMaxGpus || c.gpus_per_node > kMaxGpus || c.gpus() > kMaxGpus)
    fail("{}: keys 'nodes' × 'gpus_per_node' = {} × {} GPUs; the planner models at most {}", source,
         c.nodes, c.gpus_per_node, kMaxGpus);
  return c;
}

Cluster load_cluster(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("--cluster {}: a directory, not a TOML file", path);
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open {}: {}", path, std::strerror(errno));
  std::stringstream s;
  s << f.rdbuf();
  return parse_cluster(s.str(), path);
}

}  // namespace zaya
