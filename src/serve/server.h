// HttpServer: the OpenAI-compatible HTTP front of an Engine (cpp-httplib). Routes:
//   POST /v1/completions, POST /v1/chat/completions   (openai_request.h: parsing, template;
//   openai_response.h: shapes; a request naming another model is served by this one)
//   GET  /v1/models, GET /v1/models/{id} (the served model; another id is 404), GET /health
//   ({"status":"ok", "in_flight", and the engine's prompt_tokens / generated_tokens totals),
//   GET  /metrics (serve/metrics.h: Prometheus text, the engine's counters, the prefix cache)
// Every rejection is OpenAI's {"error": {message, type, param, code}}: 400 bad input, 401 no or a
// wrong API key, 404 unknown route or model id, 405 wrong method, 413 body over the limit, 500 an
// internal failure; the server keeps serving after each.
//
// Who may use it: with api_keys, every request but GET /health (/metrics included: its counters say
// how much the server is used and how its cache is doing) must carry
// `Authorization: Bearer KEY` with one of them (http_guard.h: ApiKeys, constant-time); a missing,
// malformed or wrong one is 401 (code "invalid_api_key", header WWW-Authenticate: Bearer), before
// routing, so an unknown route is 401 too. With ssl_cert/ssl_key it speaks HTTPS only.
//
// Every request is logged on stderr (core/log.h, so `zaya serve --quiet` drops it) once its
// response is sent — a stream's when it ends — as one line:
//   serve: METHOD PATH STATUS MS ms [prompt P completion C finish stop|length|cancelled|
//   disconnected] [model 'ASKED' (served as ID)] client ADDRESS
//
// Threads: one per connection (http_guard.h: started on demand up to http_threads, sized well
// above the engine's batch; slow, idle and silent connections are cut off so they cannot hold
// them); the engine runs on a thread the caller owns (Engine::run). A request's events
// come from the engine thread through a per-request queue: a non-streaming handler waits for the
// last one; a streaming one (SSE, `data: {json}\n\n` … `data: [DONE]\n\n`) is an httplib chunked
// content provider that drains the queue as tokens arrive. A client that goes away (a failed
// write) has its request cancelled in the engine, so it stops taking a batch slot.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/openai_request.h"
#include "serve/openai_response.h"

namespace zaya {

class Engine;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                          // 0: any free port (bind() returns it)
  int http_threads = 64;                    // connections served at once (more wait; see below)
  size_t max_body_bytes = size_t(8) << 20;  // larger request bodies get 413
  // A request must arrive whole (line, headers, body) within request_timeout of its first byte (a
  // connection that sends nothing is closed after it too); an idle keep-alive connection is
  // closed after keep_alive_timeout, or after 0.2 s while other connections wait for a thread.
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds keep_alive_timeout{5000};
  std::vector<std::string> api_keys;  // empty: anyone who reaches the port may use it
  std::string ssl_cert, ssl_key;      // PEM files; both set: HTTPS (http_guard.h: use_tls)
};

class HttpServer {
 public:
  HttpServer(Engine& engine, openai::ServedModel model, ServerOptions opt);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // HTTPS (ssl_cert and ssl_key were given and load; the constructor throws when they do not).
  bool tls() const;
  // Binds the listening socket; returns the port. Throws zaya::Error when the address cannot be
  // bound (port in use, bad host).
  int bind();
  // Serves until stop(); call after bind(). Blocks.
  void listen();
  // Thread-safe: cancels in-flight requests (their clients get finish_reason "cancelled") and
  // stops accepting; listen() returns once every connection thread has finished.
  void stop();
  int64_t in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaya
