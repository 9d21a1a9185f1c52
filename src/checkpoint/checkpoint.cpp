// Checkpoint directories: atomic write (temporary name, fsync, rename), manifest verification,
// keep-last-N pruning and loading (see checkpoint.h for the layout and the optimizer format).
// Optimizer slices may live on a GPU: they are written through host copies and loaded through
// device_copy, so the files are the same whichever device trained.
#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/arena.h"
#include "core/log.h"
#include "core/timer.h"
#include "dist/group.h"
#include "io/file.h"
#include "io/json_parse.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "checkpoint/async_writer.h"
#include "resilience/faults.h"

namespace zaya {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kManifest = "manifest.json";
constexpr const char* kManifestFormat = "zaya-checkpoint";
constexpr int kManifestVersion = 1;
constexpr const char* kOptimizerFormat = "zaya-optimizer-state-v1";

// fsync a file or directory by path; throws Error naming it.
void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) fail("{}: cannot open for fsync: {}", path, errno_str());
  if (::fsync(fd) != 0) {
    std::string err = errno_str();
    ::close(fd);
    fail("{}: fsync failed: {}", path, err);
  }
  ::close(fd);
}

// Writes `text` to `path` (a fresh file inside the temporary directory) and fsyncs it.
void write_file_synced(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", path, errno_str());
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string err = n < 0 ? errno_str() : "short write";
      ::close(fd);
      fail("{}: write failed: {}", path, err);
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    std::string err = errno_str();
    ::close(fd);
    fail("{}: fsync failed: {}", path, err);
  }
  if (::close(fd) != 0) fail("{}: close failed: {}", path, errno_str());
}

struct FileDigest {
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
};

// Size and XXH3-64 of a whole file (read through a mapping). With `sync`, also fsyncs it.
// Throws Error naming the file when it cannot be read.
FileDigest digest_file(const std::string& path, bool sync) {
  FileDigest d;
  d.xxh3 = file_xxh3(path, sync, &d.bytes);
  return d;
}

// Every regular file under dir, as paths relative to it (sorted).
std::vector<std::string> list_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file()) out.push_back(fs::relative(it->path(), dir).generic_string());
  if (ec) fail("{}: cannot list: {}", dir, ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

// The step of a directory named step_<digits>, or -1.
int64_t parse_step_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0) return -1;
  int64_t step = -1;
  const char* b = name.data() + 5;
  const char* e = name.data() + name.size();
  auto [ptr, err] = std::from_chars(b, e, step);
  if (err != std::errc() || ptr != e || step < 0) return -1;
  return step;
}

// step_* directories under root, newest first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::end(it); it.increment(ec)) {
    int64_t step = parse_step_name(it->path().filename().string());
    if (step >= 0 && it->is_directory()) out.emplace_back(step, it->path().string());
  }
  if (ec) fail("{}: cannot list checkpoints: {}", root, ec.message());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// Writes one rank's optimizer shard: its slices as stored tensors ("<name>" when whole,
