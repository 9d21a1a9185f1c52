// GGUF (io/gguf.h): round trips of every metadata value type and every tensor dtype through the
// writer and the reader, the writer's bytes against a file built by hand from the format, the
// typed getters, and one clear zaya::Error — naming the file and the key or tensor — for each kind
// of malformed input (wrong magic, versions, truncation at every byte, unknown and unsupported
// types, tensors past the end, overlapping or misaligned, bad shapes, duplicate keys and tensors,
// bad alignment, counts that cannot fit).
#include "io/gguf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// A GGUF file built by hand, field by field (little-endian, as the format says).
struct Bytes {
  std::string s;
  template <class T>
  Bytes& put(T x) {
    char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    s.append(b, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t x) { return put(x); }
  Bytes& u32(uint32_t x) { return put(x); }
  Bytes& u64(uint64_t x) { return put(x); }
  Bytes& str(const std::string& x) {
    u64(x.size());
    s += x;
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    s += "GGUF";
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  Bytes& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
  Bytes& info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(uint32_t(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t align = 32) {
    s.append((align - s.size() % align) % align, '\0');
    return *this;
  }
  Bytes& data(size_t n, char c = 'x') {
    s.append(n, c);
    return *this;
  }
};

// Two F32 tensors "a" {4} and "b" {2, 3} after one key, as a valid file.
std::string valid_small_file() {
  Bytes b;
  b.header(2, 1).kv_str("general.architecture", "test");
  b.info("a", {4}, 0, 0).info("b", {2, 3}, 0, 32).pad();
  b.data(16, 'a').pad().data(24, 'b').pad();
  return b.s;
}

GgufFile parse(const std::string& bytes) {
  return GgufFile::from_bytes(bytes, "mem.gguf");
}

void expect_bad(const std::string& bytes, std::initializer_list<std::string> parts) {
  std::vector<std::string> all(parts);
  all.push_back("mem.gguf");
  const std::string msg = error_of([&] { parse(bytes); });
  for (const std::string& p : all) expect_contains(msg, p);
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// One metadata value of every type, arrays of scalars, strings and arrays included.
std::vector<std::pair<std::string, GgufValue>> every_value() {
  auto of = [](GgufType t, uint64_t u, int64_t i, double f) {
    GgufValue v;
    v.type = t;
    v.u = u;
    v.i = i;
    v.f = f;
    return v;
  };
  return {
      {"t.u8", of(GgufType::U8, 255, 0, 0)},
      {"t.i8", of(GgufType::I8, 0, -128, 0)},
      {"t.u16", of(GgufType::U16, 65535, 0, 0)},
      {"t.i16", of(GgufType::I16, 0, -32768, 0)},
      {"t.u32", GgufValue::u32(4000000000u)},
      {"t.i32", GgufValue::i32(-2000000000)},
      {"t.f32", GgufValue::f32(1e-5f)},
      {"t.bool", GgufValue::boolean(true)},
      {"t.string", GgufValue::str(std::string("zaya\0with nul", 13))},
      {"t.empty_string", GgufValue::str("")},
      {"t.u64", GgufValue::u64(UINT64_MAX)},
      {"t.i64", GgufValue::i64(INT64_MIN)},
      {"t.f64", GgufValue::f64(1.0 / 3.0)},
      {"t.array_i32", GgufValue::array(GgufType::I32, {GgufValue::i32(1), GgufValue::i32(-2)})},
      {"t.array_str",
       GgufValue::array(GgufType::String, {GgufValue::str("a"), GgufValue::str("")})},
      {"t.array_empty", GgufValue::array(GgufType::F32, {})},
      {"t.array_nested",
       GgufValue::array(GgufType::Array,
                        {GgufValue::array(GgufType::Bool, {GgufValue::boolean(false)}),
                         GgufValue::array(GgufType::U8, {})})},
  };
}

// A tensor of each dtype GGUF holds, with a shape whose rows are whole blocks.
struct Spec {
  std::string name;
  DType dtype;
  std::vector<int64_t> ne;
  uint32_t ggml;
};
const std::vector<Spec> kEveryDtype = {
    {"f32", DType::F32, {3, 5}, 0},          {"f16", DType::F16, {7}, 1},
    {"q4_0", DType::Q4_0, {64, 3}, 2},       {"q5_0", DType::Q5_0, {32, 2, 2}, 6},
    {"q8_0", DType::Q8_0, {96, 1}, 8},       {"q4_k", DType::Q4_K, {256, 2}, 12},
    {"q5_k", DType::Q5_K, {512}, 13},        {"q6_k", DType::Q6_K, {256, 1, 1, 3}, 14},
    {"iq4_xs", DType::IQ4_XS, {256, 2}, 23}, {"bf16", DType::BF16, {2, 128, 5}, 30},
};

}  // namespace

TEST(Gguf, RoundTripEveryValueTypeAndDtype) {
  for (uint32_t alignment : {32u, 64u, 1u}) {
    SCOPED_TRACE(alignment);
    ScratchDir dir;
    const std::string path = dir / "m.gguf";
    GgufWriter w(path, alignment);
    const auto values = every_value();
    for (const auto& [k, v] : values) w.set(k, v);
    std::vector<std::string> data;
    for (size_t k = 0; k < kEveryDtype.size(); ++k) {
      const Spec& s = kEveryDtype[k];
      w.add_tensor(s.name, s.dtype, s.ne);
      int64_t n = 1;
      for (int64_t d : s.ne) n *= d;
      data.push_back(random_bytes(dtype_bytes(s.dtype, n), uint32_t(k)));
    }
    for (size_t k = 0; k < kEveryDtype.size(); ++k)
      w.write_tensor(kEveryDtype[k].name, data[k].data(), data[k].size());
    EXPECT_FALSE(fs::exists(path)) << "nothing is at the path before finish()";
    w.finish();

    const GgufFile g = GgufFile::open(path);
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(g.alignment(), alignment);
    EXPECT_EQ(g.file_bytes(), fs::file_size(path));
    EXPECT_EQ(g.file_bytes() % alignment, 0u);
    // The writer adds general.alignment first when it is not the default, then the keys in order.
    size_t first = alignment == 32 ? 0 : 1;
    ASSERT_EQ(g.metadata().size(), values.size() + first);
    if (first) {
      EXPECT_EQ(g.get_int("general.alignment"), int64_t(alignment));
    }
    for (size_t k = 0; k < values.size(); ++k) {
      EXPECT_EQ(g.metadata()[k + first].first, values[k].first);
      EXPECT_TRUE(g.metadata()[k + first].second == values[k].second) << values[k].first;
      EXPECT_TRUE(*g.find(values[k].first) == values[k].second);
    }
    ASSERT_EQ(g.tensors().size(), kEveryDtype.size());
    for (size_t k = 0; k < kEveryDtype.size(); ++k) {
      const Spec& s = kEveryDtype[k];
      const GgufTensor* t = g.tensor(s.name);
      ASSERT_NE(t, nullptr) << s.name;
      EXPECT_EQ(&g.tensors()[k], t);
      EXPECT_EQ(t->ne, s.ne);
      EXPECT_EQ(t->ggml_type, s.ggml);
      EXPECT_EQ(ggml_type_of(s.dtype), s.ggml);
      EXPECT_EQ(t->dtype, s.dtype);
      EXPECT_EQ(t->offset % alignment, 0u);
      EXPECT_EQ((g.data_offset() + t->offset) % alignment, 0u);
      ASSERT_EQ(t->nbytes, data[k].size());
      EXPECT_EQ(std::memcmp(t->data, data[k].data(), t->nbytes), 0) << s.name;
    }
    EXPECT_EQ(g.tensor("absent"), nullptr);
    EXPECT_EQ(g.find("absent"), nullptr);
  }
}

TEST(Gguf, WriterBytesEqualTheFormatBuiltByHand) {
  ScratchDir dir;
  const std::string path = dir / "hand.gguf";
  GgufWriter w(path);
  w.set("general.architecture", GgufValue::str("test"));
  w.add_tensor("a", DType::F32, {4});
  w.add_tensor("b", DType::F32, {2, 3});
  const std::string a(16, 'a'), b(24, 'b');
  w.write_tensor("a", a.data(), a.size());
  w.write_tensor("b", b.data(), 10);  // in pieces
  w.write_tensor("b", b.data() + 10, 14);
  w.finish();
  EXPECT_EQ(read_file(path), valid_small_file());
}

TEST(Gguf, ReadsVersionTwoAndAnEmptyFile) {
  std::string v2 = valid_small_file();
  v2[4] = 2;
  EXPECT_EQ(parse(v2).version(), 2u);
  EXPECT_EQ(parse(v2).tensors().size(), 2u);
  Bytes empty;
  empty.header(0, 0);
  const GgufFile g = parse(empty.s);
  EXPECT_TRUE(g.metadata().empty());
  EXPECT_TRUE(g.tensors().empty());
}

TEST(Gguf, TypedGetters) {
  Bytes b;
  b.header(0, 6)
      .kv_u32("u32", 7)
      .str("i8")
      .u32(1)
      .u8(uint8_t(-5))
      .str("u64big")
      .u32(10)
      .u64(UINT64_MAX)
      .str("f32")
      .u32(6)
      .put(0.5f)
      .kv_str("s", "text")
      .str("bool")
      .u32(7)
      .u8(1);
  const GgufFile g = parse(b.s);
  EXPECT_EQ(g.get_int("u32"), 7);
  EXPECT_EQ(g.get_int("i8"), -5);
  EXPECT_EQ(g.get_float("u32"), 7.0);
  EXPECT_EQ(g.get_float("f32"), 0.5);
  EXPECT_EQ(g.get_str("s"), "text");
  EXPECT_EQ(g.find("bool")->u, 1u);
  expect_error([&] { g.get_int("u64big"); }, {"mem.gguf", "'u64big'", "out of range"});
  expect_error([&] { g.get_int("f32"); }, {"mem.gguf", "'f32'", "f32, not an integer"});
  expect_error([&] { g.get_int("missing"); }, {"mem.gguf", "'missing'", "missing"});
  expect_error([&] { g.get_str("u32"); }, {"mem.gguf", "'u32'", "not a string"});
  expect_error([&] { g.get_float("s"); }, {"mem.gguf", "'s'", "not a number"});
  expect_error([&] { g.get_float("nope"); }, {"'nope'", "missing"});
}

TEST(Gguf, WrongMagicAndVersions) {
  std::string s = valid_small_file();
  s[0] = 'P';
  expect_bad(s, {"not a GGUF file", "'PGUF'"});
  expect_bad("GG", {"too short"});
  expect_bad("", {"too short"});
  for (uint32_t version : {1u, 4u, 0u, 0x03000000u}) {
    SCOPED_TRACE(version);
    std::string v = valid_small_file();
    std::memcpy(&v[4], &version, 4);
    if (version == 0x03000000u)
      expect_bad(v, {"big-endian"});
    else if (version == 0)
      expect_bad(v, {"bad GGUF version 0"});
    else
      expect_bad(v, {"GGUF version " + std::to_string(version) + " is not supported"});
  }
}

TEST(Gguf, TruncatedAtEveryByteIsAnError) {
  const std::string s = valid_small_file();
  for (size_t n = 0; n < s.size(); ++n) {
    // The last tensor's padding is not needed: only a prefix that cuts into a tensor's bytes, the
    // infos or the header is malformed.
    if (n >= s.size() - 8) break;
    const std::string msg = error_of([&] { parse(s.substr(0, n)); });
    EXPECT_NE(msg.find("mem.gguf"), std::string::npos) << n << ": " << msg;
    const bool says = msg.find("truncated") != std::string::npos ||
                      msg.find("too short") != std::string::npos ||
                      msg.find("cannot fit") != std::string::npos;
    EXPECT_TRUE(says) << "prefix " << n << ": " << msg;
  }
  // Cut in the middle of a metadata string and of a tensor's bytes.
  expect_bad(s.substr(0, 66), {"truncated", "key", "'general.architecture'"});
  expect_bad(s.substr(0, 200), {"tensor 'b'", "runs past the end"});
}

TEST(Gguf, UnknownAndUnsupportedTensorTypes) {
  Bytes b;
  b.header(1, 0).info("blk.0.ffn_down_exps.weight", {256}, 10, 0).pad().data(84);
  expect_bad(b.s, {"'blk.0.ffn_down_exps.weight'", "ggml type Q2_K (10) is not supported"});
  Bytes q41;
  q41.header(1, 0).info("w", {32}, 3, 0).pad().data(20);
  expect_bad(q41.s, {"'w'", "ggml type Q4_1 (3) is not supported"});
  Bytes u;
  u.header(1, 0).info("w", {4}, 99, 0).pad().data(16);
  expect_bad(u.s, {"'w'", "unknown ggml type 99"});
  Bytes removed;  // Q4_2, removed from GGML
  removed.header(1, 0).info("w", {32}, 4, 0).pad().data(32);
  expect_bad(removed.s, {"'w'", "unknown ggml type 4"});
}

TEST(Gguf, BadShapes) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type = 0) {
    Bytes b;
    b.header(1, 0).info("t", ne, type, 0).pad().data(4096);
    return b.s;
  };
  expect_bad(one({1, 1, 1, 1, 1}), {"tensor 't'", "5 dimensions"});
  expect_bad(one({}), {"tensor 't'", "0 dimensions"});
  expect_bad(one({4, 0}), {"tensor 't'", "dimension 1 of size 0"});
  expect_bad(one({uint64_t(1) << 63}), {"tensor 't'", "must be positive"});
  expect_bad(one({uint64_t(1) << 40, uint64_t(1) << 40}), {"tensor 't'", "overflows"});
  expect_bad(one({48}, 8), {"tensor 't'", "Q8_0", "not a multiple of its block of 32"});
  expect_bad(one({uint64_t(1) << 62}, 8), {"tensor 't'", "runs past the end"});
}

TEST(Gguf, TensorsPastTheEndMisalignedOrOverlapping) {
  Bytes past;
  past.header(1, 0).info("w", {4}, 0, 64).pad().data(32);
  expect_bad(past.s, {"tensor 'w'", "runs past the end"});
  Bytes huge;
  huge.header(1, 0).info("w", {4}, 0, UINT64_MAX - 31).pad().data(32);
  expect_bad(huge.s, {"tensor 'w'", "runs past the end"});
  Bytes odd;
  odd.header(1, 0).info("w", {4}, 0, 8).pad().data(64);
  expect_bad(odd.s, {"tensor 'w'", "offset 8", "not a multiple of the alignment 32"});
  Bytes overlap;
  overlap.header(2, 0).info("a", {16}, 0, 0).info("b", {4}, 0, 32).pad().data(64);
  expect_bad(overlap.s, {"'a'", "'b'", "overlap"});
  Bytes same;
  same.header(2, 0).info("a", {4}, 0, 0).info("b", {4}, 0, 0).pad().data(64);
  expect_bad(same.s, {"overlap"});
  Bytes no_data;  // the infos end where the data section would start
  no_data.header(1, 0).info("w", {4}, 0, 0);
  expect_bad(no_data.s, {"truncated", "data section"});
}

TEST(Gguf, DuplicateKeysAndTensors) {
  Bytes k;
  k.header(0, 2).kv_u32("zaya.block_count", 80).kv_u32("zaya.block_count", 40);
  expect_bad(k.s, {"duplicate metadata key 'zaya.block_count'"});
  Bytes t;
  t.header(2, 0).info("token_embd.weight", {4}, 0, 0).info("token_embd.weight", {4}, 0, 32);
  t.pad().data(64);
  expect_bad(t.s, {"duplicate tensor name 'token_embd.weight'"});
  Bytes empty_key;
  empty_key.header(0, 1).kv_u32("", 1);
  expect_bad(empty_key.s, {"metadata key 0 is empty"});
  Bytes long_name;
  long_name.header(1, 0).info(std::string(64, 'n'), {4}, 0, 0).pad().data(32);
  expect_bad(long_name.s, {"tensor 0", "64 bytes"});
}

TEST(Gguf, Alignment) {
  Bytes three;
  three.header(0, 1).kv_u32("general.alignment", 3);
  expect_bad(three.s, {"'general.alignment'", "3, not a power of two"});
  Bytes zero;
  zero.header(0, 1).kv_u32("general.alignment", 0);
  expect_bad(zero.s, {"'general.alignment'", "not a power of two"});
  Bytes wrong_type;
  wrong_type.header(0, 1).kv_str("general.alignment", "32");
  expect_bad(wrong_type.s, {"'general.alignment'", "string, not u32"});
  // A declared alignment of 64 moves the data section and the allowed offsets.
  Bytes a64;
  a64.header(1, 1).kv_u32("general.alignment", 64).info("w", {4}, 0, 0).pad(64).data(64, 'w');
  const GgufFile g = parse(a64.s);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(g.data_offset() % 64, 0u);
  EXPECT_EQ(static_cast<const char*>(g.tensor("w")->data)[0], 'w');
}

TEST(Gguf, BadMetadataValues) {
  Bytes type;
  type.header(0, 1).str("k").u32(13).u32(0);
  expect_bad(type.s, {"'k'", "unknown value type 13"});
  Bytes elem;
  elem.header(0, 1).str("k").u32(9).u32(77).u64(0);
  expect_bad(elem.s, {"'k'", "unknown array element type 77"});
  Bytes count;
  count.header(0, 1).str("k").u32(9).u32(4).u64(uint64_t(1) << 60);
  expect_bad(count.s, {"'k'", "cannot fit"});
  Bytes str;
  str.header(0, 1).str("k").u32(8).u64(UINT64_MAX).data(32);
  expect_bad(str.s, {"truncated", "'k'"});
  Bytes key;
  key.header(0, 1).u64(uint64_t(1) << 62).data(32);
  expect_bad(key.s, {"truncated", "metadata key '0'"});
  Bytes boolean;
  boolean.header(0, 1).str("k").u32(7).u8(2);
  expect_bad(boolean.s, {"'k'", "bool value 2"});
  Bytes deep;
  deep.header(0, 1).str("k").u32(9);
  for (int d = 0; d < 9; ++d) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  expect_bad(deep.s, {"'k'", "nested deeper than 8"});
  Bytes n_kv;
  n_kv.header(0, uint64_t(1) << 40);
  expect_bad(n_kv.s, {"metadata count", "cannot fit"});
  Bytes n_t;
  n_t.header(uint64_t(1) << 40, 0);
  expect_bad(n_t.s, {"tensor count", "cannot fit"});
}

TEST(Gguf, WriterRefusesMisuseAndLeavesNothingBehind) {
  ScratchDir dir;
  const std::string path = dir / "w.gguf";
  expect_error([&] { GgufWriter(path, 48); }, {path, "48 is not a power of two"});
  {
    GgufWriter w(path);
    w.set("k", GgufValue::u32(1));
    expect_error([&] { w.set("k", GgufValue::u32(2)); }, {path, "'k' is set twice"});
    expect_error([&] { w.set("general.alignment", GgufValue::u32(64)); }, {"general.alignment"});
    w.add_tensor("a", DType::F32, {2});
    expect_error([&] { w.add_tensor("a", DType::F32, {2}); }, {path, "'a' is added twice"});
    expect_error([&] { w.add_tensor("b", DType::F64, {2}); }, {"F64"});
    expect_error([&] { w.add_tensor("c", DType::Q8_0, {16}); }, {"'c'", "multiple of 32"});
    expect_error([&] { w.add_tensor("d", DType::F32, {2, 0}); }, {"'d'", "{2, 0}"});
    w.add_tensor("e", DType::F16, {4});
    const float a[2] = {1, 2};
    expect_error([&] { w.write_tensor("e", a, 8); }, {"'e'", "'a' is the next"});
    expect_error([&] { w.write_tensor("a", a, 12); }, {"'a'", "8 bytes", "12 more"});
    w.write_tensor("a", a, 8);
    expect_error([&] { w.finish(); }, {"'e'", "0 of its 8 bytes", "1 of 2 tensors"});
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  {
    GgufWriter w(path);
    w.set("bad", GgufValue::array(GgufType::U32, {GgufValue::str("x")}));
    expect_error([&] { w.finish(); }, {"'bad'", "an array of u32 holds a string value"});
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(Gguf, TypeNames) {
  EXPECT_EQ(ggml_type_name(10), "Q2_K");
  EXPECT_EQ(ggml_type_name(30), "BF16");
  EXPECT_EQ(ggml_type_name(31), "unknown");
  EXPECT_EQ(ggml_type_name(1000), "unknown");
  EXPECT_EQ(gguf_type_name(GgufType::String), "string");
  EXPECT_EQ(gguf_shape_str({2, 128, 1280}), "{2, 128, 1280}");
}
