// GGUF reading and writing (io/gguf.h). The reader walks the file once with a bounds-checked
// cursor: every count is checked against the bytes left before anything is sized by it, every
// tensor's extent against the file, and the whole set of extents for overlap. The checks follow
// GGML's own reader (docs/gguf.md, "What the reader checks") and are as strict as it is wherever
// it is strict, so a file zaya accepts is one GGML accepts too, save for the tensor types zaya has
// no DType for.
#include "io/gguf.h"

#include <algorithm>
#include <cstring>

#include "core/assert.h"
#include "io/file.h"

namespace zaya {

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMinVersion = 2, kMaxVersion = 3;
// GGML keeps tensor names in a 64-byte buffer with its NUL.
constexpr size_t kMaxTensorName = 63;
constexpr int kMaxDims = 4;
// Arrays inside arrays: the format allows nesting, no writer uses more than one level.
constexpr int kMaxArrayDepth = 8;
// All metadata values together (array elements count one each). A ZAYA1 file's largest arrays are
// the tokenizer's (262,144 tokens, scores and types, and the merges): a few million at most. The
// bound keeps a hostile count from costing more memory than a few GiB.
constexpr uint64_t kMaxMetadataValues = uint64_t(1) << 24;

// GGML's type ids and names (ggml.h); empty names are ids GGML never defined or has removed.
constexpr std::string_view kGgmlNames[] = {
    "F32",     "F16",   "Q4_0",   "Q4_1",  "",      "",       "Q5_0", "Q5_1",    "Q8_0",
    "Q8_1",    "Q2_K",  "Q3_K",   "Q4_K",  "Q5_K",  "Q6_K",   "Q8_K", "IQ2_XXS", "IQ2_XS",
    "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",   "I16",     "I32",
    "I64",     "F64",   "IQ1_M",  "BF16",  "",      "",       "",     "TQ1_0",   "TQ2_0",
    "",        "",      "",       "MXFP4", "NVFP4", "Q1_0",   "Q2_0"};

// The DType of a GGML type id zaya reads, or false.
bool dtype_of_ggml(uint32_t id, DType* out) {
  static constexpr std::pair<uint32_t, DType> kMap[] = {
      {0, DType::F32},     {1, DType::F16},   {2, DType::Q4_0},  {6, DType::Q5_0},
      {8, DType::Q8_0},    {12, DType::Q4_K}, {13, DType::Q5_K}, {14, DType::Q6_K},
      {23, DType::IQ4_XS}, {30, DType::BF16}};
  for (const auto& [g, t] : kMap)
    if (g == id) {
      *out = t;
      return true;
    }
  return false;
}

// Bytes a value of scalar type t takes in the file (strings: their length field only).
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::String:
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    case GgufType::Array:
      return 12;  // element type + count
  }
  return 1;
}

