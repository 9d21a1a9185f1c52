// Helpers shared by the config.json readers of both schemas (zaya_config.cpp,
// hf_native_config.cpp): the one error format "config.json: field 'X': what is wrong (expected
// ...)" and typed reads.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/assert.h"

namespace zaya::config_fields {

inline std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() <= 40 ? s : s.substr(0, 40) + "...";
}

template <class... Args>
[[noreturn]] void field_error(std::string_view field, fmt::format_string<Args...> f,
                              Args&&... args) {
  fail("config.json: field '{}': {}", field, fmt::format(f, std::forward<Args>(args)...));
}

inline bool fits_int64(const nlohmann::json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX));
}

inline int64_t as_int(const char* name, const nlohmann::json& v) {
  if (!fits_int64(v)) field_error(name, "got {} (expected an integer)", shown(v));
  return v.get<int64_t>();
}

inline double as_number(const char* name, const nlohmann::json& v) {
  if (!v.is_number()) field_error(name, "got {} (expected a number)", shown(v));
  return v.get<double>();
}

inline bool as_bool(const char* name, const nlohmann::json& v) {
  if (!v.is_boolean()) field_error(name, "got {} (expected true or false)", shown(v));
  return v.get<bool>();
}

}  // namespace zaya::config_fields
