// An elastic restart's launcher: the job's launcher words rewritten to run on the hosts that still
// answer (docs/fault-tolerance.md, "Restarting on the hosts left").
//
// - mpirun (also mpiexec, orterun): a `--hostfile F` (or -hostfile, --machinefile, -machinefile,
//   --hostfile=F) is replaced by a derived hostfile — F's lines without the lost hosts' (each kept
//   line, its slots included, as it was) — written where the caller says; a `--host LIST` (-host,
//   -H, --host=LIST) loses the lost hosts' entries; `-np N` (-n, --np, -c, --np=N) becomes N minus
//   the ranks the lost hosts ran.
// - srun: `-N n` (-Nn, --nodes n, --nodes=n) becomes the number of hosts left (added when absent),
//   `-n m` (-nm, --ntasks m, --ntasks=m) m minus the lost ranks, and the lost hosts are added to
//   `--exclude=` (merged with one that is there, -x LIST or --exclude LIST).
// A host in a hostfile or list is a lost one when it is the heartbeat's hostname, the same short
// name (before the first '.'), or one of the heartbeat's addresses.
#pragma once
#include <string>
#include <vector>

#include "resilience/reach.h"

namespace zaya {

enum class LauncherKind { Mpirun, Srun, Other };
LauncherKind launcher_kind(const std::vector<std::string>& launcher);

// Whether a hostfile or --host entry (a name or an address) names one of `hosts`.
bool names_host(const std::string& entry, const std::vector<HostAddresses>& hosts);

// The hostfile `text` without the lines of the lost hosts; `removed_slots` gets their slots
// (slots=N on the line, else 1) and `kept` the number of host lines left.
std::string derive_hostfile(const std::string& text, const std::vector<HostAddresses>& lost,
                            int& removed_slots, int& kept);

struct ShrunkLauncher {
  std::vector<std::string> launcher;  // empty when it cannot be shrunk (why_not says why)
  std::string why_not;
  std::string hostfile_text;  // mpirun with a hostfile: the derived file's text, for the caller to
                              // write at the path given (already in `launcher`)
};

// `lost`: the unreachable hosts; `lost_ranks`: the ranks they ran (−1: unknown, then an mpirun
// hostfile's slots are used); `hosts_left`: the hosts that answer; `hostfile_out`: the path of a
// derived hostfile. Reads an mpirun hostfile (a zaya::Error naming it when it cannot be read).
ShrunkLauncher shrink_launcher(const std::vector<std::string>& launcher,
                               const std::vector<HostAddresses>& lost, int lost_ranks,
                               int hosts_left, const std::string& hostfile_out);

}  // namespace zaya