bool valid_type(uint32_t t) {
  return t <= uint32_t(GgufType::F64);
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// A bounds-checked little-endian reader over the file. `what` and `name` say what is being read
// ("the value of key", "general.name"); the message is only formatted on failure.
class Cursor {
 public:
  Cursor(const std::string& path, const unsigned char* p, uint64_t size)
      : path_(path), p_(p), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  // Fails unless n more bytes exist.
  void need(uint64_t n, std::string_view what, std::string_view name) const {
    if (n > left())
      fail("{}: truncated: {}{}{}{} needs {} bytes at offset {} but the file ends at {}", path_,
           what, name.empty() ? "" : " '", name, name.empty() ? "" : "'", n, pos_, size_);
  }
  template <class T>
  T read(std::string_view what, std::string_view name = {}) {
    need(sizeof(T), what, name);
    T x;
    std::memcpy(&x, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return x;
  }
  std::string str(std::string_view what, std::string_view name = {}) {
    const uint64_t n = read<uint64_t>(what, name);
    need(n, what, name);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const std::string& path_;
  const unsigned char* p_;
  uint64_t size_, pos_ = 0;
};

struct Parser {
  const std::string& path;
  Cursor& in;
  uint64_t values = 0;  // metadata values read so far

  void count_value(const std::string& key) {
    if (++values > kMaxMetadataValues)
      fail("{}: key '{}': the metadata hold more than {} values (arrays count each element)", path,
           key, kMaxMetadataValues);
  }

  GgufValue value(GgufType t, const std::string& key, int depth) {
    count_value(key);
    constexpr std::string_view what = "the value of key";
    GgufValue v;
    v.type = t;
    switch (t) {
      case GgufType::U8:
        v.u = in.read<uint8_t>(what, key);
        break;
      case GgufType::I8:
        v.i = in.read<int8_t>(what, key);
        break;
      case GgufType::U16:
        v.u = in.read<uint16_t>(what, key);
        break;
      case GgufType::I16:
        v.i = in.read<int16_t>(what, key);
        break;
      case GgufType::U32:
        v.u = in.read<uint32_t>(what, key);
        break;
      case GgufType::I32:
        v.i = in.read<int32_t>(what, key);
        break;
      case GgufType::U64:
        v.u = in.read<uint64_t>(what, key);
        break;
      case GgufType::I64:
        v.i = in.read<int64_t>(what, key);
        break;
      case GgufType::F32:
        v.f = in.read<float>(what, key);
        break;
      case GgufType::F64:
        v.f = in.read<double>(what, key);
        break;
      case GgufType::Bool: {
        const uint8_t b = in.read<uint8_t>(what, key);
        if (b > 1) fail("{}: key '{}': bool value {} is neither 0 nor 1", path, key, b);
        v.u = b;
        break;
      }
      case GgufType::String:
        v.s = in.str(what, key);
        break;
      case GgufType::Array: {
        if (depth >= kMaxArrayDepth)
          fail("{}: key '{}': arrays nested deeper than {} levels", path, key, kMaxArrayDepth);
        const uint32_t elem = in.read<uint32_t>("the array element type of key", key);
        if (!valid_type(elem))
          fail("{}: key '{}': unknown array element type {} (0..12 are defined)", path, key, elem);
        v.elem = GgufType(elem);
        const uint64_t n = in.read<uint64_t>("the array length of key", key);
        if (n > in.left() / min_value_bytes(v.elem))
          fail("{}: key '{}': an array of {} {} values cannot fit in the {} bytes left in the file",
               path, key, n, gguf_type_name(v.elem), in.left());
        if (n > kMaxMetadataValues - values)
          fail("{}: key '{}': an array of {} values is more than the {} metadata values allowed",
               path, key, n, kMaxMetadataValues);
        v.items.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.items.push_back(value(v.elem, key, depth + 1));
        break;
      }
    }
    return v;
  }
};

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  return uint32_t(t) < std::size(kNames) ? kNames[uint32_t(t)] : "unknown";
}

std::string_view ggml_type_name(uint32_t id) {
  if (id < std::size(kGgmlNames) && !kGgmlNames[id].empty()) return kGgmlNames[id];
  return "unknown";
}

uint32_t ggml_type_of(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q5_0:
      return 6;
    case DType::Q8_0:
      return 8;
    case DType::Q4_K:
      return 12;
    case DType::Q5_K:
      return 13;
    case DType::Q6_K:
      return 14;
    case DType::IQ4_XS:
      return 23;
    case DType::BF16:
      return 30;
    default:
      fail("GGUF has no tensor type for dtype {} (it stores F32, F16, BF16 and the block types)",
           dtype_name(t));
  }
}

std::string gguf_shape_str(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

// ---- values ----

GgufValue GgufValue::str(std::string v) {
  GgufValue x;
  x.type = GgufType::String;
  x.s = std::move(v);
  return x;
}
GgufValue GgufValue::u32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::U32;
  x.u = v;
  return x;
}
GgufValue GgufValue::u64(uint64_t v) {
  GgufValue x;
  x.type = GgufType::U64;
  x.u = v;
  return x;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue x;
  x.type = GgufType::I32;
  x.i = v;
  return x;
}
GgufValue GgufValue::i64(int64_t v) {
  GgufValue x;
  x.type = GgufType::I64;
  x.i = v;
  return x;
}
GgufValue GgufValue::f32(float v) {
  GgufValue x;
  x.type = GgufType::F32;
  x.f = v;
  return x;
}
GgufValue GgufValue::f64(double v) {
  GgufValue x;
  x.type = GgufType::F64;
  x.f = v;
  return x;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue x;
  x.type = GgufType::Bool;
  x.u = v ? 1 : 0;
  return x;
}
GgufValue GgufValue::array(GgufType elem, std::vector<GgufValue> items) {
  GgufValue x;
  x.type = GgufType::Array;
  x.elem = elem;
  x.items = std::move(items);
  return x;
}

// ---- reading ----

GgufFile GgufFile::open(const std::string& path) {
  auto map = std::make_shared<MappedFile>(MappedFile::open(path, "GGUF file"));
  GgufFile g;
  g.path_ = path;
  g.base_ = map->data();
  g.size_ = map->size();
  g.owner_ = std::move(map);
  g.parse();
  return g;
}

GgufFile GgufFile::from_bytes(std::string bytes, std::string name) {
  auto owned = std::make_shared<std::string>(std::move(bytes));
  GgufFile g;
  g.path_ = std::move(name);
  g.base_ = reinterpret_cast<const unsigned char*>(owned->data());
  g.size_ = owned->size();
  g.owner_ = std::move(owned);
  g.parse();
  return g;
}

void GgufFile::parse() {
  Cursor in(path_, base_, size_);
  const std::string& path = path_;

  // Header.
  if (size_ < 4)
    fail("{}: not a GGUF file: {} bytes, too short for the magic \"GGUF\"", path, size_);
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    std::string shown;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = base_[k];
      shown += (c >= 0x20 && c < 0x7f) ? char(c) : '?';
    }
    fail("{}: not a GGUF file: the magic is '{}' (bytes {:02x} {:02x} {:02x} {:02x}), not 'GGUF'",
         path, shown, base_[0], base_[1], base_[2], base_[3]);
  }
  in.read<uint32_t>("the magic");
  version_ = in.read<uint32_t>("the version");
  if (version_ == 0) fail("{}: bad GGUF version 0", path);
  if ((version_ & 0xFFFFu) == 0)
    fail(
        "{}: GGUF version field reads {:#010x}: a big-endian file (zaya reads little-endian "
        "GGUF only)",
        path, version_);
  if (version_ < kMinVersion || version_ > kMaxVersion)
    fail("{}: GGUF version {} is not supported (zaya reads versions {} and {})", path, version_,
         kMinVersion, kMaxVersion);
  const uint64_t n_tensors = in.read<uint64_t>("the tensor count");
  const uint64_t n_kv = in.read<uint64_t>("the metadata count");
  // A key is at least its length, one byte, its type and a one-byte value; a tensor info at least
  // its name's length, one byte, n_dims, one dim, its type and its offset.
  constexpr uint64_t kMinKv = 8 + 1 + 4 + 1, kMinTensorInfo = 8 + 1 + 4 + 8 + 4 + 8;
  if (n_kv > in.left() / kMinKv)
    fail("{}: the metadata count {} cannot fit in the file ({} bytes; truncated?)", path, n_kv,
         size_);

  // Metadata.
  Parser parser{path, in};
  metadata_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = in.str("metadata key", std::to_string(k));
    if (key.empty()) fail("{}: metadata key {} is empty", path, k);
    if (key_index_.count(key)) fail("{}: duplicate metadata key '{}'", path, key);
    const uint32_t type = in.read<uint32_t>("the type of key", key);
    if (!valid_type(type))
      fail("{}: key '{}': unknown value type {} (0..12 are defined)", path, key, type);
    GgufValue v = parser.value(GgufType(type), key, 0);
    key_index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32)
      fail("{}: key 'general.alignment' is {}, not u32", path, gguf_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail("{}: key 'general.alignment' is {}, not a power of two", path, a->u);
    alignment_ = uint32_t(a->u);
  } else {
    alignment_ = kDefaultAlignment;
  }

  // Tensor infos.
  if (n_tensors > in.left() / kMinTensorInfo)
    fail("{}: the tensor count {} cannot fit in the file ({} bytes; truncated?)", path, n_tensors,
         size_);
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = in.str("the name of tensor", std::to_string(k));
    if (t.name.empty()) fail("{}: tensor {} has an empty name", path, k);
    if (t.name.size() > kMaxTensorName)
      fail("{}: tensor {} has a name of {} bytes (at most {})", path, k, t.name.size(),
           kMaxTensorName);
    if (tensor_index_.count(t.name)) fail("{}: duplicate tensor name '{}'", path, t.name);
    const std::string where = "tensor '" + t.name + "'";  // for messages
    const uint32_t n_dims = in.read<uint32_t>("the dimension count of tensor", t.name);
    if (n_dims == 0 || n_dims > uint32_t(kMaxDims))
      fail("{}: {} has {} dimensions (1 to {} allowed)", path, where, n_dims, kMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = in.read<uint64_t>("the shape of tensor", t.name);
      if (n == 0 || n > uint64_t(INT64_MAX))
        fail("{}: {} has dimension {} of size {} (must be positive)", path, where, d, n);
      if (__builtin_mul_overflow(numel, n, &numel) || numel > uint64_t(INT64_MAX))
        fail("{}: {} has too many elements (the shape overflows 64 bits)", path, where);
      t.ne.push_back(int64_t(n));
    }
    t.ggml_type = in.read<uint32_t>("the type of tensor", t.name);
    if (!dtype_of_ggml(t.ggml_type, &t.dtype)) {
      if (ggml_type_name(t.ggml_type) == "unknown")
        fail("{}: {} has unknown ggml type {}", path, where, t.ggml_type);
      fail(
          "{}: {}: ggml type {} ({}) is not supported (zaya reads F32, F16, BF16, Q8_0, Q4_0, "
          "Q5_0, Q4_K, Q5_K, Q6_K, IQ4_XS)",
          path, where, ggml_type_name(t.ggml_type), t.ggml_type);
    }
    const int64_t block = dtype_block_elems(t.dtype);
    if (t.ne[0] % block != 0)
      fail("{}: {} of type {} has rows of {} values, not a multiple of its block of {}", path,
           where, dtype_name(t.dtype), t.ne[0], block);
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel / uint64_t(block), uint64_t(dtype_block_bytes(t.dtype)),
                               &nbytes))
      fail("{}: {} is too large (its byte size overflows 64 bits)", path, where);
    t.nbytes = size_t(nbytes);
    t.offset = in.read<uint64_t>("the offset of tensor", t.name);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // Data section: it starts at the next multiple of the alignment; every tensor lies inside the
  // file at an aligned offset, and no two overlap.
  data_offset_ = align_up(in.pos(), alignment_);
  if (!tensors_.empty() && data_offset_ > size_)
    fail("{}: truncated: the data section starts at offset {} but the file has {} bytes", path,
         data_offset_, size_);
  const uint64_t data_bytes = tensors_.empty() ? 0 : size_ - data_offset_;
  for (GgufTensor& t : tensors_) {
    if (t.offset % alignment_ != 0)
      fail("{}: tensor '{}' has offset {}, not a multiple of the alignment {}", path, t.name,
           t.offset, alignment_);
    if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset)
      fail(
          "{}: tensor '{}' ({} {}, {} bytes at data offset {}) runs past the end of the file "
          "(the data section has {} bytes; truncated?)",
          path, t.name, ggml_type_name(t.ggml_type), gguf_shape_str(t.ne), t.nbytes, t.offset,
          data_bytes);
    t.data = base_ + data_offset_ + t.offset;
  }
  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensor& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GgufTensor &a = *by_offset[k - 1], &b = *by_offset[k];
    if (a.offset + a.nbytes > b.offset)
      fail("{}: tensors '{}' (bytes {}..{}) and '{}' (from {}) overlap", path, a.name, a.offset,
           a.offset + a.nbytes, b.name, b.offset);
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("{}: metadata key '{}' is missing", path_, key);
  switch (v->type) {
    case GgufType::U8:
    case GgufType::U16:
    case GgufType::U32:
    case GgufType::U64:
      if (v->u > uint64_t(INT64_MAX)) fail("{}: key '{}': {} is out of range", path_, key, v->u);
      return int64_t(v->u);
    case GgufType::I8:
    case GgufType::I16:
    case GgufType::I32:
    case GgufType::I64:
      return v->i;
    default:
      fail("{}: key '{}' is {}, not an integer", path_, key, gguf_type_name(v->type));
  }
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("{}: metadata key '{}' is missing", path_, key);
  if (v->type == GgufType::F32 || v->type == GgufType::F64) return v->f;
  if (v->type == GgufType::Bool || v->type == GgufType::String || v->type == GgufType::Array)
    fail("{}: key '{}' is {}, not a number", path_, key, gguf_type_name(v->type));
  return double(get_int(key));
}

