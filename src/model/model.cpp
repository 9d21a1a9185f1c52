#include "model/model.h"

#include <filesystem>

#include "core/log.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/param_names.h"
#include "ops/ops.h"

namespace zaya {

namespace {

// A host tensor shaped like `t`, backed by `staging` (grown when too small).
Tensor host_like(const Tensor& t, Buffer& staging) {
  if (staging.size() < t.nbytes()) staging = Buffer(t.nbytes());
  Tensor h = t;
  h.data = staging.data();
  h.device = Device::Cpu;
  return h;
}

// `t` readable on the host: itself on the CPU, else copied into `staging`.
Tensor readable_on_host(const Tensor& t, Buffer& staging) {
  if (t.device == Device::Cpu) return t;
  const Tensor h = host_like(t, staging);
  device_copy(h, t);
  return h;
}

// Tensor `name` of `st` into dst on any device: a device tensor is converted to F32 in host
// `staging` first (safetensors reads into host memory), then copied over.
void read_param(const SafeTensors& st, const std::string& name, const Tensor& dst,
                Buffer& staging) {
  if (dst.device == Device::Cpu) return st.read_into(name, dst);
  const Tensor h = host_like(dst, staging);
  st.read_into(name, h);
  device_copy(dst, h);
}

}  // namespace

Model::Model(ZayaConfig config, Device device)
    : config_(std::move(config)),
      layout_(make_param_layout(config_)),
      params_(layout_.total * sizeof(float), device) {
  w = bind_weights(config_, layout_, params(), device);
}

Tensor Model::view(float* base, const std::string& name) const {
  return layout_.at(name).view(base, device());
}

float* Model::on_host(const Buffer& arena, Buffer& staging) {
  Tensor t(static_cast<float*>(arena.data()), {int64_t(arena.size() / sizeof(float))});
  t.device = arena.device();
  return readable_on_host(t, staging).ptr<float>();
}

void Model::zero_grads() {
  if (!grads_.data()) {  // first use: inference never pays for a gradient arena
    grads_ = Buffer(layout_.total * sizeof(float), device());
    dw = bind_weights(config_, layout_, grads(), device());
    return;  // Buffer starts zeroed
  }
  grads_.zero();
}

void Model::init_random(uint64_t seed, double std) {
  for (size_t k = 0; k < layout_.specs.size(); ++k) {
    const ParamSpec& s = layout_.specs[k];
    const int64_t n = s.numel();
    const Tensor p = s.view(params(), device()).view({n});
    switch (s.init) {
      case ParamInit::Normal:  // one counter stream per tensor (k): independent of layout changes
        ops::fill_normal(p, seed, k, std);  // elsewhere; element i depends only on (seed, k, i)
        break;
      case ParamInit::Zero:
        ops::fill(p, 0.0);
        break;
      case ParamInit::One:
        ops::fill(p, 1.0);
        break;
      case ParamInit::BalancingBias:  // real experts 0, the skip class −1 (never updated)
        ops::fill(p, 0.0);
        if (config_.zaya_use_mod) ops::fill(p.rows(n - 1, n), -1.0);
        break;
    }
  }
}

void Model::load_weights(const SafeTensors& st, const std::string& where) {
  Buffer staging;  // a GPU model's tensors pass through host memory
  for (const ParamSpec& s : layout_.specs) {
    const SafeTensorInfo* info = st.find(s.name);
    if (!info) {
      std::string shape;
      for (int64_t d : s.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
      fail("{}: missing tensor '{}' (expected shape [{}]); config.json and the weights disagree",
           where, stored_name(config_, s.name), shape);
    }
    read_param(st, s.name, view(params(), s.name), staging);
  }
  for (const std::string& name : st.names()) {
    if (layout_.index.count(name)) continue;
    if (name == "lm_head.weight") {  // tied: allowed only as an exact copy of the embedding
      const ParamSpec& e = layout_.at(names::kEmbed);
      Buffer tmp(size_t(e.numel()) * sizeof(float));
      Tensor t(static_cast<float*>(tmp.data()), {e.shape[0], e.shape[1]});
      st.read_into(name, t);
      const float* a = static_cast<float*>(tmp.data());
      const float* b = readable_on_host(param(names::kEmbed), staging).ptr<float>();
      for (int64_t i = 0; i < e.numel(); ++i)
        if (a[i] != b[i])
          fail("{}: lm_head.weight differs from model.embed_tokens.weight, but ZAYA1 ties them",
               where);
      continue;
    }
    log_info("warning: {}: ignoring unexpected tensor '{}'", where, name);
  }
}

Model Model::load_dir(const std::string& dir, Device device) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("model directory '{}' does not exist", dir);
  const std::string cfg = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg)) fail("{}: no config.json in the model directory", dir);
  Model m(load_config(cfg), device);
  SafeTensors st = open_model_tensors(dir, m.config());
  m.load_weights(st, dir);
  return m;
}

void Model::save_dir(const std::string& dir) const {
  Buffer staging;  // a GPU model's weights are copied to the host first
  float* base = host_params(staging);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : layout_.specs) tensors.emplace_back(s.name, s.view(base));
  save_model_dir(dir, config_, tensors);  // in config_'s layout
}

}  // namespace zaya
