// zaya serve --model M [--host 127.0.0.1] [--port 8080] [--model-name NAME] [--max-batch 8]
//            [--max-context N] [--tokenizer FILE] [--threads N] [--http-threads N]
//            [--request-timeout SECONDS] [--api-key KEY]... [--api-key-file FILE]
//            [--ssl-cert FILE --ssl-key FILE] [--chat-template FILE] [--reasoning on|off]
//            [--prefix-cache-mb 1024] [--prefix-cache-block 256] [--quiet]
// The OpenAI-compatible server (serve/server.h, docs/serving.md). M is anything
// open_model_source takes (a GGUF file too); the tokenizer, the context and the special ids come
// from the model (infer/model_source.h, infer/model_files.h), the served name from its path (a
// run's name for a checkpoint's model). Streams follow the rule of docs/cli.md: stdout carries one
// line, the result a script waits for — printed once the server listens, with the real port (so
// --port 0 picks a free one):
//   zaya serve: NAME (PARAMS params, DTYPE) on http[s]://HOST:PORT — KV cache N bytes/token[ + M
//   bytes (windowed layers)], max batch B, context T
// (N: the full-attention layers' K/V per token; M: what sliding-window layers hold at most).
// and stderr the logs: what was picked, the context's origin, one line per request (server.h);
// --quiet drops the logs (warnings and errors stay).
// Chat: the chat format is loaded once at start (chat/chat_template.h: --chat-template FILE, else
// the model directory's template, else built-in ChatML when the tokenizer speaks it, else the
// plain transcript) and its origin logged. --reasoning off makes enable_thinking false the
// server's template default (a request's chat_template_kwargs still decide). The vocabulary index
// that constrained decoding masks with (grammar/token_mask.h) is built on the first request that
// needs it, once, whichever thread asks first. The stop ids are eos_ids (infer/model_files.h):
// generation_config.json's, the tokenizer's eos and <|im_end|>.
// Prefix cache (infer/prefix_cache.h): snapshots of prompts' decode state every
// --prefix-cache-block tokens, in an LRU of --prefix-cache-mb MiB (0: none); a request resumes
// from the longest cached prefix of its prompt. GET /metrics (serve/metrics.h) reports it.
// SIGINT/SIGTERM: in-flight requests are cancelled, the listener closes, exit 0.
// Access: --api-key / --api-key-file give the bearer keys every endpoint but /health requires
// (server.h); without one, a --host beyond loopback gets a warning on stderr at start, since then
// anyone who reaches the port may use it. --ssl-cert/--ssl-key serve HTTPS.
#include <omp.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/output.h"
#include "data/tokenizer.h"
#include "grammar/token_mask.h"
#include "infer/cache.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "infer/model_files.h"
#include "infer/model_source.h"
#include "model/inspect.h"
#include "serve/server.h"

namespace zaya::cli {

namespace {

struct ServeArgs {
  std::string model, host = "127.0.0.1", model_name, tokenizer;
  std::vector<std::string> api_keys;
  std::string api_key_file, ssl_cert, ssl_key, chat_template;
  chat::Reasoning reasoning = chat::Reasoning::On;
  int port = 8080;
  int64_t max_batch = 8, max_context = 0;
  int64_t prefix_cache_mb = 1024, prefix_cache_block = 256;
  int threads = 0, http_threads = 0;
  double request_timeout = 10;
  // Sampling defaults over the model's (a request's fields override them); unset: the model's.
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  bool bf16 = false, quiet = false;
};

// Set from the signal handler; a watcher thread turns it into HttpServer::stop().
std::atomic<bool> g_signalled{false};
extern "C" void on_signal(int) {
  g_signalled.store(true);
}

std::string short_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", double(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", double(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", double(n) / 1e3);
  return std::to_string(n);
}

// A key must be sendable as `Authorization: Bearer KEY`: printable ASCII, no spaces.
void check_key(const std::string& key, const std::string& where) {
  if (key.empty()) fail("{}: an API key must not be empty", where);
  for (unsigned char c : key)
    if (c <= 0x20 || c >= 0x7f)
      fail(
          "{}: an API key must be printable ASCII without spaces (it is sent as "
          "'Authorization: Bearer KEY'); this one holds byte 0x{:02x}",
          where, c);
}

// --api-key-file: one key per line; blank lines and lines starting with '#' are skipped, spaces
// around a key trimmed. A file with no key is an error (a server meant to be locked is not opened).
std::vector<std::string> read_api_key_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("--api-key-file {}: cannot read it", path);
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const size_t e = line.find_last_not_of(" \t\r");
    const std::string key = line.substr(b, e - b + 1);
    check_key(key, fmt::format("--api-key-file {} line {}", path, n));
    keys.push_back(key);
  }
  if (keys.empty())
    fail(
        "--api-key-file {}: no key in it (one key per line; blank lines and #comments are "
        "skipped)",
        path);
  return keys;
}