const std::string& GgufFile::get_str(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("{}: metadata key '{}' is missing", path_, key);
  if (v->type != GgufType::String)
    fail("{}: key '{}' is {}, not a string", path_, key, gguf_type_name(v->type));
  return v->s;
}

// ---- writing ----

namespace {

template <class T>
void put(std::string& out, T x) {
  char b[sizeof(T)];
  std::memcpy(b, &x, sizeof(T));
  out.append(b, sizeof(T));
}

void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

// Appends v (of type v.type) to out; the items of an array must all have its element type.
void put_value(std::string& out, const GgufValue& v, const std::string& path,
               const std::string& key) {
  switch (v.type) {
    case GgufType::U8:
      return put<uint8_t>(out, uint8_t(v.u));
    case GgufType::I8:
      return put<int8_t>(out, int8_t(v.i));
    case GgufType::U16:
      return put<uint16_t>(out, uint16_t(v.u));
    case GgufType::I16:
      return put<int16_t>(out, int16_t(v.i));
    case GgufType::U32:
      return put<uint32_t>(out, uint32_t(v.u));
    case GgufType::I32:
      return put<int32_t>(out, int32_t(v.i));
    case GgufType::U64:
      return put<uint64_t>(out, v.u);
    case GgufType::I64:
      return put<int64_t>(out, v.i);
    case GgufType::F32:
      return put<float>(out, float(v.f));
    case GgufType::F64:
      return put<double>(out, v.f);
    case GgufType::Bool:
      return put<uint8_t>(out, v.u ? 1 : 0);
    case GgufType::String:
      return put_str(out, v.s);
    case GgufType::Array:
      put<uint32_t>(out, uint32_t(v.elem));
      put<uint64_t>(out, v.items.size());
      for (const GgufValue& item : v.items) {
        if (item.type != v.elem)
          fail("{}: key '{}': an array of {} holds a {} value", path, key, gguf_type_name(v.elem),
               gguf_type_name(item.type));
        put_value(out, item, path, key);
      }
      return;
  }
  fail("{}: key '{}': unknown value type {}", path, key, uint32_t(v.type));
}

}  // namespace

