// Closed sets of choices written as words — config keys, command-line flags, JSON fields: each
// enum lists its words once, in a specialisation of EnumWords next to the enum, and every parser
// and printer reads that one list:
//   template <> struct EnumWords<Device> {
//     static constexpr std::pair<Device, std::string_view> words[] = {{Device::Cpu, "cpu"}, …};
//   };
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace zaya {

template <class E>
struct EnumWords;

template <class E>
concept WordEnum = requires {
  EnumWords<E>::words;
};

// The word of `v` ("?" for a value missing from the list: a bug, kept printable).
template <WordEnum E>
constexpr std::string_view enum_word(E v) {
  for (const auto& [value, word] : EnumWords<E>::words)
    if (value == v) return word;
  return "?";
}

// The value a word names, or nullopt.
template <WordEnum E>
constexpr std::optional<E> parse_enum(std::string_view word) {
  for (const auto& [value, w] : EnumWords<E>::words)
    if (w == word) return value;
  return std::nullopt;
}

// The words for a message: "cpu or gpu", "auto, fp32 or bf16".
template <WordEnum E>
std::string enum_choices() {
  std::string out;
  const size_t n = std::size(EnumWords<E>::words);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? " or " : ", ";
    out += EnumWords<E>::words[i].second;
  }
  return out;
}

}  // namespace zaya
