// safetensors reading (read-only mmap, one file or index + shards) and atomic writing.
// Contract: every malformed input throws zaya::Error with one line naming the file and what is
// wrong; nothing is read outside a file's mapping. Data pointers point into the mappings, which
// live as long as the SafeTensors object (moves keep them alive).
#include "io/safetensors.h"

#include "io/file.h"
#include "io/json_parse.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/assert.h"

namespace zaya {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MB: far above any real header

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// The dtype named in a header, or an error naming the file and tensor.
DType parse_dtype(const std::string& s, const std::string& file, const std::string& name) {
  static const std::pair<const char*, DType> kSupported[] = {
      {"F32", DType::F32}, {"F64", DType::F64}, {"BF16", DType::BF16}, {"F16", DType::F16},
      {"I32", DType::I32}, {"U32", DType::U32}, {"I64", DType::I64}};
  for (const auto& [n, t] : kSupported)
    if (s == n) return t;
  // Valid safetensors dtypes that zaya does not read.
  static const char* kUnsupported[] = {
      "BOOL",    "U8", "I8",      "I16",     "U16", "U64",         "F8_E4M3",    "F8_E5M2",
      "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
  for (const char* n : kUnsupported)
    if (s == n)
      fail(
          "{}: tensor '{}': unsupported dtype '{}' (zaya reads F32, F64, BF16, F16, I32, U32, I64)",
          file, name, s);
  fail("{}: tensor '{}': unknown dtype '{}' (expected one of F32, F64, BF16, F16, I32, U32, I64)",
       file, name, s);
}

// A non-negative int64 from a JSON integer, or an error.
int64_t non_negative_int(const json& v, const std::string& file, const std::string& name,
                         const char* what) {
  if (!v.is_number_integer())
    fail("{}: tensor '{}': {} must be integers, got {}", file, name, what, v.dump());
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX))
      fail("{}: tensor '{}': {} value {} is too large", file, name, what, u);
    return int64_t(u);
  }
  int64_t x = v.get<int64_t>();
  if (x < 0) fail("{}: tensor '{}': {} must be non-negative, got {}", file, name, what, x);
  return x;
}

template <class T>
T load_unaligned(const unsigned char* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

// dst[i] = float value of element i of src (src of dtype `from`, possibly unaligned).
template <class Dst>
void convert(Dst* dst, const unsigned char* src, DType from, int64_t n) {
  if (from == dtype_of<Dst>()) {
    std::memcpy(dst, src, size_t(n) * sizeof(Dst));
    return;
  }
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    switch (from) {
      case DType::F32:
        dst[i] = Dst(load_unaligned<float>(src + 4 * i));
        break;
      case DType::F64:
        dst[i] = Dst(load_unaligned<double>(src + 8 * i));
        break;
      case DType::BF16:
        dst[i] = Dst(bf16_to_f32(load_unaligned<uint16_t>(src + 2 * i)));
        break;
      case DType::F16:
        dst[i] = Dst(f16_to_f32(load_unaligned<uint16_t>(src + 2 * i)));
        break;
      default:
        break;  // excluded by the caller
    }
  }
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

// A read-only mapping of one whole file.
struct SafeTensors::Mapping {
  std::string path;
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, size);
  }
};

