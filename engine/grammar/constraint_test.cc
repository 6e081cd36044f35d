#include "engine/grammar/constraint.h"

#include <string>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(ConstraintTest, RepetitionCountsAreBounded) {
  ConstraintLimits limits;
  limits.max_repeat = 100;
  EXPECT_TRUE(
      CheckConstraint({ConstraintKind::kRegex, "a{3}b{0,100}", {}}, limits)
          .ok());
  EXPECT_TRUE(CheckConstraint(
                  {ConstraintKind::kRegex, "a{000000000000000100}", {}}, limits)
                  .ok());
  for (const char* bad : {"a{101}", "a{1,101}", "a{101,}", "x{ 2, 9999 }",
                          "a{99999999999999999999999}"}) {
    const absl::Status s =
        CheckConstraint({ConstraintKind::kRegex, bad, {}}, limits);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("regex: repetition count"), std::string::npos)
        << s.message();
  }
}

TEST(ConstraintTest, SchemaCountsAndShapeAreChecked) {
  ConstraintLimits limits;
  limits.max_repeat = 50;
  limits.max_count = 60;
  EXPECT_TRUE(CheckConstraint({ConstraintKind::kJsonSchema,
                               R"({"type":"array","maxItems":60})",
                               {}},
                              limits)
                  .ok());
  EXPECT_NE(CheckConstraint({ConstraintKind::kJsonSchema,
                             R"({"type":"array","maxItems":61})",
                             {}},
                            limits)
                .message()
                .find("\"maxItems\": 61 is over the limit of 60"),
            std::string::npos);
  EXPECT_NE(CheckConstraint({ConstraintKind::kJsonSchema,
                             R"({"type":"string","pattern":"^a{51}$"})",
                             {}},
                            limits)
                .message()
                .find("json_schema: repetition count 51"),
            std::string::npos);
  const absl::Status deep =
      CheckConstraint({ConstraintKind::kJsonSchema,
                       R"({"properties":{"a":{"items":{"minLength":51}}}})",
                       {}},
                      limits);
  EXPECT_NE(deep.message().find("\"minLength\": 51 is over the limit of 50"),
            std::string::npos)
      << deep.message();
  EXPECT_FALSE(
      CheckConstraint({ConstraintKind::kJsonSchema, "\"str\"", {}}, limits)
          .ok());
  const std::string nested(100, '[');
  const absl::Status too_deep = CheckConstraint(
      {ConstraintKind::kJsonSchema, "{\"a\":" + nested, {}}, limits);
  EXPECT_EQ(too_deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_deep.message().find("json_schema: "), 0u);
}

TEST(ConstraintTest, ChoicesAreChecked) {
  ConstraintLimits limits;
  limits.max_choices = 2;
  EXPECT_TRUE(
      CheckConstraint({ConstraintKind::kChoice, "", {"a", "b"}}, limits).ok());
  EXPECT_NE(
      CheckConstraint({ConstraintKind::kChoice, "", {"a", "b", "c"}}, limits)
          .message()
          .find("3 choices is over the limit of 2"),
      std::string::npos);
  EXPECT_NE(
      CheckConstraint({ConstraintKind::kChoice, "", {"a", "\xC3"}}, limits)
          .message()
          .find("choice 1 is not valid UTF-8"),
      std::string::npos);
}

TEST(ConstraintTest, ChoicesToEbnfEscapes) {
  EXPECT_EQ(ChoicesToEbnf({"a\"b", "c\\",
                           "x\ny\x01"
                           "1"}),
            "root ::= \"a\\\"b\" | \"c\\\\\" | \"x\\u000Ay\\u00011\"\n");
}

}  // namespace
}  // namespace seqboat