// "<name>@<begin>" otherwise) with the global layout and their global offsets as metadata.
void write_optimizer_shard(const std::string& path, const OptimizerShard& shard, int rank,
                           int world) {
  json layout = json::array(), ranges = json::array();
  std::map<std::string, std::pair<int64_t, int64_t>> where;  // name → (global offset, numel)
  int64_t offset = 0;
  for (const auto& [name, shape] : shard.layout) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (!where.emplace(name, std::pair{offset, n}).second)
      fail("{}: optimizer tensor name '{}' is used twice", path, name);
    layout.push_back({{"name", name}, {"offset", offset}, {"shape", shape}});
    offset += n;
  }
  std::vector<std::pair<std::string, Tensor>> stored;
  std::vector<Buffer> host;  // host copies of slices that live on a GPU
  for (const OptimizerSlice& s : shard.slices) {
    if (s.data.dtype != DType::F32)
      fail("{}: optimizer tensor '{}' is {}, but optimizer state must be F32", path, s.tensor,
           dtype_name(s.data.dtype));
    auto it = where.find(s.tensor);
    if (it == where.end()) fail("{}: optimizer slice of '{}' is not in the layout", path, s.tensor);
    const auto [global, n] = it->second;
    if (s.begin < 0 || s.begin + s.data.numel() > n)
      fail("{}: optimizer slice [{}, {}) is outside '{}' ({} elements)", path, s.begin,
           s.begin + s.data.numel(), s.tensor, n);
    const bool whole = s.begin == 0 && s.data.numel() == n;
    const std::string key = whole ? s.tensor : fmt::format("{}@{}", s.tensor, s.begin);
    ranges.push_back(
        {{"tensor", key}, {"global_offset", global + s.begin}, {"length", s.data.numel()}});
    Tensor data = s.data;
    if (data.device != Device::Cpu) {
      host.emplace_back(data.nbytes());
      data = data.on(Device::Cpu);
      data.data = host.back().data();
      device_copy(data, s.data);
    }
    stored.emplace_back(key, data);
  }
  save_safetensors(path, stored,
                   {{"format", kOptimizerFormat},
                    {"world_size", std::to_string(world)},
                    {"rank", std::to_string(rank)},
                    {"total_elements", std::to_string(offset)},
                    {"layout", layout.dump()},
                    {"ranges", ranges.dump()}});
}

std::string shard_file_name(int rank) {
  return fmt::format("optimizer_rank{:05d}.safetensors", rank);
}

// Fields whose values differ between two configs, for the mismatch message.
std::string config_difference(const ZayaConfig& a, const ZayaConfig& b) {
  json ja = config_to_json(a), jb = config_to_json(b);
  std::string out;
  std::set<std::string> keys;
  for (const auto& [k, v] : ja.items()) keys.insert(k);
  for (const auto& [k, v] : jb.items()) keys.insert(k);
  for (const std::string& k : keys) {
    json va = ja.contains(k) ? ja[k] : json(), vb = jb.contains(k) ? jb[k] : json();
    if (va != vb)
      out += fmt::format("{}{} = {} (checkpoint) vs {} (model)", out.empty() ? "" : "; ", k,
                         va.dump(), vb.dump());
  }
  return out.empty() ? "configs differ" : out;
}

json parse_json_or_fail(const std::string& text, const std::string& what) {
  try {
    return parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: not valid JSON: {}", what, e.what());
  }
}

