// Optimizer shards: writing one, and reassembling the global state from any number of them
// (optimizer_shards.h).
#include "checkpoint/optimizer_shards.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/arena.h"
#include "core/assert.h"
#include "io/json_parse.h"
#include "io/safetensors.h"

namespace zaya {

namespace {

using json = nlohmann::json;

constexpr const char* kOptimizerFormat = "zaya-optimizer-state-v1";

json parse_metadata_json(const std::string& text, const std::string& what) {
  try {
    return parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: not valid JSON: {}", what, e.what());
  }
}

// A whole decimal integer ("2x" and "" are not).
bool parse_count(const std::string& text, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, err] = std::from_chars(text.data(), end, out);
  return err == std::errc() && ptr == end;
}

// A tensor of the global layout: where it starts in the global vector and its shape.
struct LayoutEntry {
  int64_t offset;
  std::vector<int64_t> shape;
};

// A stored range of the global vector.
struct StoredRange {
  int64_t global_offset, length;
  const float* data;
  std::string file;
};

// What a checkpoint's shards hold, checked against each other: one layout, ranges sorted by
// global offset that tile [0, total) exactly.
struct StoredState {
  std::vector<SafeTensors> files;  // keeps the mappings the ranges point into
  std::map<std::string, LayoutEntry> layout;
  std::vector<StoredRange> ranges;
};

// Opens every shard, checks their metadata, and collects the layout and the ranges.
StoredState read_shards(const std::string& dir, const std::vector<std::string>& shard_files) {
  if (shard_files.empty()) fail("{}: checkpoint has no optimizer shard", dir);
  StoredState st;
  std::string layout_text;
  int64_t total = 0, world_size = -1;
  std::set<int64_t> ranks;
  for (const std::string& rel : shard_files) {
    const std::string path = dir + "/" + rel;
    st.files.push_back(SafeTensors::open_file(path));
    const SafeTensors& file = st.files.back();
    const auto& meta = file.metadata();
    auto get = [&](const char* key) -> const std::string& {
      auto it = meta.find(key);
      if (it == meta.end()) fail("{}: optimizer shard metadata has no '{}'", path, key);
      return it->second;
    };
    if (get("format") != kOptimizerFormat)
      fail("{}: unknown optimizer shard format '{}' (expected {})", path, get("format"),
           kOptimizerFormat);
    const std::string& ws_text = get("world_size");
    const std::string& rank_text = get("rank");
    const std::string& total_text = get("total_elements");
    int64_t ws = 0, rank = 0;
    if (!parse_count(ws_text, ws) || !parse_count(rank_text, rank) ||
        !parse_count(total_text, total))
      fail("{}: optimizer shard metadata world_size/rank/total_elements are not integers", path);
    if (world_size < 0) world_size = ws;
    if (ws != world_size || rank < 0 || rank >= ws || !ranks.insert(rank).second)
      fail("{}: optimizer shard rank {} of world size {} is inconsistent with the other shards",
           path, rank, ws);
    if (layout_text.empty()) {
      layout_text = get("layout");
      const json jl = parse_metadata_json(layout_text, path + " (layout metadata)");
      try {
        int64_t next = 0;  // the tensors are laid out back to back, in order
        for (const json& e : jl) {
          const std::string name = e.at("name").get<std::string>();
          LayoutEntry entry{e.at("offset").get<int64_t>(),
                            e.at("shape").get<std::vector<int64_t>>()};
          int64_t numel = 1;
          for (int64_t d : entry.shape) {
            if (d < 0 || (d > 0 && numel > (int64_t(1) << 62) / d))
              fail("{}: optimizer layout: tensor '{}' has a bad shape {}", path, name,
                   json(entry.shape).dump());
            numel *= d;
          }
          if (entry.offset != next)
            fail("{}: optimizer layout: tensor '{}' starts at element {}, expected {}", path, name,
                 entry.offset, next);
          if (!st.layout.emplace(name, std::move(entry)).second)
            fail("{}: optimizer layout: tensor '{}' is listed twice", path, name);
          next += numel;
        }
        if (next != total)
          fail("{}: optimizer layout covers {} elements but total_elements is {}", path, next,
               total);
      } catch (const json::exception& e) {
        fail("{}: malformed optimizer layout metadata: {}", path, e.what());
      }
    } else if (get("layout") != layout_text) {
      fail("{}: optimizer layout differs from the one in {}", path, dir + "/" + shard_files[0]);
    }
    const json jr = parse_metadata_json(get("ranges"), path + " (ranges metadata)");
    try {
      for (const json& r : jr) {
        const std::string name = r.at("tensor").get<std::string>();
        const SafeTensorInfo& info = file.at(name);
        const int64_t len = r.at("length").get<int64_t>();
        if (info.dtype != DType::F32 || info.numel() != len)
          fail("{}: optimizer range '{}' is {} with {} elements, expected F32 with {}", path, name,
               dtype_name(info.dtype), info.numel(), len);
        st.ranges.push_back({r.at("global_offset").get<int64_t>(), len,
                             static_cast<const float*>(info.data), path});
      }
    } catch (const json::exception& e) {
      fail("{}: malformed optimizer ranges metadata: {}", path, e.what());
    }
  }
  if (int64_t(shard_files.size()) != world_size)
    fail("{}: found {} optimizer shards but they were written by {} ranks", dir, shard_files.size(),
         world_size);
  std::sort(st.ranges.begin(), st.ranges.end(), [](const StoredRange& a, const StoredRange& b) {
    return a.global_offset < b.global_offset;
  });
  int64_t covered = 0;
  for (const StoredRange& r : st.ranges) {
    if (r.global_offset != covered)
      fail("{}: optimizer shards leave a gap or overlap at element {} (in {})", dir, covered,
           r.file);
    covered += r.length;
  }
  if (covered != total) fail("{}: optimizer shards cover {} of {} elements", dir, covered, total);
  return st;
}

// The stored layout must be the destination's: every tensor present with the same shape, and no
// stored tensor the destination lacks.
void check_layout(const std::string& dir, const StoredState& st, const OptimizerShard& dest) {
  std::set<std::string> wanted;
  for (const auto& [name, shape] : dest.layout) {
    wanted.insert(name);
    auto it = st.layout.find(name);
    if (it == st.layout.end())
      fail(
          "{}: optimizer tensor '{}' is not in the checkpoint (was it written by a different "
          "optimizer configuration?)",
          dir, name);
    if (shape != it->second.shape)
      fail("{}: optimizer tensor '{}' has shape {} in the checkpoint but {} in this run", dir, name,
           json(it->second.shape).dump(), json(shape).dump());
  }
  for (const auto& [name, e] : st.layout)
    if (!wanted.count(name))
      fail(
          "{}: the checkpoint holds optimizer tensor '{}' that this run does not have (was it "
          "written by a different optimizer configuration?)",
          dir, name);
}

// Copies the overlap of every stored range with slice `s` into it (s.data may be on a GPU).
void copy_slice(const std::string& dir, const StoredState& st, const OptimizerSlice& s) {
  auto it = st.layout.find(s.tensor);
  if (it == st.layout.end())
    fail("{}: optimizer destination '{}' is not in the layout", dir, s.tensor);
  if (s.data.dtype != DType::F32)
    fail("{}: optimizer destination '{}' must be F32, is {}", dir, s.tensor,
         dtype_name(s.data.dtype));
  int64_t numel = 1;
  for (int64_t d : it->second.shape) numel *= d;
  if (s.begin < 0 || s.begin + s.data.numel() > numel)
    fail("{}: optimizer destination [{}, {}) is outside '{}' ({} elements)", dir, s.begin,
         s.begin + s.data.numel(), s.tensor, numel);
  const int64_t begin = it->second.offset + s.begin, end = begin + s.data.numel();
  float* out = static_cast<float*>(s.data.data);  // memory of s.data.device
  for (const StoredRange& r : st.ranges) {
    const int64_t lo = std::max(begin, r.global_offset);
    const int64_t hi = std::min(end, r.global_offset + r.length);
    if (lo < hi)
      device_copy(Tensor(out + (lo - begin), {hi - lo}).on(s.data.device),
                  Tensor(const_cast<float*>(r.data) + (lo - r.global_offset), {hi - lo}));
  }
}

}  // namespace