GgufWriter::GgufWriter(std::string path, uint32_t alignment)
    : path_(std::move(path)), alignment_(alignment) {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    fail("{}: GGUF alignment {} is not a power of two", path_, alignment_);
  if (alignment_ != kDefaultAlignment)
    metadata_.emplace_back("general.alignment", GgufValue::u32(alignment_));
}

GgufWriter::~GgufWriter() = default;

void GgufWriter::set(const std::string& key, GgufValue v) {
  ZAYA_ASSERT(!f_, "{}: GGUF key '{}' set after the tensors' data began", path_, key);
  if (key.empty()) fail("{}: a GGUF key cannot be empty", path_);
  if (key == "general.alignment")
    fail("{}: key 'general.alignment' is the writer's (its alignment argument)", path_);
  for (const auto& [k, old] : metadata_)
    if (k == key) fail("{}: GGUF key '{}' is set twice", path_, key);
  metadata_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, DType t, std::vector<int64_t> ne) {
  ZAYA_ASSERT(!f_, "{}: GGUF tensor '{}' added after the tensors' data began", path_, name);
  if (name.empty() || name.size() > kMaxTensorName)
    fail("{}: GGUF tensor name '{}' must have 1 to {} bytes", path_, name, kMaxTensorName);
  for (const Pending& p : tensors_)
    if (p.name == name) fail("{}: GGUF tensor '{}' is added twice", path_, name);
  if (ne.empty() || ne.size() > size_t(kMaxDims))
    fail("{}: GGUF tensor '{}' has {} dimensions (1 to {} allowed)", path_, name, ne.size(),
         kMaxDims);
  int64_t numel = 1;
  for (int64_t d : ne) {
    if (d <= 0) fail("{}: GGUF tensor '{}' has shape {}", path_, name, gguf_shape_str(ne));
    numel *= d;
  }
  ggml_type_of(t);  // refuses dtypes GGUF cannot hold
  if (ne[0] % dtype_block_elems(t) != 0)
    fail("{}: GGUF tensor '{}' of type {} has rows of {} values, not a multiple of {}", path_, name,
         dtype_name(t), ne[0], dtype_block_elems(t));
  Pending p{name, t, std::move(ne), uint64_t(dtype_bytes(t, numel)), 0};
  p.offset =
      tensors_.empty() ? 0 : align_up(tensors_.back().offset + tensors_.back().nbytes, alignment_);
  tensors_.push_back(std::move(p));
}