// Loads the optimizer shards listed in the manifest into the destinations (see checkpoint.h).
void load_optimizer_state(const std::string& dir, const std::vector<std::string>& shard_files,
                          const OptimizerShard& dest) {
  if (shard_files.empty()) fail("{}: checkpoint has no optimizer shard", dir);
  struct Entry {
    int64_t offset;
    std::vector<int64_t> shape;
  };
  struct Range {
    int64_t global_offset, length;
    const float* data;
    std::string file;
  };
  std::vector<SafeTensors> shards;
  std::string layout_text;
  std::map<std::string, Entry> layout;
  std::vector<Range> ranges;
  int64_t total = 0, world_size = -1;
  std::set<int64_t> ranks;
  for (const std::string& rel : shard_files) {
    const std::string path = dir + "/" + rel;
    shards.push_back(SafeTensors::open_file(path));
    const SafeTensors& st = shards.back();
    const auto& meta = st.metadata();
    auto get = [&](const char* key) -> const std::string& {
      auto it = meta.find(key);
      if (it == meta.end()) fail("{}: optimizer shard metadata has no '{}'", path, key);
      return it->second;
    };
    if (get("format") != kOptimizerFormat)
      fail("{}: unknown optimizer shard format '{}' (expected {})", path, get("format"),
           kOptimizerFormat);
    int64_t ws = 0, rank = 0;
    try {
      ws = std::stoll(get("world_size"));
      rank = std::stoll(get("rank"));
      total = std::stoll(get("total_elements"));
    } catch (const std::exception&) {
      fail("{}: optimizer shard metadata world_size/rank/total_elements are not integers", path);
    }
    if (world_size < 0) world_size = ws;
    if (ws != world_size || rank < 0 || rank >= ws || !ranks.insert(rank).second)
      fail("{}: optimizer shard rank {} of world size {} is inconsistent with the other shards",
           path, rank, ws);
    if (layout_text.empty()) {
      layout_text = get("layout");
      json jl = parse_json_or_fail(layout_text, path + " (layout metadata)");
      try {
        for (const json& e : jl)
          layout[e.at("name").get<std::string>()] = {e.at("offset").get<int64_t>(),
                                                     e.at("shape").get<std::vector<int64_t>>()};
      } catch (const json::exception& e) {
        fail("{}: malformed optimizer layout metadata: {}", path, e.what());
      }
    } else if (get("layout") != layout_text) {
      fail("{}: optimizer layout differs from the one in {}", path, dir + "/" + shard_files[0]);
    }
    json jr = parse_json_or_fail(get("ranges"), path + " (ranges metadata)");
    try {
      for (const json& r : jr) {
        const std::string name = r.at("tensor").get<std::string>();
        const SafeTensorInfo& info = st.at(name);
        const int64_t len = r.at("length").get<int64_t>();
        if (info.dtype != DType::F32 || info.numel() != len)
          fail("{}: optimizer range '{}' is {} with {} elements, expected F32 with {}", path, name,
               dtype_name(info.dtype), info.numel(), len);
        ranges.push_back({r.at("global_offset").get<int64_t>(), len,
                          static_cast<const float*>(info.data), path});
      }
    } catch (const json::exception& e) {
      fail("{}: malformed optimizer ranges metadata: {}", path, e.what());
    }
  }
  if (int64_t(shard_files.size()) != world_size)
    fail("{}: found {} optimizer shards but they were written by {} ranks", dir, shard_files.size(),
         world_size);
  // The ranges must tile [0, total) exactly.
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.global_offset < b.global_offset; });
  int64_t covered = 0;
  for (const Range& r : ranges) {
    if (r.global_offset != covered)
      fail("{}: optimizer shards leave a gap or overlap at element {} (in {})", dir, covered,
           r.file);
    covered += r.length;
  }
  if (covered != total) fail("{}: optimizer shards cover {} of {} elements", dir, covered, total);

  std::set<std::string> wanted;
  for (const auto& [name, shape] : dest.layout) {
    wanted.insert(name);
    auto it = layout.find(name);
    if (it == layout.end())
      fail(
          "{}: optimizer tensor '{}' is not in the checkpoint (was it written by a different "
          "optimizer configuration?)",
          dir, name);
    if (shape != it->second.shape)
      fail("{}: optimizer tensor '{}' has shape {} in the checkpoint but {} in this run", dir, name,
           json(it->second.shape).dump(), json(shape).dump());
  }
  for (const auto& [name, e] : layout)
    if (!wanted.count(name))
      fail(
          "{}: the checkpoint holds optimizer tensor '{}' that this run does not have (was it "
          "written by a different optimizer configuration?)",
          dir, name);
  for (const OptimizerSlice& s : dest.slices) {
    auto it = layout.find(s.tensor);
    if (it == layout.end() || !wanted.count(s.tensor))
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
    for (const Range& r : ranges) {
      const int64_t lo = std::max(begin, r.global_offset);
      const int64_t hi = std::min(end, r.global_offset + r.length);
      if (lo < hi)
        device_copy(Tensor(out + (lo - begin), {hi - lo}).on(s.data.device),
                    Tensor(const_cast<float*>(r.data) + (lo - r.global_offset), {hi - lo}));
    }
  }
}

