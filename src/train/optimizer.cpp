// Optimizer (optimizer.h): grouping, state layout, the step and the balancing-bias update.
#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "train/adamw.h"
#include "train/balance.h"
#include "train/grad_clip.h"
#include "train/muon.h"

namespace zaya {

namespace {

constexpr int64_t kTwo24 = int64_t(1) << 24;

// "model.layers.3.zaya_block.router.balancing_biases" → 3.
int64_t layer_of(const std::string& name) {
  constexpr std::string_view prefix = "model.layers.";
  ZAYA_ASSERT(name.rfind(prefix, 0) == 0, "optimizer: unexpected buffer {}", name);
  return std::stoll(name.substr(prefix.size()));
}

}  // namespace

Optimizer::Optimizer(const Model& m, const OptimizerConfig& cfg) : cfg_(cfg), layout_(m.layout()) {
  const ZayaConfig& c = m.config();
  size_t used = 0, largest = 0;
  for (size_t i = 0; i < layout_.specs.size(); ++i) {
    const ParamSpec& s = layout_.specs[i];
    const size_t n = size_t(s.numel());
    Entry e{i, Rule::AdamW, false, 0, 0, 0};
    switch (s.kind) {
      case ParamKind::Matrix:
      case ParamKind::Expert:
        ZAYA_ASSERT(s.shape.size() == 2, "optimizer: {} is not 2-D", s.name);
        e.rule = cfg_.use_muon ? Rule::Muon : Rule::AdamW;
        e.decay = true;
        break;
      case ParamKind::Embedding:
        e.decay = true;
        break;
      case ParamKind::Vector:
      case ParamKind::Conv:
        break;
      case ParamKind::Buffer: {
        const int64_t layer = layer_of(s.name);
        e.rule = Rule::Balance;
        e.n_real = c.num_experts(layer);
        break;
      }
    }
    const size_t state_n = e.rule == Rule::Balance ? size_t(e.n_real) : n;
    e.s0 = used;
    used += state_n;
    if (e.rule != Rule::Muon) {
      e.s1 = used;
      used += state_n;
    } else {
      largest = std::max(largest, n);
    }
    entries_.push_back(e);
  }
  balance_steps_offset_ = used;
  used += 2;
  state_ = Buffer(used * sizeof(float));  // zero-initialised
  scratch_.resize(largest);
}

int64_t Optimizer::balance_steps() const {
  const float* s = state() + balance_steps_offset_;
  return int64_t(s[0]) * kTwo24 + int64_t(s[1]);
}

void Optimizer::set_balance_steps(int64_t n) {
  float* s = state() + balance_steps_offset_;
  s[0] = float(n / kTwo24);
  s[1] = float(n % kTwo24);
}

double Optimizer::step(Model& m, double lr) {
  ZAYA_ASSERT(m.layout().total == layout_.total, "optimizer: built for another model");
  const double norm = clip_grad_norm(m, cfg_.grad_clip);
  if (!std::isfinite(norm)) return norm;
  ++steps_;
  AdamWParams ap{lr, cfg_.adam_beta1, cfg_.adam_beta2, cfg_.adam_eps, 0.0, steps_};
  MuonParams mp{lr,
                cfg_.muon_momentum,
                cfg_.weight_decay,
                cfg_.muon_rms_scale,
                cfg_.muon_nesterov,
                cfg_.muon_symmetric,
                cfg_.muon_ns_steps};
  for (const Entry& e : entries_) {
    const ParamSpec& s = layout_.specs[e.spec];
    float* w = m.params() + s.offset;
    const float* g = m.grads() + s.offset;
    if (e.rule == Rule::Muon) {
      muon_update(w, g, state() + e.s0, scratch_.data(), s.shape[0], s.shape[1], mp);
    } else if (e.rule == Rule::AdamW) {
      ap.weight_decay = e.decay ? cfg_.weight_decay : 0.0;
      adamw_update(w, g, state() + e.s0, state() + e.s1, s.numel(), ap);
    }
  }
  return norm;
}

void Optimizer::update_balancing_biases(Model& m,
                                        const std::map<int64_t, std::vector<int64_t>>& counts) {
  ZAYA_ASSERT(m.layout().total == layout_.total, "optimizer: built for another model");
  const int64_t t = balance_steps() + 1;
  const BalanceParams bp{
      cfg_.balance_lr, cfg_.balance_beta1, cfg_.balance_beta2, cfg_.balance_eps, 0.0, t};
  bool any = false;
  for (const Entry& e : entries_) {
    if (e.rule != Rule::Balance) continue;
    const ParamSpec& s = layout_.specs[e.spec];
    auto it = counts.find(layer_of(s.name));
    if (it == counts.end()) continue;
    ZAYA_ASSERT(int64_t(it->second.size()) == s.numel(), "{}: {} counts for {} classes", s.name,
                it->second.size(), s.numel());
    balance_update(m.params() + s.offset, state() + e.s0, state() + e.s1, it->second, e.n_real, bp);
    any = true;
  }
  if (any) set_balance_steps(t);
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Entry& e : entries_) {
    const ParamSpec& s = layout_.specs[e.spec];
    Tensor t(state() + e.s0, {s.numel()});
    if (e.rule == Rule::Balance) {
      t = Tensor(state() + e.s0, {e.n_real});
    } else {
      t.ndim = int(s.shape.size());
      for (int i = 0; i < t.ndim; ++i) t.shape[size_t(i)] = s.shape[size_t(i)];
    }
    if (e.rule == Rule::Muon) {
      out.emplace_back(s.name + ".muon_momentum", t);
    } else {
      out.emplace_back(s.name + ".adam_m", t);
      Tensor v = t;
      v.data = state() + e.s1;
      out.emplace_back(s.name + ".adam_v", v);
    }
  }
  out.emplace_back("balance.steps", Tensor(state() + balance_steps_offset_, {2}));
  return out;
}

}  // namespace zaya
