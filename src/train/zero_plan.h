// ZeRO-1 ownership plan (docs/distributed.md, "ZeRO-1 training"): which rank updates which part of
// the trainable parameters, and the flat bucket that carries the gradients to their owners
// (reduce-scatter) and the updated parameters back to everyone (all-gather).
//
// - Muon matrices (is_muon_param) are owned whole: Newton–Schulz needs the whole matrix. They are
//   assigned largest cost first to the least loaded rank (cost rows·cols·min(rows, cols), ties to
//   the lower layout index and the lower rank), so the orthogonalisation work is divided, not
//   repeated. Each expert's fc1/fc2 is its own matrix (ParamKind::Expert).
// - Every other trainable tensor (AdamW) is concatenated in layout order and the concatenation is
//   cut into one contiguous slice per rank, in rank order (a slice may split a tensor), sized so
//   the optimizer state per rank (1 float per Muon element, 2 per AdamW element) is as even as
//   whole matrices allow.
// - Buffers (balancing biases) are not in the plan: every rank updates them identically.
// Buckets (the overlap of the reduce-scatter with the backward): the layers are taken in the order
// the backward finishes their gradients (the last layer with the final merge first, the embedding
// last) and cut into buckets of about `bucket_target` elements, whole layers each; 0 makes one
// bucket of everything. Every bucket is planned as above on its own — its Muon matrices to the
// ranks least loaded so far (the cost balance is the whole model's), its AdamW tensors
// water-filled against its own Muon elements — and is laid out as rank 0's segments, zero padding
// up to the bucket's chunk, rank 1's segments, …: world·chunk elements with chunk = the bucket's
// largest rank's element count, so no tensor size has to divide the number of ranks. The bucket
// buffer is the buckets one after the other (world · Σ chunks elements); a rank's shard is its
// chunk of each bucket, in bucket order (Σ chunks elements). Within a bucket a rank's segments
// are its Muon matrices (layout order), then its AdamW slice.
// The plan depends only on (layout, use_muon, world, bucket_target): every rank computes the
// same one.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/param_layout.h"

namespace zaya {

struct ZeroSegment {
  size_t spec = 0;           // index into layout.specs
  int64_t begin = 0;         // first element within the tensor
  int64_t length = 0;        // elements
  int rank = 0;              // owner
  int64_t shard_offset = 0;  // within the owner's shard (see ZeroPlan::bucket_offset)
  bool muon = false;         // a whole Muon matrix (else an AdamW slice)
  size_t bucket = 0;         // index into ZeroPlan::buckets
};

struct ZeroBucket {
  int64_t offset = 0;        // its first element in the bucket buffer (world·chunk follow)
  int64_t shard_offset = 0;  // its chunk's first element in every rank's shard
  int64_t chunk = 1;         // elements per rank (≥ 1, ≥ every rank's elements in it)
  // Its gradients are final once model_backward has reported this layer done (its lowest layer;
  // −1: the embedding, the end of the backward).
  int64_t ready_after = -1;
};

struct ZeroPlan {
  int world = 1;
  int64_t chunk = 1;                  // shard elements per rank: Σ of the buckets' chunks
  std::vector<ZeroBucket> buckets;    // in the order the backward finishes them
  std::vector<ZeroSegment> segments;  // by rank, then shard_offset
  std::vector<size_t> first;          // rank r's segments are [first[r], first[r + 1])
  std::vector<int64_t> elements;      // per rank: elements owned (the rest of its chunk is padding)
  std::vector<int64_t> state_floats;  // per rank: optimizer-state floats of what it owns
  std::vector<double> muon_cost;      // per rank: Σ rows·cols·min(rows, cols) of its matrices

  std::span<const ZeroSegment> owned_by(int rank) const {
    return {segments.data() + first[size_t(rank)], first[size_t(rank) + 1] - first[size_t(rank)]};
  }
  int64_t bucket_elements() const { return chunk * world; }
  // Where segment z sits in the bucket buffer.
  int64_t bucket_offset(const ZeroSegment& z) const {
    const ZeroBucket& b = buckets[z.bucket];
    return b.offset + z.rank * b.chunk + (z.shard_offset - b.shard_offset);
  }
};

// Muon takes Matrix and Expert tensors (2-D) unless use_muon is off; everything else trainable
// is AdamW. The one rule, shared by the optimizer and the plan.
bool is_muon_param(const ParamSpec& s, bool use_muon);

// Newton–Schulz cost model of one matrix: rows·cols·min(rows, cols).
double muon_cost(const ParamSpec& s);

// The layer after whose backward the gradient of s is final: its own (spec.layer), the last
// layer's for the final merge (the backward's first), −1 for the embedding (its last).
int64_t gradient_ready_after(const ParamLayout& layout, const ParamSpec& s);

// Throws zaya::Error for world < 1 or a negative bucket_target.
ZeroPlan make_zero_plan(const ParamLayout& layout, bool use_muon, int world,
                        int64_t bucket_target = 0);

}  // namespace zaya
