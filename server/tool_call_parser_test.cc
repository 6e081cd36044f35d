#include "server/tool_call_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

// The whole output fed in pieces of `size` bytes (0: at once), then
// finished; the content and calls concatenated.
ToolCallPiece Run(ToolCallFormat format, const std::string& output,
                  size_t size) {
  ToolCallParser parser(format);
  ToolCallPiece all;
  const size_t step = size == 0 ? output.size() + 1 : size;
  for (size_t i = 0; i < output.size(); i += step) {
    ToolCallPiece piece;
    parser.Feed(output.substr(i, step), &piece);
    all.content += piece.content;
    for (ToolCall& c : piece.calls) all.calls.push_back(c);
  }
  ToolCallPiece piece;
  parser.Finish(&piece);
  all.content += piece.content;
  for (ToolCall& c : piece.calls) all.calls.push_back(c);
  return all;
}

// Every piece size gives the same result as the whole output at once.
ToolCallPiece RunAllSplits(ToolCallFormat format, const std::string& output) {
  ToolCallPiece whole = Run(format, output, 0);
  for (size_t size = 1; size <= output.size(); ++size) {
    ToolCallPiece split = Run(format, output, size);
    EXPECT_EQ(split.content, whole.content) << "pieces of " << size;
    EXPECT_EQ(split.calls.size(), whole.calls.size()) << "pieces of " << size;
    for (size_t i = 0; i < split.calls.size() && i < whole.calls.size(); ++i) {
      EXPECT_EQ(split.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(split.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  return whole;
}

TEST(ToolCallParserTest, FormatsByName) {
  EXPECT_EQ(*ToolCallFormatByName("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ToolCallFormatByName("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_FALSE(ToolCallFormatByName("mistral").ok());
}

TEST(ToolCallParserTest, HermesCallsAndContentAtEverySplit) {
  const ToolCallPiece out = RunAllSplits(
      ToolCallFormat::kHermes,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(out.content, "Let me look.");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(out.calls[1].name, "now");
  EXPECT_EQ(out.calls[1].arguments, "{}");
}

TEST(ToolCallParserTest, HermesTextWithoutCallsIsContentExactly) {
  const std::string text = "a <tool bag> and <tool_cal> stay text \n ";
  const ToolCallPiece out = RunAllSplits(ToolCallFormat::kHermes, text);
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.calls.empty());
}

TEST(ToolCallParserTest, HermesHoldsBackOnlyAPossibleMarker) {
  ToolCallParser parser(ToolCallFormat::kHermes);
  ToolCallPiece piece;
  parser.Feed("Hello <tool", &piece);
  EXPECT_EQ(piece.content, "Hello");  // the space waits for more text too
  parser.Feed("s are nice", &piece);
  EXPECT_EQ(piece.content, "Hello <tools are nice");
  parser.Feed("<tool_call>{\"name\": \"f\", \"argu", &piece);
  EXPECT_EQ(piece.content, "Hello <tools are nice");
  EXPECT_TRUE(piece.calls.empty());
  parser.Feed("ments\": {\"x\": 1}}</tool_call>", &piece);
  ASSERT_EQ(piece.calls.size(), 1u);
  EXPECT_EQ(piece.calls[0].arguments, R"({"x":1})");
  EXPECT_TRUE(parser.called());
}

TEST(ToolCallParserTest, HermesMalformedCallsAreContent) {
  for (const std::string body :
       {"{\"name\": \"f\", \"arguments\": {\"x\": }", "not json",
        "{\"arguments\": {}}", "{\"name\": \"f\", \"arguments\": [1]}",
        "[1, 2]"}) {
    const std::string text = "<tool_call>" + body + "</tool_call>";
    const ToolCallPiece out = RunAllSplits(ToolCallFormat::kHermes, text);
    EXPECT_EQ(out.content, text);
    EXPECT_TRUE(out.calls.empty()) << body;
  }
}

TEST(ToolCallParserTest, HermesUnclosedCallAtTheEnd) {
  // Parsed, as the model stopped after the JSON.
  ToolCallPiece out = RunAllSplits(
      ToolCallFormat::kHermes,
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"b\"}}\n");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.content, "");
  // Cut short: content.
  out = RunAllSplits(ToolCallFormat::kHermes,
                     "ok <tool_call>\n{\"name\": \"f\", \"argum");
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, "ok <tool_call>\n{\"name\": \"f\", \"argum");
}

TEST(ToolCallParserTest, HermesTakesParametersForArguments) {
  const ToolCallPiece out =
      RunAllSplits(ToolCallFormat::kHermes,
                   "<tool_call>{\"name\": \"f\", \"parameters\": {\"q\": "
                   "\"x\"}}</tool_call>");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, R"({"q":"x"})");
}

TEST(ToolCallParserTest, Llama3JsonCalls) {
  ToolCallPiece out = RunAllSplits(
      ToolCallFormat::kLlama3Json,
      " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(out.content, "");

  out =
      RunAllSplits(ToolCallFormat::kLlama3Json,
                   "<|python_tag|>{\"name\": \"a\", \"parameters\": "
                   "{\"s\": \"x;y\"}}; {\"name\": \"b\", \"parameters\": {}}");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].arguments, R"({"s":"x;y"})");
  EXPECT_EQ(out.calls[1].name, "b");
}

TEST(ToolCallParserTest, Llama3TextIsContentAtOnce) {
  ToolCallParser parser(ToolCallFormat::kLlama3Json);
  ToolCallPiece piece;
  parser.Feed("The", &piece);
  EXPECT_EQ(piece.content, "The");
  parser.Feed(" answer {is} 4", &piece);
  parser.Finish(&piece);
  EXPECT_EQ(piece.content, "The answer {is} 4");
  EXPECT_TRUE(piece.calls.empty());
  // A tag's prefix waits; then it is text.
  ToolCallParser tagged(ToolCallFormat::kLlama3Json);
  ToolCallPiece p2;
  tagged.Feed("<|pyt", &p2);
  EXPECT_EQ(p2.content, "");
  tagged.Feed("hon is fun", &p2);
  EXPECT_EQ(p2.content, "<|python is fun");
}

TEST(ToolCallParserTest, Llama3MalformedJsonIsContent) {
  for (const std::string text :
       {"{\"name\": \"f\", \"parameters\": {", "{\"x\": 1}",
        "{\"name\": \"f\", \"parameters\": 3}", "{} trailing"}) {
    const ToolCallPiece out = RunAllSplits(ToolCallFormat::kLlama3Json, text);
    EXPECT_TRUE(out.calls.empty()) << text;
    EXPECT_EQ(out.content, text);
  }
}

TEST(ToolCallParserTest, RequiredCallsArray) {
  auto calls = ParseRequiredToolCalls(
      R"([{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}])");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].arguments, R"({"x":1})");
  EXPECT_FALSE(ParseRequiredToolCalls("[]").has_value());
  EXPECT_FALSE(ParseRequiredToolCalls(R"([{"name": "a", "parame)").has_value());
  EXPECT_FALSE(ParseRequiredToolCalls(R"({"name": "a"})").has_value());
}

}  // namespace
}  // namespace seqboat
