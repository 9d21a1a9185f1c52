// Fault injection (faults.h): the parsed plan of ZAYA_FAULT, the record of fired faults, and the
// faults themselves.
#include "resilience/faults.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/assert.h"
#include "core/heartbeat.h"
#include "core/log.h"

namespace zaya::faults {

namespace {

constexpr const char* kGrammar =
    "KIND@WHEN[:key:value...][:always] with KIND kill|hang|exit|slow|nan|spike|"
    "corrupt-checkpoint, WHEN step:N|setup|preflight, keys rank section seconds factor code";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

double number(const std::string& spec, const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x))
    fail("ZAYA_FAULT '{}': {} needs a number, got '{}'", spec, key, v);
  return x;
}

int64_t whole(const std::string& spec, const std::string& key, const std::string& v, int64_t lo,
              int64_t hi) {
  const double x = number(spec, key, v);
  if (x != std::floor(x) || x < double(lo) || x > double(hi))
    fail("ZAYA_FAULT '{}': {} must be a whole number in [{}, {}], got '{}'", spec, key, lo, hi, v);
  return int64_t(x);
}

FaultSpec parse_one(const std::string& text) {
  FaultSpec f;
  f.text = text;
  const size_t at = text.find('@');
  if (at == std::string::npos) fail("ZAYA_FAULT '{}': expected {}", text, kGrammar);
  const std::string kind = text.substr(0, at);
  static const std::pair<const char*, Kind> kinds[] = {
      {"kill", Kind::Kill},
      {"hang", Kind::Hang},
      {"exit", Kind::Exit},
      {"slow", Kind::Slow},
      {"nan", Kind::Nan},
      {"spike", Kind::Spike},
      {"corrupt-checkpoint", Kind::CorruptCheckpoint}};
  bool known = false;
  for (const auto& [name, k] : kinds)
    if (kind == name) f.kind = k, known = true;
  if (!known) fail("ZAYA_FAULT '{}': unknown fault kind '{}' (expected {})", text, kind, kGrammar);
  const std::vector<std::string> t = split(text.substr(at + 1), ':');
  size_t i = 0;
  if (t.empty() || t[0].empty()) fail("ZAYA_FAULT '{}': expected {}", text, kGrammar);
  if (t[0] == "step") {
    if (t.size() < 2) fail("ZAYA_FAULT '{}': step needs a number (step:N)", text);
    f.when = When::Step;
    f.step = whole(text, "step", t[1], 1, int64_t(1) << 53);
    i = 2;
  } else if (t[0] == "setup") {
    f.when = When::Setup, i = 1;
  } else if (t[0] == "preflight") {
    f.when = When::Preflight, i = 1;
  } else {
    fail("ZAYA_FAULT '{}': unknown time '{}' (expected step:N, setup or preflight)", text, t[0]);
  }
  bool has_seconds = false;
  while (i < t.size()) {
    const std::string& key = t[i];
    if (key == "always") {
      f.always = true, ++i;
      continue;
    }
    if (i + 1 >= t.size()) fail("ZAYA_FAULT '{}': '{}' needs a value ({}:VALUE)", text, key, key);
    const std::string& v = t[i + 1];
    if (key == "rank") {
      f.rank = int(whole(text, key, v, 0, 1 << 24));
    } else if (key == "section") {
      heartbeat::Section s;
      if (!heartbeat::parse_section(v, s) || s == heartbeat::Section::Done)
        fail(
            "ZAYA_FAULT '{}': unknown section '{}' (expected setup, data, forward-backward, "
            "collective, optimizer, eval or checkpoint)",
            text, v);
      f.section = v;
    } else if (key == "seconds") {
      f.seconds = number(text, key, v), has_seconds = true;
      if (f.seconds < 0) fail("ZAYA_FAULT '{}': seconds must be >= 0, got {}", text, v);
    } else if (key == "factor") {
      f.factor = number(text, key, v);
      if (!(f.factor > 0)) fail("ZAYA_FAULT '{}': factor must be > 0, got {}", text, v);
    } else if (key == "code") {
      f.code = int(whole(text, key, v, 1, 255));
    } else {
      fail(
          "ZAYA_FAULT '{}': unknown key '{}' (expected rank, section, seconds, factor, code or "
          "always)",
          text, key);
    }
    i += 2;
  }
  if (f.kind == Kind::Slow && !has_seconds) f.seconds = 1;
  if (f.when == When::Preflight && f.kind != Kind::Nan && f.kind != Kind::Slow)
    fail("ZAYA_FAULT '{}': only nan and slow faults can happen at preflight", text);
  if (f.kind == Kind::CorruptCheckpoint && f.when != When::Step)
    fail("ZAYA_FAULT '{}': corrupt-checkpoint needs the checkpoint's step (step:N)", text);
  return f;
}

struct Plan {
  std::mutex mu;
  bool installed = false;
  int rank = 0;
  std::string text;  // ZAYA_FAULT when the plan was read (a new value replaces the plan)
  std::vector<FaultSpec> specs;
  std::set<std::string> fired;  // spec texts (this job's record, or this process's)

