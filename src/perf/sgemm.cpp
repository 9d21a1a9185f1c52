#include "perf/sgemm.h"

#include <cblas.h>

#include <vector>

#include "core/timer.h"

namespace zaya {

struct SgemmProbe::Buffers {
  int n;
  std::vector<float> a, b, c;
};

SgemmProbe::SgemmProbe(int n) : b_(std::make_unique<Buffers>()) {
  const size_t size = size_t(n) * size_t(n);
  b_->n = n;
  b_->a.assign(size, 0.5f);
  b_->b.assign(size, 0.25f);
  b_->c.assign(size, 0.0f);
}

SgemmProbe::~SgemmProbe() = default;

double SgemmProbe::pass() {
  const int n = b_->n;
  Timer t;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, b_->a.data(), n,
              b_->b.data(), n, 0.0f, b_->c.data(), n);
  return 2.0 * n * double(n) * n / t.seconds();
}

double measure_sgemm_rate(double seconds) {
  SgemmProbe probe;
  probe.pass();  // warm-up: thread pool, caches, page faults
  Timer t;
  double inv = 0;  // FLOP/s over all products together: the harmonic mean of the passes
  int reps = 0;
  do inv += 1.0 / probe.pass(), ++reps;
  while (t.seconds() < seconds);
  return reps / inv;
}

}  // namespace zaya
