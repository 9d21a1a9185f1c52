// Optimizer (optimizer.h): grouping, state layout, the step and the balancing-bias update.
#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string_view>

#include "dist/group.h"
#include "ops/ops.h"
#include "train/balance.h"
#include "train/muon.h"

namespace zaya {

namespace {

constexpr int64_t kTwo24 = int64_t(1) << 24;

// The end of the batch of Muon pieces that starts at pieces[i] (a Muon piece): a layer's experts
// of one shape, adjacent in the parameters, the shard and the state (one rank's run of them), so
// one batched Newton–Schulz [E,rows,cols] takes them; any other matrix is a batch of one.
template <class Piece>
size_t muon_batch_end(const std::vector<Piece>& pieces, size_t i, const ParamLayout& layout) {
  const ParamSpec& s = layout.specs[pieces[i].spec];
  size_t j = i + 1;
  if (s.kind != ParamKind::Expert) return j;
  for (; j < pieces.size(); ++j) {
    const Piece &a = pieces[j - 1], &b = pieces[j];
    const ParamSpec& t = layout.specs[b.spec];
    if (b.rule != a.rule || t.kind != ParamKind::Expert || t.layer != s.layer ||
        t.shape != s.shape || t.offset != layout.specs[a.spec].offset + size_t(a.n) ||
        b.shard != a.shard + a.n || b.s0 != a.s0 + size_t(a.n))
      break;
  }
  return j;
}

}  // namespace

Optimizer::Optimizer(const Model& m, const OptimConfig& cfg)
    : Optimizer(m, cfg, dist::make_group("single"), nullptr) {}

Optimizer::Optimizer(const Model& m, const OptimConfig& cfg, dist::Group& group)
    : Optimizer(m, cfg, nullptr, &group) {}

Optimizer::Optimizer(const Model& m, const OptimConfig& cfg, std::unique_ptr<dist::Group> own_group,
                     dist::Group* group)
    : cfg_(cfg),
      own_group_(std::move(own_group)),
      group_(group ? *group : *own_group_),
      layout_(m.layout()),
      // One rank reads the gradients in place: nothing to bucket (and one bucket keeps the
      // gradient norm's summation order independent of optim.zero_bucket_mb).
      plan_(make_zero_plan(layout_, cfg.use_muon, group_.size(),
                           group_.size() == 1 ? 0 : zero_bucket_elements(cfg))),
      device_(m.device()) {
  const ZayaConfig& c = m.config();
  size_t used = 0, largest = 0, largest_k = 0;
  for (const ZeroSegment& z : plan_.owned_by(group_.rank())) {
    const ParamSpec& s = layout_.specs[z.spec];
    Piece p{z.spec,   Rule::AdamW, false, z.begin, z.length, z.shard_offset, plan_.bucket_offset(z),
            z.bucket, used,        0};
    shard_used_ = std::max(shard_used_, z.shard_offset + z.length);
    used += size_t(z.length);
    if (z.muon) {
      ZAYA_ASSERT(s.shape.size() == 2 && z.begin == 0 && z.length == s.numel(),
                  "optimizer: Muon needs all of the 2-D {}", s.name);
      p.rule = Rule::Muon;
    } else {
      p.s1 = used;
      used += size_t(z.length);
    }
    // Weight decay only on matrices: Muon's, the embedding, and Matrix/Expert under AdamW.
    p.decay = s.kind == ParamKind::Matrix || s.kind == ParamKind::Expert ||
              s.kind == ParamKind::Embedding;
    pieces_.push_back(p);
  }
  // The owned pieces are in shard order, so bucket by bucket: bucket b's are
  // [bucket_first_[b], bucket_first_[b + 1]).
  bucket_first_.assign(plan_.buckets.size() + 1, 0);
  for (const Piece& p : pieces_) ++bucket_first_[p.bucket + 1];
  std::partial_sum(bucket_first_.begin(), bucket_first_.end(), bucket_first_.begin());
  for (size_t i = 0; i < pieces_.size(); ++i) {  // scratch for the largest batch of Muon pieces
    if (pieces_[i].rule != Rule::Muon) continue;
    const size_t end = muon_batch_end(pieces_, i, layout_);
    size_t n = 0;
    for (size_t j = i; j < end; ++j) n += size_t(pieces_[j].n);
    largest = std::max(largest, n);
    i = end - 1;
  }
  for (size_t i = 0; i < layout_.specs.size(); ++i) {
    const ParamSpec& s = layout_.specs[i];
    if (s.kind != ParamKind::Buffer) continue;
    const int64_t n = c.num_experts(s.layer);
    pieces_.push_back(
        {i, Rule::Balance, false, 0, n, 0, 0, plan_.buckets.size(), used, used + size_t(n)});
    used += 2 * size_t(n);
    largest_k = std::max(largest_k, size_t(c.router_classes(s.layer)));
  }
  balance_steps_offset_ = used;
  used += 2;
  state_ = Buffer(used * sizeof(float), device_);  // zero-initialised
  scratch_ = Buffer(largest * sizeof(float), device_);
  if (device_ != Device::Cpu) counts_ = Buffer(largest_k * sizeof(double), device_);
  if (alone()) {
    for (const Piece& p : pieces_) {
      if (p.rule == Rule::Balance) continue;
      const int64_t at = int64_t(layout_.specs[p.spec].offset) + p.begin;
      if (!grad_runs_.empty() && grad_runs_.back().first + grad_runs_.back().second == at)
        grad_runs_.back().second += p.n;
      else
        grad_runs_.push_back({at, p.n});
    }
    return;
  }
  bucket_ = Buffer(size_t(plan_.bucket_elements()) * sizeof(float), device_);  // padding: zero
  shard_ = Buffer(size_t(plan_.chunk) * sizeof(float), device_);
  // The buckets' copy lists: every rank's segments in (pack), the others' out (unpack).
  pack_.resize(plan_.buckets.size());
  unpack_.resize(plan_.buckets.size());
  for (const ZeroSegment& z : plan_.segments) {
    const ops::CopySegment in{int64_t(layout_.specs[z.spec].offset) + z.begin,
                              plan_.bucket_offset(z), z.length};
    pack_[z.bucket].push_back(in);
    if (z.rank != group_.rank()) unpack_[z.bucket].push_back({in.dst, in.src, in.length});
  }
}

Optimizer::~Optimizer() = default;

Tensor Optimizer::bucket_region(size_t b) const {
  const ZeroBucket& k = plan_.buckets[b];
  return flat(bucket() + k.offset, k.chunk * plan_.world);
}

Tensor Optimizer::shard_chunk(size_t b) const {
  const ZeroBucket& k = plan_.buckets[b];
  return flat(shard() + k.shard_offset, k.chunk);
}

Tensor Optimizer::bucket_chunk(size_t b) const {
  const ZeroBucket& k = plan_.buckets[b];
  return flat(bucket() + k.offset + group_.rank() * k.chunk, k.chunk);
}

void Optimizer::start_bucket(const Model& m) {
  const size_t b = pending_.size();
  // Pack every rank's segments into the bucket (the padding is never written: it stays zero).
  ops::copy_segments(bucket_all(), flat(m.grads(), int64_t(layout_.total)), pack_[b]);
  reduce_scatter_bytes_ += bucket_region(b).nbytes();
  pending_.push_back(group_.start_reduce_scatter(bucket_region(b), shard_chunk(b)));
}

void Optimizer::gradients_ready(const Model& m, int64_t layer) {
  if (alone()) return;
  while (pending_.size() < plan_.buckets.size() &&
         plan_.buckets[pending_.size()].ready_after >= layer)
    start_bucket(m);
  group_.progress();
}

bool Optimizer::alone() const {
  return group_.size() == 1;
}

Tensor Optimizer::grad_of(const Model& m, const Piece& p, int64_t n) const {
  return alone() ? flat(m.grads() + layout_.specs[p.spec].offset + p.begin, n)
                 : flat(shard() + p.shard, n);
}

size_t Optimizer::total_state_bytes() const {
  int64_t floats = 0;
  for (int64_t f : plan_.state_floats) floats += f;
  const size_t owned_here = size_t(plan_.state_floats[size_t(group_.rank())]) * sizeof(float);
  return size_t(floats) * sizeof(float) + (state_bytes() - owned_here);
}

int64_t Optimizer::balance_steps() const {
  float s[2];
  device_copy(Tensor(s, {2}), flat(state() + balance_steps_offset_, 2));
  return int64_t(s[0]) * kTwo24 + int64_t(s[1]);
}

void Optimizer::set_balance_steps(int64_t n) {
  float s[2] = {float(n / kTwo24), float(n % kTwo24)};
  device_copy(flat(state() + balance_steps_offset_, 2), Tensor(s, {2}));
}

double Optimizer::reduce_gradients(const Model& m) {
  ZAYA_ASSERT(m.layout().total == layout_.total, "optimizer: built for another model");
  ZAYA_ASSERT(m.has_grads(), "optimizer: the model has no gradients");
  ZAYA_ASSERT(m.device() == device_, "optimizer: built for a {} model, given a {} one",
              device_name(device_), device_name(m.device()));
  if (alone()) {  // the gradients stay where the model wrote them
    double sum = 0;
    for (const auto& [offset, n] : grad_runs_) sum += ops::sum_squares(flat(m.grads() + offset, n));
    return std::sqrt(sum);
  }
  while (pending_.size() < plan_.buckets.size()) start_bucket(m);
  for (const std::unique_ptr<dist::Pending>& p : pending_) p->wait();
  pending_.clear();
  // (Over the padding between this rank's buckets too: zeros.)
  double sum = ops::sum_squares(flat(shard(), shard_used_));
  group_.all_reduce(Tensor(&sum, {1}), dist::ReduceOp::Sum);
  return std::sqrt(sum);
}

void Optimizer::update(Model& m, double lr, double grad_norm, bool defer_gathers) {
  ZAYA_ASSERT(m.layout().total == layout_.total, "optimizer: built for another model");
  ZAYA_ASSERT(std::isfinite(grad_norm), "optimizer: update() with a non-finite norm {}", grad_norm);
  ZAYA_ASSERT(gathers_.empty(), "optimizer: update() before the last update's finish_update()");
  ZAYA_ASSERT(m.device() == device_, "optimizer: built for a {} model, given a {} one",
              device_name(device_), device_name(m.device()));
  // The clipping factor: folded into AdamW's read of the gradient (float(g·float(clip)), the bits
  // of scaling first, one pass fewer); Muon's gradients are scaled first (the momentum's f32
  // arithmetic would fuse the factor into an FMA, other bits).
  const double clip =
      cfg_.grad_clip > 0 && grad_norm > cfg_.grad_clip ? cfg_.grad_clip / grad_norm : 1.0;
  ++steps_;
  ops::AdamWParams ap{lr, cfg_.adam_beta1, cfg_.adam_beta2, cfg_.adam_eps, 0.0, steps_, clip};
  MuonParams mp{lr,
                cfg_.muon_momentum,
                cfg_.weight_decay,
                cfg_.muon_rms_scale,
                cfg_.muon_nesterov,
                cfg_.muon_symmetric,
                cfg_.muon_bf16,
                int(cfg_.muon_ns_steps)};
  // Bucket by bucket in the order the next forward reads them (the embedding's first), each
  // bucket's all-gather started as soon as its part of the update is done.
  for (size_t b = plan_.buckets.size(); b-- > 0;) {
    for (size_t i = bucket_first_[b]; i < bucket_first_[b + 1]; ++i) {
      const Piece& p = pieces_[i];
      const ParamSpec& s = layout_.specs[p.spec];
      // Muon: a batch of `count` matrices (a layer's experts, or one); AdamW: the piece
      const size_t end = p.rule == Rule::Muon ? muon_batch_end(pieces_, i, layout_) : i + 1;
      const int64_t count = int64_t(end - i), n = count * p.n;
      const Tensor w = flat(m.params() + s.offset + p.begin, n);
      const Tensor g = grad_of(m, p, n);
      if (p.rule == Rule::Muon) {
        if (clip != 1.0) ops::scale(g, clip);
        muon_update(w, g, flat(state() + p.s0, n), flat(static_cast<float*>(scratch_.data()), n),
                    count, s.shape[0], s.shape[1], mp);
      } else {
        ap.weight_decay = p.decay ? cfg_.weight_decay : 0.0;
        ops::adamw_update(w, g, flat(state() + p.s0, n), flat(state() + p.s1, n), ap);
      }
      if (!alone()) ops::copy(flat(bucket() + p.at, n), w);  // this rank's chunk of its bucket
      i = end - 1;
    }
    if (!alone()) {
      all_gather_bytes_ += bucket_region(b).nbytes();
      gathers_.push_back({b, group_.start_all_gather(bucket_chunk(b), bucket_region(b))});
    }
  }
  if (!defer_gathers) finish_update(m);
}

void Optimizer::parameters_needed(Model& m, int64_t layer) {
  if (gathers_.empty()) return;
  for (;
       gathered_ < gathers_.size() && plan_.buckets[gathers_[gathered_].first].ready_after <= layer;
       ++gathered_)
    unpack_bucket(m, gathered_);
  if (gathered_ == gathers_.size()) {
    gathers_.clear();
    gathered_ = 0;
  } else {
    group_.progress();
  }
}

void Optimizer::finish_update(Model& m) {
  parameters_needed(m, std::numeric_limits<int64_t>::max());
}

void Optimizer::unpack_bucket(Model& m, size_t k) {
  const auto& [b, pending] = gathers_[k];
  pending->wait();
  // The other ranks' parameters (this rank's were updated in place).
  ops::copy_segments(flat(m.params(), int64_t(layout_.total)), bucket_all(), unpack_[b]);
}

double Optimizer::step(Model& m, double lr) {
  const double norm = reduce_gradients(m);
  if (std::isfinite(norm)) update(m, lr, norm);
  return norm;
}

void Optimizer::update_balancing_biases(Model& m, const RoutingCounts& counts) {
  ZAYA_ASSERT(m.layout().total == layout_.total, "optimizer: built for another model");
  ZAYA_ASSERT(m.device() == device_, "optimizer: built for a {} model, given a {} one",
              device_name(device_), device_name(m.device()));
  const int64_t t = balance_steps() + 1;
  const ops::BalanceParams bp{
      cfg_.balance_lr, cfg_.balance_beta1, cfg_.balance_beta2, cfg_.balance_eps, 0.0, t};
  bool any = false;
  for (const Piece& p : pieces_) {
    if (p.rule != Rule::Balance) continue;
    const ParamSpec& s = layout_.specs[p.spec];
    const std::span<const double> k = counts.layer(s.layer);
    ZAYA_ASSERT(int64_t(k.size()) == s.numel(), "{}: {} counts for {} classes", s.name, k.size(),
                s.numel());
    Tensor k_t(const_cast<double*>(k.data()), {int64_t(k.size())});  // host memory
    if (device_ != Device::Cpu) {  // the counts the update reads, on the device
      const Tensor on_device =
          Tensor(static_cast<double*>(counts_.data()), {k_t.numel()}).on(device_);
      device_copy(on_device, k_t);
      k_t = on_device;
    }
    ops::balance_update(flat(m.params() + s.offset, p.n), flat(state() + p.s0, p.n),
                        flat(state() + p.s1, p.n), k_t, bp);
    any = true;
  }
  if (any) set_balance_steps(t);
}

OptimizerShard Optimizer::state_shard(bool with_replicated) {
  OptimizerShard out;
  auto shape_of = [&](const Piece& p) {
    const ParamSpec& s = layout_.specs[p.spec];
    return p.rule == Rule::Balance ? std::vector<int64_t>{p.n} : s.shape;
  };
  // The global layout, in layout order (the same at any number of ranks).
  for (size_t i = 0; i < layout_.specs.size(); ++i) {
    const ParamSpec& s = layout_.specs[i];
    if (!s.trainable()) {
      auto p = std::find_if(pieces_.begin(), pieces_.end(),
                            [&](const Piece& q) { return q.rule == Rule::Balance && q.spec == i; });
      ZAYA_ASSERT(p != pieces_.end(), "optimizer: no balancing state for {}", s.name);
      out.layout.emplace_back(s.name + ".adam_m", std::vector<int64_t>{p->n});  // real experts
      out.layout.emplace_back(s.name + ".adam_v", std::vector<int64_t>{p->n});
    } else if (is_muon_param(s, cfg_.use_muon)) {
      out.layout.emplace_back(s.name + ".muon_momentum", s.shape);
    } else {
      out.layout.emplace_back(s.name + ".adam_m", s.shape);
      out.layout.emplace_back(s.name + ".adam_v", s.shape);
    }
  }
  out.layout.emplace_back("balance.steps", std::vector<int64_t>{2});
  // This rank's slices, sorted into layout order.
  std::vector<const Piece*> order;
  for (const Piece& p : pieces_)
    if (p.rule != Rule::Balance || with_replicated) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const Piece* a, const Piece* b) {
    return a->spec != b->spec ? a->spec < b->spec : a->begin < b->begin;
  });
  for (const Piece* p : order) {
    const std::string& name = layout_.specs[p->spec].name;
    const std::vector<int64_t> shape = shape_of(*p);
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    auto view = [&](size_t off) {
      Tensor t = flat(state() + off, p->n);
      if (p->n == numel) {  // whole: keep the tensor's shape
        t.ndim = int(shape.size());
        for (int i = 0; i < t.ndim; ++i) t.shape[size_t(i)] = shape[size_t(i)];
      }
      return t;
    };
    if (p->rule == Rule::Muon) {
      out.slices.push_back({name + ".muon_momentum", p->begin, view(p->s0)});
    } else {
      out.slices.push_back({name + ".adam_m", p->begin, view(p->s0)});
      out.slices.push_back({name + ".adam_v", p->begin, view(p->s1)});
    }
  }
  if (with_replicated)
    out.slices.push_back({"balance.steps", 0, flat(state() + balance_steps_offset_, 2)});
  return out;
}

OptimizerShard Optimizer::state_to_save() {
  return state_shard(/*with_replicated=*/group_.rank() == 0);
}

OptimizerShard Optimizer::state_to_load() {
  return state_shard(/*with_replicated=*/true);
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const OptimizerSlice& s : state_to_load().slices) out.emplace_back(s.tensor, s.data);
  return out;
}

}  // namespace zaya
