// The machine's own single-precision GEMM rate (OpenBLAS sgemm, all OpenMP threads): the MFU
// denominator of `zaya train` and `zaya bench step`. A square 768³ product: large enough for
// OpenBLAS's full speed, small enough (7 MiB) to sample between training steps.
//
// SgemmProbe keeps its matrices, so single passes can be interleaved with the work they are the
// yardstick for (on a shared machine the rate drifts: pairing samples in time keeps ratios fair).
#pragma once
#include <memory>

namespace zaya {

class SgemmProbe {
 public:
  explicit SgemmProbe(int n = 768);
  ~SgemmProbe();
  double pass();  // FLOP/s of one product (2·n³ FLOPs)

 private:
  struct Buffers;
  std::unique_ptr<Buffers> b_;
};

// FLOP/s of back-to-back products for about `seconds` after one untimed warm-up product.
double measure_sgemm_rate(double seconds = 0.3);

}  // namespace zaya
