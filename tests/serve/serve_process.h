// A `zaya serve` process for the server tests: started with the given flags on --port 0, the
// address read from its startup line (http or https), requests sent with curl (any headers, the
// body as a file so any bytes go), stopped with SIGTERM. A server that does not start says why
// (its exit status, stdout and stderr) instead of making the test wait out a timeout.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"

namespace zaya::test {

struct HttpReply {
  int status = 0;  // 0: no HTTP answer (curl failed: refused, TLS error, …)
  std::string body, headers;
  nlohmann::json j;  // body parsed, if it is JSON
};

class ServeProcess {
 public:
  // Runs `zaya serve ARGS --port 0` with its stdout/stderr in files under `dir`; waits (up to
  // 60 s) for the startup line. started() says whether it came; why_not() what happened instead.
  ServeProcess(const std::filesystem::path& dir, const std::vector<std::string>& args) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    out_ = (dir_ / "serve.out").string();
    err_ = (dir_ / "serve.err").string();
    pid_ = fork();
    if (pid_ == 0) {
      if (!freopen(out_.c_str(), "w", stdout) || !freopen(err_.c_str(), "w", stderr)) _exit(126);
      std::vector<char*> argv{const_cast<char*>(ZAYA_BINARY), const_cast<char*>("serve")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(const_cast<char*>("--port"));
      argv.push_back(const_cast<char*>("0"));
      argv.push_back(nullptr);
      execv(ZAYA_BINARY, argv.data());
      _exit(127);
    }
    const std::regex line(R"(zaya serve: .* on (https?://[0-9.]+:\d+) — )");
    std::string why = "no startup line within 60 s";
    for (int i = 0; i < 1200 && base_.empty(); ++i) {
      std::smatch m;
      const std::string s = slurp(out_);
      int status = 0;
      if (std::regex_search(s, m, line)) {
        base_ = m[1];
      } else if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        why = WIFEXITED(status) ? "it exited with status " + std::to_string(WEXITSTATUS(status))
                                : "it was killed by signal " + std::to_string(WTERMSIG(status));
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (base_.empty())
      why_not_ = std::string("`") + ZAYA_BINARY + " serve` did not start: " + why +
                 "; its stdout: " + slurp(out_) + " its stderr: " + slurp(err_);
  }
  ~ServeProcess() { stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool started() const { return !base_.empty(); }
  const std::string& why_not() const { return why_not_; }
  const std::string& base() const { return base_; }  // scheme://127.0.0.1:PORT
  std::string out() const { return slurp(out_); }
  std::string err() const { return slurp(err_); }

  // curl METHOD base+PATH with BODY (JSON content type) and `curl_args` (e.g. "-H 'X: y'",
  // "--cacert FILE").
  HttpReply request(const std::string& method, const std::string& path,
                    const std::string& body = "", const std::string& curl_args = "") const {
    const std::string tag = std::to_string(n_++);
    const std::filesystem::path in = dir_ / ("req" + tag), out = dir_ / ("resp" + tag),
                                code = dir_ / ("code" + tag), head = dir_ / ("head" + tag);
    std::ofstream(in, std::ios::binary) << body;
    const std::string cmd = "curl -s -N -X " + method + " -H 'Content-Type: application/json' " +
                            (body.empty() ? "" : "--data-binary @" + in.string() + " ") +
                            curl_args + " -D " + head.string() + " -o " + out.string() +
                            " -w '%{http_code}' " + shell_quote(base_ + path) + " > " +
                            code.string() + " 2>/dev/null";
    (void)std::system(cmd.c_str());
    HttpReply h;
    h.status = std::atoi(slurp(code.string()).c_str());
    h.body = slurp(out.string());
    h.headers = slurp(head.string());
    h.j = nlohmann::json::parse(h.body, nullptr, false);
    return h;
  }

  // SIGTERM, then the exit status (−1: killed by a signal or not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 200 && r == 0; ++i) {
      r = waitpid(pid_, &status, WNOHANG);
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (r == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  std::filesystem::path dir_;
  std::string out_, err_, base_, why_not_;
  pid_t pid_ = -1;
  mutable int n_ = 0;
};

}  // namespace zaya::test
