// parse_json: the nesting limit (a million-deep array is rejected before it is built, without
// recursion), numbers that overflow a double, and the byte offset of the violation.
#include <gtest/gtest.h>

#include <string>

#include "io/json_parse.h"

using namespace zaya;

TEST(JsonParse, AcceptsOrdinaryDocuments) {
  EXPECT_EQ(parse_json(R"({"a": [1, {"b": "[[[{{{"}], "c": "\"[\\"})")["a"][1]["b"], "[[[{{{");
  // Exactly at the limit: fine.
  const std::string at = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(at).is_array());
}

TEST(JsonParse, RejectsDeepNestingWithTheOffset) {
  const std::string over =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_EQ(json_depth_violation(over), kMaxJsonDepth);
  try {
    parse_json(over);
    FAIL() << "accepted";
  } catch (const JsonError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels (at byte 64)"),
              std::string::npos)
        << e.what();
  }
  // A million deep: rejected fast, no stack overflow.
  const std::string deep = R"({"prompt": )" + std::string(1'000'000, '[');
  EXPECT_THROW(parse_json(deep), JsonError);
  const std::string objects = std::string(500'000, '{') + "}";
  EXPECT_THROW(parse_json(objects), JsonError);
  // Brackets inside strings do not count.
  EXPECT_EQ(json_depth_violation("\"" + std::string(1000, '[') + "\""), -1);
}

TEST(JsonParse, EveryFailureIsAJsonError) {
  EXPECT_THROW(parse_json("{not json"), JsonError);
  EXPECT_THROW(parse_json(R"({"temperature": 1e309})"), JsonError);  // overflows a double
  EXPECT_THROW(parse_json(""), JsonError);
  EXPECT_THROW(parse_json("[1, 2"), JsonError);
  try {
    parse_json(R"({"t": -1e400})");
  } catch (const JsonError& e) {
    EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
  }
}
