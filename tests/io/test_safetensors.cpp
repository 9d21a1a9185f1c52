// safetensors: exact round trips for every dtype (with metadata), float conversion in read_into,
// index + shards, and one clear zaya::Error for each kind of malformed input.
#include "io/safetensors.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace zaya;
using namespace zaya::test;
namespace fs = std::filesystem;

namespace {

// Writes a raw safetensors file: declared header length, header text, then data bytes.
void write_raw(const std::string& path, uint64_t header_len, const std::string& header,
               const std::string& data = "") {
  std::ofstream f(path, std::ios::binary);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(header_len >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f << header << data;
}
void write_raw(const std::string& path, const std::string& header, const std::string& data = "") {
  write_raw(path, header.size(), header, data);
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST(SafeTensors, RoundTripEveryDtypeExactWithMetadata) {
  ScratchDir dir;
  std::vector<float> f32 = {1.5f, -2.25f, 3.0e-30f, 7.0f, 1e30f, -0.0f};
  std::vector<double> f64 = {1.0 / 3.0, -1e300, 5e-324};
  std::vector<uint16_t> bf16 = {
      f32_to_bf16(1.0f), f32_to_bf16(-3.14159f), f32_to_bf16(1e-20f), 0x7f80, 0xff80, 0x0001};
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7c00, 0x7bff};
  std::vector<int32_t> i32 = {-2147483647 - 1, 0, 2147483647, 42};
  std::vector<uint32_t> u32 = {0u, 4294967295u, 123456789u};
  std::vector<int64_t> i64 = {INT64_MIN, -1, INT64_MAX, 1ll << 40};
  float scalar = 0.125f;
  std::vector<float> four_d(2 * 3 * 1 * 2);
  for (size_t i = 0; i < four_d.size(); ++i) four_d[i] = float(i) - 5.5f;

  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.f32", Tensor(f32.data(), {2, 3})},
      {"a.f64", Tensor(f64.data(), {3})},
      {"m.bf16", Tensor(bf16.data(), DType::BF16, {3, 2})},
      {"m.f16", Tensor(f16.data(), DType::F16, {6})},
      {"i32", Tensor(i32.data(), {4})},
      {"u32", Tensor(u32.data(), {1, 3})},
      {"i64", Tensor(i64.data(), DType::I64, {2, 2})},
      {"scalar", Tensor(&scalar, DType::F32, {})},
      {"four_d", Tensor(four_d.data(), {2, 3, 1, 2})},
      {"empty", Tensor(nullptr, DType::F32, {2, 0})},
  };
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "7"}};
  const std::string path = dir / "t.safetensors";
  save_safetensors(path, tensors, meta);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // Header layout: length is a multiple of 8, entries in the given order, contiguous offsets.
  const std::string raw = read_bytes(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | uint8_t(raw[i]);
  EXPECT_EQ(header_len % 8, 0u);
  auto header = nlohmann::ordered_json::parse(raw.substr(8, header_len));
  std::vector<std::string> order;
  uint64_t offset = 0;
  for (const auto& [k, v] : header.items()) {
    order.push_back(k);
    if (k == "__metadata__") continue;
    EXPECT_EQ(v["data_offsets"][0].get<uint64_t>(), offset) << k;
    offset = v["data_offsets"][1].get<uint64_t>();
  }
  EXPECT_EQ(raw.size(), 8 + header_len + offset);
  ASSERT_EQ(order.size(), tensors.size() + 1);
  EXPECT_EQ(order[0], "__metadata__");
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_EQ(order[i + 1], tensors[i].first);

  SafeTensors st = SafeTensors::open_file(path);
  EXPECT_EQ(st.metadata(), meta);
  EXPECT_EQ(st.size(), tensors.size());
  auto names = st.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const SafeTensorInfo& info = st.at(name);
    EXPECT_EQ(info.dtype, t.dtype);
    EXPECT_EQ(info.shape, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim));
    EXPECT_EQ(info.nbytes, t.nbytes());
    EXPECT_EQ(info.file, path);
    if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(info.data, t.data, t.nbytes()), 0);
    }
  }
  EXPECT_EQ(st.find("nope"), nullptr);
  expect_error([&] { st.at("nope"); }, {"nope", path});
}

