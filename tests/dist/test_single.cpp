// dist::Group of size 1 ("single"): every collective is the identity (a copy for
// reduce_scatter/all_gather, in place allowed), arguments are checked as on N ranks, make_group
// picks single outside a launcher, and the MPI group also works outside a launcher (size 1).
// Also the pure parts of `zaya bench comm`: size parsing, sweep, bus-bandwidth factors, and the
// benchmark's own check on the single group.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/assert.h"
#include "dist/group.h"
#include "perf/comm.h"

using namespace zaya;
using namespace zaya::dist;

namespace {

// Clears the launcher variables for the scope of one test (ctest could run under srun).
struct NoLauncherEnv {
  NoLauncherEnv() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "ZAYA_DIST_TIMEOUT"})
      unsetenv(v);
  }
};

template <class T>
std::vector<T> iota_vec(int64_t n, T start) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST(GroupSingle, AutoOutsideALauncherIsSingle) {
  NoLauncherEnv env;
  auto g = make_group();
  EXPECT_EQ(g->backend(), dist::Backend::Single);
  EXPECT_EQ(g->rank(), 0);
  EXPECT_EQ(g->size(), 1);
  EXPECT_EQ(make_group("single")->backend(), dist::Backend::Single);
}

TEST(GroupSingle, UnknownKindAndBadTimeoutAreUserErrors) {
  NoLauncherEnv env;
  EXPECT_THROW(make_group("nccl2"), Error);
  EXPECT_THROW(make_group("single", 0), Error);
  setenv("ZAYA_DIST_TIMEOUT", "soon", 1);
  EXPECT_THROW(make_group("single"), Error);
  unsetenv("ZAYA_DIST_TIMEOUT");
}

TEST(GroupSingle, AllReduceIsIdentityForEveryOpAndDtype) {
  auto g = make_group("single");
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    auto f = iota_vec<float>(7, -3.5f);
    auto d = iota_vec<double>(1, 2.25);
    auto i = iota_vec<int32_t>(1000003, -500);
    const auto f0 = f;
    const auto d0 = d;
    const auto i0 = i;
    g->all_reduce(Tensor(f.data(), {7}), op);
    g->all_reduce(Tensor(d.data(), {1}), op);
    g->all_reduce(Tensor(i.data(), {1000003}), op);
    EXPECT_EQ(f, f0);
    EXPECT_EQ(d, d0);
    EXPECT_EQ(i, i0);
  }
}

TEST(GroupSingle, ReduceScatterAndAllGatherCopy) {
  auto g = make_group("single");
  for (int64_t n : {1, 7, 1000003}) {
    auto send = iota_vec<double>(n, 0.5);
    std::vector<double> recv(n, -1);
    g->reduce_scatter(Tensor(send.data(), {n}), Tensor(recv.data(), {n}));
    EXPECT_EQ(recv, send);
    std::vector<int32_t> gathered(n, -1);
    auto mine = iota_vec<int32_t>(n, 3);
    g->all_gather(Tensor(mine.data(), {n}), Tensor(gathered.data(), {n}));
    EXPECT_EQ(gathered, mine);
  }
  // In place: recv is chunk rank() of send / send is chunk rank() of recv.
  auto buf = iota_vec<float>(7, 1);
  const auto before = buf;
  g->reduce_scatter(Tensor(buf.data(), {7}), Tensor(buf.data(), {7}));
  g->all_gather(Tensor(buf.data(), {7}), Tensor(buf.data(), {7}));
  EXPECT_EQ(buf, before);
}

TEST(GroupSingle, BroadcastAndBarrier) {
  auto g = make_group("single");
  auto buf = iota_vec<float>(7, 1);
  const auto before = buf;
  g->broadcast(Tensor(buf.data(), {7}), 0);
  EXPECT_EQ(buf, before);
  g->barrier();
  EXPECT_THROW(g->broadcast(Tensor(buf.data(), {7}), 1), Error);
  EXPECT_THROW(g->broadcast(Tensor(buf.data(), {7}), -1), Error);
}

