// HttpServer over cpp-httplib (see server.h). Debian ships httplib compiled (libcpp-httplib.so);
// its header must see the same CPPHTTPLIB_* feature macros as the library, which CMake takes from
// the library's pkg-config file.
#include "serve/server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "core/assert.h"
#include "core/log.h"
#include "infer/engine.h"
#include "serve/chat_output.h"
#include "serve/http_guard.h"
#include "serve/metrics.h"

namespace zaya {

using json = nlohmann::json;
using openai::ApiError;
using openai::Endpoint;

namespace {

// One request's events, filled on the engine thread and drained on its connection's thread.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<GenerationEvent> events;
  int remaining = 1;  // choices not yet done
  bool done = false;  // every choice has sent its last event
};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(openai::error_body(e)), "application/json");
}

// What the request log adds for a generation request. A request is handled, streamed and logged
// on its connection's thread (httplib calls the handler, the content provider and the logger
// there, one request after the other), so a thread-local record carries it from the handler to
// the log line; the logger clears it.
struct RequestRecord {
  bool generation = false;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // completion: summed over the choices
  std::vector<int64_t> choice_tokens;                // each choice's count so far
  std::vector<FinishReason> finish;  // per choice; None at the log: the client went away
  std::string model;                 // the name the client asked for, if not the served
};
thread_local RequestRecord t_record;

void record_event(const GenerationEvent& ev) {
  const size_t i = size_t(std::max(0, ev.index));
  if (t_record.choice_tokens.size() <= i) t_record.choice_tokens.resize(i + 1, 0);
  if (t_record.finish.size() <= i) t_record.finish.resize(i + 1, FinishReason::None);
  t_record.prompt_tokens = ev.prompt_tokens;
  t_record.choice_tokens[i] = ev.completion_tokens;
  t_record.completion_tokens = 0;
  for (int64_t c : t_record.choice_tokens) t_record.completion_tokens += c;
  if (ev.done) t_record.finish[i] = ev.finish_reason;
}

