// `zaya serve` end to end: a tiny random model with the toy tokenizer is served on a free port
// (--port 0; the port is read from the startup line) and driven with curl — completions, chat,
// SSE framing, models, health, every kind of bad request (4xx in OpenAI's error shape, the server
// still answering afterwards), greedy text equal to `zaya generate --temperature 0`, 8 concurrent
// streams each equal to its sequential answer, events that arrive while the generation still runs,
// a client that disconnects mid-stream being cancelled — then with the official `openai` npm
// client (skipped without node or the package, a failure under ZAYA_STRICT_SKIPS=1:
// scripts/fetch_openai_npm.sh), and finally SIGTERM → exit 0. A server that does not start fails
// every test at once (no waiting out a timeout when it has exited).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/zaya_config.h"
#include "model/model.h"
#include "serve/node_client.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The repository root (ZAYA_TEST_FIXTURES is <root>/tests/fixtures).
struct Http {
  int status = 0;
  std::string body;
  json j;  // body parsed, if it is JSON
};

class ServeTest : public ::testing::Test {
 protected:
  static inline fs::path dir, model_dir;
  static inline pid_t pid = -1;
  static inline std::string base;           // http://127.0.0.1:PORT
  static inline std::string startup_error;  // why the server did not start

  static void SetUpTestSuite() {
    dir = fs::path(::testing::TempDir()) / ("zaya_serve_" + std::to_string(getpid()));
    fs::remove_all(dir);
    model_dir = dir / "tiny-serve";
    fs::create_directories(model_dir);
    // The tiny config with the toy tokenizer's vocabulary, random weights.
    ZayaConfig c = load_config(std::string(ZAYA_TEST_FIXTURES) + "/configs/tiny.json");
    c.vocab_size = 1024;
    Model m(c);
    m.init_random(7);
    m.save_dir(model_dir.string());
    fs::copy_file(std::string(ZAYA_TEST_FIXTURES) + "/tokenizer/toy_tokenizer.json",
                  model_dir / "tokenizer.json");

    const std::string out = (dir / "serve.out").string(), err = (dir / "serve.err").string();
    pid = fork();
    if (pid == 0) {
      freopen(out.c_str(), "w", stdout);
      freopen(err.c_str(), "w", stderr);
      execl(ZAYA_BINARY, ZAYA_BINARY, "serve", "--model", model_dir.c_str(), "--port", "0",
            "--max-context", "2048", "--max-batch", "8", "--threads", "1", "--request-timeout", "3",
            (char*)nullptr);
      _exit(127);
    }
    // Wait for the startup line (the model loads in well under a second), or the server's exit.
    const std::regex line(
        R"(zaya serve: tiny-serve \(.* params, F32\) on (http://127\.0\.0\.1:\d+) — KV cache \d+ bytes/token, max batch 8, context 2048)");
    std::string why = "no startup line within 30 s";
    for (int i = 0; i < 600 && base.empty(); ++i) {
      std::smatch m;
      const std::string s = slurp(out);
      int status = 0;
      if (std::regex_search(s, m, line)) {
        base = m[1];
      } else if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        why = WIFEXITED(status) ? "it exited with status " + std::to_string(WEXITSTATUS(status))
                                : "it was killed by signal " + std::to_string(WTERMSIG(status));
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (base.empty())
      startup_error = std::string("`") + ZAYA_BINARY + " serve` did not start: " + why +
                      "; its stdout: " + slurp(out) + " its stderr: " + slurp(err);
  }

  static void TearDownTestSuite() {
    if (pid > 0) {
      kill(pid, SIGKILL);  // only if a test left it running (the Shutdown test stops it)
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
    fs::remove_all(dir);
  }

  // Every test needs the server: one that did not start fails them all.
  void SetUp() override {
    if (base.empty()) FAIL() << startup_error;
  }

  // curl: method, path, body (sent as a file, so any bytes go).
  static Http request(const std::string& method, const std::string& path,
                      const std::string& body = "", const std::string& extra = "") {
    static int n = 0;
    const std::string tag = std::to_string(getpid()) + "_" + std::to_string(n++);
    const fs::path in = dir / ("req" + tag), out = dir / ("resp" + tag),
                   code = dir / ("code" + tag);
    std::ofstream(in, std::ios::binary) << body;
    const std::string cmd = "curl -s -N -X " + method + " -H 'Content-Type: application/json' " +
                            (body.empty() ? "" : "--data-binary @" + in.string() + " ") + extra +
                            " -o " + out.string() + " -w '%{http_code}' " +
                            shell_quote(base + path) + " > " + code.string();
    std::system(cmd.c_str());
    Http h;
    h.status = std::atoi(slurp(code.string()).c_str());
    h.body = slurp(out.string());
    h.j = json::parse(h.body, nullptr, false);
    return h;
  }
  static Http post(const std::string& path, const json& body) {
    return request("POST", path, body.dump());
  }

  // SSE body → its events' payloads; checks the framing on the way.
  static std::vector<std::string> events(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < body.size()) {
      const size_t end = body.find("\n\n", pos);
      EXPECT_NE(end, std::string::npos) << "unterminated event in: " << body;
      if (end == std::string::npos) break;
      const std::string ev = body.substr(pos, end - pos);
      EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
      out.push_back(ev.substr(6));
      pos = end + 2;
    }
    return out;
  }

  static std::string greedy_completion(const std::string& prompt, int max_tokens) {
    const Http h = post("/v1/completions",
                        {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}});
    EXPECT_EQ(h.status, 200) << h.body;
    return h.j["choices"][0]["text"].get<std::string>();
  }