void SafeTensors::add_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open safetensors file: {}", path, errno_str());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string err = errno_str();
    ::close(fd);
    fail("{}: cannot stat safetensors file: {}", path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail("{}: is a directory, not a safetensors file", path);
  }
  const uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    fail("{}: file is {} bytes, shorter than the 8-byte safetensors header length", path,
         file_size);
  }
  auto map = std::make_shared<Mapping>();
  map->path = path;
  map->size = size_t(file_size);
  map->addr = ::mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
  std::string mmap_err = map->addr == MAP_FAILED ? errno_str() : "";
  ::close(fd);
  if (map->addr == MAP_FAILED) {
    map->addr = nullptr;
    fail("{}: cannot mmap safetensors file: {}", path, mmap_err);
  }
  const auto* bytes = static_cast<const unsigned char*>(map->addr);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];  // little-endian u64
  if (header_len > kMaxHeaderBytes)
    fail("{}: header length {} is absurd (over {} bytes); not a safetensors file?", path,
         header_len, kMaxHeaderBytes);
  if (header_len > file_size - 8)
    fail("{}: header length {} exceeds the {} bytes after the length field (truncated file?)", path,
         header_len, file_size - 8);

  json header;
  try {
    header = parse_json(std::string_view(reinterpret_cast<const char*>(bytes) + 8, header_len));
  } catch (const JsonError& e) {
    fail("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", path);

  const unsigned char* data_block = bytes + 8 + header_len;
  const uint64_t data_size = file_size - 8 - header_len;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: __metadata__ is not a JSON object", path);
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          fail("{}: __metadata__ value for '{}' is not a string: {}", path, k, v.dump());
        metadata_.emplace(k, v.get<std::string>());
      }
      continue;
    }
    if (!entry.is_object()) fail("{}: tensor '{}': entry is not a JSON object", path, name);
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(key)) fail("{}: tensor '{}': entry has no '{}'", path, name, key);
    const json& jdtype = entry["dtype"];
    const json& jshape = entry["shape"];
    const json& joff = entry["data_offsets"];
    if (!jdtype.is_string()) fail("{}: tensor '{}': dtype is not a string", path, name);
    if (!jshape.is_array()) fail("{}: tensor '{}': shape is not a list", path, name);
    if (!joff.is_array() || joff.size() != 2)
      fail("{}: tensor '{}': data_offsets is not a list of two integers", path, name);

    SafeTensorInfo info;
    info.name = name;
    info.file = path;
    info.dtype = parse_dtype(jdtype.get<std::string>(), path, name);
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : jshape) {
      int64_t dim = non_negative_int(d, path, name, "shape dims");
      info.shape.push_back(dim);
      overflow |= __builtin_mul_overflow(numel, uint64_t(dim), &numel);
    }
    uint64_t want_bytes = 0;
    overflow |= __builtin_mul_overflow(numel, uint64_t(dtype_size(info.dtype)), &want_bytes);
    if (overflow) fail("{}: tensor '{}': shape {} is too large", path, name, shape_str(info.shape));
    const uint64_t begin = uint64_t(non_negative_int(joff[0], path, name, "data_offsets"));
    const uint64_t end = uint64_t(non_negative_int(joff[1], path, name, "data_offsets"));
    if (begin > end)
      fail("{}: tensor '{}': data_offsets [{}, {}] has begin > end", path, name, begin, end);
    if (end > data_size)
      fail("{}: tensor '{}': data_offsets [{}, {}] run past the {}-byte data block", path, name,
           begin, end, data_size);
    if (end - begin != want_bytes)
      fail("{}: tensor '{}': data_offsets cover {} bytes but {} {} needs {}", path, name,
           end - begin, dtype_name(info.dtype), shape_str(info.shape), want_bytes);
    info.data = data_block + begin;
    info.nbytes = size_t(want_bytes);

    auto [it, inserted] = tensors_.emplace(name, std::move(info));
    if (!inserted)
      fail("{}: tensor '{}' is also in {}; tensor names must be unique across shards", path, name,
           it->second.file);
  }
  maps_.push_back(std::move(map));
}

SafeTensors SafeTensors::open_file(const std::string& path) {
  SafeTensors st;
  st.source_ = path;
  st.add_file(path);
  return st;
}

