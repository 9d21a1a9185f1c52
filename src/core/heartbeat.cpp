// Heartbeat state and its file (heartbeat.h). The record is rebuilt and rewritten whole at every
// change: one pwrite of a fixed 512 bytes, so a reader never sees a stale tail.
#include "core/heartbeat.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/assert.h"

namespace zaya::heartbeat {

namespace {

constexpr size_t kRecordBytes = 512;
constexpr const char* kNames[] = {"setup",     "data", "forward-backward", "collective",
                                  "optimizer", "eval", "checkpoint",       "done"};

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const double g_process_start = steady_now();

struct State {
  std::mutex mu;
  bool started = false;
  int fd = -1;
  std::thread::id owner;
  std::string dir, host, path;
  std::vector<std::string> addrs;  // this host's IPv4 addresses (reachability probes)
  int rank = 0, world = 1, attempt = 1;
  int64_t seq = 0, beat = 0, step = 0, last_step = 0, collectives = 0;
  Section section = Section::Setup;
  std::string detail;
  double max_step_s = 0, max_eval_s = 0, max_checkpoint_s = 0;
  double collective_s = 0;  // this step
  SectionHook hook = nullptr;

  State() {
    if (const char* d = std::getenv("ZAYA_SUPERVISE_DIR"); d && *d) dir = d;
    if (const char* a = std::getenv("ZAYA_SUPERVISE_ATTEMPT"); a && *a) attempt = std::atoi(a);
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0) host = name;
    addrs = ipv4_addresses();
  }

  bool is_owner() const { return !started || std::this_thread::get_id() == owner; }

  // Rewrites the record; `progress` (every section change) advances seq, which the supervisor's
  // hang detection watches; a liveness beat (touch) advances only `beat`.
  void write_locked(bool progress = true) {
    if (progress) ++seq;
    if (fd < 0) return;
    const double wall =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const nlohmann::json j = {{"attempt", attempt},
                              {"rank", rank},
                              {"world", world},
                              {"host", host},
                              {"pid", int64_t(getpid())},
                              {"seq", seq},
                              {"beat", beat},
                              {"step", step},
                              {"last_step", last_step},
                              {"section", kNames[int(section)]},
                              {"detail", detail},
                              {"collectives", collectives},
                              {"max_step_s", max_step_s},
                              {"max_eval_s", max_eval_s},
                              {"max_checkpoint_s", max_checkpoint_s},
                              {"time", wall}};
    std::string line = j.dump();
    // The addresses last, as many as fit (a host with dozens of interfaces keeps its first).
    std::string list;
    for (const std::string& a : addrs) {
      const std::string more = (list.empty() ? "\"" : ",\"") + a + "\"";
      if (line.size() + list.size() + more.size() + 12 > kRecordBytes - 1) break;
      list += more;
    }
    line.insert(line.size() - 1, ",\"addrs\":[" + list + "]");
    if (line.size() > kRecordBytes - 1) line.resize(kRecordBytes - 1);  // never: bounded fields
    line.resize(kRecordBytes - 1, ' ');
    line += '\n';
    // Best effort: a heartbeat that cannot be written must not stop training (the supervisor then
    // sees silence and reports it).
    [[maybe_unused]] ssize_t n = pwrite(fd, line.data(), line.size(), 0);
  }
};

// Never destroyed: the fencing watchdog (resilience/fence.h) may touch it while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

}  // namespace

const char* section_name(Section s) {
  return kNames[int(s)];
}

bool parse_section(const std::string& name, Section& out) {
  for (int i = 0; i < int(std::size(kNames)); ++i)
    if (name == kNames[i]) return out = Section(i), true;
  return false;
}

void start(int rank, int world) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.rank = rank, s.world = world;
  s.owner = std::this_thread::get_id();
  s.started = true;
  if (!s.dir.empty() && s.fd < 0) {
    s.path = fmt::format("{}/heartbeat_rank{:05d}.json", s.dir, rank);
    s.fd = ::open(s.path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
    if (s.fd < 0)
      fail("cannot write the heartbeat file {}: {} (ZAYA_SUPERVISE_DIR)", s.path,
           std::strerror(errno));
  }
  s.write_locked();
}

std::vector<std::string> ipv4_addresses() {
  std::vector<std::string> out;
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (struct ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const struct sockaddr_in*>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) out.emplace_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

void touch() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.started) return;
  ++s.beat;
  s.write_locked(/*progress=*/false);
}

bool supervised() {
  return !state().dir.empty();
}

const std::string& supervise_dir() {
  return state().dir;
}

int attempt() {
  return state().attempt;
}

double process_seconds() {
  return steady_now() - g_process_start;
}

void begin_step(int64_t step) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.is_owner()) return;
  s.step = step;
  s.collective_s = 0;
}

void end_step(int64_t step, double seconds) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.is_owner()) return;
  s.last_step = step;
  s.max_step_s = std::max(s.max_step_s, seconds);
}

void enter(Section sec, const char* detail) {
  State& s = state();
  SectionHook hook;
  int64_t step;
  {
    std::lock_guard lock(s.mu);
    if (!s.is_owner()) return;
    if (sec == Section::Collective) ++s.collectives;
    s.section = sec;
    s.detail = detail;
    s.write_locked();
    hook = s.hook;
    step = s.step;
  }
  if (hook) hook(step, sec);  // outside the lock: a hook may sleep (hang, slow) or exit
}

double collective_seconds_this_step() {
  return state().collective_s;
}

Scope::Scope(Section s, const char* detail) : sec_(s), start_(steady_now()) {
  State& st = state();
  {
    std::lock_guard lock(st.mu);
    prev_ = st.section;
    prev_detail_ = st.detail;
  }
  enter(s, detail);
}

Scope::~Scope() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.is_owner()) return;
  const double took = steady_now() - start_;
  const Section sec = sec_;
  if (sec == Section::Collective) s.collective_s += took;
  if (sec == Section::Eval) s.max_eval_s = std::max(s.max_eval_s, took);
  if (sec == Section::Checkpoint) s.max_checkpoint_s = std::max(s.max_checkpoint_s, took);
  s.section = prev_;
  s.detail = prev_detail_;
  s.write_locked();
}

void record_error(const std::string& message) {
  State& s = state();
  if (s.dir.empty()) return;
  int rank = s.rank;
  if (!s.started)
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
      if (const char* v = std::getenv(var); v && *v) {
        rank = std::atoi(v);
        break;
      }
  const std::string path = fmt::format("{}/error_rank{:05d}.txt", s.dir, rank);
  if (std::FILE* f = std::fopen(path.c_str(), "w")) {
    std::fprintf(f, "%s\n", message.c_str());
    std::fclose(f);
  }
}

void set_section_hook(SectionHook hook) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.hook = hook;
}

}  // namespace zaya::heartbeat