  static void expect_error(const Http& h, int status, const std::string& param = "",
                           const std::string& code = "") {
    EXPECT_EQ(h.status, status) << h.body;
    ASSERT_TRUE(h.j.is_object() && h.j.contains("error")) << h.body;
    const json& e = h.j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << h.body;
    EXPECT_TRUE(e["type"].is_string()) << h.body;
    EXPECT_EQ(e["param"], param.empty() ? json() : json(param)) << h.body;
    EXPECT_EQ(e["code"], code.empty() ? json() : json(code)) << h.body;
    // Still serving.
    EXPECT_EQ(request("GET", "/health").status, 200);
  }
};

TEST_F(ServeTest, HealthAndModels) {
  Http h = request("GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.j["status"], "ok");
  h = request("GET", "/v1/models");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.j["object"], "list");
  ASSERT_EQ(h.j["data"].size(), 1u);
  EXPECT_EQ(h.j["data"][0]["id"], "tiny-serve");
  EXPECT_EQ(request("GET", "/v1/models/tiny-serve").j["id"], "tiny-serve");
  expect_error(request("GET", "/v1/models/gpt-4"), 404, "model", "model_not_found");
}

TEST_F(ServeTest, CompletionShapeAndGreedyEqualsGenerate) {
  const Http h = post("/v1/completions", {{"model", "tiny-serve"},
                                          {"prompt", "In the beginning"},
                                          {"max_tokens", 10},
                                          {"temperature", 0}});
  ASSERT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(h.j["object"], "text_completion");
  EXPECT_EQ(h.j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(h.j["model"], "tiny-serve");
  EXPECT_TRUE(h.j["created"].is_number_integer());
  const json& ch = h.j["choices"][0];
  EXPECT_EQ(ch["index"], 0);
  EXPECT_TRUE(ch["logprobs"].is_null());
  const std::string reason = ch["finish_reason"];
  EXPECT_TRUE(reason == "length" || reason == "stop") << reason;
  const json& u = h.j["usage"];
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  if (reason == "length") {
    EXPECT_EQ(u["completion_tokens"], 10);
  }

  const CliResult g = run_zaya_in(dir.string(), "generate --model " + model_dir.string() +
                                                    " --prompt 'In the beginning' "
                                                    "--max-new-tokens 10 --temperature 0 --quiet");
  ASSERT_EQ(g.code, 0) << g.err;
  // generate ends its output with one newline.
  ASSERT_FALSE(g.out.empty());
  EXPECT_EQ(ch["text"].get<std::string>() + "\n", g.out);
}

TEST_F(ServeTest, ChatShape) {
  const Http h =
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}},
                                    {"max_tokens", 6},
                                    {"temperature", 0}});
  ASSERT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(h.j["object"], "chat.completion");
  EXPECT_EQ(h.j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(h.j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(h.j["choices"][0]["message"]["content"].is_string());
  EXPECT_LE(h.j["usage"]["completion_tokens"].get<int>(), 6);
}

TEST_F(ServeTest, StreamingCompletionFraming) {
  const std::string plain = greedy_completion("Behold the", 8);
  const Http h =
      post("/v1/completions",
           {{"prompt", "Behold the"}, {"max_tokens", 8}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(h.status, 200);
  const std::vector<std::string> ev = events(h.body);
  ASSERT_GE(ev.size(), 2u) << h.body;
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const json c = json::parse(ev[i]);
    EXPECT_EQ(c["object"], "text_completion");
    text += c["choices"][0]["text"].get<std::string>();
    const bool last = i + 2 == ev.size();
    EXPECT_EQ(c["choices"][0]["finish_reason"].is_null(), !last) << ev[i];
  }
  EXPECT_EQ(text, plain);
  // The content type is SSE.
  const Http head = request("POST", "/v1/completions",
                            json{{"prompt", "x"}, {"max_tokens", 1}, {"stream", true}}.dump(),
                            "-D " + (dir / "headers").string());
  EXPECT_NE(slurp((dir / "headers").string()).find("text/event-stream"), std::string::npos);
}

TEST_F(ServeTest, StreamingChatFraming) {
  const json body = {
      {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 6}, {"temperature", 0}};
  const std::string plain =
      post("/v1/chat/completions", body).j["choices"][0]["message"]["content"];
  json sb = body;
  sb["stream"] = true;
  sb["stream_options"] = {{"include_usage", true}};
  const Http h = post("/v1/chat/completions", sb);
  ASSERT_EQ(h.status, 200);
  const std::vector<std::string> ev = events(h.body);
  ASSERT_GE(ev.size(), 4u) << h.body;  // role, finish, usage, [DONE]
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_EQ(json::parse(ev[0])["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (size_t i = 0; i + 3 < ev.size(); ++i) {
    const json c = json::parse(ev[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
    content += c["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(content, plain);
  const json fin = json::parse(ev[ev.size() - 3]);
  EXPECT_FALSE(fin["choices"][0]["finish_reason"].is_null()) << ev[ev.size() - 3];
  const json usage = json::parse(ev[ev.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_GT(usage["usage"]["prompt_tokens"].get<int>(), 0);
}

TEST_F(ServeTest, BadRequestsGetOpenAiErrors) {
  expect_error(request("POST", "/v1/completions", "{not json"), 400);
  // Another model's name is no error: this server's one model answers, and says so.
  const Http other =
      post("/v1/completions", {{"model", "gpt-4"}, {"prompt", "x"}, {"max_tokens", 2}});
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(other.j["model"], "tiny-serve") << other.body;
  expect_error(post("/v1/completions", {{"prompt", std::string(6000, 'q')}, {"max_tokens", 4}}),
               400, "prompt", "context_length_exceeded");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 5000}}), 400, "max_tokens",
               "context_length_exceeded");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"temperature", -1}}), 400, "temperature");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"n", 9}}), 400, "n");
  expect_error(post("/v1/completions", {{"prompt", {"a", "b"}}}), 400, "prompt");
  expect_error(
      post("/v1/chat/completions", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}), 400,
      "messages[0].role");
  expect_error(post("/v1/completions", {{"prompt", {1, 5000}}}), 400, "prompt");
  expect_error(request("GET", "/v1/nothing"), 404, "", "not_found");
  expect_error(request("GET", "/v1/completions"), 405);
  expect_error(request("POST", "/health", "{}"), 405);
  expect_error(request("POST", "/v1/completions", std::string(9 << 20, ' ')), 413);
}

