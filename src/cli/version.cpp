// zaya --version (see version.h): one line on stdout, exit 0.
#include "cli/version.h"

#include <fmt/format.h>

namespace zaya::cli {

std::string version_line(const BuildInfo& b) {
  return fmt::format("zaya {} ({}, {}, backends: {}, mpi {}, server {})", b.version, b.commit,
                     b.build_type, b.backends, b.mpi ? "yes" : "no", b.server ? "yes" : "no");
}

}  // namespace zaya::cli
