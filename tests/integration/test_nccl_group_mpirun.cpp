// The NCCL group under `mpirun -np 2` (label mpi; skipped without a GPU, mpirun or a loadable
// NCCL — ZAYA_NCCL_LIB — so CI skips it; scripts/gpu_emu/run.sh test_integration_nccl_group_mpirun
// runs it against the emulated NCCL). GpuNccl.* launch this executable on 2 ranks, which then run
// GpuNcclRank.*:
// - every collective (all_reduce sum/max/min, reduce_scatter, all_gather, in place and out of
//   place, broadcast from each root, barrier) for F32/F64/I32 on GPU buffers gives the bits the
//   MPI group gives on the same data in host buffers (values exact in every dtype, so the
//   reduction order cannot matter), as do host buffers staged by the NCCL group and a mixed
//   call; a repeated all_reduce gives the same bits;
// - a rank that never joins an all_reduce makes the other's fail within ZAYA_DIST_TIMEOUT with
//   an error naming all_reduce, and the group is unusable afterwards.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/assert.h"
#include "dist/group.h"
#include "dist/nccl.h"
#include "gpu_test_util.h"
#include "test_skips.h"

using namespace zaya;
using namespace zaya::test;
using dist::Group;
using dist::ReduceOp;

namespace {

// --------------------------------------------------------------------------- the launcher side

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool have_mpirun() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0;
}

// Runs GpuNcclRank.`test` on 2 ranks with ZAYA_NCCL_RANK_TEST=`role`; returns the output.
std::string run_ranks(const std::string& test, const std::string& role, const std::string& env) {
  const ScratchDir dir;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  EXPECT_GT(n, 0);
  self[n > 0 ? n : 0] = '\0';
  const std::string log = dir / "ranks.log";
  const std::string cmd = "OMP_NUM_THREADS=1 ZAYA_NCCL_RANK_TEST=" + role + " " + env +
                          " mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS"
                          " -x ZAYA_NCCL_RANK_TEST -x ZAYA_DIST_TIMEOUT -x ZAYA_NCCL_LIB " +
                          std::string(self) + " --gtest_color=no --gtest_filter=GpuNcclRank." +
                          test + " >" + log + " 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  const std::string out = slurp(log);
  EXPECT_EQ(status, 0) << cmd << "\n" << out;
  return out;
}

#define ZAYA_REQUIRE_NCCL_JOB()                                         \
  do {                                                                  \
    ZAYA_REQUIRE_GPU();                                                 \
    if (!have_mpirun()) ZAYA_SKIP(NoMpirun) << "no mpirun on the PATH"; \
    try {                                                               \
      dist::open_nccl_library();                                        \
    } catch (const Error& e) {                                          \
      ZAYA_SKIP(NoNccl) << e.what();                                    \
    }                                                                   \
  } while (0)

// ------------------------------------------------------------------------------- the rank side

#define ZAYA_REQUIRE_ROLE(role)                                                             \
  do {                                                                                      \
    const char* r = std::getenv("ZAYA_NCCL_RANK_TEST");                                     \
    if (!r || std::string(r) != role) GTEST_SKIP() << "a rank of GpuNccl.* (under mpirun)"; \
  } while (0)

// Rank r's element i: exact in F32/F64/I32, not monotone in r (max/min pick different ranks).
double value(int r, int64_t i) {
  return double((i * 7919 + int64_t(r) * 104729 + 13) % 2003 - 1001) * 0.5;
}

// A buffer of `count` elements of `dtype`: host values of rank `r` (ints: the values × 2), on
// the host (`cpu`) and on the GPU (`gpu`).
DevicePair rank_data(DType dtype, int64_t count, int r) {
  DevicePair p(dtype, {count});
  for (int64_t i = 0; i < count; ++i) {
    const double v = value(r, i);
    if (dtype == DType::F32) static_cast<float*>(p.cpu.data)[i] = float(v);
    if (dtype == DType::F64) static_cast<double*>(p.cpu.data)[i] = v;
    if (dtype == DType::I32) static_cast<int32_t*>(p.cpu.data)[i] = int32_t(2 * v);
  }
  p.upload();
  return p;
}