// n choices: each with its index, choice 0 what the same request gives with n = 1 (the engine
// draws choice i from stream i of the seed), the usage summing every choice's tokens; streamed,
// each chunk names its choice and every choice ends with its own finish chunk.
TEST_F(ServeTest, ChoicesNonStreamingAndStreaming) {
  const json body = {{"prompt", "In the beginning"},
                     {"max_tokens", 6},
                     {"seed", 17},
                     {"temperature", 1},
                     {"ignore_eos", true}};
  json b3 = body;
  b3["n"] = 3;
  const Http one = post("/v1/completions", body), three = post("/v1/completions", b3);
  ASSERT_EQ(three.status, 200) << three.body;
  ASSERT_EQ(three.j["choices"].size(), 3u) << three.body;
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(three.j["choices"][i]["index"], i);
    EXPECT_EQ(three.j["choices"][i]["finish_reason"], "length");
    texts.insert(three.j["choices"][i]["text"].get<std::string>());
  }
  EXPECT_GT(texts.size(), 1u) << "three draws at temperature 1 were all equal: " << three.body;
  EXPECT_EQ(three.j["choices"][0]["text"], one.j["choices"][0]["text"]);
  EXPECT_EQ(three.j["usage"]["completion_tokens"], 18);
  EXPECT_EQ(three.j["usage"]["prompt_tokens"], one.j["usage"]["prompt_tokens"]);

  json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
               {"max_tokens", 5},
               {"seed", 3},
               {"ignore_eos", true},
               {"n", 3}};
  const Http plain = post("/v1/chat/completions", chat);
  ASSERT_EQ(plain.status, 200) << plain.body;
  ASSERT_EQ(plain.j["choices"].size(), 3u);
  chat["stream"] = true;
  chat["stream_options"] = {{"include_usage", true}};
  const Http h = post("/v1/chat/completions", chat);
  ASSERT_EQ(h.status, 200);
  std::vector<std::string> content(3);
  std::vector<int> finishes(3, 0), roles(3, 0);
  json usage;
  const std::vector<std::string> ev = events(h.body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back(), "[DONE]");
  for (const std::string& e : ev) {
    if (e == "[DONE]") continue;
    const json c = json::parse(e);
    if (c.contains("usage")) {
      usage = c["usage"];
      continue;
    }
    const int i = c["choices"][0]["index"];
    ASSERT_TRUE(i >= 0 && i < 3) << e;
    const json& d = c["choices"][0]["delta"];
    if (d.value("role", "") == "assistant") ++roles[size_t(i)];
    content[size_t(i)] += d.value("content", "");
    if (!c["choices"][0]["finish_reason"].is_null()) ++finishes[size_t(i)];
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(roles[size_t(i)], 1) << i;
    EXPECT_EQ(finishes[size_t(i)], 1) << i;
    EXPECT_EQ(content[size_t(i)], plain.j["choices"][i]["message"]["content"]) << i;
  }
  EXPECT_EQ(usage["completion_tokens"], 15) << h.body;
}

