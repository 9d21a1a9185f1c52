// `zaya serve` on a run as the trainer leaves it (runs/NAME/step_N/model/ with tokenizer.json and
// a trained context of 48 in tokenizer_config.json), with no --tokenizer: the served name is the
// run's, a request naming another model is served, the context defaults to the trained one (chat
// without max_tokens stops there; a longer prompt is refused naming both numbers), every request
// is one log line on stderr and the listening line is the one line on stdout; --quiet drops the
// logs; a model directory without a tokenizer and a --max-context past max_position_embeddings
// are user errors. (tests/serve/test_server.cpp drives the HTTP API itself.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "cli_util.h"
#include "infer/whole_model_dir.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::CliResult;
using test::expect_user_error;
using test::run_zaya_in;
using test::shell_quote;
using test::slurp;

constexpr int64_t kTrained = 48;

// `zaya serve ARGS --port 0` in the background: waits for the listening line on stdout (or the
// process's exit), and stops it with SIGTERM when destroyed.
class Server {
 public:
  Server(const std::string& dir, const std::vector<std::string>& args) : dir_(dir) {
    out_ = dir + "/serve.out";
    err_ = dir + "/serve.err";
    pid_ = fork();
    if (pid_ == 0) {
      freopen(out_.c_str(), "w", stdout);
      freopen(err_.c_str(), "w", stderr);
      std::vector<const char*> argv = {ZAYA_BINARY, "serve"};
      for (const std::string& a : args) argv.push_back(a.c_str());
      for (const char* a : {"--port", "0", "--threads", "1"}) argv.push_back(a);
      argv.push_back(nullptr);
      execv(ZAYA_BINARY, const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    const std::regex line(R"(on (http://127\.0\.0\.1:\d+) — )");
    for (int i = 0; i < 600 && base.empty(); ++i) {  // 30 s: a bound for a stuck test
      std::smatch m;
      const std::string s = slurp(out_);
      if (std::regex_search(s, m, line)) {
        base = m[1];
        break;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Server() { stop(); }

  // Stops the server (SIGTERM); returns its exit status (−1 if it was not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string out() const { return slurp(out_); }
  std::string err() const { return slurp(err_); }

  // curl: the status and the body parsed (null if not JSON).
  std::pair<int, json> request(const std::string& method, const std::string& path,
                               const std::string& body = "") {
    const std::string tag = std::to_string(n_++);
    const std::string in = dir_ + "/req" + tag, resp = dir_ + "/resp" + tag,
                      code = dir_ + "/code" + tag;
    std::ofstream(in, std::ios::binary) << body;
    const std::string cmd = "curl -s -N -X " + method + " -H 'Content-Type: application/json' " +
                            (body.empty() ? "" : "--data-binary @" + in + " ") + "-o " + resp +
                            " -w '%{http_code}' " + shell_quote(base + path) + " > " + code;
    std::system(cmd.c_str());
    return {std::atoi(slurp(code).c_str()), json::parse(slurp(resp), nullptr, false)};
  }

  // Waits (up to 10 s) until stderr holds `needle`: a request's log line is written once its
  // response has been sent, so just after the client has it.
  std::string wait_for_log(const std::string& needle) const {
    for (int i = 0; i < 200; ++i) {
      const std::string e = err();
      if (e.find(needle) != std::string::npos) return e;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return err();
  }

  std::string base;  // http://127.0.0.1:PORT, empty if it did not start

 private:
  std::string dir_, out_, err_;
  pid_t pid_ = -1;
  int n_ = 0;
};

struct TinyRun {
  test::ScratchDir dir;
  std::string run = dir / "runs/tiny-run";
  TinyRun() { test::save_whole_run(run, {10, 20}, kTrained); }
};

TEST(ServeCli, ARunIsServedUnderItsNameWithItsTrainedContext) {
  TinyRun t;
  Server s(t.dir.path, {"--model", t.run});
  ASSERT_FALSE(s.base.empty()) << s.out() << s.err();
  // stdout: the listening line alone (the result a script waits for).
  const std::string out = s.out();
  EXPECT_EQ(out.find("zaya serve: tiny-run ("), 0u) << out;
  EXPECT_NE(out.find(", context 48\n"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  // stderr: what was picked, and where the context came from.
  const std::string err = s.err();
  const std::string picked = t.run + "/step_00000020/model";
  const std::string why = "(the newest valid checkpoint of " + t.run + ": step 20)";
  EXPECT_NE(err.find("serve: model " + picked + " " + why), std::string::npos) << err;
  EXPECT_NE(err.find("serve: context 48 tokens (the trained context"), std::string::npos) << err;

  auto [st, models] = s.request("GET", "/v1/models");
  EXPECT_EQ(st, 200);
  EXPECT_EQ(models["data"][0]["id"], "tiny-run") << models;

  // Another model's name: served, the response naming the served model; the log says both.
  auto [cst, c] = s.request("POST", "/v1/completions",
                            json{{"model", "gpt-4"},
                                 {"prompt", "In the"},
                                 {"max_tokens", 5},
                                 {"temperature", 0},
                                 {"ignore_eos", true}}
                                .dump());
  ASSERT_EQ(cst, 200) << c;
  EXPECT_EQ(c["model"], "tiny-run");
  const int64_t p = c["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_EQ(c["usage"]["completion_tokens"], 5);
  const std::string logged = s.wait_for_log("serve: POST /v1/completions");
  const std::regex line("serve: POST /v1/completions 200 \\d+ ms prompt " + std::to_string(p) +
                        " completion 5 finish length model 'gpt-4' \\(served as tiny-run\\) "
                        "client 127\\.0\\.0\\.1\n");
  EXPECT_TRUE(std::regex_search(logged, line)) << logged;

  // Chat without max_tokens: the rest of the trained context, not thousands of tokens.
  auto [hst, chat] = s.request("POST", "/v1/chat/completions",
                               json{{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                    {"temperature", 0},
                                    {"ignore_eos", true}}
                                   .dump());
  ASSERT_EQ(hst, 200) << chat;
  const int64_t total = chat["usage"]["total_tokens"].get<int64_t>();
  EXPECT_LE(total, kTrained) << chat;
  if (chat["choices"][0]["finish_reason"] == "length") {
    EXPECT_EQ(total, kTrained) << chat;
  }
  const std::string chat_log = s.wait_for_log("serve: POST /v1/chat/completions 200");
  EXPECT_NE(chat_log.find("serve: POST /v1/chat/completions 200 "), std::string::npos) << chat_log;

  // A prompt past the trained context: 400, naming the context and the prompt's length.
  std::vector<int> ids(60, 40);
  auto [lst, refused] =
      s.request("POST", "/v1/completions", json{{"prompt", ids}, {"max_tokens", 1}}.dump());
  EXPECT_EQ(lst, 400) << refused;
  EXPECT_EQ(refused["error"]["code"], "context_length_exceeded") << refused;
  const std::string msg = refused["error"]["message"].get<std::string>();
  EXPECT_NE(msg.find("maximum context length is 48 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the prompt has 60 tokens"), std::string::npos) << msg;
  EXPECT_NE(s.wait_for_log("serve: POST /v1/completions 400").find("/v1/completions 400"),
            std::string::npos);

  // Streams are logged when they end, with their tokens; other routes with their status.
  auto [sst, stream] = s.request(
      "POST", "/v1/completions",
      json{{"prompt", "And"}, {"max_tokens", 3}, {"ignore_eos", true}, {"stream", true}}.dump());
  EXPECT_EQ(sst, 200);
  EXPECT_TRUE(std::regex_search(
      s.wait_for_log("completion 3 finish length client"),
      std::regex("serve: POST /v1/completions 200 \\d+ ms prompt \\d+ completion 3 finish "
                 "length client")))
      << s.err();
  s.request("GET", "/v1/nothing");
  EXPECT_NE(s.wait_for_log("serve: GET /v1/nothing 404").find("serve: GET /v1/nothing 404 "),
            std::string::npos)
      << s.err();
  EXPECT_EQ(s.stop(), 0) << s.err();
  EXPECT_EQ(s.out(), out) << "logs went to stdout";
}

// --quiet: no logs (no request lines), the listening line stays; --model-name overrides the name.
TEST(ServeCli, QuietKeepsOnlyTheListeningLine) {
  TinyRun t;
  Server s(t.dir.path, {"--model", t.run + "/step_00000010", "--model-name", "kjv", "--quiet"});
  ASSERT_FALSE(s.base.empty()) << s.out() << s.err();
  EXPECT_EQ(s.out().find("zaya serve: kjv ("), 0u) << s.out();
  auto [st, body] = s.request("GET", "/v1/models");
  EXPECT_EQ(body["data"][0]["id"], "kjv");
  EXPECT_EQ(s.stop(), 0);
  EXPECT_EQ(s.err(), "");
}

TEST(ServeCli, ModelDirectoryErrors) {
  test::ScratchDir d;
  test::save_whole_model_dir(d / "m", kTrained);
  const std::string m = "serve --port 0 --model " + d / "m";
  expect_user_error(run_zaya_in(d.path, m + " --max-context 4096"),
                    "--max-context 4096 exceeds the model's max_position_embeddings of 2048");
  fs::remove(d / "m/tokenizer.json");
  const std::string message =
      ": no tokenizer.json in the model directory; pass --tokenizer FILE (the tokenizer.json the "
      "model was trained with)";
  expect_user_error(run_zaya_in(d.path, m), d / "m" + message);
  expect_user_error(run_zaya_in(d.path, "serve --port 0 --model " + d / "runs/x/final"),
                    "no such file or directory");
}

}  // namespace
}  // namespace zaya