SafeTensors SafeTensors::open_dir(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (exists(single)) {
    SafeTensors st = open_file(single);
    st.source_ = dir;
    return st;
  }
  if (!exists(index_path)) fail("no model.safetensors or model.safetensors.index.json in {}", dir);

  json index;
  {
    const std::string text = read_text_file(index_path, "index");
    try {
      index = parse_json(text);
    } catch (const JsonError& e) {
      fail("{}: not valid JSON: {}", index_path, e.what());
    }
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail("{}: expected a JSON object with a \"weight_map\" object", index_path);
  const json& weight_map = index["weight_map"];

  SafeTensors st;
  st.source_ = dir;
  std::set<std::string> loaded;
  for (const auto& [name, shard] : weight_map.items()) {
    if (!shard.is_string())
      fail("{}: weight_map entry for '{}' is not a shard file name", index_path, name);
    const std::string file = shard.get<std::string>();
    if (file.empty() || file.front() == '/')
      fail("{}: weight_map entry for '{}' has a bad shard name '{}'", index_path, name, file);
    if (loaded.insert(file).second) st.add_file(dir + "/" + file);
  }
  for (const auto& [name, shard] : weight_map.items()) {
    const std::string shard_path = dir + "/" + shard.get<std::string>();
    const SafeTensorInfo* info = st.find(name);
    if (!info || info->file != shard_path)
      fail("{}: tensor '{}' is listed for shard {} but that shard does not contain it", index_path,
           name, shard_path);
  }
  return st;
}

const SafeTensorInfo* SafeTensors::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const SafeTensorInfo& SafeTensors::at(const std::string& name) const {
  const SafeTensorInfo* info = find(name);
  if (!info) fail("{}: tensor '{}' not found", source_, name);
  return *info;
}

std::vector<std::string> SafeTensors::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

void SafeTensors::read_into(const std::string& name, const Tensor& dst) const {
  const SafeTensorInfo& info = at(name);
  if (dst.dtype != DType::F32 && dst.dtype != DType::F64)
    fail("{}: tensor '{}': can only read into an F32 or F64 buffer, not {}", info.file, name,
         dtype_name(dst.dtype));
  if (info.dtype != DType::F32 && info.dtype != DType::F64 && info.dtype != DType::BF16 &&
      info.dtype != DType::F16)
    fail("{}: tensor '{}' is {}, not a float dtype (F32, F64, BF16, F16)", info.file, name,
         dtype_name(info.dtype));
  std::vector<int64_t> want(dst.shape.begin(), dst.shape.begin() + dst.ndim);
  if (want != info.shape)
    fail("{}: tensor '{}' has shape {} but the model expects {}", info.file, name,
         shape_str(info.shape), shape_str(want));
  ZAYA_ASSERT(dst.data || dst.numel() == 0, "read_into '{}': destination has no data", name);
  const auto* src = static_cast<const unsigned char*>(info.data);
  if (dst.dtype == DType::F32)
    convert(static_cast<float*>(dst.data), src, info.dtype, dst.numel());
  else
    convert(static_cast<double*>(dst.data), src, info.dtype, dst.numel());
}

SafeTensors SafeTensors::with_tensors(std::vector<SafeTensorInfo> infos, std::string source) const {
  SafeTensors st;
  st.maps_ = maps_;
  st.metadata_ = metadata_;
  st.source_ = std::move(source);
  for (SafeTensorInfo& info : infos) {
    const std::string name = info.name;
    auto [it, inserted] = st.tensors_.emplace(name, std::move(info));
    if (!inserted) fail("{}: two tensors map to the name '{}'", st.source_, name);
  }
  return st;
}

namespace {

// The header text of a file of `tensors` (entries in the given order: ordered_json keeps insertion
// order; offsets of contiguous data), unpadded.
std::string safetensors_header(const std::string& path,
                               const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      fail("{}: cannot save: tensor name '{}' is duplicated or reserved", path, name);
    std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.ndim);
    header[name] = {{"dtype", dtype_name(t.dtype)},
                    {"shape", shape},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  return header.dump();
}

// Header bytes padded so the data block starts 8-byte aligned.
uint64_t padded(uint64_t header_bytes) {
  return header_bytes + (8 - header_bytes % 8) % 8;
}

}  // namespace

uint64_t safetensors_file_bytes(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                const std::map<std::string, std::string>& metadata,
                                uint64_t extra_header_bytes) {
  uint64_t data = 0;
  for (const auto& nt : tensors) data += nt.second.nbytes();
  return 8 + padded(safetensors_header("(size)", tensors, metadata).size() + extra_header_bytes) +
         data;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  for (const auto& [name, t] : tensors)
    if (!t.data && t.numel() > 0) fail("{}: cannot save: tensor '{}' has no data", path, name);
  std::string text = safetensors_header(path, tensors, metadata);
  text.append(padded(text.size()) - text.size(), ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  FileWriter f(path);
  f.write(len_bytes, 8);
  f.write(text.data(), text.size());
  for (const auto& [name, t] : tensors) f.write(t.data, t.nbytes());
  f.commit();
}

}  // namespace zaya
