// Closed sets of choices as words (core/enum_words.h): each enum's one list gives its word, parses
// a word back (and nothing else), and spells the choices for a message.
#include <gtest/gtest.h>

#include "core/device.h"
#include "core/enum_words.h"

namespace zaya {
namespace {

enum class Fruit { Apple, Pear, Fig };

}  // namespace

template <>
struct EnumWords<Fruit> {
  static constexpr std::pair<Fruit, std::string_view> words[] = {
      {Fruit::Apple, "apple"}, {Fruit::Pear, "pear"}, {Fruit::Fig, "fig"}};
};

namespace {

TEST(EnumWords, WordsRoundTripAndNothingElseParses) {
  for (const auto& [value, word] : EnumWords<Fruit>::words) {
    EXPECT_EQ(enum_word(value), word);
    EXPECT_EQ(parse_enum<Fruit>(word), value);
  }
  EXPECT_EQ(parse_enum<Fruit>("Apple"), std::nullopt);  // case matters
  EXPECT_EQ(parse_enum<Fruit>(""), std::nullopt);
  EXPECT_EQ(parse_enum<Fruit>("apple "), std::nullopt);
  EXPECT_EQ(enum_word(Fruit(7)), "?");
}

TEST(EnumWords, ChoicesReadLikeASentence) {
  EXPECT_EQ(enum_choices<Fruit>(), "apple, pear or fig");
  EXPECT_EQ(enum_choices<Device>(), "cpu or gpu");
  EXPECT_EQ(device_name(Device::Gpu), "gpu");
}

}  // namespace
}  // namespace zaya
