// Python's str methods over UTF-8 text (the ones chat templates call), shared by the string
// methods and the filters. Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic (docs/chat-templates.md: what is not supported).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::jinja::pystr {

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string title(std::string_view s);                                 // str.title()
std::string capitalize(std::string_view s);                            // str.capitalize()
std::string jinja_title(std::string_view s);                           // jinja2's title filter
int64_t find(std::string_view s, std::string_view sub, bool reverse);  // code points; -1
int64_t count(std::string_view s, std::string_view sub);
bool is_cased(char32_t c);
char32_t to_lower(char32_t c);
char32_t to_upper(char32_t c);

}  // namespace zaya::jinja::pystr
