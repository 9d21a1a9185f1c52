// A shared library opened at run time (dlopen), for optional vendor libraries the binary must
// start without (NCCL: dist/nccl.cpp). Host-only, built in every configuration.
//
// open_first tries candidate paths or sonames in order and keeps the first that loads; when none
// does, the zaya::Error names every candidate with the loader's own reason and ends with `hint`
// (what to install or set). symbol() throws naming the library and the missing symbol (an
// older library than the caller was built for). The library stays loaded until the object dies.
#pragma once
#include <string>
#include <vector>

namespace zaya {

class SharedLibrary {
 public:
  SharedLibrary() = default;
  static SharedLibrary open_first(const std::vector<std::string>& candidates,
                                  const std::string& what, const std::string& hint);
  SharedLibrary(SharedLibrary&& o) noexcept;
  SharedLibrary& operator=(SharedLibrary&& o) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  void* symbol(const char* name) const;
  // The candidate that loaded.
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_, what_;
};

}  // namespace zaya
