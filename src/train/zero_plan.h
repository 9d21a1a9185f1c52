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
// The bucket is rank 0's segments, zero padding up to `chunk`, rank 1's segments, …: world·chunk
// elements with chunk = the largest rank's element count, so no tensor size has to divide the
// number of ranks. A rank's segments are its Muon matrices (layout order), then its AdamW slice.
// The plan depends only on (layout, use_muon, world): every rank computes the same one.
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
  int64_t shard_offset = 0;  // within the owner's chunk: bucket offset = rank·chunk + shard_offset
  bool muon = false;         // a whole Muon matrix (else an AdamW slice)
};

struct ZeroPlan {
  int world = 1;
  int64_t chunk = 1;                  // bucket elements per rank (≥ 1, ≥ every rank's elements)
  std::vector<ZeroSegment> segments;  // bucket order: by rank, then shard_offset
  std::vector<size_t> first;          // rank r's segments are [first[r], first[r + 1])
  std::vector<int64_t> elements;      // per rank: elements owned (the rest of its chunk is padding)
  std::vector<int64_t> state_floats;  // per rank: optimizer-state floats of what it owns
  std::vector<double> muon_cost;      // per rank: Σ rows·cols·min(rows, cols) of its matrices

  std::span<const ZeroSegment> owned_by(int rank) const {
    return {segments.data() + first[size_t(rank)], first[size_t(rank) + 1] - first[size_t(rank)]};
  }
  int64_t bucket_elements() const { return chunk * world; }
};

// Muon takes Matrix and Expert tensors (2-D) unless use_muon is off; everything else trainable
// is AdamW. The one rule, shared by the optimizer and the plan.
bool is_muon_param(const ParamSpec& s, bool use_muon);

// Newton–Schulz cost model of one matrix: rows·cols·min(rows, cols).
double muon_cost(const ParamSpec& s);

// Throws zaya::Error for world < 1.
ZeroPlan make_zero_plan(const ParamLayout& layout, bool use_muon, int world);

}  // namespace zaya
