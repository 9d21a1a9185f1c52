// resilience/elastic.h: which launchers can be shrunk, the derived hostfile (names, short names,
// addresses; slots kept), mpirun's -np / --host and srun's -N / -n / --exclude rewritten, and
// the cases where no elastic restart is possible (named).
#include <gtest/gtest.h>

#include <fstream>

#include "resilience/elastic.h"
#include "test_util.h"

using namespace zaya;
using Words = std::vector<std::string>;

namespace {

const std::vector<HostAddresses> kLost3 = {{"zmh3", {"10.78.0.13"}}};

}  // namespace

TEST(Elastic, LauncherKinds) {
  EXPECT_EQ(launcher_kind({"mpirun", "-np", "2"}), LauncherKind::Mpirun);
  EXPECT_EQ(launcher_kind({"/usr/bin/mpiexec"}), LauncherKind::Mpirun);
  EXPECT_EQ(launcher_kind({"srun", "-N2"}), LauncherKind::Srun);
  EXPECT_EQ(launcher_kind({"torchrun"}), LauncherKind::Other);
  EXPECT_EQ(launcher_kind({}), LauncherKind::Other);
}

TEST(Elastic, DerivedHostfileDropsTheLostHostsAndKeepsSlots) {
  int removed = 0, kept = 0;
  EXPECT_EQ(derive_hostfile("# cluster\nzmh1 slots=2\n\nzmh2 slots=2 max_slots=4\nzmh3 slots=2\n",
                            kLost3, removed, kept),
            "zmh1 slots=2\nzmh2 slots=2 max_slots=4\n");
  EXPECT_EQ(removed, 2);
  EXPECT_EQ(kept, 2);
  // By address, and by the short name of a qualified one; no slots= is one slot.
  EXPECT_EQ(derive_hostfile("10.78.0.11\n10.78.0.13\nzmh3.cluster.local slots=4 # old\n", kLost3,
                            removed, kept),
            "10.78.0.11\n");
  EXPECT_EQ(removed, 5);
  EXPECT_EQ(kept, 1);
}

TEST(Elastic, MpirunWithAHostfile) {
  const test::ScratchDir dir;
  std::ofstream(dir / "hosts") << "zmh1 slots=1\nzmh2 slots=1\nzmh3 slots=1\n";
  const ShrunkLauncher s =
      shrink_launcher({"mpirun", "-np", "3", "--hostfile", dir / "hosts", "-x", "ZAYA_FAULT"},
                      kLost3, 1, 2, dir / "derived");
  EXPECT_EQ(s.why_not, "");
  EXPECT_EQ(s.launcher,
            (Words{"mpirun", "-np", "2", "--hostfile", dir / "derived", "-x", "ZAYA_FAULT"}));
  EXPECT_EQ(s.hostfile_text, "zmh1 slots=1\nzmh2 slots=1\n");
  // Two ranks per host, known only from the hostfile (lost_ranks −1); --hostfile=F.
  std::ofstream(dir / "hosts2") << "zmh1 slots=2\nzmh2 slots=2\nzmh3 slots=2\n";
  const ShrunkLauncher t = shrink_launcher({"mpirun", "--np=6", "--hostfile=" + (dir / "hosts2")},
                                           kLost3, -1, 2, dir / "d2");
  EXPECT_EQ(t.launcher, (Words{"mpirun", "--np=4", "--hostfile=" + (dir / "d2")}));
  test::expect_error(
      [&] {
        shrink_launcher({"mpirun", "--hostfile", dir / "none"}, kLost3, 1, 2, "");
      },
      {dir / "none"});
}

TEST(Elastic, MpirunWithAHostList) {
  const ShrunkLauncher s = shrink_launcher({"mpirun", "-n", "6", "--host", "zmh1:2,zmh3:2,zmh2:2"},
                                           kLost3, 2, 2, "unused");
  EXPECT_EQ(s.launcher, (Words{"mpirun", "-n", "4", "--host", "zmh1:2,zmh2:2"}));
  EXPECT_EQ(s.hostfile_text, "");
  const ShrunkLauncher h =
      shrink_launcher({"mpirun", "-H", "10.78.0.13,10.78.0.11"}, kLost3, 1, 1, "unused");
  EXPECT_EQ(h.launcher, (Words{"mpirun", "-H", "10.78.0.11"}));
}

TEST(Elastic, Srun) {
  EXPECT_EQ(shrink_launcher({"srun", "-N3", "-n", "3", "--mpi=pmix"}, kLost3, 1, 2, "").launcher,
            (Words{"srun", "--exclude=zmh3", "-N2", "-n", "2", "--mpi=pmix"}));
  EXPECT_EQ(
      shrink_launcher({"srun", "--nodes=3", "--ntasks=6", "-x", "zmh9"}, kLost3, 2, 2, "").launcher,
      (Words{"srun", "--nodes=2", "--ntasks=4", "-x", "zmh9,zmh3"}));
  // No node count: one is added (the allocation may hold more nodes than the job used).
  EXPECT_EQ(shrink_launcher({"srun", "--mpi=pmix"}, kLost3, 1, 2, "").launcher,
            (Words{"srun", "--exclude=zmh3", "-N", "2", "--mpi=pmix"}));
}

TEST(Elastic, WhenItCannot) {
  EXPECT_NE(shrink_launcher({"torchrun"}, kLost3, 1, 2, "").why_not.find("neither mpirun nor srun"),
            std::string::npos);
  const ShrunkLauncher none = shrink_launcher({"mpirun", "-np", "3"}, kLost3, 1, 2, "");
  EXPECT_TRUE(none.launcher.empty());
  EXPECT_NE(none.why_not.find("no --hostfile or --host"), std::string::npos);
  EXPECT_TRUE(shrink_launcher({"mpirun", "-np", "1", "--host", "zmh1,zmh3"}, kLost3, 1, 1, "")
                  .launcher.empty());
  EXPECT_TRUE(shrink_launcher({"mpirun", "--host", "zmh3"}, kLost3, 1, 0, "").launcher.empty());
}
