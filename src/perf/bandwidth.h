// Memory bandwidth of this machine, measured with all OpenMP threads: the yardstick for
// memory-bound kernels (decode streams every weight once per token), so benchmarks can print
// "achieved / possible" from the same run.
//
// Two figures, because a read-only stream (weights during decode) is not a copy:
// - copy: STREAM "copy" convention, (bytes read + bytes written) per second while copying, i.e.
//   2·bytes per memcpy of `bytes`. The read share alone is half of it.
// - read: bytes read per second by a pure read kernel (a vectorised sum), nothing written. This
//   is the fair bound for "bytes of weights read per token": a read-only stream usually exceeds
//   the read share of a copy (no write-allocate or write-back traffic).
//
// BandwidthProbe keeps its buffers, so single passes can be interleaved with the work they are
// the yardstick for (on a shared machine the bandwidth drifts; pairing samples in time keeps the
// comparison fair). measure_* are the one-shot forms: the best of `reps` timed passes after one
// untimed pass (page faults, first touch).
#pragma once
#include <cstddef>
#include <memory>

namespace zaya {

class BandwidthProbe {
 public:
  explicit BandwidthProbe(size_t bytes);  // buffers first touched by the threads that stream them
  ~BandwidthProbe();
  double read_pass();  // bytes read per second, one parallel read-only sum over the buffer
  double copy_pass();  // (read + written) bytes per second, one parallel memcpy of the buffer

 private:
  struct Buffers;
  std::unique_ptr<Buffers> b_;
};

// (read + written) bytes per second of a parallel memcpy of `bytes` (STREAM copy convention).
double measure_copy_bandwidth(size_t bytes, int reps);

// Bytes read per second by a parallel read-only sum over `bytes`.
double measure_read_bandwidth(size_t bytes, int reps);

}  // namespace zaya
