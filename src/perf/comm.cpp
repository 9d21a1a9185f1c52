// zaya bench comm's measurement and checking (formulas in bench_comm.h).
#include "perf/comm.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/arena.h"
#include "core/assert.h"
#include "core/timer.h"

namespace zaya::dist {

std::string comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::AllReduce:
      return "all_reduce";
    case CommOp::ReduceScatter:
      return "reduce_scatter";
    case CommOp::AllGather:
      return "all_gather";
    case CommOp::Broadcast:
      return "broadcast";
  }
  return "?";
}

std::vector<CommOp> parse_comm_ops(const std::string& list) {
  const std::vector<CommOp> all{CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather,
                                CommOp::Broadcast};
  if (list == "all") return all;
  std::vector<CommOp> ops;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, end - at);
    auto it =
        std::find_if(all.begin(), all.end(), [&](CommOp op) { return comm_op_name(op) == name; });
    ZAYA_CHECK_INPUT(it != all.end(),
                     "unknown collective '{}' in --ops: use all or a comma-separated list of "
                     "all_reduce, reduce_scatter, all_gather, broadcast",
                     name);
    if (std::find(ops.begin(), ops.end(), *it) == ops.end()) ops.push_back(*it);
    at = end + 1;
  }
  return ops;
}

int64_t parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit = unit.substr(0, 1);
  if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K") shift = 10;
  if (unit == "M") shift = 20;
  if (unit == "G") shift = 30;
  ZAYA_CHECK_INPUT(digits > 0 && digits <= 12 && shift >= 0,
                   "'{}' is not a size: write bytes as a whole number with an optional K, M or G "
                   "(binary multiples), e.g. 8, 64K, 256M",
                   text);
  return std::stoll(text.substr(0, digits)) << shift;
}

double bus_bandwidth_factor(CommOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CommOp::AllReduce:
      return 2 * (n - 1) / n;
    case CommOp::ReduceScatter:
    case CommOp::AllGather:
      return (n - 1) / n;
    case CommOp::Broadcast:
      return 1;
  }
  return 1;
}

void validate(const CommBenchOptions& opt) {
  ZAYA_CHECK_INPUT(opt.min_bytes >= 1, "--min-bytes must be at least 1, got {}", opt.min_bytes);
  ZAYA_CHECK_INPUT(opt.min_bytes <= opt.max_bytes,
                   "--min-bytes ({}) is larger than --max-bytes ({})", opt.min_bytes,
                   opt.max_bytes);
  ZAYA_CHECK_INPUT(opt.max_bytes <= int64_t(16) << 30,
                   "--max-bytes {} is over the 16G this benchmark allows", opt.max_bytes);
  ZAYA_CHECK_INPUT(opt.factor >= 2, "--factor must be at least 2, got {}", opt.factor);
  ZAYA_CHECK_INPUT(opt.iters >= 1, "--iters must be at least 1, got {}", opt.iters);
  ZAYA_CHECK_INPUT(opt.warmup >= 0, "--warmup must be 0 or more, got {}", opt.warmup);
  ZAYA_CHECK_INPUT(opt.max_seconds > 0, "--max-time must be positive, got {}", opt.max_seconds);
  ZAYA_CHECK_INPUT(!opt.ops.empty(), "--ops names no collective");
  ZAYA_CHECK_INPUT(opt.dtype == DType::F32 || opt.dtype == DType::F64 || opt.dtype == DType::I32,
                   "--dtype must be f32, f64 or i32");
}

std::vector<int64_t> sweep_sizes(const CommBenchOptions& opt) {
  std::vector<int64_t> sizes;
  for (int64_t s = opt.min_bytes; s < opt.max_bytes; s *= opt.factor) sizes.push_back(s);
  sizes.push_back(opt.max_bytes);
  return sizes;
}