  // Marks f fired (in the job's record when supervised) and says whether it is due now.
  bool take(const FaultSpec& f) {
    std::lock_guard lock(mu);
    if (f.rank != rank) return false;
    if (!f.always && !fired.insert(f.text).second) return false;
    if (heartbeat::supervised()) {
      const std::string path = heartbeat::supervise_dir() + "/faults_fired.txt";
      const std::string line =
          f.text + "\t" + std::to_string(rank) + "\t" + std::to_string(heartbeat::attempt()) + "\n";
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
        ::fsync(fd);
        ::close(fd);
      }
    }
    std::fprintf(stderr, "zaya: fault injected on rank %d: %s\n", rank, f.text.c_str());
    std::fflush(stderr);
    return true;
  }
};

Plan& plan() {
  static Plan p;
  return p;
}

[[noreturn]] void hang_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// kill / hang / exit / slow, once due.
void act(const FaultSpec& f) {
  switch (f.kind) {
    case Kind::Kill:
      std::raise(SIGKILL);
      hang_forever();
    case Kind::Hang:
      if (f.seconds < 0) hang_forever();
      sleep_s(f.seconds);
      return;
    case Kind::Exit:
      std::_Exit(f.code);
    case Kind::Slow:
      sleep_s(f.seconds);
      return;
    case Kind::Nan:
    case Kind::Spike:
    case Kind::CorruptCheckpoint:
      return;  // not actions at a section (see apply_loss_fault, corrupt_checkpoint_due)
  }
}

bool is_action(Kind k) {
  return k == Kind::Kill || k == Kind::Hang || k == Kind::Exit || k == Kind::Slow;
}

void on_section(int64_t step, heartbeat::Section s) {
  Plan& p = plan();
  for (const FaultSpec& f : p.specs) {
    if (f.when != When::Step || f.step != step || !is_action(f.kind)) continue;
    if (f.section != heartbeat::section_name(s)) continue;
    if (f.kind == Kind::Kill && s == heartbeat::Section::Checkpoint) continue;  // mid-write
    if (p.take(f)) act(f);
  }
}

// The plan of ZAYA_FAULT and the job's record of fired faults, read once.
void load(int rank) {
  Plan& p = plan();
  std::lock_guard lock(p.mu);
  p.rank = rank;
  const char* env = std::getenv("ZAYA_FAULT");
  const std::string text = env ? env : "";
  // Not supervised, a fault fires once per run (a later Trainer in this process starts afresh).
  if (p.installed && text == p.text && heartbeat::supervised()) return;
  p.specs = text.empty() ? std::vector<FaultSpec>{} : parse_fault_specs(text);
  p.text = text;
  p.installed = true;
  p.fired.clear();
  if (heartbeat::supervised()) {
    std::ifstream f(heartbeat::supervise_dir() + "/faults_fired.txt");
    for (std::string line; std::getline(f, line);) p.fired.insert(line.substr(0, line.find('\t')));
  }
}

}  // namespace

std::vector<FaultSpec> parse_fault_specs(const std::string& text) {
  std::vector<FaultSpec> specs;
  for (const std::string& part : split(text, ',')) {
    const std::string s = trim(part);
    if (s.empty()) fail("ZAYA_FAULT '{}': an empty fault spec (expected {})", text, kGrammar);
    specs.push_back(parse_one(s));
  }
  return specs;
}

void install(int rank) {
  load(rank);
  heartbeat::set_section_hook(plan().specs.empty() ? nullptr : on_section);
}

void at_setup() {
  Plan& p = plan();
  for (const FaultSpec& f : p.specs)
    if (f.when == When::Setup && is_action(f.kind) && p.take(f)) act(f);
}

double apply_loss_fault(int64_t step, double loss) {
  Plan& p = plan();
  for (const FaultSpec& f : p.specs) {
    if (f.when != When::Step || f.step != step) continue;
    if (f.kind == Kind::Nan && p.take(f)) loss = NAN;
    if (f.kind == Kind::Spike && p.take(f)) loss *= f.factor;
  }
  return loss;
}

void at_checkpoint_write(int64_t step) {
  Plan& p = plan();
  for (const FaultSpec& f : p.specs)
    if (f.kind == Kind::Kill && f.when == When::Step && f.step == step &&
        f.section == "checkpoint" && p.take(f))
      act(f);
}

bool corrupt_checkpoint_due(int64_t step) {
  Plan& p = plan();
  for (const FaultSpec& f : p.specs)
    if (f.kind == Kind::CorruptCheckpoint && f.step == step && p.take(f)) return true;
  return false;
}

void corrupt_checkpoint(const std::string& dir) {
  const std::string file = dir + "/model/model.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const std::streamoff middle = f.tellg() / 2;
  f.seekg(middle);
  const char byte = char(f.get());
  f.seekp(middle);
  f.put(char(~byte));
  if (!f) fail("fault injection: cannot corrupt {}", file);
  log_info("fault: corrupted {} (byte {})", file, int64_t(middle));
}

PreflightFault preflight_fault(int rank) {
  load(rank);
  Plan& p = plan();
  PreflightFault out;
  for (const FaultSpec& f : p.specs) {
    if (f.when != When::Preflight) continue;
    if (f.kind == Kind::Slow && p.take(f)) out.slow_seconds += f.seconds;
    if (f.kind == Kind::Nan && p.take(f)) out.nan = true;
  }
  return out;
}

}  // namespace zaya::faults
