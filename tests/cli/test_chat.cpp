// `zaya chat` under a pseudo-terminal (tmux, on a private server socket) with the ZAYA1-8B-like
// directory (tests/chat_model_dir.h): two turns with a /think off between them (the saved
// conversation shows reasoning on the first answer only), a Ctrl-C in the middle of an answer that
// stops it and leaves the session answering the next message, and Ctrl-D exiting with status 0.
// `-p` answers once with plain output when stdout is not a terminal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "chat_model_dir.h"
#include "cli_util.h"
#include "test_util.h"

namespace zaya {
namespace {

using namespace std::chrono_literals;

#define NEED_FIXTURE() \
  if (test::zaya_chat_model_dir().empty()) GTEST_SKIP() << test::gemma3_missing_message()

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// One `zaya chat` in a detached tmux session of its own server.
class TmuxChat {
 public:
  TmuxChat(const std::string& dir, const std::string& args)
      : dir_(dir),
        socket_("zaya_chat_test_" + std::to_string(getpid()) + "_" + std::to_string(++count_)) {
    const std::string cmd =
        std::string(ZAYA_BINARY) + " chat --model " + test::zaya_chat_model_dir() + " " + args;
    // stderr (the status lines) shares the terminal, as for a user.
    // The wrapping shell outlives a Ctrl-C (which the terminal sends to both) to record the status.
    std::ofstream(dir + "/run.sh") << "trap true INT\n"
                                   << cmd << "\necho $? >" << dir << "/exit_status\n";
    tmux("new-session -d -x 200 -y 50 -s chat 'sh " + dir + "/run.sh'");
    tmux("set-option -t chat remain-on-exit on");
  }
  ~TmuxChat() { tmux("kill-server"); }
  std::string tmux(const std::string& args) const {
    return run_capture("tmux -L " + socket_ + " " + args + " 2>&1");
  }
  std::string screen() const { return tmux("capture-pane -p -J -S -5000 -t chat"); }
  void type(const std::string& text) const {
    tmux("send-keys -t chat -l " + test::shell_quote(text));
    tmux("send-keys -t chat Enter");
  }
  void key(const std::string& k) const { tmux("send-keys -t chat " + k); }
  // Waits up to `limit` for `pred(screen())`; false on time-out.
  bool wait_for(const std::function<bool(const std::string&)>& pred,
                std::chrono::seconds limit = 120s) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (pred(screen())) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  bool dead() const { return tmux("display -p -t chat '#{pane_dead}'").starts_with("1"); }
  // `/save PATH`, waiting for "saved N"; the conversation it wrote.
  nlohmann::json save(const std::string& path, int n) const {
    type("/save " + path);
    const std::string said = "saved " + std::to_string(n);
    EXPECT_TRUE(wait_for([&](const std::string& s) { return s.find(said) != std::string::npos; }))
        << screen();
    return nlohmann::json::parse(test::slurp(path));
  }
  // Ctrl-D at the prompt; the exit status the wrapping shell recorded.
  std::string exit_by_ctrl_d() const {
    key("C-d");
    EXPECT_TRUE(wait_for([&](const std::string&) { return dead(); }, 30s)) << screen();
    return exit_status();
  }
  std::string exit_status() const { return test::slurp(dir_ + "/exit_status"); }

 private:
  static inline int count_ = 0;
  std::string dir_, socket_;
};

size_t count_of(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliChat, TwoTurnsAThinkOffAndSave) {
  NEED_FIXTURE();
  test::ScratchDir dir;
  TmuxChat chat(dir.path, "--max-tokens 24 --seed 3");
  ASSERT_TRUE(chat.wait_for([](const std::string& s) { return s.find("> ") != std::string::npos; }))
      << chat.screen();
  chat.type("What is a mixture of experts?");
  ASSERT_TRUE(chat.wait_for([](const std::string& s) { return count_of(s, " tokens/s") >= 1; }))
      << chat.screen();
  chat.type("/think off");
  ASSERT_TRUE(chat.wait_for(
      [](const std::string& s) { return s.find("reasoning off") != std::string::npos; }));
  chat.type("And in one word?");
  ASSERT_TRUE(chat.wait_for([](const std::string& s) { return count_of(s, " tokens/s") >= 2; }))
      << chat.screen();
  const nlohmann::json saved = chat.save(dir / "conversation.json", 4);
  ASSERT_EQ(saved.size(), 4u) << saved.dump(2);
  EXPECT_EQ(saved[0]["content"], "What is a mixture of experts?");
  EXPECT_EQ(saved[1]["role"], "assistant");
  // Thinking on: the prompt opened <think>, so the answer began as reasoning.
  EXPECT_TRUE(saved[1].contains("reasoning_content")) << saved[1].dump();
  EXPECT_FALSE(saved[3].contains("reasoning_content")) << saved[3].dump();
  EXPECT_FALSE(saved[3]["content"].get<std::string>().empty());
  EXPECT_EQ(chat.exit_by_ctrl_d(), "0\n");
}

TEST(CliChat, CtrlCStopsAnAnswerAndTheSessionGoesOn) {
  NEED_FIXTURE();
  test::ScratchDir dir;
  // No token limit: an answer runs to the end of the context unless stopped.
  TmuxChat chat(dir.path, "--reasoning off --seed 5");
  ASSERT_TRUE(chat.wait_for([](const std::string& s) { return s.find("> ") != std::string::npos; }))
      << chat.screen();
  for (int turn = 1; turn <= 2; ++turn) {
    const std::string before = chat.screen();
    chat.type("Tell me a long story, part " + std::to_string(turn));
    // Wait for some of the answer, then interrupt it.
    ASSERT_TRUE(chat.wait_for([&](const std::string& s) { return s.size() > before.size() + 120; }))
        << chat.screen();
    chat.key("C-c");
    ASSERT_TRUE(chat.wait_for(
        [&](const std::string& s) { return count_of(s, ", stopped]") >= size_t(turn); }, 60s))
        << chat.screen();
  }
  const nlohmann::json saved = chat.save(dir / "conversation.json", 4);
  EXPECT_EQ(saved[2]["content"], "Tell me a long story, part 2");
  EXPECT_EQ(chat.exit_by_ctrl_d(), "0\n");
}

TEST(CliChat, OneTurnWithPIsPlainText) {
  NEED_FIXTURE();
  test::ScratchDir dir;
  const test::CliResult r = test::run_zaya_in(
      dir.path, "chat --model " + test::zaya_chat_model_dir() +
                    " -p 'Hello' --max-tokens 12 --seed 2 --reasoning off --system 'Be brief.'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;  // no colour
  EXPECT_TRUE(r.out.ends_with("\n"));
  test::expect_contains(r.err, "tokens/s");
  // Same seed, same answer.
  const test::CliResult again = test::run_zaya_in(
      dir.path, "chat --model " + test::zaya_chat_model_dir() +
                    " -p 'Hello' --max-tokens 12 --seed 2 --reasoning off --system 'Be brief.'");
  EXPECT_EQ(again.out, r.out);
  test::expect_user_error(
      test::run_zaya_in(dir.path,
                        "chat --model " + test::zaya_chat_model_dir() + " -p x --reasoning maybe"),
      "--reasoning");
}

}  // namespace
}  // namespace zaya
