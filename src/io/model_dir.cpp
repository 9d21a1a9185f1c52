// Reading and writing model directories in either layout (see model_dir.h); the name map itself is
// io/hf_native_layout.cpp.
#include "io/model_dir.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "core/assert.h"
#include "io/file.h"
#include "io/hf_native_layout.h"

namespace zaya {

namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// The layer pair p of a native "model.layers.{p}.…" name (−1 if none).
int64_t pair_of(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  return std::atoll(name.c_str() + prefix.size());
}

// Stacked expert tensor `info` of pair p cut into its E per-expert views.
void slice_experts(const SafeTensorInfo& info, const ZayaConfig& c, int64_t p,
                   std::vector<SafeTensorInfo>& out) {
  const int64_t L = c.num_layers(), i = 2 * p + 1;
  if (p < 0 || i >= L || c.is_attention(i)) {
    out.push_back(info);  // not part of this model: left for the loader to report
    return;
  }
  const int64_t E = c.num_experts(i), F = c.ffn_hidden_size_list[size_t(i)], D = c.hidden_size;
  const bool gate_up = info.name.size() >= 12 && info.name.ends_with("gate_up_proj");
  const std::vector<int64_t> want =
      gate_up ? std::vector<int64_t>{E, F, D} : std::vector<int64_t>{E, D, F / 2};
  if (info.shape != want)
    fail(
        "{}: tensor '{}' has shape {} but config.json gives {} ({}; num_experts, "
        "moe_intermediate_size, hidden_size)",
        info.file, info.name, shape_str(info.shape), shape_str(want),
        gate_up ? "[E, 2·I, D]" : "[E, D, I]");
  const size_t slice_bytes = info.nbytes / size_t(E);
  for (int64_t e = 0; e < E; ++e) {
    SafeTensorInfo s = info;
    s.name = original_name(info.name, L, e);
    s.shape.erase(s.shape.begin());
    s.data = static_cast<const char*>(info.data) + size_t(e) * slice_bytes;
    s.nbytes = slice_bytes;
    out.push_back(std::move(s));
  }
}

Tensor shaped(void* data, DType dtype, const std::vector<int64_t>& shape) {
  ZAYA_ASSERT(shape.size() <= 4, "tensor of {} dims", shape.size());
  Tensor t(data, dtype, {});
  t.ndim = int(shape.size());
  for (int k = 0; k < t.ndim; ++k) t.shape[size_t(k)] = shape[size_t(k)];
  return t;
}

std::vector<int64_t> shape_of(const Tensor& t) {
  return std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim);
}

// The native tensors of `tensors` (original names, parameter order): renamed, experts stacked.
// A stack is a view when its experts lie back to back in memory (the parameter arena), else a copy
// held in `owned`.
std::vector<std::pair<std::string, Tensor>> to_native(
    const ZayaConfig& c, const std::vector<std::pair<std::string, Tensor>>& tensors,
    std::vector<std::unique_ptr<Buffer>>& owned) {
  struct Out {
    std::string name;
    Tensor whole;
    std::vector<Tensor> experts;
  };
  std::vector<Out> outs;
  std::map<std::string, size_t> where;
  for (const auto& [name, t] : tensors) {
    const NativeRef ref = native_ref(name, c.num_layers());
    auto [it, fresh] = where.emplace(ref.name, outs.size());
    if (fresh) outs.push_back({ref.name, {}, {}});
    Out& o = outs[it->second];
    if (ref.expert < 0) {
      if (!fresh) fail("cannot write native layout: two tensors map to '{}'", ref.name);
      o.whole = t;
      continue;
    }
    if (ref.expert != int64_t(o.experts.size()))
      fail("cannot write native layout: expert {} of '{}' out of order", ref.expert, ref.name);
    o.experts.push_back(t);
  }
  std::vector<std::pair<std::string, Tensor>> result;
  for (Out& o : outs) {
    if (o.experts.empty()) {
      result.emplace_back(o.name, o.whole);
      continue;
    }
    const Tensor& first = o.experts[0];
    std::vector<int64_t> shape = shape_of(first);
    shape.insert(shape.begin(), int64_t(o.experts.size()));
    bool contiguous = true;
    for (size_t e = 0; e < o.experts.size(); ++e) {
      const Tensor& t = o.experts[e];
      if (t.dtype != first.dtype || shape_of(t) != shape_of(first))
        fail("cannot write native layout: the experts of '{}' differ in dtype or shape", o.name);
      contiguous &= t.data == static_cast<const char*>(first.data) + e * first.nbytes();
    }
    void* data = first.data;
    if (!contiguous) {
      owned.push_back(std::make_unique<Buffer>(first.nbytes() * o.experts.size()));
      data = owned.back()->data();
      for (size_t e = 0; e < o.experts.size(); ++e)
        std::memcpy(static_cast<char*>(data) + e * first.nbytes(), o.experts[e].data,
                    first.nbytes());
    }
    result.emplace_back(o.name, shaped(data, first.dtype, shape));
  }
  return result;
}