Tensor part(const Tensor& t, int64_t from, int64_t n) {
  Tensor v = t;
  v.data = static_cast<char*>(t.data) + from * int64_t(dtype_size(t.dtype));
  v.shape[0] = n;
  return v;
}

// Runs the same collective on both groups: `f(group, tensors)` with the MPI group on the host
// sides, the NCCL group on the GPU sides; then every pair must hold equal values.
template <class F>
void same_result(Group& nccl, Group& mpi, std::vector<DevicePair>& pairs, F f,
                 const std::string& what) {
  std::vector<Tensor> host, dev;
  for (const DevicePair& p : pairs) host.push_back(p.cpu), dev.push_back(p.gpu);
  f(mpi, host);
  f(nccl, dev);
  for (const DevicePair& p : pairs) expect_equal(p, what.c_str());
}

}  // namespace

TEST(GpuNccl, CollectivesMatchTheMpiGroup) {
  ZAYA_REQUIRE_NCCL_JOB();
  const std::string out = run_ranks("Collectives", "collectives", "ZAYA_DIST_TIMEOUT=120");
  EXPECT_NE(out.find("[  PASSED  ] 1 test."), std::string::npos) << out;
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
}

TEST(GpuNccl, AHungPeerTimesOutNamingTheCollective) {
  ZAYA_REQUIRE_NCCL_JOB();
  const std::string out = run_ranks("HungPeer", "hung_peer", "ZAYA_DIST_TIMEOUT=3");
  EXPECT_NE(out.find("rank 0 timed out: all_reduce: no answer from the other ranks within 3 s"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank 0 timed out (started): reduce_scatter: no answer from the other ranks "
                     "within 3 s"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
  const size_t at = out.find("rank 0 timed out: ");
  if (at != std::string::npos) std::printf("%s\n", out.substr(at, out.find('\n', at) - at).c_str());
}

TEST(GpuNcclRank, Collectives) {
  ZAYA_REQUIRE_ROLE("collectives");
  std::unique_ptr<Group> nccl = dist::make_group("nccl");  // first: it picks this rank's GPU
  std::unique_ptr<Group> mpi = dist::make_group("mpi");
  ASSERT_EQ(nccl->backend(), dist::Backend::Nccl);
  ASSERT_EQ(nccl->size(), mpi->size());
  ASSERT_EQ(nccl->rank(), mpi->rank());
  const int n = nccl->size(), r = nccl->rank();
  for (DType dtype : {DType::F32, DType::F64, DType::I32})
    for (int64_t count : {int64_t(1), int64_t(7), int64_t(100003)}) {
      const std::string tag = std::string(dtype_name(dtype)) + " × " + std::to_string(count);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
        std::vector<DevicePair> p;
        p.push_back(rank_data(dtype, count, r));
        same_result(
            *nccl, *mpi, p, [&](Group& g, auto& t) { g.all_reduce(t[0], op); },
            "all_reduce " + tag);
      }
      {  // reduce_scatter out of place, then in place (recv = chunk rank() of send)
        std::vector<DevicePair> p;
        p.push_back(rank_data(dtype, count * n, r));
        p.push_back(rank_data(dtype, count, r + 7));
        same_result(
            *nccl, *mpi, p, [&](Group& g, auto& t) { g.reduce_scatter(t[0], t[1]); },
            "reduce_scatter " + tag);
        // In place: only chunk rank() is defined afterwards (the group contract).
        DevicePair in_place = rank_data(dtype, count * n, r);
        mpi->reduce_scatter(in_place.cpu, part(in_place.cpu, r * count, count));
        nccl->reduce_scatter(in_place.gpu, part(in_place.gpu, r * count, count));
        const std::vector<double> got = in_place.gpu_values(), want = in_place.cpu_values();
        EXPECT_TRUE(std::equal(got.begin() + r * count, got.begin() + (r + 1) * count,
                               want.begin() + r * count))
            << "reduce_scatter in place " << tag;
      }
      {  // all_gather out of place, then in place (send = chunk rank() of recv)
        std::vector<DevicePair> p;
        p.push_back(rank_data(dtype, count, r));
        p.push_back(rank_data(dtype, count * n, r + 3));
        same_result(
            *nccl, *mpi, p, [&](Group& g, auto& t) { g.all_gather(t[0], t[1]); },
            "all_gather " + tag);
        p.erase(p.begin());
        p[0] = rank_data(dtype, count * n, r);
        same_result(
            *nccl, *mpi, p,
            [&](Group& g, auto& t) { g.all_gather(part(t[0], r * count, count), t[0]); },
            "all_gather in place " + tag);
      }
      for (int root = 0; root < n; ++root) {
        std::vector<DevicePair> p;
        p.push_back(rank_data(dtype, count, r));
        same_result(
            *nccl, *mpi, p, [&](Group& g, auto& t) { g.broadcast(t[0], root); },
            "broadcast from " + std::to_string(root) + " " + tag);
      }
    }
  // The started forms (the ZeRO-1 overlap) on device buffers: two reduce-scatters and an
  // all-gather in flight with a blocking all-reduce between them, finished in reverse order —
  // the MPI group's blocking results, bit for bit.
  {
    const int64_t count = 40009;
    DevicePair a = random_pair(DType::F32, {count * n}, 21 + uint64_t(r));
    DevicePair b = random_pair(DType::F32, {count * n}, 31 + uint64_t(r));
    DevicePair ga = rank_data(DType::F32, count, 0), gb = rank_data(DType::F32, count, 0);
    DevicePair gsend = random_pair(DType::F32, {count}, 41 + uint64_t(r));
    DevicePair gather = rank_data(DType::F32, count * n, 0), word = rank_data(DType::F64, 3, r);
    auto pa = nccl->start_reduce_scatter(a.gpu, ga.gpu);
    auto pg = nccl->start_all_gather(gsend.gpu, gather.gpu);
    nccl->all_reduce(word.gpu, ReduceOp::Sum);
    auto pb = nccl->start_reduce_scatter(b.gpu, gb.gpu);
    nccl->progress();
    pb->wait();
    pg->wait();
    pa->wait();
    mpi->reduce_scatter(a.cpu, ga.cpu);
    mpi->reduce_scatter(b.cpu, gb.cpu);
    mpi->all_gather(gsend.cpu, gather.cpu);
    mpi->all_reduce(word.cpu, ReduceOp::Sum);
    EXPECT_EQ(ga.gpu_values(), DevicePair::values_of(ga.cpu)) << "started reduce_scatter a";
    EXPECT_EQ(gb.gpu_values(), DevicePair::values_of(gb.cpu)) << "started reduce_scatter b";
    EXPECT_EQ(gather.gpu_values(), DevicePair::values_of(gather.cpu)) << "started all_gather";
    EXPECT_EQ(word.gpu_values(), DevicePair::values_of(word.cpu)) << "all_reduce between";
    // In place, and a host buffer (staged: the blocking call).
    DevicePair c = random_pair(DType::F32, {count * n}, 51 + uint64_t(r));
    DevicePair c2 = rank_data(DType::F32, count * n, 0);
    std::memcpy(c2.cpu.data, c.cpu.data, c.cpu.nbytes());
    nccl->start_reduce_scatter(c.gpu, part(c.gpu, r * count, count))->wait();
    nccl->start_reduce_scatter(c2.cpu, part(c2.cpu, r * count, count))->wait();
    mpi->reduce_scatter(c.cpu, part(c.cpu, r * count, count));
    const std::vector<double> got = c.gpu_values(), staged = DevicePair::values_of(c2.cpu),
                              want = DevicePair::values_of(c.cpu);
    EXPECT_TRUE(std::equal(got.begin() + r * count, got.begin() + (r + 1) * count,
                           want.begin() + r * count))
        << "started reduce_scatter in place";
    EXPECT_TRUE(std::equal(staged.begin() + r * count, staged.begin() + (r + 1) * count,
                           want.begin() + r * count))
        << "started reduce_scatter of a host buffer";
  }
  // Host buffers through the NCCL group (staged on the GPU), and a mixed call.
  DevicePair a = rank_data(DType::F64, 1001, r), b = rank_data(DType::F64, 1001, r);
  nccl->all_reduce(a.cpu, ReduceOp::Sum);
  mpi->all_reduce(b.cpu, ReduceOp::Sum);
  EXPECT_EQ(DevicePair::values_of(a.cpu), DevicePair::values_of(b.cpu)) << "staged all_reduce";
  DevicePair send = rank_data(DType::F32, 64 * n, r), want = rank_data(DType::F32, 64, 0);
  DevicePair got = rank_data(DType::F32, 64, 0);
  nccl->reduce_scatter(send.gpu, got.cpu);  // GPU send, host recv
  mpi->reduce_scatter(send.cpu, want.cpu);
  EXPECT_EQ(DevicePair::values_of(got.cpu), DevicePair::values_of(want.cpu)) << "mixed";
  // Determinism: the same call twice, the same bits (F32 sums of non-exact values).
  DevicePair x = random_pair(DType::F32, {4099}, 11 + uint64_t(r));
  DevicePair y2(DType::F32, {4099});
  std::memcpy(y2.cpu.data, x.cpu.data, x.cpu.nbytes());
  y2.upload();
  nccl->all_reduce(x.gpu, ReduceOp::Sum);
  nccl->all_reduce(y2.gpu, ReduceOp::Sum);
  EXPECT_EQ(x.gpu_values(), y2.gpu_values()) << "two all_reduce calls differ";
  nccl->barrier();
  // Argument errors leave the group usable.
  EXPECT_THROW(nccl->broadcast(x.gpu, n), Error);
  nccl->barrier();
}

TEST(GpuNcclRank, HungPeer) {
  ZAYA_REQUIRE_ROLE("hung_peer");
  std::unique_ptr<Group> nccl = dist::make_group("nccl");    // ZAYA_DIST_TIMEOUT=3
  std::unique_ptr<Group> second = dist::make_group("nccl");  // for a started collective
  unsetenv("ZAYA_DIST_TIMEOUT");  // rank 1 waits out rank 0's timeouts on the MPI side
  std::unique_ptr<Group> mpi = dist::make_group("mpi", 120);
  DevicePair buf = rank_data(DType::F32, 16, nccl->rank());
  nccl->barrier();
  if (nccl->rank() == 0) {  // rank 1 never joins this all_reduce
    try {
      nccl->all_reduce(buf.gpu, ReduceOp::Sum);
      ADD_FAILURE() << "all_reduce returned without the peer";
    } catch (const Error& e) {
      std::printf("rank 0 timed out: %s\n", e.what());
    }
    try {
      nccl->barrier();
      ADD_FAILURE() << "the group is still usable after the timeout";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("barrier: the NCCL group is unusable"),
                std::string::npos)
          << e.what();
    }
    // A started collective whose peer never comes: its wait() times out the same way.
    DevicePair whole = rank_data(DType::F32, 32, 0);
    try {
      second->start_reduce_scatter(whole.gpu, buf.gpu)->wait();
      ADD_FAILURE() << "a started reduce_scatter finished without the peer";
    } catch (const Error& e) {
      std::printf("rank 0 timed out (started): %s\n", e.what());
    }
  }
  mpi->barrier();  // both ranks meet again on the host side
}
