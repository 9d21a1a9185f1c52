// GGUF: reading (a validated read-only mapping) and writing (streamed, atomic) of the single-file
// model container of the GGML ecosystem (docs/gguf.md). Little-endian, versions 2 and 3:
//   "GGUF" · u32 version · u64 tensor_count · u64 kv_count · kv_count × (string key · u32 type ·
//   value) · tensor_count × (string name · u32 n_dims · u64 ne[n_dims] · u32 ggml_type ·
//   u64 offset) · zero padding to the alignment · the data section
// (a string is u64 length + bytes; an array is u32 element type · u64 count · elements). Tensor
// offsets are relative to the data section, which starts at the first multiple of the alignment
// (general.alignment, default 32) after the tensor infos. ne is GGML's order: ne[0] is the
// contiguous dimension, so a torch shape [O, I] is ne {I, O}.
//
// Contract: GgufFile refuses every malformed file with a zaya::Error naming the path and what is
// wrong (the key or tensor, and both sides of a mismatch); nothing outside the mapping is read and
// no allocation is sized by an unchecked count. Data pointers point into the mapping, which lives
// as long as the GgufFile (moves keep it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace zaya {

class FileWriter;

// The metadata value types (their numbers are the file's).
enum class GgufType : uint32_t {
  U8 = 0,
  I8,
  U16,
  I16,
  U32,
  I32,
  F32,
  Bool,
  String,
  Array,
  U64,
  I64,
  F64
};
std::string_view gguf_type_name(GgufType t);  // "u32", "string", ...

// One metadata value. Unsigned integers and bools are held in u, signed integers in i, floats in
// f, strings in s; an array's elements (all of type elem) in items.
struct GgufValue {
  GgufType type = GgufType::U32;
  GgufType elem = GgufType::U8;  // arrays: their element type
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<GgufValue> items;  // arrays

  static GgufValue str(std::string v);
  static GgufValue u32(uint32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i32(int32_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  // Every item must have type `elem` (checked when written).
  static GgufValue array(GgufType elem, std::vector<GgufValue> items);

  bool operator==(const GgufValue&) const = default;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // GGML order: ne[0] is the contiguous dim (torch shape reversed)
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;  // the matching DType (the reader refuses types zaya has none for)
  uint64_t offset = 0;       // from the start of the data section
  const void* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
  }
};

// "{4096, 2048}": a GGML shape for messages.
std::string gguf_shape_str(const std::vector<int64_t>& ne);

class GgufFile {
 public:
  // Maps and validates the whole file; throws zaya::Error naming the path and what is wrong
  // (wrong magic, version, truncated, unknown/unsupported type naming the tensor, a tensor past
  // the end or overlapping, bad alignment, duplicate keys or tensor names, bad dims, counts that
  // cannot fit the file).
  static GgufFile open(const std::string& path);
  // The same checks on bytes in memory; `name` stands for the path in messages (tests, fuzzing).
  static GgufFile from_bytes(std::string bytes, std::string name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;  // null when absent
  // Typed reads; a missing key or another type is a zaya::Error naming the path and the key.
  // get_int accepts every integer type (range-checked), get_float also F32/F64.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::string& get_str(const std::string& key) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(const std::string& name) const;  // null when absent
  uint64_t file_bytes() const { return size_; }

 private:
  void parse();
  std::string path_;
  std::shared_ptr<const void> owner_;  // the mapping or the bytes
  const unsigned char* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// DType ↔ GGML type id: F32 0, F16 1, Q4_0 2, Q5_0 6, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14,
// IQ4_XS 23, BF16 30. ggml_type_of throws zaya::Error for a DType GGUF has no id for (F64, the
// integer types).
uint32_t ggml_type_of(DType t);
// GGML's name of a type id ("Q2_K"), or "unknown" for an id GGML does not define.
std::string_view ggml_type_name(uint32_t id);

// Writes a GGUF v3 file atomically (io/file.h FileWriter: temporary file, fsync, rename) and
// streams tensor data (an 8B model never sits in memory): declare every key and tensor first,
// then write the tensors' bytes in declaration order. Each tensor starts at a multiple of the
// alignment (written as general.alignment when it is not the default 32).
class GgufWriter {
 public:
  explicit GgufWriter(std::string path, uint32_t alignment = 32);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void set(const std::string& key, GgufValue v);  // duplicate key: zaya::Error
  // GGML order; a block type's ne[0] must be a multiple of its block. Duplicate name: zaya::Error.
  void add_tensor(const std::string& name, DType t, std::vector<int64_t> ne);
  // The next declared tensor's bytes, in one call or several (in order; the total is checked
  // against its size, and so is the name).
  void write_tensor(const std::string& name, const void* bytes, size_t n);
  // After the last tensor: fsync + rename; until then nothing is at `path`.
  void finish();

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0, offset = 0;
  };
  void start();  // writes the header once every key and tensor is declared
  std::string path_;
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Pending> tensors_;
  std::unique_ptr<FileWriter> f_;
  size_t next_ = 0;        // the tensor being written
  uint64_t written_ = 0;   // bytes of it written so far
  uint64_t position_ = 0;  // bytes written into the data section
  bool finished_ = false;
};

}  // namespace zaya
