// dist::MpiGroup under mpirun (registered as test_group_mpi_np1/_np2/_np3, label mpi): every
// collective for F32/F64/I32 at odd counts (1, 7, 1000003), every reduce op, in place and out
// of place, broadcast from each root, barrier ordering, and determinism (every rank holds the
// same bits, call after call). Rank r's data is a deterministic function of r, so each rank
// computes the expected result itself. Rank 0 prints gtest's report; other ranks print only
// their failures, and the exit code is the worst over the ranks, so a failure anywhere fails
// the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/assert.h"
#include "dist/group.h"

using namespace zaya;
using namespace zaya::dist;

namespace {

Group* g_group = nullptr;
Group& group() {
  return *g_group;
}

const int64_t kCounts[] = {1, 7, 1000003};

// Rank r's element i: spread over [-1001, 1001], not monotone in r (so max/min pick different
// ranks at different i), exact in every dtype: f32/f64 get halves, i32 thousands plus r.
int64_t base(int r, int64_t i) {
  return (i * 7919 + int64_t(r) * 104729 + 13) % 2003 - 1001;
}
template <class T>
T value(int r, int64_t i) {
  if constexpr (std::is_integral_v<T>) return T(base(r, i) * 1000 + r);
  return T(base(r, i)) * T(0.5);
}

template <class T>
T reduce_ref(ReduceOp op, int ranks, int64_t i) {
  T acc = value<T>(0, i);
  for (int r = 1; r < ranks; ++r) {
    const T v = value<T>(r, i);
    acc = op == ReduceOp::Sum   ? T(acc + v)
          : op == ReduceOp::Max ? std::max(acc, v)
                                : std::min(acc, v);
  }
  return acc;
}

// Elements of `got` that differ from `want(i)`.
template <class T, class F>
int64_t mismatches(const std::vector<T>& got, F want, int64_t offset = 0) {
  int64_t bad = 0;
  for (int64_t i = 0; i < int64_t(got.size()); ++i) bad += got[i] != want(offset + i);
  return bad;
}

template <class T>
void all_reduce_case(ReduceOp op, int64_t n) {
  const int r = group().rank(), p = group().size();
  std::vector<T> buf(n);
  for (int64_t i = 0; i < n; ++i) buf[i] = value<T>(r, i);
  group().all_reduce(Tensor(buf.data(), {n}), op);
  EXPECT_EQ(mismatches(buf, [&](int64_t i) { return reduce_ref<T>(op, p, i); }), 0)
      << "n=" << n << " op=" << int(op);
}

template <class T>
void reduce_scatter_case(int64_t n, bool in_place, bool started = false) {
  const int r = group().rank(), p = group().size();
  std::vector<T> send(n * p), recv(n, T(-7));
  for (int64_t i = 0; i < n * p; ++i) send[i] = value<T>(r, i);
  Tensor recv_t = in_place ? Tensor(send.data() + r * n, {n}) : Tensor(recv.data(), {n});
  if (started) {
    std::unique_ptr<Pending> pending =
        group().start_reduce_scatter(Tensor(send.data(), {n * p}), recv_t);
    group().progress();
    pending->wait();
    pending->wait();  // a second wait returns at once
  } else {
    group().reduce_scatter(Tensor(send.data(), {n * p}), recv_t);
  }
  if (in_place) std::copy(send.begin() + r * n, send.begin() + (r + 1) * n, recv.begin());
  EXPECT_EQ(mismatches(
                recv, [&](int64_t i) { return reduce_ref<T>(ReduceOp::Sum, p, i); }, r * n),
            0)
      << "n=" << n << " in_place=" << in_place << " started=" << started;
}

template <class T>
void all_gather_case(int64_t n, bool in_place, bool started = false) {
  const int r = group().rank(), p = group().size();
  std::vector<T> send(n), recv(n * p, T(-7));
  for (int64_t j = 0; j < n; ++j) send[j] = value<T>(r, j);
  if (in_place) std::copy(send.begin(), send.end(), recv.begin() + r * n);
  Tensor send_t = in_place ? Tensor(recv.data() + r * n, {n}) : Tensor(send.data(), {n});
  if (started)
    group().start_all_gather(send_t, Tensor(recv.data(), {n * p}))->wait();
  else
    group().all_gather(send_t, Tensor(recv.data(), {n * p}));
  EXPECT_EQ(mismatches(recv, [&](int64_t i) { return value<T>(int(i / n), i % n); }), 0)
      << "n=" << n << " in_place=" << in_place << " started=" << started;
}

template <class T>
void broadcast_case(int64_t n, int root) {
  std::vector<T> buf(n);
  for (int64_t i = 0; i < n; ++i) buf[i] = value<T>(group().rank(), i);
  group().broadcast(Tensor(buf.data(), {n}), root);
  EXPECT_EQ(mismatches(buf, [&](int64_t i) { return value<T>(root, i); }), 0)
      << "n=" << n << " root=" << root;
}

}  // namespace