TEST(SafeTensors, ReadIntoConvertsFloatDtypes) {
  ScratchDir dir;
  std::vector<float> src = {1.0f, -2.5f, 3.14159f, 1e-3f, 65504.0f, -1e20f};
  std::vector<uint16_t> bf16(src.size());
  for (size_t i = 0; i < src.size(); ++i) bf16[i] = f32_to_bf16(src[i]);
  // f16: 1, -2, 0.33325195, smallest subnormal, +inf, 65504
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7c00, 0x7bff};
  const float f16_want[] = {1.0f,     -2.0f,   0.333251953125f, 5.960464477539063e-08f,
                            INFINITY, 65504.0f};
  std::vector<double> f64 = {1.0 / 3.0, -2.0, 1e-40, 0.5, 1e10, -7.0};
  const std::string path = dir / "c.safetensors";
  save_safetensors(path, {{"bf16", Tensor(bf16.data(), DType::BF16, {2, 3})},
                          {"f16", Tensor(f16.data(), DType::F16, {2, 3})},
                          {"f32", Tensor(src.data(), {2, 3})},
                          {"f64", Tensor(f64.data(), {2, 3})}});
  SafeTensors st = SafeTensors::open_file(path);

  std::vector<float> out(6);
  std::vector<double> out64(6);
  st.read_into("bf16", Tensor(out.data(), {2, 3}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], bf16_to_f32(bf16[i])) << i;
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.5f);
  st.read_into("bf16", Tensor(out64.data(), {2, 3}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out64[i], double(bf16_to_f32(bf16[i]))) << i;
  st.read_into("f16", Tensor(out.data(), {2, 3}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], f16_want[i]) << i;
  st.read_into("f32", Tensor(out.data(), {2, 3}));
  EXPECT_EQ(out, src);
  st.read_into("f32", Tensor(out64.data(), {2, 3}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out64[i], double(src[i])) << i;
  st.read_into("f64", Tensor(out64.data(), {2, 3}));
  EXPECT_EQ(out64, f64);
  st.read_into("f64", Tensor(out.data(), {2, 3}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], float(f64[i])) << i;
}

TEST(SafeTensors, ReadIntoRejectsShapeMismatchIntegerDtypeAndMissingName) {
  ScratchDir dir;
  std::vector<float> w(6, 1.0f);
  std::vector<int32_t> ids = {1, 2};
  const std::string path = dir / "s.safetensors";
  save_safetensors(path,
                   {{"layer.weight", Tensor(w.data(), {2, 3})}, {"ids", Tensor(ids.data(), {2})}});
  SafeTensors st = SafeTensors::open_file(path);
  std::vector<float> out(6);
  expect_error(
      [&] {
        st.read_into("layer.weight", Tensor(out.data(), {3, 2}));
      },
      {"layer.weight", "[2,3]", "[3,2]", path});
  expect_error([&] { st.read_into("layer.weight", Tensor(out.data(), {6})); }, {"[2,3]", "[6]"});
  expect_error([&] { st.read_into("ids", Tensor(out.data(), {2})); },
               {"ids", "I32", "not a float"});
  expect_error([&] { st.read_into("missing.weight", Tensor(out.data(), {2})); },
               {"missing.weight", "not found"});
}

TEST(SafeTensors, IndexWithTwoShards) {
  ScratchDir dir;
  std::vector<float> a = {1, 2, 3}, b = {4, 5}, c = {6};
  std::vector<uint16_t> d = {f32_to_bf16(0.5f), f32_to_bf16(-8.0f)};
  save_safetensors(dir / "model-00001-of-00002.safetensors",
                   {{"a", Tensor(a.data(), {3})}, {"b", Tensor(b.data(), {2})}},
                   {{"format", "pt"}});
  save_safetensors(dir / "model-00002-of-00002.safetensors",
                   {{"c", Tensor(c.data(), {1})}, {"d", Tensor(d.data(), DType::BF16, {2})}});
  nlohmann::json index = {{"metadata", {{"total_size", 28}}},
                          {"weight_map",
                           {{"a", "model-00001-of-00002.safetensors"},
                            {"b", "model-00001-of-00002.safetensors"},
                            {"c", "model-00002-of-00002.safetensors"},
                            {"d", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);

  SafeTensors st = SafeTensors::open_dir(dir.path);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.at("c").file, dir / "model-00002-of-00002.safetensors");
  std::vector<float> out(2);
  st.read_into("d", Tensor(out.data(), {2}));
  EXPECT_EQ(out, (std::vector<float>{0.5f, -8.0f}));
  st.read_into("b", Tensor(out.data(), {2}));
  EXPECT_EQ(out, b);

  // A single model.safetensors takes precedence over an index.
  save_safetensors(dir / "model.safetensors", {{"only", Tensor(c.data(), {1})}});
  EXPECT_EQ(SafeTensors::open_dir(dir.path).names(), std::vector<std::string>{"only"});
}

TEST(SafeTensors, IndexErrors) {
  ScratchDir dir;
  std::vector<float> a = {1, 2, 3};
  save_safetensors(dir / "s1.safetensors", {{"a", Tensor(a.data(), {3})}});
  save_safetensors(dir / "s2.safetensors",
                   {{"a", Tensor(a.data(), {3})}, {"b", Tensor(a.data(), {3})}});
  const std::string index_path = dir / "model.safetensors.index.json";
  auto write_index = [&](const nlohmann::json& j) { std::ofstream(index_path) << j.dump(); };

  expect_error([&] { SafeTensors::open_dir(dir / "nowhere"); },
               {"no model.safetensors or model.safetensors.index.json in", "nowhere"});
  expect_error([&] { SafeTensors::open_dir(dir.path); },
               {"no model.safetensors or model.safetensors.index.json in " + dir.path});

  write_index({{"weight_map", {{"a", "s1.safetensors"}, {"zzz", "s1.safetensors"}}}});
  expect_error([&] { SafeTensors::open_dir(dir.path); }, {"zzz", "s1.safetensors", index_path});

  write_index({{"weight_map", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}}});
  expect_error([&] { SafeTensors::open_dir(dir.path); }, {"'a'", "unique across shards"});

  write_index({{"weight_map", {{"a", "missing.safetensors"}}}});
  expect_error([&] { SafeTensors::open_dir(dir.path); }, {"missing.safetensors", "cannot open"});

  write_index({{"weight_map", {{"a", 3}}}});
  expect_error([&] { SafeTensors::open_dir(dir.path); }, {index_path, "'a'"});

  write_index({{"no_weight_map", 1}});
  expect_error([&] { SafeTensors::open_dir(dir.path); }, {index_path, "weight_map"});

  std::ofstream(index_path) << "{not json";
  expect_error([&] { SafeTensors::open_dir(dir.path); }, {index_path, "not valid JSON"});
}

TEST(SafeTensors, MalformedFilesGiveClearErrors) {
  ScratchDir dir;
  const std::string p = dir / "bad.safetensors";
  const std::string f32x2 = std::string(8, '\0');  // 2 floats of data
  auto header_with = [](const std::string& entry) { return "{\"t\":" + entry + "}"; };
  auto check = [&](const std::string& header, const std::string& data,
                   std::initializer_list<std::string> parts) {
    SCOPED_TRACE(header);
    write_raw(p, header, data);
    expect_error([&] { SafeTensors::open_file(p); }, parts);
    expect_error([&] { SafeTensors::open_file(p); }, {p});  // every message names the file
  };

  expect_error([&] { SafeTensors::open_file(dir / "absent.safetensors"); },
               {"absent.safetensors", "cannot open"});
  expect_error([&] { SafeTensors::open_file(dir.path); }, {"is a directory"});
  std::ofstream(p, std::ios::binary) << "abc";
  expect_error([&] { SafeTensors::open_file(p); }, {p, "3 bytes", "shorter than the 8-byte"});
  std::ofstream(p, std::ios::binary).flush();
  expect_error([&] { SafeTensors::open_file(p); }, {"0 bytes"});
  write_raw(p, 1000, "{}");
  expect_error([&] { SafeTensors::open_file(p); }, {p, "header length 1000 exceeds"});
  write_raw(p, 1ull << 40, "{}");
  expect_error([&] { SafeTensors::open_file(p); }, {p, "absurd"});

  check("{\"t\": [", "", {"not valid JSON"});
  check("[1, 2]", "", {"header is not a JSON object"});
  check(header_with("5"), "", {"'t'", "entry is not a JSON object"});
  check(header_with(R"({"shape":[2],"data_offsets":[0,8]})"), f32x2, {"'t'", "no 'dtype'"});
  check(header_with(R"({"dtype":"F32","data_offsets":[0,8]})"), f32x2, {"no 'shape'"});
  check(header_with(R"({"dtype":"F32","shape":[2]})"), f32x2, {"no 'data_offsets'"});
  check(header_with(R"({"dtype":32,"shape":[2],"data_offsets":[0,8]})"), f32x2,
        {"dtype is not a string"});
  check(header_with(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), f32x2,
        {"shape is not a list"});
  check(header_with(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), f32x2,
        {"shape dims must be integers"});
  check(header_with(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), f32x2,
        {"shape dims must be integers"});
  check(header_with(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), f32x2,
        {"data_offsets is not a list of two integers"});
  check(header_with(R"({"dtype":"F32","shape":[2],"data_offsets":"0-8"})"), f32x2,
        {"data_offsets is not a list of two integers"});
  check(header_with(R"({"dtype":"F32","shape":[2],"data_offsets":[0,"8"]})"), f32x2,
        {"data_offsets must be integers"});
  check(header_with(R"({"dtype":"Q7","shape":[2],"data_offsets":[0,8]})"), f32x2,
        {"unknown dtype 'Q7'"});
  for (const char* dt : {"BOOL", "U8", "I8", "I16", "F8_E4M3"})
    check(header_with(std::string(R"({"dtype":")") + dt + R"(","shape":[2],"data_offsets":[0,2]})"),
          f32x2, {std::string("unsupported dtype '") + dt + "'"});
  check(header_with(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), f32x2,
        {"'t'", "must be non-negative", "-2"});
  check(header_with(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), f32x2,
        {"must be non-negative"});
  check(header_with(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})"), f32x2,
        {"[4, 12]", "run past the 8-byte data block"});
  check(header_with(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), f32x2, {"begin > end"});
  check(header_with(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), f32x2,
        {"cover 8 bytes", "F32 [3] needs 12"});
  check(header_with(R"({"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]})"), f32x2,
        {"BF16 [2,3] needs 12"});
  check(header_with(
            R"({"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]})"),
        f32x2, {"too large"});
  check(R"({"__metadata__":{"format":5}})", "", {"__metadata__", "'format'", "not a string"});
  check(R"({"__metadata__":[1]})", "", {"__metadata__ is not a JSON object"});

  // A well-formed hand-written file (header not padded, so data is unaligned) reads correctly.
  float vals[2] = {1.25f, -3.0f};
  write_raw(p, R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
            std::string(reinterpret_cast<const char*>(vals), 8));
  SafeTensors st = SafeTensors::open_file(p);
  std::vector<float> out(2);
  st.read_into("t", Tensor(out.data(), {2}));
  EXPECT_EQ(out, (std::vector<float>{1.25f, -3.0f}));
}

