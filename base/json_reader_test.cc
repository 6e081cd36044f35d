#include "base/json_reader.h"

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Nested(int depth, const std::string& inside = "1") {
  return std::string(depth, '[') + inside + std::string(depth, ']');
}

TEST(ParseJsonTest, NestingIsBounded) {
  json out;
  EXPECT_TRUE(ParseJson(Nested(kMaxJsonDepth), "f.json", &out).ok());
  const absl::Status too_deep =
      ParseJson(Nested(kMaxJsonDepth + 1), "f.json", &out);
  EXPECT_EQ(too_deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_deep.message(),
              HasSubstr("f.json: arrays and objects nest deeper than 64"));
  // The readers recurse once per level, so a small file nested a million
  // levels deep used to exhaust the stack.
  EXPECT_FALSE(ParseJson(Nested(1000000), "f.json", &out).ok());
}

TEST(ParseJsonTest, BracketsInStringsDoNotNest) {
  json out;
  const std::string brackets(1000, '[');
  EXPECT_TRUE(ParseJson("{\"a\": \"" + brackets + "\", \"b\": \"\\\"" +
                            brackets + "\"}",
                        "f.json", &out)
                  .ok());
  EXPECT_EQ(out["a"], brackets);
}

TEST(BriefJsonTest, IsTheStartOfTheValuesText) {
  EXPECT_EQ(BriefJson(json::parse(R"({"a": [1, 2.5, "x"], "b": null})")),
            R"({"a":[1,2.5,"x"],"b":null})");
  EXPECT_EQ(BriefJson(json(std::string(100, 'y'))),
            "\"" + std::string(36, 'y') + "...");
  json long_array = json::array();
  for (int i = 0; i < 100000; ++i) long_array.push_back(i);
  EXPECT_EQ(BriefJson(long_array), "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,1...");
}

// Found by fuzzing the OpenAI request parser: an error quoting a string was
// cut inside a character, and the message was not UTF-8.
TEST(BriefJsonTest, CutsBetweenCharacters) {
  // '"', 35 bytes, then U+3000 (3 bytes) across the 37-byte cut.
  const std::string brief =
      BriefJson(json(std::string(35, 'x') + "\u3000" + std::string(10, 'y')));
  EXPECT_EQ(brief, "\"" + std::string(35, 'x') + "...");
}

TEST(BriefJsonTest, SerializesOnlyWhatItShows) {
  // Built in code, past any parser's bound: serializing it whole would
  // recurse a million times.
  json deep = 1;
  for (int i = 0; i < 1000000; ++i) deep = json::array({std::move(deep)});
  EXPECT_EQ(BriefJson(deep), std::string(37, '[') + "...");
}

}  // namespace
}  // namespace seqboat