void GgufWriter::start() {
  if (f_) return;
  std::string h;
  h.append("GGUF", 4);
  put<uint32_t>(h, 3);
  put<uint64_t>(h, tensors_.size());
  put<uint64_t>(h, metadata_.size());
  for (const auto& [key, v] : metadata_) {
    put_str(h, key);
    put<uint32_t>(h, uint32_t(v.type));
    put_value(h, v, path_, key);
  }
  for (const Pending& p : tensors_) {
    put_str(h, p.name);
    put<uint32_t>(h, uint32_t(p.ne.size()));
    for (int64_t d : p.ne) put<uint64_t>(h, uint64_t(d));
    put<uint32_t>(h, ggml_type_of(p.dtype));
    put<uint64_t>(h, p.offset);
  }
  if (!tensors_.empty()) h.append(size_t(align_up(h.size(), alignment_) - h.size()), '\0');
  f_ = std::make_unique<FileWriter>(path_);
  f_->write(h.data(), h.size());
  // Written: the values (a vocabulary's arrays, embedded texts) need not stay in memory while the
  // tensors stream (no key can be set from here on).
  metadata_ = {};
}

void GgufWriter::write_tensor(const std::string& name, const void* bytes, size_t n) {
  ZAYA_ASSERT(!finished_, "{}: GGUF tensor '{}' written after finish()", path_, name);
  if (next_ >= tensors_.size())
    fail("{}: GGUF tensor '{}' written, but every declared tensor is complete", path_, name);
  Pending& p = tensors_[next_];
  if (name != p.name)
    fail("{}: GGUF tensor '{}' written while '{}' is the next in declaration order", path_, name,
         p.name);
  if (n > p.nbytes - written_)
    fail("{}: GGUF tensor '{}' ({} {}) has {} bytes; {} written, {} more given", path_, name,
         dtype_name(p.dtype), gguf_shape_str(p.ne), p.nbytes, written_, n);
  start();
  f_->write(bytes, n);
  written_ += n;
  position_ += n;
  if (written_ < p.nbytes) return;
  // Complete: pad to the alignment (the last tensor too, as GGML's writer does).
  static const char kZeros[256] = {};
  uint64_t pad = align_up(position_, alignment_) - position_;
  position_ += pad;
  while (pad > 0) {
    const uint64_t k = std::min<uint64_t>(pad, sizeof(kZeros));
    f_->write(kZeros, size_t(k));
    pad -= k;
  }
  written_ = 0;
  ++next_;
}

void GgufWriter::finish() {
  ZAYA_ASSERT(!finished_, "{}: GGUF finish() called twice", path_);
  if (next_ < tensors_.size())
    fail("{}: GGUF tensor '{}' has {} of its {} bytes written ({} of {} tensors complete)", path_,
         tensors_[next_].name, written_, tensors_[next_].nbytes, next_, tensors_.size());
  start();
  f_->commit();
  finished_ = true;
}

}  // namespace zaya
