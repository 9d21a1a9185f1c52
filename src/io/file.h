// File helpers with user-facing errors (zaya::Error naming the path): whole-file reads, read-only
// mappings, checksums, the one way every writer puts a file on disk (write_file / FileWriter),
// and the errno / hex formatting every reader and writer shares.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace zaya {

// Reads `path` whole; `what` names the file's role in the error ("token file", "config file").
std::string read_text_file(const std::string& path, std::string_view what);
// How a written file reaches the disk. The default suits every file a user or a resumed run reads
// back: a crash leaves the old file or the new one, never a part, and neither is lost to a power
// cut once the call returns.
struct WriteMode {
  // Write PATH.tmp, then rename it over PATH (off: write PATH in place, e.g. inside a directory
  // that is itself renamed into place when complete).
  bool atomic = true;
  // fsync the data before it counts as written (and, when atomic, the directory after the rename).
  bool fsync = true;
};

// Writes `bytes` to `path` as `mode` says; zaya::Error naming the path (a failed atomic write
// leaves no temporary behind and the old file untouched).
void write_file(const std::string& path, std::string_view bytes, WriteMode mode = {});

// The same for a file written in pieces (safetensors, token shards): write() appends, seek()
// moves the write position, commit() makes the file final as write_file does. An atomic writer
// destroyed without a commit (an error on the way) removes its temporary; one writing in place
// leaves what it wrote for its caller (who owns the directory) to discard.
class FileWriter {
 public:
  FileWriter(std::string path, WriteMode mode = {});
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void write(const void* data, size_t bytes);
  void seek(uint64_t offset);
  void commit();
  // The file being written (PATH.tmp while atomic and not yet committed).
  const std::string& writing() const { return writing_; }

 private:
  void fail_and_discard(const char* what);
  std::string path_, writing_;
  WriteMode mode_;
  std::FILE* f_ = nullptr;
};

// fsync of a file or a directory (a new or renamed entry is durable once its directory is);
// zaya::Error naming it.
void fsync_path(const std::string& path, bool directory);

// strerror(errno) as a string (call it before anything else can touch errno).
std::string errno_str();

// 16 lowercase hex digits (checksums in manifests and messages).
std::string hex64(uint64_t x);

// A whole regular file mapped read-only (MAP_PRIVATE); shared ownership keeps the mapping alive
// while views of it are in use. An empty file maps to data() == nullptr, size() == 0.
class MappedFile {
 public:
  // `what` names the file's role in errors ("safetensors file", "token shard").
  static MappedFile open(const std::string& path, std::string_view what);
  const unsigned char* data() const { return map_ ? map_->addr : nullptr; }
  size_t size() const { return map_ ? map_->size : 0; }
  const std::string& path() const { return path_; }

 private:
  struct Mapping {
    unsigned char* addr = nullptr;
    size_t size = 0;
    ~Mapping();
  };
  std::shared_ptr<Mapping> map_;
  std::string path_;
};

// XXH3-64 of a whole file, read through a mapping (madvise sequential); with `sync` the file is
// fsynced first. `bytes` receives its size when given.
uint64_t file_xxh3(const std::string& path, bool sync = false, uint64_t* bytes = nullptr);

}  // namespace zaya
