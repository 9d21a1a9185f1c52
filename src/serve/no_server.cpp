// The HTTP server of a build without it (ZAYA_SERVE=OFF, e.g. the GPU bundle, whose static link
// cannot take Debian's shared-only cpp-httplib): `zaya serve` fails with one clear error.
#include "core/assert.h"
#include "serve/server.h"

namespace zaya {

struct HttpServer::Impl {};

HttpServer::HttpServer(Engine&, openai::ServedModel, ServerOptions) {
  fail(
      "this build has no HTTP server (configured with -DZAYA_SERVE=OFF, as the GPU bundle is): "
      "run zaya serve from a regular build");
}

HttpServer::~HttpServer() = default;

bool HttpServer::tls() const {
  return false;
}

int HttpServer::bind() {
  return 0;
}

void HttpServer::listen() {}

void HttpServer::stop() {}

int64_t HttpServer::in_flight() const {
  return 0;
}

}  // namespace zaya