namespace {

// Rank r's element i: a small positive integer, exact in f32/f64/i32, distinct per rank and
// varying along the buffer. Sums over up to ~500 ranks stay below 2^24, exact in f32.
template <class T>
T value(int r, int64_t i) {
  return T((r + 1) * (i % 61 + 1));
}
template <class T>
T sum_over_ranks(int n, int64_t i) {
  return T(int64_t(n) * (n + 1) / 2 * (i % 61 + 1));
}

template <class T>
void fill(T* p, int64_t count, int r, int64_t first = 0) {
  for (int64_t i = 0; i < count; ++i) p[i] = value<T>(r, first + i);
}
template <class T>
void poison(T* p, int64_t count) {
  std::fill(p, p + count, T(-1));
}

// Writes fresh inputs (and, when `for_check`, poisons the outputs) for one call of `op`.
template <class T>
void prepare(CommOp op, int rank, int64_t count, int64_t chunk, T* a, T* b, bool for_check) {
  switch (op) {
    case CommOp::AllReduce:
      fill(a, count, rank);
      break;
    case CommOp::ReduceScatter:
      fill(a, count, rank);
      if (for_check) poison(b, chunk);
      break;
    case CommOp::AllGather:
      fill(a, chunk, rank);
      if (for_check) poison(b, count);
      break;
    case CommOp::Broadcast:
      fill(a, count, rank);  // non-roots hold their own data until the root's arrives
      break;
  }
}

// Elements of this rank's output that differ from what the collective must produce.
template <class T>
int64_t count_wrong(CommOp op, int rank, int ranks, int root, int64_t count, int64_t chunk,
                    const T* a, const T* b) {
  int64_t wrong = 0;
  switch (op) {
    case CommOp::AllReduce:
      for (int64_t i = 0; i < count; ++i) wrong += a[i] != sum_over_ranks<T>(ranks, i);
      break;
    case CommOp::ReduceScatter:
      for (int64_t j = 0; j < chunk; ++j)
        wrong += b[j] != sum_over_ranks<T>(ranks, int64_t(rank) * chunk + j);
      break;
    case CommOp::AllGather:
      for (int64_t i = 0; i < count; ++i) wrong += b[i] != value<T>(int(i / chunk), i % chunk);
      break;
    case CommOp::Broadcast:
      for (int64_t i = 0; i < count; ++i) wrong += a[i] != value<T>(root, i);
      break;
  }
  return wrong;
}

void call(Group& g, CommOp op, const CommBenchOptions& opt, int64_t count, int64_t chunk, void* a,
          void* b, int root) {
  const auto buf = [&](void* p, int64_t n) { return Tensor(p, opt.dtype, {n}).on(opt.device); };
  switch (op) {
    case CommOp::AllReduce:
      g.all_reduce(buf(a, count), ReduceOp::Sum);
      break;
    case CommOp::ReduceScatter:
      g.reduce_scatter(buf(a, count), buf(b, chunk));
      break;
    case CommOp::AllGather:
      g.all_gather(buf(a, chunk), buf(b, count));
      break;
    case CommOp::Broadcast:
      g.broadcast(buf(a, count), root);
      break;
  }
}

// The host side of the buffers `a` and `b`: they themselves, or host mirrors of GPU buffers,
// copied over (both buffers, `count` elements) by upload() and back by download().
template <class T>
class HostSide {
 public:
  HostSide(const CommBenchOptions& opt, T* a, T* b, int64_t count)
      : opt_(opt), a_(a), b_(b), count_(count) {
    if (opt.device != Device::Cpu) {
      ma_.resize(size_t(count)), mb_.resize(size_t(count));
      a = ma_.data(), b = mb_.data();
    }
    ha = a, hb = b;
  }
  void upload() const {
    if (opt_.device == Device::Cpu) return;
    device_copy(on_device(a_), on_host(ha));
    device_copy(on_device(b_), on_host(hb));
  }
  void download() const {
    if (opt_.device == Device::Cpu) return;
    device_copy(on_host(ha), on_device(a_));
    device_copy(on_host(hb), on_device(b_));
  }
  T *ha, *hb;  // where prepare() writes and count_wrong() reads