// One choice's output on its way to the client: the text the engine emits, split (chat) into
// reasoning, content and tool calls, and its logprobs; kept whole for a non-streaming response.
struct ChoiceOut {
  int index = 0;
  std::optional<openai::ChatOutput> chat;  // chat: reasoning split, tool calls
  std::string text, reasoning;
  json logprobs = nullptr;
  int64_t offset = 0;  // completions' text_offset so far
  bool done = false;
  FinishReason finish = FinishReason::None;
  int64_t completion_tokens = 0;
};

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  openai::ServedModel model;
  ServerOptions opt;
  GuardedHttpServer http;
  ApiKeys keys;
  int64_t created = unix_now();

  mutable std::mutex mu;
  std::set<uint64_t> active;     // engine ids of requests not yet finished
  std::condition_variable idle;  // notified when `active` shrinks
  bool stopping = false;

  Impl(Engine& e, openai::ServedModel m, ServerOptions o)
      : engine(e),
        model(std::move(m)),
        opt(std::move(o)),
        http(ConnectionLimits{std::max(1, opt.http_threads), opt.request_timeout,
                              opt.keep_alive_timeout}),
        keys(opt.api_keys) {}

  // With keys: the request's bearer key, or a 401 (its message says what is wrong, never echoing
  // what was sent). /health stays open, for load balancers and probes.
  bool authorized(const httplib::Request& q, httplib::Response& r) const {
    if (keys.empty() || q.path == "/health") return true;
    std::string problem;
    if (!q.has_header("Authorization")) {
      problem =
          "You didn't provide an API key: send it in an Authorization header using Bearer auth "
          "(Authorization: Bearer YOUR_KEY)";
    } else {
      const BearerToken t = parse_bearer(q.get_header_value("Authorization"));
      if (!t.ok)
        problem = "Malformed Authorization header: " + t.problem +
                  "; send Authorization: Bearer YOUR_KEY";
      else if (!keys.matches(t.key))
        problem =
            "Incorrect API key provided. The key in the Authorization header is not one this "
            "server accepts (its --api-key / --api-key-file)";
    }
    if (problem.empty()) return true;
    r.set_header("WWW-Authenticate", "Bearer");
    send_error(r, ApiError(401, problem, "", "invalid_api_key"));
    return false;
  }

  // Queues the request; on_event fills the channel. Returns the engine id.
  uint64_t submit(GenerationRequest gen, const std::shared_ptr<Channel>& ch) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) throw ApiError(503, "the server is shutting down", "", "", "server_error");
    uint64_t id;
    try {
      id = engine.submit(std::move(gen), [ch](const GenerationEvent& ev) {
        {
          std::lock_guard<std::mutex> l(ch->mu);
          ch->events.push_back(ev);
          if (ev.done && --ch->remaining <= 0) ch->done = true;
        }
        ch->cv.notify_all();
      });
    } catch (const Error& err) {  // the engine's own validation (the parser checks first)
      throw ApiError(400, err.what());
    }
    active.insert(id);
    return id;
  }
  void finished(uint64_t id, bool cancel) {
    if (cancel) engine.cancel(id);
    {
      std::lock_guard<std::mutex> lock(mu);
      active.erase(id);
    }
    idle.notify_all();
  }

  void generate(const httplib::Request& req, httplib::Response& res, Endpoint e) {
    openai::ParsedRequest pr;
    auto ch = std::make_shared<Channel>();
    uint64_t id;
    try {
      pr = e == Endpoint::Chat ? openai::parse_chat_request(req.body, model)
                               : openai::parse_completion_request(req.body, model);
      t_record.model = pr.model != model.id ? pr.model : "";
      t_record.prompt_tokens = int64_t(pr.gen.prompt.size());
      t_record.finish.assign(size_t(pr.gen.n), FinishReason::None);
      ch->remaining = pr.gen.n;
      id = submit(pr.gen, ch);
      t_record.generation = true;
    } catch (const ApiError& err) {
      send_error(res, err);
      return;
    }
    const std::string rid = openai::new_response_id(e);
    const int64_t created_at = unix_now();
    auto outs = std::make_shared<std::vector<ChoiceOut>>(size_t(pr.gen.n));
    for (int i = 0; i < pr.gen.n; ++i) {
      (*outs)[size_t(i)].index = i;
      if (e == Endpoint::Chat) (*outs)[size_t(i)].chat.emplace(pr.chat, i);
    }
    const bool want_logprobs = pr.gen.sampling.top_logprobs >= 0;
    // The logprobs of an event, in the endpoint's shape (null when not asked for).
    auto event_logprobs = [this, e, want_logprobs, ids = pr.tokens_as_ids](
                              ChoiceOut& c, const GenerationEvent& ev) {
      if (!want_logprobs || ev.logprobs.empty()) return json();
      return e == Endpoint::Chat
                 ? openai::chat_logprobs(model.tok, ev.logprobs, ids)
                 : openai::completion_logprobs(model.tok, ev.logprobs, c.offset, ids);
    };
    auto usage = [outs] {
      openai::Usage u;
      for (const ChoiceOut& c : *outs) u.completion_tokens += c.completion_tokens;
      return u;
    };

    if (!pr.stream) {
      std::unique_lock<std::mutex> lock(ch->mu);
      int64_t prompt_tokens = 0;
      for (;;) {
        ch->cv.wait(lock, [&] { return !ch->events.empty(); });
        for (GenerationEvent& ev : ch->events) {
          record_event(ev);
          if (ev.index < 0 || ev.index >= pr.gen.n) continue;
          ChoiceOut& c = (*outs)[size_t(ev.index)];
          if (c.chat) {
            c.chat->push(ev.text);
            if (ev.done) c.chat->finish();
          } else {
            c.text += ev.text;
          }
          openai::append_logprobs(c.logprobs, event_logprobs(c, ev));
          c.completion_tokens = ev.completion_tokens;
          prompt_tokens = ev.prompt_tokens;
          if (ev.done) c.done = true, c.finish = ev.finish_reason;
        }
        ch->events.clear();
        if (ch->done) break;
      }
      lock.unlock();
      finished(id, false);
      std::vector<openai::ChoiceResult> results;
      for (ChoiceOut& c : *outs) {
        openai::ChoiceResult r;
        r.index = c.index;
        r.text = std::move(c.text);
        r.finish = c.finish;
        if (c.chat) {
          r.text = c.chat->content();
          r.reasoning = c.chat->reasoning();
          if (c.chat->has_tool_calls()) {
            r.tool_calls = c.chat->tool_calls_json();
            r.finish_tool_calls = c.finish == FinishReason::Stop;
          }
        }
        r.logprobs =
            want_logprobs && c.logprobs.is_null()
                ? (e == Endpoint::Chat ? json{{"content", json::array()}}
                                       : openai::completion_logprobs(model.tok, {}, c.offset))
                : std::move(c.logprobs);
        results.push_back(std::move(r));
      }
      openai::Usage u = usage();
      u.prompt_tokens = prompt_tokens;
      res.set_content(
          dump(e == Endpoint::Chat
                   ? openai::chat_response(rid, created_at, model.id, results, u)
                   : openai::completion_response(rid, created_at, model.id, results, u)),
          "application/json");
      return;
    }

    // Streaming: the provider is called again and again until it calls sink.done() or fails.
    struct Stream {
      bool role_sent = false, finished = false;
      int64_t prompt_tokens = 0;
    };
    auto st = std::make_shared<Stream>();
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, ch, st, e, rid, created_at, outs, event_logprobs, usage,
         include_usage = pr.include_usage](size_t, httplib::DataSink& sink) -> bool {
          std::deque<GenerationEvent> batch;
          bool all_done;
          {
            std::unique_lock<std::mutex> lock(ch->mu);
            ch->cv.wait_for(lock, std::chrono::milliseconds(200),
                            [&] { return !ch->events.empty(); });
            batch.swap(ch->events);
            all_done = ch->done;
          }
          std::string out;
          if (e == Endpoint::Chat && !st->role_sent) {
            for (const ChoiceOut& c : *outs)
              out += openai::sse_event(openai::chat_chunk(rid, created_at, model.id,
                                                          {{"role", "assistant"}, {"content", ""}},
                                                          FinishReason::None, c.index));
            st->role_sent = true;
          }
          for (const GenerationEvent& ev : batch) {
            record_event(ev);
            if (ev.index < 0 || ev.index >= int(outs->size())) continue;
            ChoiceOut& c = (*outs)[size_t(ev.index)];
            c.completion_tokens = ev.completion_tokens;
            st->prompt_tokens = ev.prompt_tokens;
            const json lp = event_logprobs(c, ev);
            if (c.chat) {
              // The event's text through the splitter and parser; at the end, what they held.
              openai::ChatOutput::Delta d = c.chat->push(ev.text);
              if (ev.done) {
                openai::ChatOutput::Delta f = c.chat->finish();
                d.reasoning += f.reasoning;
                d.content += f.content;
                for (auto& call : f.calls) d.calls.push_back(std::move(call));
              }
              if (!d.empty() || !lp.is_null()) {
                json delta = openai::ChatOutput::delta_json(d);
                if (delta.empty()) delta["content"] = "";
                out += openai::sse_event(openai::chat_chunk(rid, created_at, model.id, delta,
                                                            FinishReason::None, c.index, lp));
              }
            } else if (!ev.text.empty() || !lp.is_null()) {
              out += openai::sse_event(openai::completion_chunk(rid, created_at, model.id, ev.text,
                                                                FinishReason::None, c.index, lp));
            }
            if (!ev.done) continue;
            c.done = true;
            c.finish = ev.finish_reason;
            out += openai::sse_event(
                c.chat ? openai::chat_chunk(
                             rid, created_at, model.id, json::object(), ev.finish_reason, c.index,
                             nullptr,
                             c.chat->has_tool_calls() && ev.finish_reason == FinishReason::Stop)
                       : openai::completion_chunk(rid, created_at, model.id, "", ev.finish_reason,
                                                  c.index));
          }
          if (all_done && !st->finished) {
            if (include_usage) {
              openai::Usage u = usage();
              u.prompt_tokens = st->prompt_tokens;
              out += openai::sse_event(openai::usage_chunk(e, rid, created_at, model.id, u));
            }
            out += openai::kSseDone;
            st->finished = true;
          }
          // A failed write means the client went away: returning false ends the response and
          // the releaser below cancels the request.
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (st->finished) {
            sink.done();
          } else if (out.empty() && sink.is_writable && !sink.is_writable()) {
            return false;
          }
          return true;
        },
        [this, id, st](bool) { finished(id, !st->finished); });
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
      return authorized(q, r) ? httplib::Server::HandlerResponse::Unhandled
                              : httplib::Server::HandlerResponse::Handled;
    });
    http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) {
      generate(q, r, Endpoint::Completions);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) {
      generate(q, r, Endpoint::Chat);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(dump(openai::models_list(model.id, created)), "application/json");
    });
    http.Get("/v1/models/(.+)", [this](const httplib::Request& q, httplib::Response& r) {
      const std::string want = q.matches[1];
      if (want != model.id) {
        send_error(r, ApiError(404,
                               fmt::format("The model '{}' does not exist; this server serves '{}'",
                                           want, model.id),
                               "model", "model_not_found"));
        return;
      }
      r.set_content(dump(openai::models_list(model.id, created)["data"][0]), "application/json");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      const EngineStats st = engine.stats();
      r.set_content(dump({{"status", "ok"},
                          {"model", model.id},
                          {"in_flight", count()},
                          {"connections", http.open_connections()},
                          {"prompt_tokens", st.prompt_tokens},
                          {"generated_tokens", st.decode_tokens}}),
                    "application/json");
    });
    // Prometheus's scrape target; behind the API keys like every endpoint but /health (server.h).
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics_text(engine.stats(), {count(), int64_t(http.open_connections())}),
                    kPrometheusContentType);
    });
    // The right path with the wrong method: 405 rather than httplib's 404.
    auto not_allowed = [](const char* allowed) {
      return [allowed](const httplib::Request& q, httplib::Response& r) {
        r.set_header("Allow", allowed);
        send_error(r, ApiError(405, fmt::format("{} {} is not allowed; use {}", q.method, q.path,
                                                allowed)));
      };
    };
    for (const char* p : {"/v1/completions", "/v1/chat/completions"}) {
      http.Get(p, not_allowed("POST"));
      http.Put(p, not_allowed("POST"));
      http.Patch(p, not_allowed("POST"));
      http.Delete(p, not_allowed("POST"));
    }
    for (const char* p : {"/v1/models", "/v1/models/(.+)", "/health", "/metrics"}) {
      http.Post(p, not_allowed("GET"));
      http.Put(p, not_allowed("GET"));
      http.Patch(p, not_allowed("GET"));
      http.Delete(p, not_allowed("GET"));
    }
    // httplib's own failures (unknown route, body too large, unreadable request) in OpenAI's
    // shape; responses that already carry a body are left alone.
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& q, httplib::Response& r) {
          if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          std::string msg = fmt::format("HTTP {}", r.status);
          if (r.status == 404)
            msg = fmt::format(
                "Unknown route {} {}; this server has POST /v1/completions, POST "
                "/v1/chat/completions, GET /v1/models, GET /health and GET /metrics",
                q.method, q.path);
          if (r.status == 413)
            msg = fmt::format("The request body is larger than {} bytes", opt.max_body_bytes);
          send_error(r, ApiError(r.status, msg, "", r.status == 404 ? "not_found" : ""));
          return httplib::Server::HandlerResponse::Handled;
        }));
    // The request log: one line per request on stderr, once its response is sent (a stream's at
    // its end), e.g. "serve: POST /v1/completions 200 85 ms prompt 4 completion 10 finish length
    // client 127.0.0.1".
    http.set_logger([this](const httplib::Request& q, const httplib::Response& r) {
      RequestRecord rec = std::move(t_record);
      t_record = {};
      const double ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - GuardedHttpServer::request_start())
                            .count();
      std::string line = fmt::format("serve: {} {} {} {:.0f} ms", q.method.empty() ? "-" : q.method,
                                     q.path.empty() ? "-" : q.path, r.status, ms);
      if (rec.generation) {
        // One finish per choice, comma-separated when n > 1.
        std::string finish;
        for (FinishReason f : rec.finish)
          finish += (finish.empty() ? "" : ",") +
                    std::string(f == FinishReason::None ? "disconnected" : enum_word(f));
        line += fmt::format(" prompt {} completion {} finish {}", rec.prompt_tokens,
                            rec.completion_tokens, finish.empty() ? "disconnected" : finish);
      }
      if (!rec.model.empty())
        line += fmt::format(" model '{}' (served as {})", rec.model, model.id);
      if (!q.remote_addr.empty()) line += " client " + q.remote_addr;
      log_info("{}", line);
    });
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
          std::string what = "unknown error";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& ex) {
            what = ex.what();
          } catch (...) {
          }
          send_error(r, ApiError(500, "internal error: " + what, "", "", "server_error"));
        });
  }

  int64_t count() const {
    std::lock_guard<std::mutex> lock(mu);
    return int64_t(active.size());
  }
};