TEST(GroupSingle, MismatchedBuffersAreErrors) {
  auto g = make_group("single");
  std::vector<float> f(8);
  std::vector<double> d(8);
  std::vector<uint16_t> h(8);
  EXPECT_THROW(g->all_reduce(Tensor(h.data(), {8})), Error);  // bf16 is not a collective dtype
  EXPECT_THROW(g->reduce_scatter(Tensor(f.data(), {8}), Tensor(d.data(), {8})), Error);
  EXPECT_THROW(g->reduce_scatter(Tensor(f.data(), {8}), Tensor(f.data(), {7})), Error);
  EXPECT_THROW(g->all_gather(Tensor(f.data(), {4}), Tensor(f.data(), {8})), Error);
}

// Zero-element buffers: every collective returns without an error and touches no memory (the
// element behind the empty views keeps its value), started ones too.
TEST(GroupSingle, EmptyBuffersAreFine) {
  auto g = make_group("single");
  float x[2] = {1.5f, -2.5f};
  const Tensor a(&x[0], {0}), b(&x[1], {0});
  EXPECT_NO_THROW(g->all_reduce(a));
  EXPECT_NO_THROW(g->reduce_scatter(b, a));
  EXPECT_NO_THROW(g->all_gather(b, a));
  EXPECT_NO_THROW(g->broadcast(a, 0));
  EXPECT_NO_THROW(g->start_reduce_scatter(b, a)->wait());
  EXPECT_NO_THROW(g->start_all_gather(b, a)->wait());
  EXPECT_EQ(x[0], 1.5f);
  EXPECT_EQ(x[1], -2.5f);
}

// The MPI backend without mpirun: MPI starts as a singleton, a 1-rank group.
TEST(GroupSingle, MpiOutsideALauncherIsSizeOne) {
  NoLauncherEnv env;
  auto g = make_group("mpi", 30);
  EXPECT_EQ(g->backend(), dist::Backend::Mpi);
  EXPECT_EQ(g->size(), 1);
  EXPECT_EQ(g->rank(), 0);
  auto v = iota_vec<double>(7, 1);
  const auto before = v;
  g->all_reduce(Tensor(v.data(), {7}), ReduceOp::Max);
  EXPECT_EQ(v, before);
  std::vector<double> out(7, 0);
  g->all_gather(Tensor(v.data(), {7}), Tensor(out.data(), {7}));
  EXPECT_EQ(out, before);
  std::fill(out.begin(), out.end(), 0);
  g->reduce_scatter(Tensor(v.data(), {7}), Tensor(out.data(), {7}));
  EXPECT_EQ(out, before);
  g->broadcast(Tensor(v.data(), {7}), 0);
  g->barrier();
  EXPECT_EQ(v, before);
  EXPECT_THROW(g->broadcast(Tensor(v.data(), {7}), 1), Error);
}

TEST(BenchComm, ParsesSizesOpsAndSweeps) {
  EXPECT_EQ(parse_byte_size("8"), 8);
  EXPECT_EQ(parse_byte_size("64K"), 65536);
  EXPECT_EQ(parse_byte_size("256M"), int64_t(256) << 20);
  EXPECT_EQ(parse_byte_size("1MiB"), 1 << 20);
  EXPECT_EQ(parse_byte_size("2gb"), int64_t(2) << 30);
  for (const char* bad : {"", "M", "12Q", "-5", "1.5M", "99999999999999K"})
    EXPECT_THROW(parse_byte_size(bad), Error) << bad;

  EXPECT_EQ(parse_comm_ops("all").size(), 4u);
  auto ops = parse_comm_ops("broadcast,all_reduce,broadcast");
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0], CommOp::Broadcast);
  EXPECT_EQ(ops[1], CommOp::AllReduce);
  EXPECT_THROW(parse_comm_ops("allreduce"), Error);
  EXPECT_THROW(parse_comm_ops("all_reduce,"), Error);

  CommBenchOptions opt;
  opt.min_bytes = 8, opt.max_bytes = 100, opt.factor = 4;
  EXPECT_EQ(sweep_sizes(opt), (std::vector<int64_t>{8, 32, 100}));
  opt.max_bytes = 8;
  EXPECT_EQ(sweep_sizes(opt), (std::vector<int64_t>{8}));
  opt.min_bytes = 16;
  EXPECT_THROW(validate(opt), Error);
  opt = CommBenchOptions{};
  opt.factor = 1;
  EXPECT_THROW(validate(opt), Error);
  opt = CommBenchOptions{};
  opt.iters = 0;
  EXPECT_THROW(validate(opt), Error);
}

TEST(BenchComm, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CommOp::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CommOp::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CommOp::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CommOp::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CommOp::AllReduce, 1), 0.0);
}