 private:
  Tensor on_device(T* p) const { return Tensor(p, opt_.dtype, {count_}).on(opt_.device); }
  Tensor on_host(T* p) const { return Tensor(p, opt_.dtype, {count_}); }
  const CommBenchOptions& opt_;
  T *a_, *b_;
  int64_t count_;
  std::vector<T> ma_, mb_;
};

template <class T>
CommBenchRow bench_typed(Group& g, CommOp op, int64_t bytes, const CommBenchOptions& opt, T* a,
                         T* b) {
  const int n = g.size(), rank = g.rank(), root = 0;
  CommBenchRow row{op};
  row.count = bytes / int64_t(sizeof(T));
  if (op == CommOp::ReduceScatter || op == CommOp::AllGather) row.count -= row.count % n;
  row.bytes = row.count * int64_t(sizeof(T));
  if (row.count == 0) return row;
  const int64_t chunk = row.count / n;
  const HostSide<T> host(opt, a, b, row.count);

  prepare(op, rank, row.count, chunk, host.ha, host.hb, false);
  host.upload();
  row.iters = opt.iters;
  int warmup = opt.warmup;
  if (warmup > 0) {
    // Time the first warm-up call on the slowest rank: it caps the calls to make.
    g.barrier();
    const Timer first;
    call(g, op, opt, row.count, chunk, a, b, root);
    double call_s = first.seconds();
    g.all_reduce(Tensor(&call_s, {1}), ReduceOp::Max);
    const double fit = opt.max_seconds / std::max(call_s, 1e-9);
    row.iters = int(std::clamp<double>(fit, 1, opt.iters));
    warmup = int(std::clamp<double>(fit, 0, warmup - 1));
  }
  for (int i = 0; i < warmup; ++i) call(g, op, opt, row.count, chunk, a, b, root);
  g.barrier();
  const Timer clock;
  for (int i = 0; i < row.iters; ++i) call(g, op, opt, row.count, chunk, a, b, root);
  double seconds = clock.seconds() / row.iters;

  prepare(op, rank, row.count, chunk, host.ha, host.hb, true);
  host.upload();
  call(g, op, opt, row.count, chunk, a, b, root);
  host.download();
  int32_t wrong = int32_t(std::min<int64_t>(
      count_wrong(op, rank, n, root, row.count, chunk, host.ha, host.hb), INT32_MAX / n));

  row.wrong_here = wrong;
  row.time_us_here = seconds * 1e6;
  g.all_reduce(Tensor(&seconds, {1}), ReduceOp::Sum);
  g.all_reduce(Tensor(&wrong, {1}), ReduceOp::Sum);
  row.time_us = seconds / n * 1e6;
  row.algbw_gbs = double(row.bytes) / (seconds / n) / 1e9;
  row.busbw_gbs = row.algbw_gbs * bus_bandwidth_factor(op, n);
  row.wrong = wrong;
  return row;
}

}  // namespace

CommBenchRow bench_collective(Group& group, CommOp op, int64_t bytes, const CommBenchOptions& opt,
                              void* a, void* b) {
  switch (opt.dtype) {
    case DType::F32:
      return bench_typed(group, op, bytes, opt, static_cast<float*>(a), static_cast<float*>(b));
    case DType::F64:
      return bench_typed(group, op, bytes, opt, static_cast<double*>(a), static_cast<double*>(b));
    case DType::I32:
      return bench_typed(group, op, bytes, opt, static_cast<int32_t*>(a), static_cast<int32_t*>(b));
    default:
      fail("bench comm: --dtype must be f32, f64 or i32");
  }
}

std::vector<CommBenchRow> run_comm_bench(Group& group, const CommBenchOptions& opt,
                                         const std::function<void(const CommBenchRow&)>& on_row) {
  validate(opt);
  // Two buffers of max_bytes (rounded up to whole 8-byte words) serve every size and op.
  const size_t bytes = (size_t(opt.max_bytes) + 7) / 8 * 8;
  const Buffer a(bytes, opt.device), b(bytes, opt.device);
  std::vector<CommBenchRow> rows;
  for (CommOp op : opt.ops)
    for (int64_t size : sweep_sizes(opt)) {
      CommBenchRow row = bench_collective(group, op, size, opt, a.data(), b.data());
      if (row.count == 0) continue;  // smaller than one element per rank
      if (on_row) on_row(row);
      rows.push_back(row);
    }
  return rows;
}

}  // namespace zaya::dist