TEST(GroupMpi, IsTheLaunchedJob) {
  EXPECT_EQ(group().backend(), dist::Backend::Mpi);
  EXPECT_EQ(group().size(), std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(group().rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
}

TEST(GroupMpi, AllReduceEveryOpAndDtype) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
    for (int64_t n : kCounts) {
      all_reduce_case<float>(op, n);
      all_reduce_case<double>(op, n);
      all_reduce_case<int32_t>(op, n);
    }
}

TEST(GroupMpi, ReduceScatterEveryDtype) {
  for (bool in_place : {false, true})
    for (int64_t n : kCounts) {
      reduce_scatter_case<float>(n, in_place);
      reduce_scatter_case<double>(n, in_place);
      reduce_scatter_case<int32_t>(n, in_place);
    }
}

// The started forms (the ZeRO-1 overlap) one at a time: the blocking forms' results, every
// dtype, in and out of place, 1000003 elements = the staged pieces.
TEST(GroupMpi, StartedCollectivesGiveTheBlockingResults) {
  for (bool in_place : {false, true})
    for (int64_t n : kCounts) {
      reduce_scatter_case<float>(n, in_place, true);
      reduce_scatter_case<double>(n, in_place, true);
      reduce_scatter_case<int32_t>(n, in_place, true);
      all_gather_case<float>(n, in_place, true);
      all_gather_case<int32_t>(n, in_place, true);
    }
}

// Several in flight with a blocking collective between them, finished in reverse order; F32
// data that is not exact, so the bits must be the blocking call's, not merely close.
TEST(GroupMpi, StartedCollectivesOverlapAndKeepTheBits) {
  const int r = group().rank(), p = group().size();
  auto noisy = [&](int64_t n, int salt) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[size_t(i)] = std::sin(float(i * 31 + r * 7 + salt)) * 1.37e3f / float(1 + i % 97);
    return v;
  };
  for (int64_t n : {int64_t(1000), int64_t(700001)}) {
    std::vector<float> a = noisy(n * p, 1), b = noisy(n * p, 2), a2 = a, b2 = b;
    std::vector<float> ra(static_cast<size_t>(n)), rb(static_cast<size_t>(n)),
        ra2(static_cast<size_t>(n)), rb2(static_cast<size_t>(n));
    std::vector<int32_t> word = {int32_t(r + 1)};
    std::vector<float> gather_send = noisy(n, 3), gathered(static_cast<size_t>(n * p)),
                       gathered2(static_cast<size_t>(n * p));
    auto pa = group().start_reduce_scatter(Tensor(a.data(), {n * p}), Tensor(ra.data(), {n}));
    auto pg =
        group().start_all_gather(Tensor(gather_send.data(), {n}), Tensor(gathered.data(), {n * p}));
    group().progress();
    group().all_reduce(Tensor(word.data(), {1}));  // blocking, between started ones
    auto pb = group().start_reduce_scatter(Tensor(b.data(), {n * p}), Tensor(rb.data(), {n}));
    group().progress();
    pb->wait();
    pg->wait();
    pa->wait();
    EXPECT_EQ(word[0], p * (p + 1) / 2);
    group().reduce_scatter(Tensor(a2.data(), {n * p}), Tensor(ra2.data(), {n}));
    group().reduce_scatter(Tensor(b2.data(), {n * p}), Tensor(rb2.data(), {n}));
    group().all_gather(Tensor(gather_send.data(), {n}), Tensor(gathered2.data(), {n * p}));
    EXPECT_EQ(std::memcmp(ra.data(), ra2.data(), ra.size() * sizeof(float)), 0) << "n=" << n;
    EXPECT_EQ(std::memcmp(rb.data(), rb2.data(), rb.size() * sizeof(float)), 0) << "n=" << n;
    EXPECT_EQ(gathered, gathered2) << "n=" << n;
  }
  // A pending destroyed unfinished is finished first (every rank then still agrees).
  std::vector<float> c = noisy(64 * p, 4), rc(64);
  {
    auto pending =
        group().start_reduce_scatter(Tensor(c.data(), {64 * p}), Tensor(rc.data(), {64}));
  }
  group().barrier();
  // Argument errors of the started forms throw before anything is sent.
  std::vector<float> odd(static_cast<size_t>(3 * p + 1));
  EXPECT_THROW(
      group().start_reduce_scatter(Tensor(odd.data(), {3 * p + 1}), Tensor(rc.data(), {3})), Error);
  EXPECT_THROW(group().start_all_gather(Tensor(rc.data(), {3}), Tensor(odd.data(), {3 * p + 1})),
               Error);
  group().barrier();
}