// Parses dir/manifest.json into (relative path → expected digest); "" or the reason it is bad.
std::string read_manifest(const std::string& dir,
                          std::vector<std::pair<std::string, FileDigest>>& files) {
  const std::string path = dir + "/" + kManifest;
  std::error_code ec;
  if (!fs::exists(path, ec)) return fmt::format("{}: missing (torn checkpoint)", path);
  json j;
  try {
    j = parse_json(read_text_file(path, "checkpoint manifest"));
  } catch (const JsonError& e) {
    return fmt::format("{}: not valid JSON: {}", path, e.what());
  } catch (const Error& e) {
    return e.what();
  }
  try {
    if (j.at("format").get<std::string>() != kManifestFormat ||
        j.at("version").get<int>() != kManifestVersion)
      return fmt::format("{}: not a {} v{} manifest", path, kManifestFormat, kManifestVersion);
    for (const json& f : j.at("files")) {
      const std::string rel = f.at("path").get<std::string>();
      fs::path p(rel);
      bool bad = rel.empty() || p.is_absolute();
      for (const auto& part : p) bad |= part == "..";
      if (bad) return fmt::format("{}: bad file path '{}'", path, rel);
      FileDigest d;
      d.bytes = f.at("bytes").get<uint64_t>();
      const std::string hex = f.at("xxh3_64").get<std::string>();
      auto [ptr, err] = std::from_chars(hex.data(), hex.data() + hex.size(), d.xxh3, 16);
      if (err != std::errc() || ptr != hex.data() + hex.size() || hex.size() != 16)
        return fmt::format("{}: bad checksum '{}' for {}", path, hex, rel);
      files.emplace_back(rel, d);
    }
  } catch (const json::exception& e) {
    return fmt::format("{}: malformed: {}", path, e.what());
  }
  for (const char* required :
       {"model/config.json", "model/model.safetensors", "trainer_state.json"}) {
    bool found = false;
    for (const auto& [rel, d] : files) found |= rel == required;
    if (!found) return fmt::format("{}: does not list {}", path, required);
  }
  return "";
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) {
  return fmt::format("step_{:08d}", step);
}

int64_t checkpoint_step(const std::string& dir) {
  return parse_step_name(fs::path(dir).filename().string());
}

OptimizerShard OptimizerShard::whole(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  OptimizerShard s;
  for (const auto& [name, t] : tensors) {
    s.layout.emplace_back(name, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim));
    s.slices.push_back({name, 0, t});
  }
  return s;
}

void remove_all_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) log_info("warning: could not remove {}: {}", path, ec.message());
}

namespace {

// Every rank learns whether any rank failed; then all throw (a failed rank its own error).
void agree(dist::Group& g, const std::exception_ptr& error, int64_t step) {
  double failed = error ? 1.0 : 0.0;
  g.all_reduce(Tensor(&failed, {1}), dist::ReduceOp::Max);
  if (error) std::rethrow_exception(error);
  if (failed != 0) fail("checkpoint of step {} failed on another rank (see its error)", step);
}

}  // namespace

std::string begin_checkpoint(dist::Group& g, const std::string& root, int64_t step) {
  std::exception_ptr error;
  double pid = double(::getpid());
  const std::string name = checkpoint_dir_name(step);
  if (g.rank() == 0) {
    try {
      ZAYA_CHECK_INPUT(step >= 0, "checkpoint step must be non-negative, got {}", step);
      std::error_code ec;
      fs::create_directories(root, ec);
      if (ec) fail("cannot create checkpoint directory '{}': {}", root, ec.message());
      const std::string tmp = fmt::format("{}/.tmp_{}_{}", root, name, ::getpid());
      remove_all_quietly(tmp);  // a leftover of an earlier failed attempt by this process
      fs::create_directories(tmp + "/model", ec);
      if (!ec) fs::create_directories(tmp + "/optimizer", ec);
      if (ec) fail("cannot create '{}': {}", tmp, ec.message());
    } catch (...) {
      error = std::current_exception();
    }
  }
  agree(g, error, step);
  g.broadcast(Tensor(&pid, {1}), 0);
  return fmt::format("{}/.tmp_{}_{}", root, name, int64_t(pid));
}