// logprobs: completions' legacy shape and chat's, one entry per generated token, the chosen
// token's logprob among its alternatives, alternatives most likely first, all ≤ 0; greedy picks
// the most likely.
TEST_F(ServeTest, Logprobs) {
  const Http c = post("/v1/completions", {{"prompt", "In the beginning"},
                                          {"max_tokens", 5},
                                          {"temperature", 0},
                                          {"ignore_eos", true},
                                          {"logprobs", 3}});
  ASSERT_EQ(c.status, 200) << c.body;
  const json& lp = c.j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << c.body;
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  ASSERT_EQ(lp["text_offset"].size(), 5u);
  std::string joined;
  for (size_t t = 0; t < 5; ++t) {
    EXPECT_EQ(lp["text_offset"][t], int64_t(joined.size()));
    joined += lp["tokens"][t].get<std::string>();
    const float l = lp["token_logprobs"][t];
    EXPECT_LE(l, 0.f);
    const json& top = lp["top_logprobs"][t];
    EXPECT_LE(top.size(), 4u);
    ASSERT_TRUE(top.contains(lp["tokens"][t].get<std::string>())) << top.dump();
    for (const auto& [tok, v] : top.items()) EXPECT_LE(v.get<float>(), l + 1e-6f) << top.dump();
  }
  EXPECT_EQ(joined, c.j["choices"][0]["text"]);

  const Http h =
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                    {"max_tokens", 4},
                                    {"temperature", 0},
                                    {"ignore_eos", true},
                                    {"logprobs", true},
                                    {"top_logprobs", 5}});
  ASSERT_EQ(h.status, 200) << h.body;
  const json& content = h.j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u) << h.body;
  for (const json& t : content) {
    ASSERT_EQ(t["top_logprobs"].size(), 5u) << t.dump();
    EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]) << t.dump();  // greedy: the top one
    for (size_t k = 1; k < 5; ++k)
      EXPECT_LE(t["top_logprobs"][k]["logprob"].get<float>(),
                t["top_logprobs"][k - 1]["logprob"].get<float>());
    EXPECT_TRUE(t["bytes"].is_array());
  }
  // Without the fields: null.
  EXPECT_TRUE(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}})
                  .j["choices"][0]["logprobs"]
                  .is_null());
}