TEST(GroupMpi, AllGatherEveryDtype) {
  for (bool in_place : {false, true})
    for (int64_t n : kCounts) {
      all_gather_case<float>(n, in_place);
      all_gather_case<double>(n, in_place);
      all_gather_case<int32_t>(n, in_place);
    }
}

TEST(GroupMpi, BroadcastFromEachRoot) {
  for (int root = 0; root < group().size(); ++root)
    for (int64_t n : kCounts) {
      broadcast_case<float>(n, root);
      broadcast_case<double>(n, root);
      broadcast_case<int32_t>(n, root);
    }
}

// Inexact sums (reduction order matters for the bits): every rank must hold the same bits, the
// same on every repeat, and be close to the double-precision sum.
TEST(GroupMpi, AllReduceIsDeterministicAndAgreedAcrossRanks) {
  const int r = group().rank(), p = group().size();
  const int64_t n = 1000003;
  auto input = [&](int q, int64_t i) {
    return float(std::sin(0.001 * double(i) + 1.7 * q)) * 3.1f;
  };
  std::vector<float> first(n), again(n);
  for (int rep = 0; rep < 2; ++rep) {
    std::vector<float>& buf = rep ? again : first;
    for (int64_t i = 0; i < n; ++i) buf[i] = input(r, i);
    group().all_reduce(Tensor(buf.data(), {n}));
  }
  EXPECT_EQ(std::memcmp(first.data(), again.data(), n * sizeof(float)), 0) << "repeat differs";
  std::vector<float> rank0 = first;
  group().broadcast(Tensor(rank0.data(), {n}), 0);
  EXPECT_EQ(std::memcmp(first.data(), rank0.data(), n * sizeof(float)), 0)
      << "rank " << r << " holds different bits than rank 0";
  int64_t far = 0;
  for (int64_t i = 0; i < n; ++i) {
    double ref = 0;
    for (int q = 0; q < p; ++q) ref += input(q, i);
    far += std::abs(first[i] - ref) > 1e-5 + 1e-5 * std::abs(ref);
  }
  EXPECT_EQ(far, 0);
}

// No rank leaves the barrier before the last one (rank p-1, who sleeps longest) has entered it.
TEST(GroupMpi, BarrierWaitsForTheSlowestRank) {
  using clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: one clock for all local ranks
  const int r = group().rank(), p = group().size();
  group().barrier();
  std::this_thread::sleep_for(std::chrono::milliseconds(100 * r));
  std::vector<double> entered(p);
  entered[r] = std::chrono::duration<double>(clock::now().time_since_epoch()).count();
  group().barrier();
  const double left = std::chrono::duration<double>(clock::now().time_since_epoch()).count();
  group().all_gather(Tensor(entered.data() + r, {1}), Tensor(entered.data(), {p}));
  EXPECT_GE(left, *std::max_element(entered.begin(), entered.end()));
}

// A local argument error throws before any communication: the group stays usable.
TEST(GroupMpi, BadArgumentsThrowWithoutBreakingTheGroup) {
  const int p = group().size();
  std::vector<float> f(8 * p);
  std::vector<double> d(8 * p);
  EXPECT_THROW(group().reduce_scatter(Tensor(f.data(), {8 * p}), Tensor(d.data(), {8})), Error);
  EXPECT_THROW(group().all_gather(Tensor(f.data(), {8}), Tensor(f.data(), {8 * p + 1})), Error);
  EXPECT_THROW(group().broadcast(Tensor(f.data(), {8}), p), Error);
  all_reduce_case<float>(ReduceOp::Sum, 7);
}

// Prints the failures of ranks other than 0 (whose full report gtest prints).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<Group> group_owner;
  try {
    group_owner = make_group("mpi", 60);
  } catch (const Error& e) {
    std::fprintf(stderr, "zaya: error: %s\n", e.what());
    return 1;
  }
  g_group = group_owner.get();
  const int rank = g_group->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int32_t status = 0;
  try {
    status = RUN_ALL_TESTS() == 0 ? 0 : 1;
    g_group->all_reduce(Tensor(&status, {1}), ReduceOp::Max);  // failed anywhere → failed
  } catch (const Error& e) {
    std::fprintf(stderr, "zaya: error: rank %d: %s\n", rank, e.what());
    return 1;
  }
  if (rank == 0 && status)
    std::fprintf(stderr, "FAILED: a test failed on at least one rank (see the [rank N] lines)\n");
  return status;
}
