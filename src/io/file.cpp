// File helpers (file.h).
#include "io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

std::string errno_str() {
  return std::strerror(errno);
}

std::string hex64(uint64_t x) {
  return fmt::format("{:016x}", x);
}

MappedFile::Mapping::~Mapping() {
  if (addr) ::munmap(addr, size);
}

namespace {

// Opens a regular file read-only; fails naming it. Returns the descriptor and fills st.
int open_regular(const std::string& path, std::string_view what, struct stat& st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open {}: {}", path, what, errno_str());
  if (::fstat(fd, &st) != 0) {
    const std::string err = errno_str();
    ::close(fd);
    fail("{}: cannot stat {}: {}", path, what, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: {} is not a regular file{}", path, what,
         S_ISDIR(st.st_mode) ? " (it is a directory)" : "");
  }
  return fd;
}

}  // namespace

MappedFile MappedFile::open(const std::string& path, std::string_view what) {
  struct stat st;
  const int fd = open_regular(path, what, st);
  MappedFile f;
  f.path_ = path;
  f.map_ = std::make_shared<Mapping>();
  f.map_->size = size_t(st.st_size);
  if (f.map_->size > 0) {
    void* p = ::mmap(nullptr, f.map_->size, PROT_READ, MAP_PRIVATE, fd, 0);
    const std::string err = p == MAP_FAILED ? errno_str() : "";
    ::close(fd);
    if (p == MAP_FAILED) fail("{}: cannot mmap {}: {}", path, what, err);
    f.map_->addr = static_cast<unsigned char*>(p);
  } else {
    ::close(fd);
  }
  return f;
}

uint64_t file_xxh3(const std::string& path, bool sync, uint64_t* bytes) {
  if (sync) {
    struct stat st;
    const int fd = open_regular(path, "file", st);
    const bool ok = ::fsync(fd) == 0;
    const std::string err = ok ? "" : errno_str();
    ::close(fd);
    if (!ok) fail("{}: fsync failed: {}", path, err);
  }
  const MappedFile f = MappedFile::open(path, "file");
  if (f.size() > 0) ::madvise(const_cast<unsigned char*>(f.data()), f.size(), MADV_SEQUENTIAL);
  if (bytes) *bytes = f.size();
  return XXH3_64bits(f.data(), f.size());
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) fail("{}: cannot open for fsync: {}", path, errno_str());
  const bool ok = ::fsync(fd) == 0;
  const std::string err = ok ? "" : errno_str();
  ::close(fd);
  if (!ok) fail("{}: fsync failed: {}", path, err);
}

FileWriter::FileWriter(std::string path, WriteMode mode)
    : path_(std::move(path)), writing_(mode.atomic ? path_ + ".tmp" : path_), mode_(mode) {
  f_ = std::fopen(writing_.c_str(), "wb");
  if (!f_) fail("{}: cannot create: {}", writing_, errno_str());
}

FileWriter::~FileWriter() {
  if (!f_) return;
  std::fclose(f_);
  if (mode_.atomic) std::remove(writing_.c_str());
}

void FileWriter::fail_and_discard(const char* what) {
  const std::string err = errno_str();
  if (f_) std::fclose(f_);
  f_ = nullptr;
  if (mode_.atomic) std::remove(writing_.c_str());
  fail("{}: {} failed: {}", writing_, what, err);
}

void FileWriter::write(const void* data, size_t bytes) {
  ZAYA_ASSERT(f_, "{}: write after commit", path_);
  if (bytes > 0 && std::fwrite(data, 1, bytes, f_) != bytes) fail_and_discard("write");
}

void FileWriter::seek(uint64_t offset) {
  ZAYA_ASSERT(f_, "{}: seek after commit", path_);
  if (std::fseek(f_, long(offset), SEEK_SET) != 0) fail_and_discard("seek");
}

void FileWriter::commit() {
  ZAYA_ASSERT(f_, "{}: committed twice", path_);
  if (std::fflush(f_) != 0) fail_and_discard("write");
  if (mode_.fsync && ::fsync(::fileno(f_)) != 0) fail_and_discard("fsync");
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (closed != 0) {
    const std::string err = errno_str();
    if (mode_.atomic) std::remove(writing_.c_str());
    fail("{}: close failed: {}", writing_, err);
  }
  if (!mode_.atomic) return;
  if (std::rename(writing_.c_str(), path_.c_str()) != 0) {
    const std::string err = errno_str();
    std::remove(writing_.c_str());
    fail("cannot rename {} to {}: {}", writing_, path_, err);
  }
  if (mode_.fsync) {
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    fsync_path(dir.empty() ? "." : dir, /*directory=*/true);
  }
}

void write_file(const std::string& path, std::string_view bytes, WriteMode mode) {
  FileWriter w(path, mode);
  w.write(bytes.data(), bytes.size());
  w.commit();
}

}  // namespace zaya
