// Logging (log.h): one process-wide level; info lines to stderr unless quiet.
#include "core/log.h"

#include <cstdlib>
#include <cstring>

namespace zaya {

static LogLevel initial_level() {
  const char* env = std::getenv("ZAYA_LOG");
  if (env && std::strcmp(env, "debug") == 0) return LogLevel::Debug;
  if (env && std::strcmp(env, "quiet") == 0) return LogLevel::Quiet;
  return LogLevel::Info;
}

static LogLevel g_level = initial_level();

LogLevel log_level() {
  return g_level;
}
void set_log_level(LogLevel level) {
  g_level = level;
}

}  // namespace zaya
