// A small MPI program for the fault tests (tests/integration/): every rank makes the MPI group and
// calls all_reduce, except that rank `--victim` first misbehaves as `--mode` says:
//   ok     behaves (the job exits 0),
//   kill   raise(SIGKILL) — the rank dies without a word,
//   hang   sleeps for 10 minutes (a rank stuck in a long computation or a deadlock),
//   error  throws a zaya::Error (a rank-local user error, e.g. a file only it reads).
// Errors are printed as zaya's main prints them ("zaya: error: …", exit 1).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/assert.h"
#include "dist/group.h"

int main(int argc, char** argv) {
  std::string mode = "ok";
  int victim = 1;
  double timeout_s = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mode")) mode = argv[i + 1];
    if (!std::strcmp(argv[i], "--victim")) victim = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--timeout")) timeout_s = std::atof(argv[i + 1]);
  }
  try {
    auto group = zaya::dist::make_group("mpi", timeout_s);
    float x = 1;
    group->all_reduce(zaya::Tensor(&x, {1}));  // everyone is up
    if (group->rank() == victim) {
      if (mode == "kill") raise(SIGKILL);
      if (mode == "hang") sleep(600);
      if (mode == "error") zaya::fail("rank {}: cannot open shard 'missing.bin'", victim);
    }
    group->all_reduce(zaya::Tensor(&x, {1}));
    if (group->rank() == 0) std::printf("ok: sum %g over %d ranks\n", x, group->size());
    return x == float(group->size() * group->size()) ? 0 : 2;
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "zaya: error: %s\n", e.what());
    return 1;
  }
}