TEST(BenchComm, SingleGroupSweepIsCorrectAndRowsAreConsistent) {
  auto g = make_group("single");
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    CommBenchOptions opt;
    opt.min_bytes = 4, opt.max_bytes = 4096, opt.factor = 4, opt.iters = 2, opt.warmup = 1;
    opt.dtype = dt;
    int seen = 0;
    auto rows = run_comm_bench(*g, opt, [&](const CommBenchRow&) { ++seen; });
    EXPECT_EQ(size_t(seen), rows.size());
    // f64 skips the 4-byte size (less than one element).
    EXPECT_EQ(rows.size(), (dt == DType::F64 ? 5u : 6u) * 4);
    for (const auto& r : rows) {
      EXPECT_EQ(r.wrong, 0) << comm_op_name(r.op) << " " << r.bytes;
      EXPECT_EQ(r.bytes, r.count * int64_t(dtype_size(dt)));
      EXPECT_GT(r.time_us, 0);
      EXPECT_NEAR(r.algbw_gbs, double(r.bytes) / (r.time_us * 1e-6) / 1e9, 1e-9 * r.algbw_gbs);
      EXPECT_DOUBLE_EQ(r.busbw_gbs, r.algbw_gbs * bus_bandwidth_factor(r.op, 1));
    }
  }
}

namespace {

// A group whose collectives are subtly broken, to show the benchmark's check catches it.
class CorruptingGroup final : public Group {
 public:
  explicit CorruptingGroup(CommOp broken) : broken_(broken) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  dist::Backend backend() const override { return dist::Backend::Mpi; }
  void all_reduce(const Tensor& buf, ReduceOp op) override {
    inner_->all_reduce(buf, op);
    if (broken_ == CommOp::AllReduce) flip_last(buf);
  }
  void reduce_scatter(const Tensor& send, const Tensor& recv) override {
    inner_->reduce_scatter(send, recv);
    if (broken_ == CommOp::ReduceScatter) flip_last(recv);
  }
  void all_gather(const Tensor& send, const Tensor& recv) override {
    if (broken_ != CommOp::AllGather) inner_->all_gather(send, recv);  // "forgets" to copy
  }
  void broadcast(const Tensor& buf, int root) override {
    inner_->broadcast(buf, root);
    if (broken_ == CommOp::Broadcast) flip_last(buf);
  }
  void barrier() override {}

 private:
  // Only the benchmark's data buffers (more than one element), not its 1-element time/wrong sums.
  static void flip_last(const Tensor& t) {
    if (t.numel() < 2) return;
    if (t.dtype == DType::F32) t.ptr<float>()[t.numel() - 1] += 1;
  }
  CommOp broken_;
  std::unique_ptr<Group> inner_ = make_group("single");
};

}  // namespace

TEST(BenchComm, CheckCountsWrongElementsOfABrokenCollective) {
  for (CommOp op :
       {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather, CommOp::Broadcast}) {
    CorruptingGroup g(op);
    CommBenchOptions opt;
    opt.min_bytes = 64, opt.max_bytes = 64, opt.iters = 1, opt.warmup = 0;
    for (const auto& r : run_comm_bench(g, opt, nullptr))
      EXPECT_EQ(r.wrong, r.op != op                ? 0
                         : op == CommOp::AllGather ? 16
                                                   : 1)
          << comm_op_name(op) << " broken, row " << comm_op_name(r.op);
  }
}

TEST(BenchComm, MaxTimeCapsTheTimedCalls) {
  auto g = make_group("single");
  CommBenchOptions opt;
  opt.min_bytes = 1024, opt.max_bytes = 4096, opt.iters = 7, opt.warmup = 2;
  opt.max_seconds = 1e-12;  // every call is "slow": one timed call per size
  for (const auto& r : run_comm_bench(*g, opt, nullptr)) EXPECT_EQ(r.iters, 1);
  opt.max_seconds = 1e3;
  for (const auto& r : run_comm_bench(*g, opt, nullptr)) EXPECT_EQ(r.iters, 7);
  opt.warmup = 0;  // nothing to estimate from: --iters as given
  opt.max_seconds = 1e-12;
  for (const auto& r : run_comm_bench(*g, opt, nullptr)) EXPECT_EQ(r.iters, 7);
  opt.max_seconds = 0;
  EXPECT_THROW(validate(opt), Error);
}
