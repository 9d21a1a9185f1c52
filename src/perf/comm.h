// Collective benchmark behind `zaya bench comm`, in the manner of nccl-tests: for each
// collective and each size in a geometric sweep, the mean time of one call and two bandwidths,
// plus a check of the result.
//
//   S     = bytes of the whole buffer: all_reduce and broadcast buf; the send buffer of
//           reduce_scatter and the recv buffer of all_gather (n ranks × chunk, as nccl-tests
//           counts it). For reduce_scatter/all_gather S is rounded down to a multiple of
//           n × element size.
//   t     = seconds per call: the mean over `iters` timed calls (after `warmup` untimed ones),
//           averaged over the ranks as nccl-tests does. Where one call is slow (large sizes on a
//           busy machine) fewer calls are made, so that a size takes about `max_seconds`: the
//           first warm-up call is timed (slowest rank) and sets the count, never below 1.
//   algbw = S / t
//   busbw = algbw × 2(n−1)/n   all_reduce    (each byte crosses the busiest link 2(n−1)/n times)
//         = algbw × (n−1)/n    reduce_scatter, all_gather
//         = algbw              broadcast
//   GB/s  = 1e9 bytes per second.
//
// Rank r's input is a deterministic function of r and the element index, so every rank knows
// what every other rank sent and checks its own result element by element ("wrong" = elements
// that differ, summed over the ranks). The data are small integers, exact in every dtype, so the
// check is exact whatever the reduction order. all_reduce and broadcast work in place (the timed
// calls compound or repeat), so every collective is checked on one extra call made after the
// inputs are written afresh and the outputs poisoned.
//
// Buffers live on `device`: the host for the single and mpi groups, the GPU for nccl (the data
// are written and checked on the host and copied to and from the GPU outside the timed calls).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/group.h"

namespace zaya::dist {

enum class CommOp { AllReduce, ReduceScatter, AllGather, Broadcast };

std::string comm_op_name(CommOp op);  // "all_reduce", …
// Parses "all_reduce,all_gather" or "all"; throws zaya::Error naming the valid choices.
std::vector<CommOp> parse_comm_ops(const std::string& list);
// "8", "64K", "1M", "256M", "2G" (binary multiples; a trailing B or iB is allowed).
int64_t parse_byte_size(const std::string& text);
// busbw / algbw for `op` on `ranks` ranks.
double bus_bandwidth_factor(CommOp op, int ranks);

struct CommBenchOptions {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t(256) << 20;
  int64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  double max_seconds = 1;  // timed calls per size stop at about this many seconds
  std::vector<CommOp> ops{CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather,
                          CommOp::Broadcast};
  DType dtype = DType::F32;
  Device device = Device::Cpu;  // where the collectives' buffers live
};
// Throws zaya::Error for options that make no sweep (min > max, factor < 2, iters < 1, …).
void validate(const CommBenchOptions& opt);

// The sizes of the sweep: min, min·factor, … up to max (max itself always included).
std::vector<int64_t> sweep_sizes(const CommBenchOptions& opt);

struct CommBenchRow {
  CommOp op;
  int64_t bytes = 0;  // S
  int64_t count = 0;  // elements in S
  int iters = 0;      // timed calls made
  double time_us = 0, algbw_gbs = 0, busbw_gbs = 0;
  int64_t wrong = 0;  // over all ranks
  // This rank's own share: its wrong elements and its mean seconds per call by its own clock
  // (`zaya preflight` names the rank that saw a wrong result).
  int64_t wrong_here = 0;
  double time_us_here = 0;
};

// Runs one collective at one size on every rank of `group` (a collective call itself: every
// rank must call it with the same arguments). Uses the caller's buffers `a` and `b`, each of at
// least `bytes` bytes, on opt.device.
CommBenchRow bench_collective(Group& group, CommOp op, int64_t bytes, const CommBenchOptions& opt,
                              void* a, void* b);

// The whole sweep: every op × every size; `on_row` sees each row as soon as it is measured
// (on every rank; the CLI prints on rank 0 only).
std::vector<CommBenchRow> run_comm_bench(Group& group, const CommBenchOptions& opt,
                                         const std::function<void(const CommBenchRow&)>& on_row);

}  // namespace zaya::dist