std::string_view format_name(chat::ChatFormat f) {
  switch (f) {
    case chat::ChatFormat::ModelTemplate:
      return "model template";
    case chat::ChatFormat::BuiltinChatML:
      return "built-in ChatML";
    case chat::ChatFormat::Transcript:
      return "plain transcript";
  }
  return "?";
}

// The vocabulary index, built by the first caller (about 0.2 s for a 262k vocabulary) and shared.
std::function<std::shared_ptr<const grammar::VocabIndex>()> lazy_vocab_index(const Tokenizer& tok) {
  struct Lazy {
    std::once_flag once;
    std::shared_ptr<const grammar::VocabIndex> index;
  };
  auto lazy = std::make_shared<Lazy>();
  return [lazy, &tok] {
    std::call_once(lazy->once, [&] {
      const auto t0 = std::chrono::steady_clock::now();
      lazy->index = std::make_shared<const grammar::VocabIndex>(tok);
      log_info(
          "serve: vocabulary index for constrained decoding built in {:.0f} ms",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    });
    return lazy->index;
  };
}

bool loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int run_serve(const ServeArgs& a) {
  if (a.quiet) set_log_level(LogLevel::Quiet);
  // Flags that need no model are checked first: a bad key file is one error line, at once.
  std::vector<std::string> keys = a.api_keys;
  for (const std::string& k : keys) check_key(k, "--api-key");
  if (!a.api_key_file.empty())
    for (std::string& k : read_api_key_file(a.api_key_file)) keys.push_back(std::move(k));
  if (a.ssl_cert.empty() != a.ssl_key.empty())
    fail("{} needs {} too (the certificate and its private key, PEM files)",
         a.ssl_cert.empty() ? "--ssl-key" : "--ssl-cert",
         a.ssl_cert.empty() ? "--ssl-cert" : "--ssl-key");
  const ModelSource src = open_model_source(a.model);
  if (const std::string line = src.line(); !line.empty()) log_info("serve: {}", line);
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const ModelExtras& extras = src.extras;
  SourceTokenizer st = src.require_tokenizer(a.tokenizer);
  const std::string tok_path = st.origin;
  const Tokenizer& tok = *st.tok;
  const chat::ChatTemplate chat_template = src.chat_template(a.chat_template, &tok);
  const InferModel model = src.load_weights(a.bf16);
  const ZayaConfig& c = model.config();
  const ContextLimit ctx = choose_context(c, extras, a.max_context);
  std::vector<std::string> warnings = ctx.warnings;
  warnings.push_back(tokenizer_fit_warning(tok, tok_path, c, extras.vocab_size_origin));
  for (const std::string& w : warnings)
    if (!w.empty()) fmt::print(stderr, "zaya: warning: {}\n", w);

  EngineOptions eo;
  eo.max_batch = a.max_batch;
  eo.max_context = ctx.tokens;
  eo.eos_ids = eos_ids(c, extras, &tok);
  eo.prefix_cache_bytes = a.prefix_cache_mb << 20;
  eo.prefix_block = a.prefix_cache_block;
  Engine engine(model, &tok, eo);

  openai::ServedModel served;
  served.id = a.model_name.empty() ? src.name : a.model_name;
  served.max_context = engine.max_context();
  served.vocab_size = c.vocab_size;
  served.tok = &tok;
  served.bos_id = bos_id(c, extras, &tok);
  served.defaults = default_sampling(extras);
  served.chat_template = &chat_template;
  if (a.reasoning == chat::Reasoning::Off) served.chat_kwargs["enable_thinking"] = false;
  served.eos_ids = eo.eos_ids;
  served.vocab_index = lazy_vocab_index(tok);
  if (a.temperature) served.defaults.temperature = *a.temperature;
  if (a.top_p) served.defaults.top_p = *a.top_p;
  if (a.top_k) served.defaults.top_k = *a.top_k;
  if (a.min_p) served.defaults.min_p = *a.min_p;
  if (a.repetition_penalty) served.defaults.repetition_penalty = *a.repetition_penalty;
  if (auto inv = served.defaults.check())
    fail("serve: the sampling defaults (generation_config.json, then the flags) are invalid: {}",
         inv->message);

  ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.http_threads =
      a.http_threads > 0 ? a.http_threads : int(std::max<int64_t>(64, 2 * a.max_batch + 4));
  so.request_timeout = std::chrono::milliseconds(int64_t(a.request_timeout * 1000));
  so.api_keys = keys;
  so.ssl_cert = a.ssl_cert;
  so.ssl_key = a.ssl_key;
  HttpServer server(engine, served, so);
  const int port = server.bind();  // before any log line: a port in use is the one line printed
  log_info("serve: context {} tokens ({}){}", engine.max_context(), ctx.source,
           engine.max_context() < ctx.tokens ? ", lowered to fit the cache" : "");
  log_info(
      "serve: request defaults: temperature {} top_p {} top_k {} min_p {} "
      "repetition_penalty {} (generation_config.json, then the sampling flags)",
      served.defaults.temperature, served.defaults.top_p, served.defaults.top_k,
      served.defaults.min_p, served.defaults.repetition_penalty);
  if (a.prefix_cache_mb > 0)
    log_info("serve: prefix cache up to {} MiB, a snapshot every {} tokens ({} bytes each)",
             a.prefix_cache_mb, a.prefix_cache_block,
             PrefixCache(c, {eo.prefix_cache_bytes, eo.prefix_block, {}}).node_bytes());
  else
    log_info("serve: no prefix cache (--prefix-cache-mb 0)");
  log_info("serve: chat format: {} ({}); reasoning {} by default",
           format_name(chat_template.format), chat_template.origin, enum_word(a.reasoning));
  if (keys.empty() && !loopback(a.host))
    fmt::print(stderr,
               "zaya: warning: listening on {} without --api-key: anyone who can reach port {} "
               "may use this server{}\n",
               a.host, port, server.tls() ? "" : " (and the traffic is not encrypted: --ssl-cert)");
  else if (!keys.empty())
    log_info("serve: {} API key(s); every endpoint but /health requires one", keys.size());

  std::atomic<bool> engine_stop{false};
  std::thread engine_thread([&] { engine.run(engine_stop); });

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::atomic<bool> listening_done{false};
  std::thread watcher([&] {
    while (!listening_done.load()) {
      if (g_signalled.load()) server.stop();  // repeated: a stop before listen() starts is lost
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  const ModelFacts f = model_facts(c, engine.max_context());
  // The decode cache's real figures (infer/cache.h): bytes per token of the full-attention
  // sub-layers, and what the windowed ones hold at most, whatever the context.
  const int64_t window_bytes = SequenceCache::window_bytes(c);
  print_result(
      "zaya serve: {} ({} params, {}) on {}://{}:{} — KV cache {} bytes/token{}, max batch {}, "
      "context {}",
      served.id, short_count(f.params_total), dtype_name(model.matrix_dtype()),
      server.tls() ? "https" : "http", a.host, port, SequenceCache::bytes_per_token(c),
      window_bytes > 0 ? fmt::format(" + {} bytes (windowed layers)", window_bytes) : "",
      a.max_batch, engine.max_context());

  server.listen();
  listening_done.store(true);
  watcher.join();
  engine_stop.store(true);
  engine.wake();
  engine_thread.join();
  log_info("zaya serve: stopped");
  return 0;
}

}  // namespace

Action add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  sub->add_option("--model", a->model,
                  "model directory, GGUF file, checkpoint (step_N), run (its newest valid "
                  "checkpoint) or a file in a model directory")
      ->required();
  sub->add_option("--host", a->host, "address to listen on")->capture_default_str();
  sub->add_option("--port", a->port, "port (0 = any free port, printed at startup)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  sub->add_option("--model-name", a->model_name,
                  "model id /v1/models lists and responses carry (default: the model directory's "
                  "name, or the run's for a checkpoint; requests naming another are served too)");
  sub->add_option("--max-batch", a->max_batch, "sequences decoded together at most")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  sub->add_option("--max-context", a->max_context,
                  "prompt + completion tokens per request (default: the trained context; up to "
                  "max_position_embeddings)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json (default: DIR/tokenizer.json, or the GGUF file's)")
      ->check(CLI::ExistingFile);
  sub->add_option("--threads", a->threads, "compute threads (default: OpenMP's)")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--http-threads", a->http_threads,
                  "connections served at once (default: max(64, 2·max-batch + 4))")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--request-timeout", a->request_timeout,
                  "seconds a request may take to arrive, first byte to last (slow clients are "
                  "cut off)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_option("--api-key", a->api_keys,
                  "require this key as 'Authorization: Bearer KEY' on every endpoint but /health "
                  "(repeat for several keys)")
      ->allow_extra_args(false);
  sub->add_option("--api-key-file", a->api_key_file,
                  "file of keys, one per line (blank lines and #comments skipped), as --api-key");
  sub->add_option("--ssl-cert", a->ssl_cert, "serve HTTPS with this PEM certificate (chain)");
  sub->add_option("--ssl-key", a->ssl_key, "the PEM private key of --ssl-cert");
  sub->add_option("--temperature", a->temperature,
                  "default temperature of requests that give none (0 = greedy; default: the "
                  "model's generation_config.json, else 1)");
  sub->add_option("--top-p", a->top_p, "default top_p (default: the model's, else 1 = off)");
  sub->add_option("--top-k", a->top_k, "default top_k (default: the model's, else 0 = off)");
  sub->add_option("--min-p", a->min_p, "default min_p (default: the model's, else 0 = off)");
  sub->add_option("--repetition-penalty", a->repetition_penalty,
                  "default repetition_penalty (default: the model's, else 1 = off)");
  sub->add_option("--chat-template", a->chat_template,
                  "Jinja chat template file used instead of the model directory's "
                  "(chat_template.jinja, tokenizer_config.json's chat_template)")
      ->check(CLI::ExistingFile);
  add_enum_option(sub, "--reasoning", a->reasoning,
                  "the chat template's enable_thinking default: off renders the generation prompt "
                  "without reasoning unless a request's chat_template_kwargs asks for it");
  sub->add_option("--prefix-cache-mb", a->prefix_cache_mb,
                  "MiB of prompt-state snapshots kept to resume requests that share a prefix "
                  "(0 = no prefix cache)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  sub->add_option("--prefix-cache-block", a->prefix_cache_block,
                  "tokens between snapshots (prompt chunks end at multiples of it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_flag(
      "--bf16", a->bf16,
      "hold F32 matrices and conv weights as bf16 (rounded at load: half the bytes per token)");
  sub->add_flag("--quiet", a->quiet,
                "no logs on stderr (what was loaded, one line per request); the listening line "
                "stays");
  return [a] { return run_serve(*a); };
}

}  // namespace zaya::cli
