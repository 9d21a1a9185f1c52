// Memory bandwidth of this machine, measured with all OpenMP threads: the yardstick for
// memory-bound kernels (decode streams every weight once per token), so benchmarks can print
// "achieved / possible" from the same run.
//
// Two figures, because a read-only stream (weights during decode) is not a copy:
// - measure_copy_bandwidth: STREAM "copy" convention, (bytes read + bytes written) per second
//   while copying, i.e. 2·bytes per memcpy of `bytes`. The read share alone is half of it.
// - measure_read_bandwidth: bytes read per second by a pure read kernel (a vectorised sum),
//   nothing written. This is the fair bound for "bytes of weights read per token": a read-only
//   stream usually exceeds the read share of a copy (no write-allocate or write-back traffic).
// Both return the best of `reps` timed passes after one untimed pass (page faults, first touch).
#pragma once
#include <cstddef>

namespace zaya {

// (read + written) bytes per second of a parallel memcpy of `bytes` (STREAM copy convention).
double measure_copy_bandwidth(size_t bytes, int reps);

// Bytes read per second by a parallel read-only sum over `bytes`.
double measure_read_bandwidth(size_t bytes, int reps);

}  // namespace zaya
