// Straggler detection: each step, every rank's compute time (the step's wall time outside
// collectives: a rank that waits for a slow peer is not slow itself) is compared with the median
// of the other ranks' (with two ranks: the other one); a rank above factor × median for `steps`
// consecutive steps is a straggler, named once when it becomes one and again if it recovers and
// falls behind later.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace zaya {

struct StragglerConfig {
  double factor = 1.5;
  int64_t steps = 5;
  // A rank must also be this many seconds above the median: a few milliseconds of scheduling
  // noise on tiny steps are not a straggler (they reach 6x on 2 shared cores).
  double min_excess_s = 0.05;
};

class StragglerTracker {
 public:
  StragglerTracker(int world, StragglerConfig c);
  // One step's compute seconds per rank; returns the ranks that became stragglers at this step.
  std::vector<int> observe(std::span<const double> seconds);
  // Ranks that are stragglers now.
  std::vector<int> current() const;
  // Each rank's ratio to the median at the last step.
  const std::vector<double>& ratios() const { return ratio_; }

 private:
  StragglerConfig c_;
  std::vector<int64_t> slow_run_;  // consecutive slow steps per rank
  std::vector<double> ratio_;
};

}  // namespace zaya