OptimizerShard OptimizerShard::whole(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  OptimizerShard s;
  for (const auto& [name, t] : tensors) {
    s.layout.emplace_back(name, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim));
    s.slices.push_back({name, 0, t});
  }
  return s;
}

std::string shard_file_name(int rank) {
  return fmt::format("optimizer_rank{:05d}.safetensors", rank);
}

namespace {

// A global layout, indexed: its metadata text, and each tensor's global offset and size.
struct LayoutIndex {
  std::string text;
  std::map<std::string, std::pair<int64_t, int64_t>> where;  // name → (global offset, numel)
  int64_t total = 0;
};

LayoutIndex index_layout(const std::string& path,
                         const std::vector<std::pair<std::string, std::vector<int64_t>>>& layout) {
  LayoutIndex ix;
  json text = json::array();
  for (const auto& [name, shape] : layout) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (!ix.where.emplace(name, std::pair{ix.total, n}).second)
      fail("{}: optimizer tensor name '{}' is used twice", path, name);
    text.push_back({{"name", name}, {"offset", ix.total}, {"shape", shape}});
    ix.total += n;
  }
  ix.text = text.dump();
  return ix;
}

// What a shard file holds: its stored tensors ("<name>" when whole, "<name>@<begin>" otherwise;
// the slices' views as given) and its metadata (the global layout as `layout_text`, the ranges,
// rank and world).
struct ShardContents {
  std::vector<std::pair<std::string, Tensor>> stored;
  std::map<std::string, std::string> metadata;
};

