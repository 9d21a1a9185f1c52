// Who may use `zaya serve`: API keys and TLS, end to end on a tiny random model with the toy
// tokenizer. With --api-key and --api-key-file (comments, blank lines, spaces around keys), a
// request with no Authorization header, a wrong key or a malformed header is 401 in OpenAI's error
// shape (and logged as 401) while /health stays open; every listed key works on /v1/models and a
// completion; key-file and TLS-file mistakes are one clear error at start; a --host beyond loopback
// without a key warns. TLS: a self-signed certificate made here with the `openssl` command, curl
// trusting it, plain HTTP refused on the TLS port, and the official `openai` npm client getting a
// chat completion over HTTPS with the key (tests/serve/openai_auth_client.mjs). Without openssl,
// node or the npm package those tests skip, a failure under ZAYA_STRICT_SKIPS=1 (they are set up
// by scripts/setup.sh).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "infer/whole_model_dir.h"
#include "serve/node_client.h"
#include "serve/serve_process.h"

using namespace zaya;
using namespace zaya::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Everything the tests write, removed at exit.
const fs::path kScratch =
    fs::path(::testing::TempDir()) / ("zaya_auth_" + std::to_string(getpid()));
struct RemoveScratch {
  ~RemoveScratch() { fs::remove_all(kScratch); }
} remove_scratch;

// The tiny random model with the toy tokenizer, once per process.
const fs::path& tiny_model() {
  static const fs::path dir = [] {
    const fs::path d = kScratch / "tiny-auth";
    fs::remove_all(d);
    fs::create_directories(d);
    tiny_toy_model(11).save_dir(d.string());
    add_model_extras(d.string(), /*model_max_length=*/0);  // the tokenizer only
    return d;
  }();
  return dir;
}

fs::path work_dir(const std::string& name) {
  const fs::path d = kScratch / name;
  fs::create_directories(d);
  return d;
}

std::string bearer(const std::string& value) {
  return "-H " + shell_quote("Authorization: " + value);
}

void expect_401(const HttpReply& h, const std::string& needle) {
  EXPECT_EQ(h.status, 401) << h.body;
  ASSERT_TRUE(h.j.is_object() && h.j.contains("error")) << h.body;
  const json& e = h.j["error"];
  EXPECT_EQ(e["type"], "invalid_request_error") << h.body;
  EXPECT_EQ(e["code"], "invalid_api_key") << h.body;
  EXPECT_TRUE(e["param"].is_null()) << h.body;
  EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos)
      << "wanted '" << needle << "' in " << h.body;
  EXPECT_NE(h.headers.find("WWW-Authenticate: Bearer"), std::string::npos) << h.headers;
}

const json kCompletion = {{"prompt", "In the beginning"}, {"max_tokens", 4}, {"temperature", 0}};

