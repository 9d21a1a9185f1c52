// docs/quickstart-your-own-text.md, run as written: every ```sh block of the page, in order, in
// a scratch folder, with `zaya` on PATH and $ZAYA the source tree — the newcomer's scenario end to
// end (a single-file corpus, a tokenizer, shards, training interrupted by Ctrl-C and resumed, eval
// on text, generate and serve with no --tokenizer, a plot of the run). The block's info string
// says how it runs:
//   ```sh             runs to completion; must exit 0
//   ```sh ctrl-c      runs until its first step lines, then gets SIGINT (a terminal's Ctrl-C, to
//                     its process group); must exit 130 having saved a checkpoint
//   ```sh background  starts, and stays up (a server) until the page's last block has run; the
//                     blocks after it wait until its port (8080 on the page, a free one here)
//                     accepts connections
//   ```sh env         the reader's own set-up ($ZAYA); the test sets it itself
// What each block printed is then checked against what the page promises.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "test_util.h"

using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

struct Block {
  std::string kind;    // "", "ctrl-c", "background" or "env"
  std::string script;  // the block's text
  int line = 0;        // its first line on the page
};

const fs::path kSourceRoot = fs::path(ZAYA_TEST_FIXTURES).parent_path().parent_path();
const fs::path kPage = kSourceRoot / "docs/quickstart-your-own-text.md";

std::vector<Block> sh_blocks(const fs::path& page) {
  std::ifstream f(page);
  std::vector<Block> blocks;
  std::optional<Block> open;
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    ++n;
    if (open) {
      if (line.rfind("```", 0) == 0) {
        blocks.push_back(*open);
        open.reset();
      } else {
        open->script += line + "\n";
      }
    } else if (line.rfind("```sh", 0) == 0) {
      open = Block{line.size() > 6 ? line.substr(6) : "", "", n + 1};
    } else if (line.rfind("```", 0) == 0) {
      // Another language's block (output shown on the page): skip to its end.
      while (std::getline(f, line) && (++n, line.rfind("```", 0) != 0)) {
      }
    }
  }
  EXPECT_FALSE(open) << page << ": a ```sh block is not closed";
  return blocks;
}

// A TCP port nothing listens on now.
int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

bool port_accepts(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

// Waits up to `seconds` for pred().
template <class Pred>
bool wait_for(Pred pred, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// A block's script as a process of its own (its own process group, like a terminal's foreground
// job), stdout and stderr to files in `dir`.
struct Process {
  pid_t pid = -1;
  std::string out_path, err_path;

  Process(const std::string& dir, const std::string& script, int index) {
    out_path = dir + "/block" + std::to_string(index) + ".out";
    err_path = dir + "/block" + std::to_string(index) + ".err";
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      if (chdir(dir.c_str()) != 0) _exit(127);
      if (!freopen(out_path.c_str(), "w", stdout) || !freopen(err_path.c_str(), "w", stderr))
        _exit(127);
      execl("/bin/sh", "sh", "-ec", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
  }
  // The exit status; 128 + N for a death by signal N (as a shell reports it). Returns once the
  // whole process group is gone: a shell killed by the signal may leave zaya still saving.
  int wait() {
    int status = 0;
    waitpid(pid, &status, 0);
    wait_for([&] { return kill(-pid, 0) != 0; }, 300);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void signal_group(int sig) const { kill(-pid, sig); }
  ~Process() {
    if (pid > 0) {  // a failed assertion left it running
      signal_group(SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  std::string out() const { return slurp(out_path); }
  std::string err() const { return slurp(err_path); }
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

TEST(Quickstart, TheNewcomersScenarioRunsAsThePageSays) {
  const std::vector<Block> blocks = sh_blocks(kPage);
  ASSERT_GE(blocks.size(), 8u) << kPage;
  ScratchDir dir;
  setenv("ZAYA", kSourceRoot.c_str(), 1);
  const std::string path = fs::path(ZAYA_BINARY).parent_path().string() + ":" + getenv("PATH");
  setenv("PATH", path.c_str(), 1);
  const std::string port = std::to_string(free_port());

  std::vector<std::unique_ptr<Process>> background;
  std::string all_out, all_err;  // every block's output, for the checks at the end
  int index = 0;
  for (const Block& b : blocks) {
    ++index;
    if (b.kind == "env") continue;
    const std::string script = replace_all(b.script, "8080", port);
    const std::string where = kPage.filename().string() + ":" + std::to_string(b.line);
    auto p = std::make_unique<Process>(dir.path, script, index);
    if (b.kind == "background") {
      ASSERT_TRUE(wait_for([&] { return port_accepts(std::stoi(port)); }, 120))
          << where << ": the server did not come up\n"
          << p->err();
      background.push_back(std::move(p));
      continue;
    }
    if (b.kind == "ctrl-c") {
      // A few step lines first: Ctrl-C in the middle of training, not before it starts.
      const std::regex step_line(R"(step +(\d+)/)");
      const bool stepping = wait_for(
          [&] {
            const std::string e = p->err();
            return std::distance(std::sregex_iterator(e.begin(), e.end(), step_line),
                                 std::sregex_iterator()) >= 2;
          },
          300);
      p->signal_group(SIGINT);
      const int code = p->wait();
      ASSERT_TRUE(stepping) << where << ": no step lines before the timeout\n" << p->err();
      EXPECT_EQ(code, 130) << where << "\n" << p->err();
      EXPECT_NE(p->err().find("checkpoint"), std::string::npos) << where << "\n" << p->err();
    } else {
      ASSERT_EQ(p->wait(), 0) << where << ":\n"
                              << script << "\nstdout:\n"
                              << p->out() << "\nstderr:\n"
                              << p->err();
    }
    all_out += p->out();
    all_err += p->err();
  }
  for (auto& p : background) {
    p->signal_group(SIGTERM);
    p->wait();
    all_err += p->err();
  }

  // What the page promises along the way.
  EXPECT_NE(all_err.find("resumed from"), std::string::npos) << all_err;
  EXPECT_NE(all_out.find("perplexity"), std::string::npos) << all_out;
  EXPECT_EQ(all_err.find("--tokenizer"), std::string::npos) << all_err;  // never asked for one
  bool has_svg = false, has_tokenizer = false;
  for (const auto& e : fs::recursive_directory_iterator(dir.path)) {
    has_svg |= e.path().extension() == ".svg";
    has_tokenizer |=
        e.path().filename() == "tokenizer.json" && e.path().parent_path().filename() == "model";
  }
  EXPECT_TRUE(has_svg) << "no plot of the run";
  // The validation loss is in the metrics, on its step's line, for the plot to draw.
  EXPECT_NE(slurp(dir / "runs/my-run/metrics.jsonl").find("\"val_loss\""), std::string::npos);
  EXPECT_TRUE(has_tokenizer) << "no tokenizer.json in a saved model directory";
}

}  // namespace