ShardContents shard_contents(const std::string& path, const LayoutIndex& ix,
                             const std::vector<OptimizerSlice>& slices, int rank, int world,
                             const std::string& layout_text) {
  json ranges = json::array();
  ShardContents out;
  for (const OptimizerSlice& s : slices) {
    if (s.data.dtype != DType::F32)
      fail("{}: optimizer tensor '{}' is {}, but optimizer state must be F32", path, s.tensor,
           dtype_name(s.data.dtype));
    auto it = ix.where.find(s.tensor);
    if (it == ix.where.end())
      fail("{}: optimizer slice of '{}' is not in the layout", path, s.tensor);
    const auto [global, n] = it->second;
    if (s.begin < 0 || s.begin + s.data.numel() > n)
      fail("{}: optimizer slice [{}, {}) is outside '{}' ({} elements)", path, s.begin,
           s.begin + s.data.numel(), s.tensor, n);
    const bool whole = s.begin == 0 && s.data.numel() == n;
    const std::string key = whole ? s.tensor : fmt::format("{}@{}", s.tensor, s.begin);
    ranges.push_back(
        {{"tensor", key}, {"global_offset", global + s.begin}, {"length", s.data.numel()}});
    out.stored.emplace_back(key, s.data);
  }
  out.metadata = {{"format", kOptimizerFormat},   {"world_size", std::to_string(world)},
                  {"rank", std::to_string(rank)}, {"total_elements", std::to_string(ix.total)},
                  {"layout", layout_text},        {"ranges", ranges.dump()}};
  return out;
}

}  // namespace

struct OptimizerShardSizer::Index : LayoutIndex {};

OptimizerShardSizer::OptimizerShardSizer(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& layout)
    : index_(std::make_unique<Index>(Index{index_layout("(size)", layout)})),
      // The layout's text as the header holds it: a JSON string (quotes escaped).
      layout_bytes_(json(index_->text).dump().size() - 2) {}

OptimizerShardSizer::~OptimizerShardSizer() = default;

uint64_t OptimizerShardSizer::bytes(const std::vector<OptimizerSlice>& slices, int rank,
                                    int world) const {
  // The header with an empty layout string, plus the layout's own bytes.
  const ShardContents c = shard_contents("(size)", *index_, slices, rank, world, "");
  return safetensors_file_bytes(c.stored, c.metadata, layout_bytes_);
}

uint64_t optimizer_shard_file_bytes(const OptimizerShard& shard, int rank, int world) {
  return OptimizerShardSizer(shard.layout).bytes(shard.slices, rank, world);
}

void write_optimizer_shard(const std::string& path, const OptimizerShard& shard, int rank,
                           int world) {
  const LayoutIndex ix = index_layout(path, shard.layout);
  ShardContents c = shard_contents(path, ix, shard.slices, rank, world, ix.text);
  std::vector<Buffer> host;  // host copies of slices that live on a GPU
  host.reserve(c.stored.size());
  for (auto& [key, data] : c.stored) {
    if (data.device == Device::Cpu) continue;
    const Tensor src = data;
    host.emplace_back(src.nbytes());
    data = src.on(Device::Cpu);
    data.data = host.back().data();
    device_copy(data, src);
  }
  save_safetensors(path, c.stored, c.metadata);
}

void load_optimizer_state(const std::string& dir, const std::vector<std::string>& shard_files,
                          const OptimizerShard& dest) {
  const StoredState st = read_shards(dir, shard_files);
  check_layout(dir, st, dest);
  for (const OptimizerSlice& s : dest.slices) copy_slice(dir, st, s);
}

}  // namespace zaya