// logit_bias and stop_token_ids act on token ids: +100 on one id makes greedy pick it every time;
// that id as a stop id ends the completion before it is emitted.
TEST_F(ServeTest, LogitBiasAndStopTokenIds) {
  const json forced = {{"prompt", {5, 6, 7}}, {"max_tokens", 4}, {"temperature", 0},
                       {"ignore_eos", true},  {"logprobs", 0},   {"logit_bias", {{"42", 100}}}};
  const Http f = post("/v1/completions", forced);
  ASSERT_EQ(f.status, 200) << f.body;
  const json& toks = f.j["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(toks.size(), 4u) << f.body;
  for (const json& t : toks) EXPECT_EQ(t, toks[0]) << f.body;
  json stopped = forced;
  stopped["stop_token_ids"] = {42};
  const Http s = post("/v1/completions", stopped);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.j["choices"][0]["text"], "");
  EXPECT_EQ(s.j["choices"][0]["finish_reason"], "stop");
  json penalised = {
      {"prompt", "In the beginning"}, {"max_tokens", 8},        {"temperature", 0},
      {"ignore_eos", true},           {"frequency_penalty", 2}, {"presence_penalty", 2}};
  EXPECT_EQ(post("/v1/completions", penalised).status, 200);
}

// Hostile requests: each a 400, the server still up.
TEST_F(ServeTest, HostileRequestsAre400sAndTheServerStaysUp) {
  expect_error(
      request("POST", "/v1/completions", R"({"prompt":"x","max_tokens":9223372036854775807})"), 400,
      "max_tokens", "context_length_exceeded");
  expect_error(
      request("POST", "/v1/chat/completions",
              R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775000})"),
      400, "max_tokens", "context_length_exceeded");
  expect_error(request("POST", "/v1/completions", R"({"prompt":"x","temperature":1e309})"), 400);
  expect_error(
      request("POST", "/v1/completions", R"({"prompt":)" + std::string(1'000'000, '[') + "}"), 400);
  expect_error(request("POST", "/v1/completions", R"({"prompt":"x","response_format":{"type":5}})"),
               400);
  // The longest path httplib takes, through the /v1/models/(.+) route's regex.
  expect_error(request("GET", "/v1/models/" + std::string(8000, 'm')), 404, "model",
               "model_not_found");
}