void write_checkpoint_part(const std::string& tmp, int rank, int world,
                           const std::function<void(const std::string&)>& write_model_dir,
                           const CheckpointData& d) {
  const std::string shard = tmp + "/optimizer/" + shard_file_name(rank);
  write_optimizer_shard(shard + ".partial", d.optimizer, rank, world);
  fsync_path(shard + ".partial", /*directory=*/false);
  if (std::rename((shard + ".partial").c_str(), shard.c_str()) != 0)
    fail("cannot rename {}.partial: {}", shard, errno_str());
  if (rank != 0) return;
  write_model_dir(tmp + "/model");
  write_file_synced(tmp + "/trainer_state.json", d.trainer_state.dump(2) + "\n");
}

std::string finish_checkpoint(const std::string& root, const std::string& tmp, int64_t step,
                              int world, int keep_last, double wait_s) {
  ZAYA_CHECK_INPUT(keep_last >= 0, "checkpoint keep_last must be non-negative, got {}", keep_last);
  const std::string name = checkpoint_dir_name(step);
  const std::string final_dir = root + "/" + name;
  std::error_code ec;
  try {
    // The other ranks' shards appear (renamed into place) when they are complete.
    Timer waited;
    for (int r = 0; r < world; ++r) {
      const std::string shard = tmp + "/optimizer/" + shard_file_name(r);
      while (!fs::exists(shard, ec)) {
        if (waited.seconds() > wait_s)
          fail("{}: rank {} did not write its optimizer shard within {:.0f} s", tmp, r, wait_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    fsync_path(tmp + "/optimizer", true);

    faults::at_checkpoint_write(step);  // kill@step:N:section:checkpoint: a torn checkpoint
    // Manifest last: it is what makes the checkpoint complete.
    json files = json::array();
    for (const std::string& rel : list_files(tmp)) {
      FileDigest dg = digest_file(tmp + "/" + rel, /*sync=*/true);
      files.push_back({{"path", rel}, {"bytes", dg.bytes}, {"xxh3_64", hex64(dg.xxh3)}});
    }
    json manifest = {{"format", kManifestFormat},
                     {"version", kManifestVersion},
                     {"step", step},
                     {"world_size", world},
                     {"files", files}};
    write_file_synced(tmp + "/" + kManifest, manifest.dump(2) + "\n");
    fsync_path(tmp + "/model", true);
    fsync_path(tmp + "/optimizer", true);
    fsync_path(tmp, true);

    // Replace an existing checkpoint of this step by moving it aside first (a directory cannot be
    // renamed over a non-empty one); the old copy is deleted once the new one is in place.
    std::string old;
    if (fs::exists(final_dir, ec)) {
      old = fmt::format("{}/.old_{}_{}", root, name, ::getpid());
      remove_all_quietly(old);
      if (std::rename(final_dir.c_str(), old.c_str()) != 0)
        fail("cannot move the existing {} aside: {}", final_dir, errno_str());
    }
    if (std::rename(tmp.c_str(), final_dir.c_str()) != 0)
      fail("cannot rename {} to {}: {}", tmp, final_dir, errno_str());
    fsync_path(root, true);
    if (!old.empty()) remove_all_quietly(old);
  } catch (...) {
    remove_all_quietly(tmp);
    throw;
  }

  if (keep_last > 0) {
    int kept = 0;
    for (const auto& [s, path] : list_checkpoints(root)) {
      if (s > step) continue;  // a later run's checkpoints are not ours to prune
      if (!fs::exists(path + "/" + kManifest, ec)) continue;  // torn: not counted, left alone
      if (++kept > keep_last) {
        log_debug("checkpoint: removing old {}", path);
        remove_all_quietly(path);
      }
    }
  }
  return final_dir;
}

std::string save_checkpoint(const std::string& root, int64_t step, const Model& m,
                            const CheckpointData& d, int keep_last) {
  return save_checkpoint(*dist::make_group("single"), root, step, m, d, keep_last);
}

std::string save_checkpoint(dist::Group& g, const std::string& root, int64_t step, const Model& m,
                            const CheckpointData& d, int keep_last) {
  ZAYA_CHECK_INPUT(keep_last >= 0, "checkpoint keep_last must be non-negative, got {}", keep_last);
  const std::string tmp = begin_checkpoint(g, root, step);
  std::exception_ptr error;
  try {
    write_checkpoint_part(
        tmp, g.rank(), g.size(), [&m](const std::string& dir) { m.save_dir(dir); }, d);
  } catch (...) {
    error = std::current_exception();
  }
  try {
    agree(g, error, step);
  } catch (...) {
    if (g.rank() == 0) remove_all_quietly(tmp);
    throw;
  }
  std::string path;
  if (g.rank() == 0) {
    try {
      path = finish_checkpoint(root, tmp, step, g.size(), keep_last, /*wait_s=*/0);
    } catch (...) {
      error = std::current_exception();
    }
  }
  agree(g, error, step);
  return root + "/" + checkpoint_dir_name(step);
}

std::string verify_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fmt::format("{}: not a directory", dir);
  std::vector<std::pair<std::string, FileDigest>> files;
  if (std::string why = read_manifest(dir, files); !why.empty()) return why;
  for (const auto& [rel, want] : files) {
    const std::string path = dir + "/" + rel;
    if (!fs::exists(path, ec)) return fmt::format("{}: missing (listed in the manifest)", path);
    FileDigest got;
    try {
      got = digest_file(path, /*sync=*/false);
    } catch (const Error& e) {
      return e.what();
    }
    if (got.bytes != want.bytes)
      return fmt::format("{}: {} bytes, the manifest says {} (truncated or corrupted)", path,
                         got.bytes, want.bytes);
    if (got.xxh3 != want.xxh3)
      return fmt::format("{}: checksum {} does not match the manifest's {} (corrupted)", path,
                         hex64(got.xxh3), hex64(want.xxh3));
  }
  return "";
}

std::string find_latest_valid_checkpoint(const std::string& root, int64_t before_step) {
  for (const auto& [step, path] : list_checkpoints(root)) {
    if (step >= before_step) continue;
    std::string why = verify_checkpoint(path);
    if (why.empty()) return path;
    log_info("warning: skipping checkpoint {}: {}", path, why);
  }
  return "";
}

int discard_checkpoints_after(const std::string& root, int64_t step) {
  int removed = 0;
  for (const auto& [s, path] : list_checkpoints(root)) {
    if (s <= step) continue;
    log_info("checkpoint: discarding {} (after the rollback point, step {})", path, step);
    remove_all_quietly(path);
    ++removed;
  }
  return removed;
}

std::string find_resume_checkpoint(const std::string& root) {
  const std::string latest = find_latest_valid_checkpoint(root);
  if (!latest.empty()) return latest;
  const auto all = list_checkpoints(root);
  if (!all.empty())
    fail(
        "{}: {} checkpoint(s) (newest {}) but none verifies (see the warnings above); refusing to "
        "start from step 0 and overwrite them: repair or move them away, or set resume = \"none\" "
        "to train from scratch",
        root, all.size(), all.front().second);
  return "";
}

namespace {

// ".tmp_step_00000042_123" / ".old_step_00000042_123" → ("step_00000042", 123); pid -1 otherwise.
std::pair<std::string, int64_t> parse_temp_name(const std::string& name,
                                                const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return {"", -1};
  const size_t us = name.rfind('_');
  if (us == std::string::npos || us <= prefix.size()) return {"", -1};
  const std::string step_name = name.substr(prefix.size(), us - prefix.size());
  int64_t pid = -1;
  const char* b = name.data() + us + 1;
  const char* e = name.data() + name.size();
  auto [ptr, err] = std::from_chars(b, e, pid);
  if (err != std::errc() || ptr != e || pid <= 0 || parse_step_name(step_name) < 0) return {"", -1};
  return {step_name, pid};
}

// True when process `pid` runs (on this machine) and is not this process.
bool other_process_alive(int64_t pid) {
  if (pid == int64_t(::getpid())) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

uint64_t tree_bytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  return bytes;
}

}  // namespace

int remove_stale_checkpoint_temps(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return 0;
  std::vector<fs::path> entries;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::end(it); it.increment(ec))
    entries.push_back(it->path());
  int removed = 0;
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    for (const char* prefix : {".tmp_", ".old_"}) {
      const auto [step_name, pid] = parse_temp_name(name, prefix);
      if (pid < 0 || !fs::is_directory(p, ec)) continue;
      if (other_process_alive(pid)) {
        log_info("warning: leaving {}: process {} (its writer?) is still running", p.string(), pid);
        continue;
      }
      const fs::path final_dir = fs::path(root) / step_name;
      if (std::string(prefix) == ".old_" && !fs::exists(final_dir, ec)) {
        // Killed between moving the old copy aside and renaming the new one into place.
        fs::rename(p, final_dir, ec);
        if (!ec) {
          log_info("checkpoint: restored {} from {} (a replacement was interrupted)",
                   final_dir.string(), name);
          continue;
        }
      }
      const uint64_t bytes = tree_bytes(p.string());
      remove_all_quietly(p.string());
      log_info("checkpoint: removed {} ({} bytes) left by an interrupted write", p.string(), bytes);
      ++removed;
    }
  }
  return removed;
}