TEST(SafeTensors, SaveErrors) {
  ScratchDir dir;
  std::vector<float> a = {1, 2};
  expect_error(
      [&] {
        save_safetensors(dir / "no/such/dir/x.safetensors", {{"a", Tensor(a.data(), {2})}});
      },
      {"no/such/dir/x.safetensors.tmp", "cannot create"});
  expect_error(
      [&] {
        save_safetensors(dir / "x.safetensors",
                         {{"a", Tensor(a.data(), {2})}, {"a", Tensor(a.data(), {2})}});
      },
      {"'a'", "duplicated"});
  expect_error(
      [&] {
        save_safetensors(dir / "x.safetensors", {{"u", Tensor()}});
      },
      {"'u'", "no data"});
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
}

// safetensors_file_bytes is the size save_safetensors writes, from the shapes alone (metadata
// whose values need escaping included), and a long value can be sized apart (extra_header_bytes).
TEST(SafeTensors, FileBytesAreTheSizeWritten) {
  ScratchDir dir;
  std::vector<float> a(7), b(12);
  std::vector<uint16_t> c(5);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"a", Tensor(a.data(), {7})},
      {"b.w", Tensor(b.data(), {3, 4})},
      {"c@2", Tensor(c.data(), DType::BF16, {5})}};
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"layout", "[{\"name\": \"x\\y\"}]"}};
  for (size_t pad = 0; pad < 9; ++pad) {  // every header padding
    std::map<std::string, std::string> m = meta;
    m["z"] = std::string(pad, 'p');
    const std::string path = dir / ("t" + std::to_string(pad) + ".safetensors");
    save_safetensors(path, tensors, m);
    const uint64_t written = std::filesystem::file_size(path);
    std::vector<std::pair<std::string, Tensor>> shapes = tensors;
    for (auto& nt : shapes) nt.second.data = nullptr;  // the size needs no data
    EXPECT_EQ(safetensors_file_bytes(shapes, m), written) << pad;
    // The layout value sized apart: its escaped bytes added to an empty one's header.
    const std::string escaped = nlohmann::json(m["layout"]).dump();
    std::map<std::string, std::string> empty = m;
    empty["layout"] = "";
    EXPECT_EQ(safetensors_file_bytes(shapes, empty, escaped.size() - 2), written) << pad;
  }
}
