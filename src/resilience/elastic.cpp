// Rewriting mpirun and srun launchers for the hosts left (elastic.h).
#include "resilience/elastic.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/assert.h"
#include "io/file.h"

namespace zaya {

namespace {

std::string short_name(const std::string& name) {
  return name.substr(0, name.find('.'));
}

// The integer in `text`, or −1.
int to_int(const std::string& text) {
  int n = -1;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && p == text.data() + text.size() ? n : -1;
}

// Where an option's value is: `--name V`, `--name=V`, or (for a one-letter option) `-nV`.
struct OptionAt {
  size_t word = 0;    // the word holding the value
  size_t offset = 0;  // where the value starts in it
  bool found = false;
};

OptionAt find_option(const std::vector<std::string>& w, const std::vector<std::string>& names,
                     bool glued_short = false) {
  for (size_t i = 0; i < w.size(); ++i)
    for (const std::string& n : names) {
      if (w[i] == n && i + 1 < w.size()) return {i + 1, 0, true};
      if (n.rfind("--", 0) == 0 && w[i].rfind(n + "=", 0) == 0) return {i, n.size() + 1, true};
      if (glued_short && n.size() == 2 && w[i].size() > 2 && w[i].rfind(n, 0) == 0 &&
          to_int(w[i].substr(2)) >= 0)
        return {i, 2, true};
    }
  return {};
}

std::string value_of(const std::vector<std::string>& w, const OptionAt& at) {
  return w[at.word].substr(at.offset);
}

void set_value(std::vector<std::string>& w, const OptionAt& at, const std::string& v) {
  w[at.word] = w[at.word].substr(0, at.offset) + v;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// a + b for slot counts read from a file, capped at INT_MAX (a hostile count must not overflow).
int add_slots(int a, int b) {
  return int(std::min<int64_t>(int64_t(a) + b, std::numeric_limits<int>::max()));
}

}  // namespace

LauncherKind launcher_kind(const std::vector<std::string>& launcher) {
  if (launcher.empty()) return LauncherKind::Other;
  const std::string name = std::filesystem::path(launcher[0]).filename().string();
  if (name == "mpirun" || name == "mpiexec" || name == "orterun") return LauncherKind::Mpirun;
  if (name == "srun") return LauncherKind::Srun;
  return LauncherKind::Other;
}

bool names_host(const std::string& entry, const std::vector<HostAddresses>& hosts) {
  for (const HostAddresses& h : hosts) {
    if (entry == h.host || short_name(entry) == short_name(h.host)) return true;
    if (std::find(h.addrs.begin(), h.addrs.end(), entry) != h.addrs.end()) return true;
  }
  return false;
}

std::string derive_hostfile(const std::string& text, const std::vector<HostAddresses>& lost,
                            int& removed_slots, int& kept) {
  removed_slots = kept = 0;
  std::string out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::stringstream words(line.substr(0, line.find('#')));
    std::string host, word;
    words >> host;
    if (host.empty()) continue;  // a blank line or a comment
    if (!names_host(host, lost)) {
      out += line + "\n";
      ++kept;
      continue;
    }
    int slots = 1;
    while (words >> word)
      if (word.rfind("slots=", 0) == 0 && to_int(word.substr(6)) > 0)
        slots = to_int(word.substr(6));
    removed_slots = add_slots(removed_slots, slots);
  }
  return out;
}

ShrunkLauncher shrink_launcher(const std::vector<std::string>& launcher,
                               const std::vector<HostAddresses>& lost, int lost_ranks,
                               int hosts_left, const std::string& hostfile_out) {
  ShrunkLauncher r;
  std::vector<std::string> w = launcher;
  const LauncherKind kind = launcher_kind(w);
  if (kind == LauncherKind::Mpirun) {
    const OptionAt file =
        find_option(w, {"--hostfile", "-hostfile", "--machinefile", "-machinefile"});
    const OptionAt list = find_option(w, {"--host", "-host", "-H"});
    if (!file.found && !list.found) {
      r.why_not = "the mpirun launcher names no --hostfile or --host to take the lost hosts from";
      return r;
    }
    int removed = 0;
    if (file.found) {
      const std::string path = value_of(w, file);
      int kept = 0;
      r.hostfile_text =
          derive_hostfile(read_text_file(path, "mpirun --hostfile"), lost, removed, kept);
      if (kept == 0) {
        r.why_not = fmt::format("no host of the hostfile {} is left", path);
        return r;
      }
      set_value(w, file, hostfile_out);
    }
    if (list.found) {
      std::vector<std::string> left;
      for (const std::string& e : split_on(value_of(w, list), ',')) {
        const size_t colon = e.find(':');
        const std::string host = e.substr(0, colon);
        if (!names_host(host, lost)) {
          left.push_back(e);
        } else {
          removed = add_slots(
              removed, colon == std::string::npos ? 1 : std::max(1, to_int(e.substr(colon + 1))));
        }
      }
      if (left.empty()) {
        r.why_not = "no host of the mpirun --host list is left";
        return r;
      }
      set_value(w, list, join(left, ","));
    }
    const int ranks_gone = lost_ranks >= 0 ? lost_ranks : removed;
    if (const OptionAt np = find_option(w, {"-np", "-n", "--np", "--n", "-c"}); np.found) {
      const int n = to_int(value_of(w, np));
      if (n < 0) {
        r.why_not = fmt::format("the mpirun rank count '{}' is not a number", value_of(w, np));
        return r;
      }
      if (n - ranks_gone < 1) {
        r.why_not = fmt::format("mpirun -np {} less the {} ranks of the lost hosts leaves none", n,
                                ranks_gone);
        return r;
      }
      set_value(w, np, std::to_string(n - ranks_gone));
    }
  } else if (kind == LauncherKind::Srun) {
    if (const OptionAt nodes = find_option(w, {"-N", "--nodes"}, true); nodes.found) {
      set_value(w, nodes, std::to_string(hosts_left));
    } else {
      w.insert(w.begin() + 1, {"-N", std::to_string(hosts_left)});
    }
    if (const OptionAt tasks = find_option(w, {"-n", "--ntasks"}, true); tasks.found) {
      const int n = to_int(value_of(w, tasks));
      if (n < 0 || lost_ranks < 0 || n - lost_ranks < 1) {
        r.why_not = fmt::format("cannot derive the srun task count from '{}' less {} lost ranks",
                                value_of(w, tasks), lost_ranks);
        return r;
      }
      set_value(w, tasks, std::to_string(n - lost_ranks));
    }
    std::vector<std::string> names;
    for (const HostAddresses& h : lost) names.push_back(h.host);
    if (const OptionAt ex = find_option(w, {"--exclude", "-x"}); ex.found) {
      std::vector<std::string> all = split_on(value_of(w, ex), ',');
      for (const std::string& n : names)
        if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
      set_value(w, ex, join(all, ","));
    } else {
      w.insert(w.begin() + 1, "--exclude=" + join(names, ","));
    }
  } else {
    r.why_not =
        fmt::format("the launcher '{}' is neither mpirun nor srun: zaya cannot derive its hosts",
                    launcher.empty() ? std::string("(none)") : launcher[0]);
    return r;
  }
  r.launcher = std::move(w);
  return r;
}

}  // namespace zaya
