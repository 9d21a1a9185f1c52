// Model: a config, its parameter layout, and two arenas of that layout — the weights and their
// gradients (F32; allocated by the first zero_grads(), so inference never holds them) — on one
// device (the CPU by default; ops/ops.h runs the model wherever its tensors live). Loading
// accepts any float dtype on disk (F32/BF16/F16/F64) and computes in F32: a GPU model's tensors
// are converted on the host, one at a time, and copied to the device.
#pragma once
#include <string>

#include "core/arena.h"
#include "io/zaya_config.h"
#include "model/param_layout.h"
#include "model/weights.h"

namespace zaya {

class SafeTensors;

class Model {
 public:
  explicit Model(ZayaConfig config, Device device = Device::Cpu);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&&) = default;  // views stay valid: the arenas keep their heap blocks

  // Loads config.json + model.safetensors (or index + shards) from a model directory.
  static Model load_dir(const std::string& dir, Device device = Device::Cpu);
  // Fills the weights from `st`; throws zaya::Error naming any missing or mis-shaped tensor.
  void load_weights(const SafeTensors& st, const std::string& where);
  // Writes config.json + model.safetensors (F32) into dir (created if needed).
  void save_dir(const std::string& dir) const;
  // Spec §9 initialisation from the counter-based RNG (std 0.02 for matrices, embedding, convs).
  void init_random(uint64_t seed, double std = 0.02);
  // Allocates the gradient arena on first use, then zeroes it.
  void zero_grads();
  bool has_grads() const { return grads_.data() != nullptr; }
  // The arenas' allocated bytes (grads: 0 until the first zero_grads()).
  size_t params_bytes() const { return params_.size(); }
  size_t grads_bytes() const { return grads_.size(); }

  const ZayaConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Device device() const { return params_.device(); }
  // The arenas' base pointers: memory of device() (never dereference a GPU model's on the host).
  float* params() const { return static_cast<float*>(params_.data()); }
  float* grads() const { return static_cast<float*>(grads_.data()); }
  // The same arenas readable on the host: params()/grads() themselves on a CPU model, else a copy
  // made into `staging` (valid while it lives). ParamSpec::view(base) then views one tensor.
  float* host_params(Buffer& staging) const { return on_host(params_, staging); }
  float* host_grads(Buffer& staging) const { return on_host(grads_, staging); }
  // Whole-tensor views by name.
  Tensor param(const std::string& name) const { return view(params(), name); }
  Tensor grad(const std::string& name) const { return view(grads(), name); }

  ModelWeights w;   // views of params()
  ModelWeights dw;  // views of grads(); bound by the first zero_grads()

 private:
  Tensor view(float* base, const std::string& name) const;
  static float* on_host(const Buffer& arena, Buffer& staging);
  ZayaConfig config_;
  ParamLayout layout_;
  Buffer params_, grads_;
};

}  // namespace zaya