HttpServer::HttpServer(Engine& engine, openai::ServedModel model, ServerOptions opt)
    : impl_(std::make_unique<Impl>(engine, std::move(model), std::move(opt))) {
  Impl& s = *impl_;
  if (s.opt.ssl_cert.empty() != s.opt.ssl_key.empty())
    fail("serve: --ssl-cert and --ssl-key go together (got only {})",
         s.opt.ssl_cert.empty() ? "--ssl-key" : "--ssl-cert");
  if (!s.opt.ssl_cert.empty()) s.http.use_tls(s.opt.ssl_cert, s.opt.ssl_key);
  s.http.set_keep_alive_timeout(std::max<time_t>(
      1, std::chrono::ceil<std::chrono::seconds>(s.opt.keep_alive_timeout).count()));
  s.http.set_payload_max_length(s.opt.max_body_bytes);
  s.http.set_tcp_nodelay(true);  // SSE deltas are small; send each at once
  // httplib's default adds SO_REUSEPORT, which lets a second server bind a port already in use;
  // SO_REUSEADDR alone still allows a quick restart and makes "port in use" an error.
  s.http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.routes();
}

HttpServer::~HttpServer() = default;

bool HttpServer::tls() const {
  return impl_->http.tls();
}

int HttpServer::bind() {
  // A write to a client that has gone away must fail with EPIPE, not kill the process.
  ::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  int port = s.opt.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opt.host);
    if (port < 0) fail("serve: cannot bind to {} on any port", s.opt.host);
  } else if (!s.http.bind_to_port(s.opt.host, port)) {
    fail(
        "serve: cannot listen on {}:{} (in use, or not an address of this machine); pick "
        "another --port or --host",
        s.opt.host, port);
  }
  s.http.widen_backlog();
  return port;
}

void HttpServer::listen() {
  impl_->http.listen_after_bind();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  std::set<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stopping = true;
    ids = s.active;
  }
  for (uint64_t id : ids) s.engine.cancel(id);
  // Let the cancelled requests send their last event (finish_reason "cancelled", [DONE]) before
  // the connections close; bounded, in case the engine is not running.
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.idle.wait_for(lock, std::chrono::seconds(5), [&] { return s.active.empty(); });
  }
  s.http.stop();
}

int64_t HttpServer::in_flight() const {
  return impl_->count();
}

}  // namespace zaya