TEST(ServeAuth, KeysFromFlagsAndFileGateEveryEndpointButHealth) {
  const fs::path d = work_dir("keys");
  std::ofstream(d / "keys.txt") << "# the team's keys\n\n  sk-file-two  \nsk-file-three\r\n"
                                << "#sk-commented-out\n";
  ServeProcess s(d / "run", {"--model", tiny_model().string(), "--api-key", "sk-flag-one",
                             "--api-key-file", (d / "keys.txt").string(), "--threads", "1"});
  ASSERT_TRUE(s.started()) << s.why_not();

  // /health needs no key.
  EXPECT_EQ(s.request("GET", "/health").status, 200);

  // No header, a wrong key, malformed headers: 401, nothing served.
  expect_401(s.request("GET", "/v1/models"), "Authorization");
  expect_401(s.request("POST", "/v1/completions", kCompletion.dump()), "Authorization");
  expect_401(s.request("GET", "/v1/models", "", bearer("Bearer sk-wrong")),
             "Incorrect API key provided");
  // A key's prefix, or a key with more after it, is no key.
  expect_401(s.request("GET", "/v1/models", "", bearer("Bearer sk-flag-on")),
             "Incorrect API key provided");
  expect_401(s.request("GET", "/v1/models", "", bearer("Bearer sk-flag-one1")),
             "Incorrect API key provided");
  expect_401(s.request("GET", "/v1/models", "", bearer("Bearer sk-commented-out")),
             "Incorrect API key provided");
  expect_401(s.request("GET", "/v1/models", "", bearer("Basic c2stZmxhZy1vbmU=")), "Malformed");
  expect_401(s.request("GET", "/v1/models", "", bearer("sk-flag-one")), "Malformed");
  expect_401(s.request("GET", "/v1/models", "", bearer("Bearer")), "Malformed");
  expect_401(s.request("GET", "/v1/models", "", bearer("Bearer sk-flag-one extra")), "Malformed");
  // An unknown route is 401 too without a key (nothing about the server is told).
  expect_401(s.request("GET", "/v1/nothing"), "Authorization");

  // Every key works, the scheme in any case.
  for (const char* k : {"sk-flag-one", "sk-file-two", "sk-file-three"}) {
    const HttpReply m = s.request("GET", "/v1/models", "", bearer(std::string("Bearer ") + k));
    EXPECT_EQ(m.status, 200) << k << ": " << m.body;
    EXPECT_EQ(m.j["data"][0]["id"], "tiny-auth") << m.body;
  }
  EXPECT_EQ(s.request("GET", "/v1/models", "", bearer("bearer sk-file-two")).status, 200);
  const HttpReply c =
      s.request("POST", "/v1/completions", kCompletion.dump(), bearer("Bearer sk-file-two"));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.j["object"], "text_completion");
  const HttpReply chat = s.request(
      "POST", "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3}}.dump(),
      bearer("Bearer sk-flag-one"));
  EXPECT_EQ(chat.status, 200) << chat.body;

  EXPECT_EQ(s.stop(), 0);
  const std::string log = s.err();
  EXPECT_NE(log.find("serve: GET /v1/models 401 "), std::string::npos) << log;
  EXPECT_NE(log.find("serve: POST /v1/completions 401 "), std::string::npos) << log;
  EXPECT_NE(log.find("serve: GET /health 200 "), std::string::npos) << log;
  EXPECT_NE(log.find("3 API key(s)"), std::string::npos) << log;
  // The keys never appear in the log.
  EXPECT_EQ(log.find("sk-"), std::string::npos) << log;
}

TEST(ServeAuth, KeyFileAndTlsMistakesAreUserErrors) {
  const fs::path d = work_dir("mistakes");
  const std::string model = "--model " + tiny_model().string() + " --port 0";
  std::ofstream(d / "empty.txt") << "# no keys here\n\n   \n";
  expect_user_error(
      run_zaya_in(d.string(), "serve " + model + " --api-key-file " + (d / "empty.txt").string()),
      "--api-key-file " + (d / "empty.txt").string() + ": no key in it");
  expect_user_error(
      run_zaya_in(d.string(), "serve " + model + " --api-key-file " + (d / "none.txt").string()),
      "--api-key-file " + (d / "none.txt").string() + ": cannot read it");
  std::ofstream(d / "spaced.txt") << "two words\n";
  expect_user_error(
      run_zaya_in(d.string(), "serve " + model + " --api-key-file " + (d / "spaced.txt").string()),
      "line 1: an API key must be printable ASCII without spaces");
  expect_user_error(
      run_zaya_in(d.string(), "serve " + model + " --ssl-cert " + (d / "empty.txt").string()),
      "--ssl-cert needs --ssl-key too");
  expect_user_error(
      run_zaya_in(d.string(), "serve " + model + " --ssl-cert " + (d / "no.pem").string() +
                                  " --ssl-key " + (d / "empty.txt").string()),
      "--ssl-cert " + (d / "no.pem").string() + ": cannot read it");
  // A text file as the certificate: named, and said to be no PEM certificate.
  expect_user_error(
      run_zaya_in(d.string(), "serve " + model + " --ssl-cert " + (d / "empty.txt").string() +
                                  " --ssl-key " + (d / "empty.txt").string()),
      "--ssl-cert " + (d / "empty.txt").string() + ": not a PEM certificate");
}

TEST(ServeAuth, WarnsWhenListeningBeyondLoopbackWithoutAKey) {
  const fs::path d = work_dir("open");
  ServeProcess s(d, {"--model", tiny_model().string(), "--host", "0.0.0.0", "--threads", "1"});
  ASSERT_TRUE(s.started()) << s.why_not();
  EXPECT_EQ(s.stop(), 0);
  const std::string err = s.err();
  EXPECT_NE(err.find("zaya: warning: listening on 0.0.0.0 without --api-key"), std::string::npos)
      << err;
  // With a key, no warning.
  ServeProcess k(d / "keyed", {"--model", tiny_model().string(), "--host", "0.0.0.0", "--api-key",
                               "sk-x", "--threads", "1"});
  ASSERT_TRUE(k.started()) << k.why_not();
  EXPECT_EQ(k.stop(), 0);
  EXPECT_EQ(k.err().find("warning: listening"), std::string::npos) << k.err();
}

// A self-signed certificate for 127.0.0.1 (and localhost) in dir/cert.pem, its key in key.pem.
bool make_certificate(const fs::path& dir, const std::string& name, std::string& log) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=" + name +
                          "' -addext 'subjectAltName=IP:127.0.0.1,DNS:localhost' -keyout " +
                          (dir / (name + "_key.pem")).string() + " -out " +
                          (dir / (name + "_cert.pem")).string() + " > " +
                          (dir / "openssl.log").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  log = slurp((dir / "openssl.log").string());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(ServeAuth, TlsWithAKeyServesCurlAndTheOpenAiClient) {
  if (std::system("openssl version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "the openssl command is not installed (Debian package openssl): it makes the "
                    "test's self-signed certificate";
  const fs::path d = work_dir("tls");
  std::string log;
  ASSERT_TRUE(make_certificate(d, "server", log)) << log;
  ASSERT_TRUE(make_certificate(d, "other", log)) << log;
  const std::string cert = (d / "server_cert.pem").string(), key = (d / "server_key.pem").string();

  // A key that is not the certificate's: one error at start naming both.
  expect_user_error(
      run_zaya_in(d.string(), "serve --model " + tiny_model().string() + " --port 0 --ssl-cert " +
                                  cert + " --ssl-key " + (d / "other_key.pem").string()),
      "--ssl-key " + (d / "other_key.pem").string() + " is not the private key of the certificate");

  ServeProcess s(d / "run", {"--model", tiny_model().string(), "--ssl-cert", cert, "--ssl-key", key,
                             "--api-key", "sk-tls", "--threads", "1"});
  ASSERT_TRUE(s.started()) << s.why_not();
  ASSERT_EQ(s.base().rfind("https://127.0.0.1:", 0), 0u) << s.base();
  const std::string trust = "--cacert " + shell_quote(cert);
  EXPECT_EQ(s.request("GET", "/health", "", trust).status, 200);
  expect_401(s.request("GET", "/v1/models", "", trust), "Authorization");
  const HttpReply c = s.request("POST", "/v1/completions", kCompletion.dump(),
                                trust + " " + bearer("Bearer sk-tls"));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.j["object"], "text_completion");
  // Not trusted without the certificate; plain HTTP on the TLS port gets no answer; the server
  // goes on.
  EXPECT_EQ(s.request("GET", "/health").status, 0);
  {
    std::string plain = s.base();
    plain.replace(0, 5, "http");
    const std::string cmd = "curl -s -m 10 -o /dev/null -w '%{http_code}' " + plain + "/health > " +
                            (d / "plain_code").string() + " 2>/dev/null";
    (void)std::system(cmd.c_str());
    EXPECT_NE(slurp((d / "plain_code").string()), "200");
  }
  EXPECT_EQ(s.request("GET", "/health", "", trust).status, 200);

  // The official client, trusting the certificate through NODE_EXTRA_CA_CERTS.
  if (const std::string missing = node_client_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string node_log = (d / "node.log").string();
  EXPECT_TRUE(run_node_client("openai_auth_client.mjs",
                              shell_quote(s.base() + "/v1") + " tiny-auth sk-tls", node_log,
                              "NODE_EXTRA_CA_CERTS=" + shell_quote(cert) + " "))
      << slurp(node_log);
  EXPECT_EQ(s.stop(), 0) << s.err();
}

}  // namespace