void check_trainer_state(const nlohmann::json& s, const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  constexpr int64_t kMaxStep = int64_t(1) << 53;
  auto get = [&](const char* key, int64_t lo, int64_t hi, bool required) -> int64_t {
    if (!s.contains(key)) {
      if (required) fail("{}: \"{}\" is missing", path, key);
      return lo;
    }
    const json& v = s[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) ||
        v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail("{}: \"{}\" is {} (expected an integer in [{}, {}])", path, key, v.dump(), lo, hi);
    return v.get<int64_t>();
  };
  if (!s.is_object()) fail("{}: expected a JSON object", path);
  const int64_t step = get("step", 0, kMaxStep, true);
  const int64_t named = parse_step_name(fs::path(dir).filename().string());
  if (named >= 0 && named != step)
    fail("{}: \"step\" is {} but the directory is {} (a checkpoint of step {})", path, step,
         fs::path(dir).filename().string(), named);
  get("optimizer_steps", 0, kMaxStep, true);
  get("skipped", 0, step, false);
  get("world_size", 1, int64_t(1) << 24, false);
  get("global_batch_rows", 1, int64_t(1) << 40, false);
}

void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const std::vector<std::pair<std::string, Tensor>>& optimizer_dest) {
  load_checkpoint(dir, m, trainer_state, OptimizerShard::whole(optimizer_dest));
}

void load_checkpoint(const std::string& dir, Model& m, nlohmann::json& trainer_state,
                     const OptimizerShard& optimizer_dest) {
  if (std::string why = verify_checkpoint(dir); !why.empty())
    fail("checkpoint {} is torn or corrupted: {}; resume from an earlier checkpoint", dir, why);
  std::vector<std::pair<std::string, FileDigest>> files;
  read_manifest(dir, files);

  const std::string model_dir = dir + "/model";
  ZayaConfig cfg = load_config(model_dir + "/config.json");
  if (!(cfg == m.config()))
    fail("checkpoint {} was written for a different model config: {}", dir,
         config_difference(cfg, m.config()));
  m.load_weights(open_model_tensors(model_dir, cfg), model_dir);

  const std::string state_path = dir + "/trainer_state.json";
  trainer_state = parse_json_or_fail(read_text_file(state_path, "trainer state"), state_path);

  std::vector<std::string> shards;
  for (const auto& [rel, d] : files)
    if (rel.rfind("optimizer/", 0) == 0) shards.push_back(rel);
  load_optimizer_state(dir, shards, optimizer_dest);
}

}  // namespace zaya
