// Whole-file reading with user-facing errors (zaya::Error naming the path).
#pragma once
#include <string>
#include <string_view>

namespace zaya {

// Reads `path` whole; `what` names the file's role in the error ("token file", "config file").
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace zaya
