// Is a host reachable? A TCP connect to each of its IPv4 addresses with a short timeout: a
// connection accepted or refused (a RST) means the host's network stack answered, so it is
// reachable; no answer within the timeout (or "no route to host" / "network unreachable") means it
// is not. No listener is needed on the far side and no ping binary or raw socket (no root): the
// supervisor probes the hosts its job's heartbeats name, by the addresses they list
// (docs/fault-tolerance.md, "Localising a network fault"). A firewall that drops the probe's port
// silently looks unreachable: pick a port the cluster lets through (--probe-port; ssh's by
// default, which mpirun needs anyway).
#pragma once
#include <string>
#include <vector>

namespace zaya {

struct HostAddresses {
  std::string host;                // the hostname the heartbeats give
  std::vector<std::string> addrs;  // dotted IPv4
};

struct HostReach {
  std::string host;
  std::vector<std::string> addrs;
  bool reachable = true;  // a host without addresses cannot be probed: counted reachable
  std::string how;        // "connected", "refused", "timeout", "No route to host", "no addresses"
};

// Probes every address of every host at once (non-blocking connects, one poll), waiting at most
// `timeout_s` in all; a host is reachable when any of its addresses answers. Order kept.
std::vector<HostReach> probe_hosts(const std::vector<HostAddresses>& hosts, int port,
                                   double timeout_s);

// "host zmh2 (10.78.0.12) unreachable" for each unreachable host, joined by "; " ("" if none).
std::string describe_unreachable(const std::vector<HostReach>& probes);

}  // namespace zaya
