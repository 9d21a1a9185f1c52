// The checkpoint manifest (manifest.h) and verify_checkpoint (checkpoint.h).
#include "checkpoint/manifest.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kManifestFormat = "zaya-checkpoint";
constexpr int kManifestVersion = 1;

// Every regular file under dir, as paths relative to it (sorted).
std::vector<std::string> list_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file()) out.push_back(fs::relative(it->path(), dir).generic_string());
  if (ec) fail("{}: cannot list: {}", dir, ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

FileDigest digest_file(const std::string& path, bool sync) {
  FileDigest d;
  d.xxh3 = file_xxh3(path, sync, &d.bytes);
  return d;
}

void write_manifest(const std::string& dir, int64_t step, int world) {
  json files = json::array();
  for (const std::string& rel : list_files(dir)) {
    const FileDigest dg = digest_file(dir + "/" + rel, /*sync=*/true);
    files.push_back({{"path", rel}, {"bytes", dg.bytes}, {"xxh3_64", hex64(dg.xxh3)}});
  }
  const json manifest = {{"format", kManifestFormat},
                         {"version", kManifestVersion},
                         {"step", step},
                         {"world_size", world},
                         {"files", files}};
  write_file(dir + "/" + kManifest, manifest.dump(2) + "\n", {.atomic = false});
}

std::string read_manifest(const std::string& dir,
                          std::vector<std::pair<std::string, FileDigest>>& files) {
  const std::string path = dir + "/" + kManifest;
  std::error_code ec;
  if (!fs::exists(path, ec)) return fmt::format("{}: missing (torn checkpoint)", path);
  json j;
  try {
    j = parse_json(read_text_file(path, "checkpoint manifest"));
  } catch (const JsonError& e) {
    return fmt::format("{}: not valid JSON: {}", path, e.what());
  } catch (const Error& e) {
    return e.what();
  }
  try {
    if (j.at("format").get<std::string>() != kManifestFormat ||
        j.at("version").get<int>() != kManifestVersion)
      return fmt::format("{}: not a {} v{} manifest", path, kManifestFormat, kManifestVersion);
    for (const json& f : j.at("files")) {
      const std::string rel = f.at("path").get<std::string>();
      fs::path p(rel);
      bool bad = rel.empty() || p.is_absolute();
      for (const auto& part : p) bad |= part == "..";
      if (bad) return fmt::format("{}: bad file path '{}'", path, rel);
      FileDigest d;
      d.bytes = f.at("bytes").get<uint64_t>();
      const std::string hex = f.at("xxh3_64").get<std::string>();
      auto [ptr, err] = std::from_chars(hex.data(), hex.data() + hex.size(), d.xxh3, 16);
      if (err != std::errc() || ptr != hex.data() + hex.size() || hex.size() != 16)
        return fmt::format("{}: bad checksum '{}' for {}", path, hex, rel);
      files.emplace_back(rel, d);
    }
  } catch (const json::exception& e) {
    return fmt::format("{}: malformed: {}", path, e.what());
  }
  for (const char* required :
       {"model/config.json", "model/model.safetensors", "trainer_state.json"}) {
    bool found = false;
    for (const auto& [rel, d] : files) found |= rel == required;
    if (!found) return fmt::format("{}: does not list {}", path, required);
  }
  return "";
}

std::string verify_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fmt::format("{}: not a directory", dir);
  std::vector<std::pair<std::string, FileDigest>> files;
  if (std::string why = read_manifest(dir, files); !why.empty()) return why;
  for (const auto& [rel, want] : files) {
    const std::string path = dir + "/" + rel;
    if (!fs::exists(path, ec)) return fmt::format("{}: missing (listed in the manifest)", path);
    FileDigest got;
    try {
      got = digest_file(path, /*sync=*/false);
    } catch (const Error& e) {
      return e.what();
    }
    if (got.bytes != want.bytes)
      return fmt::format("{}: {} bytes, the manifest says {} (truncated or corrupted)", path,
                         got.bytes, want.bytes);
    if (got.xxh3 != want.xxh3)
      return fmt::format("{}: checksum {} does not match the manifest's {} (corrupted)", path,
                         hex64(got.xxh3), hex64(want.xxh3));
  }
  return "";
}

}  // namespace zaya