void remove_if_exists(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
}

}  // namespace

std::string stored_name(const ZayaConfig& c, const std::string& name) {
  if (c.legacy_names) return legacy_name(name);
  if (c.semantics != Semantics::Native) return name;
  const NativeRef r = native_ref(name, c.num_layers());
  return r.expert < 0 ? r.name : fmt::format("{}[{}]", r.name, r.expert);
}

SafeTensors open_model_tensors(const std::string& dir, const ZayaConfig& c) {
  SafeTensors st = SafeTensors::open_dir(dir);
  std::vector<SafeTensorInfo> infos;
  if (c.legacy_names) {
    for (const std::string& name : st.names()) {
      SafeTensorInfo renamed = st.at(name);
      renamed.name = original_from_legacy(name);
      infos.push_back(std::move(renamed));
    }
    return st.with_tensors(std::move(infos), dir + " (legacy layout)");
  }
  if (c.semantics != Semantics::Native) return st;
  for (const std::string& name : st.names()) {
    const SafeTensorInfo& info = st.at(name);
    if (is_stacked_expert(name)) {
      slice_experts(info, c, pair_of(name), infos);
      continue;
    }
    SafeTensorInfo renamed = info;
    renamed.name = original_name(name, c.num_layers());
    infos.push_back(std::move(renamed));
  }
  return st.with_tensors(std::move(infos), dir + " (native layout)");
}

void save_model_dir(const std::string& dir, const ZayaConfig& c,
                    const std::vector<std::pair<std::string, Tensor>>& tensors,
                    uint64_t max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create directory '{}': {}", dir, ec.message());
  save_config(c, (fs::path(dir) / "config.json").string());
  std::vector<std::unique_ptr<Buffer>> owned;
  std::vector<std::pair<std::string, Tensor>> out =
      c.semantics == Semantics::Native ? to_native(c, tensors, owned) : tensors;
  if (c.legacy_names)
    for (auto& nt : out) nt.first = legacy_name(nt.first);
  const std::map<std::string, std::string> meta = {{"format", "pt"}};

  // Shards: consecutive tensors, each shard at most max_shard_bytes unless one tensor is larger.
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  uint64_t total = 0, in_shard = 0;
  for (const auto& nt : out) {
    const uint64_t b = nt.second.nbytes();
    if (in_shard > 0 && in_shard + b > max_shard_bytes) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(nt);
    in_shard += b;
    total += b;
  }
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (shards.size() == 1) {
    remove_if_exists(index);
    save_safetensors(single.string(), out, meta);
    return;
  }
  remove_if_exists(single);  // open_dir prefers a single file over an index
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, shards.size());
    save_safetensors((fs::path(dir) / file).string(), shards[k], meta);
    for (const auto& nt : shards[k]) weight_map[nt.first] = file;
  }
  nlohmann::ordered_json j = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file(index.string(), j.dump(2) + "\n");
}

}  // namespace zaya