// A raw loopback TCP connection to the server (for slow and idle clients).
int connect_to(const std::string& base) {
  const int port = std::stoi(base.substr(base.rfind(':') + 1));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the server has closed `fd` (recv returns 0 or fails).
bool closed_by_server(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A POST of `body` to `path` on a new raw connection, whose response the caller reads; −1 if the
// connection or the send failed.
int post_raw(const std::string& base, const std::string& path, const json& body) {
  const int fd = connect_to(base);
  if (fd < 0) return -1;
  const std::string b = body.dump();
  const std::string req = "POST " + path +
                          " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " +
                          std::to_string(b.size()) + "\r\n\r\n" + b;
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// The payloads of the complete SSE events ("data: …\n\n") in `raw`, a response as received (its
// headers and chunk framing around them: each event is written whole, within one chunk).
std::vector<std::string> sse_payloads(const std::string& raw) {
  std::vector<std::string> out;
  for (size_t at = raw.find("data: "); at != std::string::npos; at = raw.find("data: ", at)) {
    const size_t end = raw.find("\n\n", at);
    if (end == std::string::npos) break;
    out.push_back(raw.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

// Reads the response on `fd` into `raw` until it holds `n` complete SSE events, the server closes
// the connection, or 30 s pass. Returns the events read so far.
std::vector<std::string> read_events(int fd, size_t n, std::string& raw) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> ev = sse_payloads(raw);
  char buf[4096];
  while (ev.size() < n && seconds_since(start) < 30) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t got = recv(fd, buf, sizeof(buf), 0);
    if (got <= 0) break;
    raw.append(buf, size_t(got));
    ev = sse_payloads(raw);
  }
  return ev;
}

// 40 slow-loris clients (a request trickled in a byte every 0.25 s: ~33 s for the whole of it) and
// 300 connections that send nothing: /health keeps answering and a completion is served correctly;
// the slow requests are cut off at the request deadline (--request-timeout 3), not before it.
// No tight wall-clock bound: on a busy machine an answer may take a while, but it must come.
TEST_F(ServeTest, SlowLorisAndIdleFloodDoNotStarveOthers) {
  const std::string expected = greedy_completion("Slow and steady", 5);
  const std::string slow_request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 20\r\n\r\n{\"prompt\": \"x\"}";
  std::vector<int> slow, idle;
  // Before the first connect: the server's deadline for each starts after this.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) slow.push_back(connect_to(base));
  for (int fd : slow) ASSERT_GE(fd, 0);
  std::atomic<bool> done{false};
  std::vector<double> cut_at(slow.size(), -1);
  std::thread trickle([&] {
    for (size_t byte = 0; !done.load() && seconds_since(start) < 20; ++byte) {
      for (size_t k = 0; k < slow.size(); ++k) {
        if (cut_at[k] >= 0) continue;
        if (closed_by_server(slow[k]) ||
            send(slow[k], &slow_request[byte % slow_request.size()], 1, MSG_NOSIGNAL) != 1)
          cut_at[k] = seconds_since(start);
      }
      if (std::all_of(cut_at.begin(), cut_at.end(), [](double t) { return t >= 0; })) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  for (int i = 0; i < 300; ++i) idle.push_back(connect_to(base));
  std::printf("slow-loris: 40 slow + 300 silent connections open after %.3f s\n",
              seconds_since(start));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int round = 0; round < 3; ++round) {
    const auto t = std::chrono::steady_clock::now();
    const Http h = request("GET", "/health", "", "--max-time 15");
    EXPECT_EQ(h.status, 200) << "round " << round << ": no answer within 15 s";
    std::printf("slow-loris: /health answered in %.3f s (round %d)\n", seconds_since(t), round);
  }
  EXPECT_EQ(greedy_completion("Slow and steady", 5), expected);
  trickle.join();
  done = true;
  for (size_t k = 0; k < slow.size(); ++k) {
    EXPECT_GE(cut_at[k], 2.9) << "slow client " << k << " cut off before the 3 s deadline";
    EXPECT_GT(cut_at[k], 0) << "slow client " << k << " still connected after 20 s";
  }
  std::printf("slow-loris: %zu slow clients cut off between %.2f and %.2f s\n", slow.size(),
              *std::min_element(cut_at.begin(), cut_at.end()),
              *std::max_element(cut_at.begin(), cut_at.end()));
  for (int fd : slow) close(fd);
  for (int fd : idle)
    if (fd >= 0) close(fd);
  EXPECT_EQ(request("GET", "/health").status, 200);
}

// Endless headers, sent fast: cut off at 1 MiB (beyond the body limit) instead of buffered without
// bound; keep-alive requests pipelined on one connection are each answered.
TEST_F(ServeTest, HeaderFloodIsCutOffAndPipelinedRequestsAreServed) {
  const int fd = connect_to(base);
  ASSERT_GE(fd, 0);
  const std::string start = "GET /health HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(send(fd, start.data(), start.size(), MSG_NOSIGNAL), ssize_t(start.size()));
  const std::string line = "X-Pad: " + std::string(100, 'p') + "\r\n";
  size_t sent = 0;
  bool cut = false;
  for (int i = 0; i < 200000 && !cut; ++i) {  // up to 21 MB
    pollfd p{fd, POLLOUT, 2000};
    if (poll(&p, 1, 2000) <= 0 || send(fd, line.data(), line.size(), MSG_NOSIGNAL) <= 0)
      cut = true;
    else
      sent += line.size();
    if (i % 1000 == 0 && closed_by_server(fd)) cut = true;
  }
  close(fd);
  EXPECT_TRUE(cut) << "the server read " << sent << " bytes of headers";
  EXPECT_LT(sent, size_t(16) << 20);
  std::printf("header flood: cut off after %zu bytes sent\n", sent);

  const int k = connect_to(base);
  ASSERT_GE(k, 0);
  std::string two;
  for (int i = 0; i < 2; ++i) two += "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(k, two.data(), two.size(), MSG_NOSIGNAL), ssize_t(two.size()));
  std::string got;
  char buf[4096];
  for (int i = 0; i < 50; ++i) {
    pollfd p{k, POLLIN, 100};
    if (poll(&p, 1, 100) > 0) {
      const ssize_t n = recv(k, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, size_t(n));
    }
    size_t count = 0;
    for (size_t at = got.find("HTTP/1.1 200"); at != std::string::npos;
         at = got.find("HTTP/1.1 200", at + 1))
      ++count;
    if (count == 2) break;
  }
  close(k);
  size_t count = 0;
  for (size_t at = got.find("HTTP/1.1 200"); at != std::string::npos;
       at = got.find("HTTP/1.1 200", at + 1))
    ++count;
  EXPECT_EQ(count, 2u) << got;
  EXPECT_EQ(request("GET", "/health").status, 200);
}

TEST_F(ServeTest, ConcurrentStreamsMatchSequentialAnswers) {
  const int n = 8;
  std::vector<std::string> prompts, sequential;
  for (int i = 0; i < n; ++i) {
    prompts.push_back("Voice " + std::to_string(i) + " speaks");
    sequential.push_back(greedy_completion(prompts.back(), 6));
  }
  std::vector<std::thread> threads;
  std::vector<std::string> got(n);
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      const Http h =
          post("/v1/completions",
               {{"prompt", prompts[i]}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}});
      for (const std::string& e : events(h.body))
        if (e != "[DONE]") got[i] += json::parse(e)["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], sequential[i]) << "client " << i;
}

// A long streamed completion: 2000 tokens (seconds on this model), no early stop. /health's
// generated_tokens counts decoding steps, so one that runs to its end adds 1999 (its first token
// comes from the prompt's pass).
const json kLongStream = {
    {"prompt", "Go on"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}};
constexpr int64_t kLongStreamSteps = 1999;

// /health's generated_tokens once the server has settled: no request in flight and no decoding
// step for 1 s (up to 60 s). A cancelled request leaves the in-flight set at once, but the engine
// may still be decoding it; a server that fails to stop it shows here, the count still rising until
// the stream's end. (A pause of the engine under load could only end the wait early.)
int64_t generated_tokens_once_settled(const std::function<json()>& health) {
  json h = health();
  int64_t last = h["generated_tokens"].get<int64_t>();
  int still = 0;
  for (int i = 0; i < 600 && still < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    h = health();
    const int64_t now = h["generated_tokens"].get<int64_t>();
    still = now == last && h["in_flight"] == 0 ? still + 1 : 0;
    last = now;
  }
  EXPECT_EQ(still, 10) << "the server did not settle within 60 s: " << h.dump();
  return last;
}

// The first event of a stream arrives while its generation still runs: the client reads it and
// then goes away, and the server, which cancels a request whose client has gone, has run fewer
// than the 1999 decoding steps of the whole stream. A server that sent the stream only once it was
// generated (or buffered it whole) fails: it had run them all before the first event left it. A
// correct one could fail only by running ~2000 steps between writing that event and seeing the
// connection closed, far more than it needs to notice that.
TEST_F(ServeTest, StreamingSendsTheFirstEventWhileGenerating) {
  const auto health = [] { return request("GET", "/health").j; };
  const int64_t before = generated_tokens_once_settled(health);
  const int fd = post_raw(base, "/v1/completions", kLongStream);
  ASSERT_GE(fd, 0);
  std::string raw;
  const std::vector<std::string> ev = read_events(fd, 1, raw);
  close(fd);
  ASSERT_GE(ev.size(), 1u) << "no complete event within 30 s; received: " << raw;
  EXPECT_EQ(raw.find("data: [DONE]"), std::string::npos) << "the stream had ended already";
  const json first = json::parse(ev[0], nullptr, false);
  EXPECT_EQ(first["object"], "text_completion") << ev[0];
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null()) << ev[0];
  const int64_t generated = generated_tokens_once_settled(health) - before;
  EXPECT_GT(generated, 0);
  EXPECT_LT(generated, kLongStreamSteps)
      << "the whole stream was generated: it was sent only once generated, or its generation went "
         "on after the client had gone";
  std::printf("first event: %zu event(s) read, %lld decoding steps before the cancel\n", ev.size(),
              (long long)generated);
}

// A client that disconnects mid-stream (after its third event: no timing involved) is cancelled:
// the request leaves the in-flight set before its stream is generated, and the server serves
// the next request as before.
TEST_F(ServeTest, DisconnectedClientIsCancelled) {
  const std::string expected = greedy_completion("After the storm", 5);
  const auto health = [] { return request("GET", "/health").j; };
  const int64_t before = generated_tokens_once_settled(health);
  const int fd = post_raw(base, "/v1/completions", kLongStream);
  ASSERT_GE(fd, 0);
  std::string raw;
  const size_t got = read_events(fd, 3, raw).size();
  close(fd);
  ASSERT_GE(got, 3u) << raw;
  const int64_t generated = generated_tokens_once_settled(health) - before;
  EXPECT_GE(generated, 3);
  EXPECT_LT(generated, kLongStreamSteps) << "the abandoned request ran to its end";
  std::printf("disconnect: %lld decoding steps before the cancel\n", (long long)generated);
  EXPECT_EQ(greedy_completion("After the storm", 5), expected);
}

TEST_F(ServeTest, PortInUseIsAUserError) {
  const std::string port = base.substr(base.rfind(':') + 1);
  expect_user_error(
      run_zaya_in(dir.string(), "serve --model " + model_dir.string() + " --port " + port),
      "cannot listen on 127.0.0.1:" + port);
  EXPECT_EQ(request("GET", "/health").status, 200);
}

// Needs node and the openai package (scripts/setup.sh installs both): without them it skips, a
// failure under ZAYA_STRICT_SKIPS=1 (tests/test_skips.h).
TEST_F(ServeTest, OfficialOpenAiNodeClient) {
  if (const std::string missing = node_client_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string log = (dir / "node.log").string();
  EXPECT_TRUE(run_node_client("openai_client.mjs", shell_quote(base + "/v1") + " tiny-serve", log))
      << slurp(log);
}

// Last (gtest runs a suite's tests in order): SIGTERM stops the server cleanly.
TEST_F(ServeTest, ZShutdownOnSigterm) {
  ASSERT_GT(pid, 0);
  // A long stream in flight: it is cancelled, and its client still gets a well-formed ending.
  Http in_flight;
  std::thread client([&] { in_flight = post("/v1/completions", kLongStream); });
  // (Up to 30 s for the request to arrive: a bound for a stuck test, not a timing assumption.)
  for (int i = 0; i < 1500 && request("GET", "/health").j["in_flight"] == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  client.join();
  const std::vector<std::string> ev = events(in_flight.body);
  ASSERT_GE(ev.size(), 2u) << in_flight.body;
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_EQ(json::parse(ev[ev.size() - 2])["choices"][0]["finish_reason"], "cancelled");
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 200 && r == 0; ++i) {
    r = waitpid(pid, &status, WNOHANG);
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(r, pid) << "server did not exit within 10 s of SIGTERM";
  pid = -1;
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal";
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp((dir / "serve.err").string());
}

TEST(ServeCli, MissingModelIsAUserError) {
  const fs::path d =
      fs::path(::testing::TempDir()) / ("zaya_serve_cli_" + std::to_string(getpid()));
  fs::create_directories(d);
  expect_user_error(run_zaya_in(d.string(), "serve --model /no/such/dir --port 0"),
                    "--model /no/such/dir: no such file or directory");
  fs::create_directories(d / "empty_model");
  expect_user_error(run_zaya_in(d.string(), "serve --model " + (d / "empty_model").string()),
                    "not a model directory");
  fs::remove_all(d);
}

}  // namespace
