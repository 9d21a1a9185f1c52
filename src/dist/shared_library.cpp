// SharedLibrary (shared_library.h): dlopen / dlsym with errors that say what was tried.
#include "dist/shared_library.h"

#include <dlfcn.h>

#include <utility>

#include "core/assert.h"

namespace zaya {

SharedLibrary SharedLibrary::open_first(const std::vector<std::string>& candidates,
                                        const std::string& what, const std::string& hint) {
  std::string tried;
  for (const std::string& c : candidates) {
    dlerror();
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      SharedLibrary lib;
      lib.handle_ = h;
      lib.path_ = c;
      lib.what_ = what;
      return lib;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", c, why ? why : "not loadable");
  }
  fail("cannot load {}: tried {}. {}", what, tried.empty() ? "nothing" : tried, hint);
}

SharedLibrary::SharedLibrary(SharedLibrary&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)),
      path_(std::move(o.path_)),
      what_(std::move(o.what_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& o) noexcept {
  if (this != &o) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
    path_ = std::move(o.path_);
    what_ = std::move(o.what_);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_) dlclose(handle_);
}

void* SharedLibrary::symbol(const char* name) const {
  ZAYA_ASSERT(handle_, "SharedLibrary::symbol({}) on a library that is not open", name);
  dlerror();
  void* p = dlsym(handle_, name);
  if (!p)
    fail("{} ({}) has no symbol {}: it is older than the version zaya was built for", what_, path_,
         name);
  return p;
}

}  // namespace zaya
