// Reading tokenizer_config.json and generation_config.json (model_extras.h). Every number is
// checked before it is converted (a JSON 1e300 or -5 is a message, not a wrapped integer).
#include "io/model_extras.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/assert.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya {

namespace {

using json = nlohmann::json;

// `path` names the text in messages: a file, or a GGUF file and its key.
json read_object(const std::string& text, const std::string& path) {
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
  if (!j.is_object()) fail("{}: must be a JSON object, got {}", path, j.type_name());
  return j;
}

bool present(const json& j, const char* key) {
  return j.contains(key) && !j[key].is_null();
}

// A non-negative integer id (a JSON integer, or a float with an integral value, as Python's json
// writes 2.0).
int64_t token_id(const std::string& path, const char* key, const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(INT32_MAX))
    return int64_t(v.get<uint64_t>());
  if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX)
    return v.get<int64_t>();
  if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() >= 0 &&
      v.get<double>() <= INT32_MAX && std::floor(v.get<double>()) == v.get<double>())
    return int64_t(v.get<double>());
  fail("{}: {} must be a token id (an integer from 0 to {}), got {}", path, key, INT32_MAX,
       v.dump());
}

// bos_token / eos_token: "text", or transformers' AddedToken {"content": "text", ...}.
std::string token_text(const std::string& path, const char* key, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  fail("{}: {} must be the token's text (a string, or an object with a string \"content\"), got {}",
       path, key, v.dump());
}

// A sampling field: a finite number in [lo, hi].
double number_in(const std::string& path, const char* key, const json& v, double lo, double hi) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
      v.get<double>() > hi)
    fail("{}: {} must be a number from {} to {}, got {}", path, key, lo, hi, v.dump());
  return v.get<double>();
}

}  // namespace

void read_tokenizer_config(const std::string& path, ModelExtras& x) {
  read_tokenizer_config_text(read_text_file(path, "model file"), path, x);
}

void read_tokenizer_config_text(const std::string& text, const std::string& path, ModelExtras& x) {
  const json j = read_object(text, path);
  x.tokenizer_config = path;
  if (present(j, "model_max_length")) {
    const json& v = j["model_max_length"];
    const double d = v.is_number() ? v.get<double>() : -1;
    if (!v.is_number() || !std::isfinite(d) || d < 1 ||
        (d < double(kNoModelMaxLength) && std::floor(d) != d))
      fail(
          "{}: model_max_length must be a positive integer (the trained context in tokens), got {}",
          path, v.dump());
    // Integers are read exactly (a double rounds above 2^53); the huge "no limit" ones as 0.
    const int64_t n = v.is_number_float() ? int64_t(std::min(d, double(kNoModelMaxLength)))
                      : v.is_number_unsigned()
                          ? int64_t(std::min<uint64_t>(v.get<uint64_t>(), kNoModelMaxLength))
                          : v.get<int64_t>();
    x.model_max_length = n >= kNoModelMaxLength ? 0 : n;
  }
  if (present(j, "bos_token")) x.bos_token = token_text(path, "bos_token", j["bos_token"]);
  if (present(j, "eos_token")) x.eos_token = token_text(path, "eos_token", j["eos_token"]);
}

void read_generation_config(const std::string& path, ModelExtras& x) {
  read_generation_config_text(read_text_file(path, "model file"), path, x);
}

void read_generation_config_text(const std::string& text, const std::string& path, ModelExtras& x) {
  const json j = read_object(text, path);
  x.generation_config = path;
  if (present(j, "bos_token_id"))
    x.bos_token_id = token_id(path, "bos_token_id", j["bos_token_id"]);
  if (present(j, "eos_token_id")) {
    const json& v = j["eos_token_id"];
    x.eos_token_ids.clear();
    if (v.is_array()) {
      if (v.empty()) fail("{}: eos_token_id is an empty list; give at least one id", path);
      for (const json& e : v) x.eos_token_ids.push_back(token_id(path, "eos_token_id", e));
    } else {
      x.eos_token_ids.push_back(token_id(path, "eos_token_id", v));
    }
  }
  if (present(j, "do_sample")) {
    if (!j["do_sample"].is_boolean())
      fail("{}: do_sample must be true or false, got {}", path, j["do_sample"].dump());
    x.do_sample = j["do_sample"].get<bool>();
  }
  // The ranges transformers accepts (temperature 0 is its "greedy" too).
  if (present(j, "temperature"))
    x.temperature = number_in(path, "temperature", j["temperature"], 0, 1e6);
  if (present(j, "top_p")) {
    x.top_p = number_in(path, "top_p", j["top_p"], 0, 1);
    if (*x.top_p == 0) fail("{}: top_p must be above 0 (1 = off), got 0", path);
  }
  if (present(j, "min_p")) x.min_p = number_in(path, "min_p", j["min_p"], 0, 1);
  if (present(j, "repetition_penalty"))
    x.repetition_penalty =
        number_in(path, "repetition_penalty", j["repetition_penalty"], 1e-6, 1e6);
  if (present(j, "top_k")) {
    const double k = number_in(path, "top_k", j["top_k"], 0, double(INT32_MAX));
    if (std::floor(k) != k) fail("{}: top_k must be an integer, got {}", path, j["top_k"].dump());
    x.top_k = int64_t(k);
  }
}

ModelExtras read_model_extras(const std::string& dir) {
  namespace fs = std::filesystem;
  ModelExtras x;
  std::error_code ec;
  const fs::path tc = fs::path(dir) / "tokenizer_config.json";
  const fs::path gc = fs::path(dir) / "generation_config.json";
  if (fs::exists(tc, ec)) read_tokenizer_config(tc.string(), x);
  if (fs::exists(gc, ec)) read_generation_config(gc.string(), x);
  return x;
}

}  // namespace zaya
