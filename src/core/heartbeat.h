// Heartbeats: where this rank is (step, section, collective), for `zaya supervise`
// (docs/fault-tolerance.md; the file format is the contract in that document's "Files" section).
//
// Always on in memory (a few clock reads per section change: the straggler check uses the time a
// step spent outside collectives); written to ZAYA_SUPERVISE_DIR/heartbeat_rankRRRRR.json — one
// fixed-size JSON line rewritten with one pwrite — only when the supervisor set that variable.
// Nothing here touches the step's numerics. One process-wide state; sections are changed by the
// thread that runs the step (collectives from other threads are not tracked).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya::heartbeat {

// In the order a step goes through them (the supervisor compares ranks by it).
enum class Section { Setup, Data, ForwardBackward, Collective, Optimizer, Eval, Checkpoint, Done };
const char* section_name(Section s);
// The section named `name` ("forward-backward" …); false if there is none.
bool parse_section(const std::string& name, Section& out);

// Called once the rank is known (after the group is made): opens the heartbeat file when
// supervised and writes the first record (section setup). Calling it again (a second Trainer in
// one process) keeps the file and updates rank and world.
void start(int rank, int world);
// Rewrites the record without advancing `seq` (which tracks progress) but advancing `beat`: the
// process is alive. The fencing watchdog calls it (resilience/fence.h); no-op before start.
void touch();
// This host's IPv4 addresses on interfaces that are up, loopback left out (the record's "addrs",
// which the supervisor probes to tell an unreachable host).
std::vector<std::string> ipv4_addresses();
bool supervised();                   // ZAYA_SUPERVISE_DIR is set
const std::string& supervise_dir();  // "" when not supervised
int attempt();                       // ZAYA_SUPERVISE_ATTEMPT (1 when unset)
double process_seconds();            // seconds since this process started (first use of this file)

// The step now in progress (1-based).
void begin_step(int64_t step);
// A step (train_step) completed in `seconds`.
void end_step(int64_t step, double seconds);
// Enters a section; a hook installed with set_section_hook runs first (fault injection).
void enter(Section s, const char* detail = "");

// Seconds this thread spent inside collectives since the last begin_step.
double collective_seconds_this_step();

// Enters `s` and restores the previous section (and detail) on destruction; Eval and Checkpoint
// scopes also record their longest duration (max_eval_s / max_checkpoint_s).
class Scope {
 public:
  explicit Scope(Section s, const char* detail = "");
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Section sec_, prev_;
  std::string prev_detail_;
  double start_;
};

// Writes ZAYA_SUPERVISE_DIR/error_rankRRRRR.txt with the message that ends this process (main's
// handler of zaya::Error); no-op when not supervised. The rank is heartbeat's, else the launcher's
// (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID), else 0.
void record_error(const std::string& message);

// Runs at every section entry with the step in progress (fault injection: resilience/faults.h).
using SectionHook = void (*)(int64_t step, Section s);
void set_section_hook(SectionHook hook);

}  // namespace zaya::heartbeat
