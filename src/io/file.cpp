#include "io/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/assert.h"

namespace zaya {

std::string read_text_file(const std::string& path, std::string_view what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("{}: cannot open {}: {}", path, what, std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool read_error = std::ferror(f);
  std::fclose(f);
  if (read_error) fail("{}: read error", path);
  return text;
}

}  // namespace zaya
