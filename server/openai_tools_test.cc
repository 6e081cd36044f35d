// The OpenAI API's structured output and tools: response_format and vLLM's
// guided_* into the constraint oneof, tools and tool_choice, tool messages,
// and tool calls rendered from the output.
#include "server/openai_tools.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/openai_chat_prompt.h"
#include "server/openai_constraint.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kModel[] = "tiny";
const std::string kUser = R"("messages": [{"role": "user", "content": "x"}])";
const std::string kWeather =
    R"({"type": "function", "function": {"name": "get_weather",
        "description": "Weather in a city", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";
const std::string kTime =
    R"({"type": "function", "function": {"name": "get_time"}})";

ValidationLimits Limits() {
  ValidationLimits limits;
  limits.max_new_tokens_limit = 64;
  return limits;
}

ChatRequest Chat(const std::string& body) {
  ChatRequest out;
  OpenAiError error;
  EXPECT_TRUE(ParseChatRequest(body, kModel, Limits(), &out, &error))
      << body << ": " << error.message;
  return out;
}

OpenAiError ChatFails(const std::string& body) {
  ChatRequest out;
  OpenAiError error;
  EXPECT_FALSE(ParseChatRequest(body, kModel, Limits(), &out, &error))
      << "accepted: " << body;
  return error;
}

CompletionRequest Completion(const std::string& body) {
  CompletionRequest out;
  OpenAiError error;
  EXPECT_TRUE(ParseCompletionRequest(body, kModel, Limits(), &out, &error))
      << body << ": " << error.message;
  return out;
}

OpenAiError CompletionFails(const std::string& body) {
  CompletionRequest out;
  OpenAiError error;
  EXPECT_FALSE(ParseCompletionRequest(body, kModel, Limits(), &out, &error))
      << "accepted: " << body;
  return error;
}

TEST(OpenAiConstraintTest, ResponseFormatKinds) {
  ChatRequest r =
      Chat("{" + kUser + R"(, "response_format": {"type": "text"}})");
  EXPECT_EQ(r.completion.generate.sampling().constraint_case(),
            v1::SamplingParams::CONSTRAINT_NOT_SET);
  EXPECT_EQ(r.completion.constraint_param, "");

  r = Chat("{" + kUser + R"(, "response_format": {"type": "json_object"}})");
  EXPECT_TRUE(r.completion.generate.sampling().has_json_object());
  EXPECT_EQ(r.completion.constraint_param, "response_format");

  r = Chat("{" + kUser + R"(, "response_format": {"type": "json_schema",
      "json_schema": {"name": "Pet", "strict": true, "schema": {"type":
      "object", "properties": {"age": {"type": "integer"}}}}}})");
  EXPECT_EQ(json::parse(r.completion.generate.sampling().json_schema()),
            json::parse(R"({"type": "object", "properties": {"age":
                           {"type": "integer"}}})"));
}

TEST(OpenAiConstraintTest, GuidedExtrasOnBothEndpoints) {
  CompletionRequest c =
      Completion(R"({"prompt": "x", "guided_regex": "[0-9]+"})");
  EXPECT_EQ(c.generate.sampling().regex(), "[0-9]+");
  EXPECT_EQ(c.constraint_param, "guided_regex");
  c = Completion(R"({"prompt": "x", "guided_choice": ["yes", "no"]})");
  ASSERT_EQ(c.generate.sampling().choice().choices_size(), 2);
  EXPECT_EQ(c.generate.sampling().choice().choices(1), "no");
  c = Completion(R"({"prompt": "x", "guided_grammar": "root ::= \"a\""})");
  EXPECT_EQ(c.generate.sampling().grammar(), "root ::= \"a\"");
  c = Completion(R"({"prompt": "x", "guided_json": {"type": "integer"}})");
  EXPECT_EQ(c.generate.sampling().json_schema(), R"({"type":"integer"})");
  c = Completion(R"({"prompt": "x", "guided_json": "{\"type\": \"string\"}"})");
  EXPECT_EQ(c.generate.sampling().json_schema(), R"({"type": "string"})");
  c = Completion(
      R"({"prompt": "x", "response_format": {"type": "json_object"}})");
  EXPECT_TRUE(c.generate.sampling().has_json_object());

  ChatRequest r = Chat("{" + kUser + R"(, "guided_choice": ["a"]})");
  EXPECT_EQ(r.completion.constraint_param, "guided_choice");
}

TEST(OpenAiConstraintTest, RefusesBadAndConflictingConstraints) {
  struct Case {
    std::string extra;
    const char* param;
    const char* message;
  };
  for (const Case& c : {
           Case{R"("response_format": {"type": "xml"})", "response_format",
                "response_format.type must be"},
           Case{R"("response_format": "json")", "response_format",
                "response_format must be an object"},
           Case{R"("response_format": {"type": "json_schema"})",
                "response_format", "response_format.json_schema must be"},
           Case{R"("response_format": {"type": "json_schema", "json_schema":
                  {"name": "a b", "schema": {}}})",
                "response_format", "name must be 1 to 64"},
           Case{R"("response_format": {"type": "json_schema", "json_schema":
                  {"name": "a", "schema": []}})",
                "response_format", "schema must be a JSON Schema object"},
           Case{R"("response_format": {"type": "json_object", "x": 1})",
                "response_format", "unknown field 'x'"},
           Case{R"("guided_json": 3)", "guided_json",
                "guided_json must be a JSON Schema"},
           Case{R"("guided_choice": "a")", "guided_choice",
                "guided_choice must be an array of strings"},
           Case{R"("guided_choice": ["a", 2])", "guided_choice",
                "guided_choice[1] must be a string"},
           Case{R"("guided_regex": ["a"])", "guided_regex",
                "guided_regex must be a string"},
           Case{R"("response_format": {"type": "json_object"},
                  "guided_regex": "a")",
                "guided_regex",
                "response_format and guided_regex both constrain the output"},
           Case{R"("guided_json": {}, "guided_choice": ["a"])", "guided_choice",
                "guided_json and guided_choice both constrain the output"},
           Case{R"("guided_whitespace_pattern": " ")",
                "guided_whitespace_pattern", "Unrecognized request argument"},
       }) {
    OpenAiError e = ChatFails("{" + kUser + ", " + c.extra + "}");
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param, c.param) << c.extra;
    EXPECT_THAT(e.message, HasSubstr(c.message)) << c.extra;
    e = CompletionFails(R"({"prompt": "x", )" + c.extra + "}");
    EXPECT_EQ(e.param, c.param) << c.extra;
  }
}

TEST(OpenAiConstraintTest, ValidationAndCompileErrorsNameTheParameter) {
  OpenAiError validation;
  validation.message = "sampling.regex is refused: repetition count 100";
  OpenAiError e = ConstraintError(validation, "guided_regex");
  EXPECT_EQ(e.param, "guided_regex");
  EXPECT_EQ(e.message,
            "guided_regex (sampling.regex) is refused: repetition count 100");
  OpenAiError compile;
  compile.message = "json_schema: unsupported keyword \"$dynamicRef\"";
  e = ConstraintError(compile, "response_format");
  EXPECT_EQ(e.param, "response_format");
  EXPECT_THAT(e.message, HasSubstr("$dynamicRef"));
  OpenAiError other;
  other.message = "temperature must be in [0, 100]";
  other.param = "temperature";
  EXPECT_EQ(ConstraintError(other, "response_format").param, "temperature");
}

TEST(OpenAiToolsTest, ToolsAndToolChoice) {
  ChatRequest r =
      Chat("{" + kUser + R"(, "tools": [)" + kWeather + ", " + kTime + "]}");
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);  // the default with tools
  ASSERT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.completion.constraint_param, "");

  r = Chat("{" + kUser + R"(, "tools": [)" + kWeather +
           R"(], "tool_choice": "none"})");
  EXPECT_EQ(r.tools.choice, ToolChoice::kNone);
  EXPECT_EQ(Chat("{" + kUser + "}").tools.choice, ToolChoice::kNone);

  r = Chat("{" + kUser + R"(, "tools": [)" + kWeather + ", " + kTime +
           R"(], "tool_choice": {"type": "function", "function": {"name":
           "get_weather"}}})");
  EXPECT_EQ(r.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools.named, "get_weather");
  EXPECT_EQ(r.completion.constraint_param, "tool_choice");
  EXPECT_EQ(json::parse(r.completion.generate.sampling().json_schema()),
            json::parse(R"({"type": "object", "properties": {"city":
                           {"type": "string"}}, "required": ["city"]})"));

  r = Chat("{" + kUser + R"(, "tools": [)" + kWeather + ", " + kTime +
           R"(], "tool_choice": "required", "parallel_tool_calls": false})");
  const json schema =
      json::parse(r.completion.generate.sampling().json_schema());
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_EQ(schema["maxItems"], 1);
  const json& any_of = schema["items"]["anyOf"];
  ASSERT_EQ(any_of.size(), 2u);
  EXPECT_EQ(any_of[0]["properties"]["name"]["enum"][0], "get_weather");
  EXPECT_EQ(any_of[1]["properties"]["parameters"],
            json::parse(R"({"type": "object"})"));
}

TEST(OpenAiToolsTest, RefusesBadToolsNamingTheParameter) {
  struct Case {
    std::string extra;
    const char* param;
    const char* message;
  };
  std::string many = R"("tools": [)";
  for (int i = 0; i <= kMaxTools; ++i) {
    many += (i ? ", " : "") +
            absl::StrCat(R"({"type": "function", "function": {"name": "f)", i,
                         R"("}})");
  }
  many += "]";
  for (const Case& c : {
           Case{R"("tools": {})", "tools", "tools must be an array"},
           Case{R"("tools": [{"type": "retrieval"}])", "tools",
                "tools[0].type must be \"function\""},
           Case{R"("tools": [{"type": "function", "function": {"name": ""}}])",
                "tools", "tools[0].function.name must be 1 to 64"},
           Case{"\"tools\": [" + kTime + ", " + kTime + "]", "tools",
                "tools[1].function.name 'get_time' names an earlier tool"},
           Case{R"("tools": [{"type": "function", "function": {"name": "f",
                  "parameters": []}}])",
                "tools", "parameters must be a JSON Schema object"},
           Case{many, "tools", "more than the limit of 128"},
           Case{"\"tools\": [" + kTime + R"(], "tool_choice": "sometimes")",
                "tool_choice", "tool_choice must be"},
           Case{"\"tools\": [" + kTime +
                    R"(], "tool_choice": {"type": "function", "function":
                    {"name": "nope"}})",
                "tool_choice", "'nope', which no tool defines"},
           Case{"\"tools\": [" + kTime +
                    R"(], "tool_choice": "required", "response_format":
                    {"type": "json_object"})",
                "tool_choice",
                "tool_choice and response_format both constrain the output"},
       }) {
    OpenAiError e = ChatFails("{" + kUser + ", " + c.extra + "}");
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param, c.param) << c.extra;
    EXPECT_THAT(e.message, HasSubstr(c.message)) << c.extra;
  }
}

TEST(OpenAiToolsTest, ToolMessagesReachTheTemplateAsTransformersGivesThem) {
  ChatRequest r = Chat(R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
        "type": "function", "function": {"name": "get_weather",
        "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(json::parse(r.messages[1].extra.dump()),
            json::parse(R"({"tool_calls": [{"id": "call_1", "type":
              "function", "function": {"name": "get_weather", "arguments":
              {"city": "Paris"}}}]})"));
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].extra["tool_call_id"], "call_1");
  EXPECT_EQ(r.messages[2].content, "sunny");

  struct Case {
    std::string message;
    const char* error;
  };
  for (const Case& c : {
           Case{R"({"role": "tool", "content": "x"})",
                "messages[0].tool_call_id must be the id"},
           Case{R"({"role": "user", "content": "x", "tool_call_id": "1"})",
                "tool_call_id is only for tool messages"},
           Case{R"({"role": "user", "content": "x", "tool_calls": []})",
                "tool_calls is only for assistant messages"},
           Case{R"({"role": "assistant", "tool_calls": [{"id": "1",
                  "function": {"name": "f", "arguments": "{bad"}}]})",
                "arguments must be a JSON object's text"},
           Case{R"({"role": "assistant", "tool_calls": [{"id": "1",
                  "function": {"name": "f", "arguments": {}}}]})",
                "arguments must be a string"},
           Case{R"({"role": "assistant", "function_call": {}})",
                "function_call is not supported"},
       }) {
    OpenAiError e = ChatFails(R"({"messages": [)" + c.message + "]}");
    EXPECT_EQ(e.param, "messages") << c.message;
    EXPECT_THAT(e.message, HasSubstr(c.error)) << c.message;
  }
}

TEST(OpenAiToolsTest, AutoNeedsTheServersParser) {
  ChatTools tools;
  tools.choice = ToolChoice::kAuto;
  ToolCallOptions options;
  std::optional<OpenAiError> e = ToolCallMode(tools, std::nullopt, &options);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tool_choice");
  EXPECT_THAT(e->message, HasSubstr("--tool_call_parser"));
  EXPECT_FALSE(ToolCallMode(tools, ToolCallFormat::kHermes, &options));
  EXPECT_EQ(options.mode, ToolCallOptions::Mode::kParsed);
  tools.choice = ToolChoice::kRequired;
  EXPECT_FALSE(ToolCallMode(tools, std::nullopt, &options));
  EXPECT_EQ(options.mode, ToolCallOptions::Mode::kRequired);
}

// --- tool calls in responses

GenerationEvent Text(std::string text) {
  GenerationEvent e;
  e.token_ids = {1};
  e.text = std::move(text);
  return e;
}

GenerationEvent Final(FinishReason reason) {
  GenerationEvent e;
  e.finish = reason;
  e.prompt_tokens = 5;
  e.generated_tokens = 3;
  return e;
}

CompletionContext Context() {
  CompletionContext c;
  c.id = "chatcmpl-1";
  c.model = kModel;
  return c;
}

ToolCallOptions Hermes() {
  ToolCallOptions o;
  o.mode = ToolCallOptions::Mode::kParsed;
  o.format = ToolCallFormat::kHermes;
  return o;
}

std::vector<json> Chunks(const std::string& sse) {
  std::vector<json> out;
  for (absl::string_view event : absl::StrSplit(sse, "\n\n")) {
    if (event.empty() || event == "data: [DONE]") continue;
    EXPECT_TRUE(absl::ConsumePrefix(&event, "data: ")) << event;
    out.push_back(json::parse(event));
  }
  return out;
}

TEST(ChatToolCallsTest, NonStreamedCallsWithIdsAndFinishReason) {
  ChatRenderer r(Context(), Hermes());
  r.Add(Text("I'll check.\n<tool_call>\n{\"name\": \"get_weather\", "));
  r.Add(Text("\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  r.Add(Final(FinishReason::kEos));
  auto [status, body] = r.Finish();
  ASSERT_EQ(status, 200) << body;
  const json choice = json::parse(body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "I'll check.");
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_THAT(call["id"].get<std::string>(), ::testing::StartsWith("call_"));
  EXPECT_EQ(call["id"].get<std::string>().size(), 29u);
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city":"Paris"})");
}

TEST(ChatToolCallsTest, MalformedCallUnderAutoIsContent) {
  ChatRenderer r(Context(), Hermes());
  r.Add(Text("<tool_call>{\"name\": oops}</tool_call>"));
  r.Add(Final(FinishReason::kEos));
  auto [status, body] = r.Finish();
  ASSERT_EQ(status, 200);
  const json choice = json::parse(body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"]["content"],
            "<tool_call>{\"name\": oops}</tool_call>");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
}

TEST(ChatToolCallsTest, StreamedAsOpenAiStreamsThem) {
  ChatRenderer r(Context(), Hermes());
  std::vector<json> chunks = Chunks(r.StreamEvents({Text("Sure. <tool_")}));
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["content"], "Sure.");
  // The marker is held back until decided.
  EXPECT_TRUE(
      Chunks(r.StreamEvents({Text("call>{\"name\": \"f\", ")})).empty());
  chunks =
      Chunks(r.StreamEvents({Text("\"arguments\": {\"a\": 1}}</tool_call>")}));
  ASSERT_EQ(chunks.size(), 2u);
  const json first = chunks[0]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_THAT(first["id"].get<std::string>(), ::testing::StartsWith("call_"));
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["function"]["name"], "f");
  EXPECT_EQ(first["function"]["arguments"], "");
  const json second = chunks[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(second["index"], 0);
  EXPECT_FALSE(second.contains("id"));
  EXPECT_EQ(second["function"]["arguments"], R"({"a":1})");
  chunks = Chunks(r.StreamEvents({Final(FinishReason::kEos)}));
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(r.ended());
}

TEST(ChatToolCallsTest, RequiredAndNamedReadTheConstrainedJson) {
  ToolCallOptions required;
  required.mode = ToolCallOptions::Mode::kRequired;
  ChatRenderer r(Context(), required);
  r.Add(Text(R"([{"name": "a", "parameters": {"x": 1}},)"));
  r.Add(Text(R"( {"name": "b", "parameters": {}}])"));
  r.Add(Final(FinishReason::kEos));
  json choice = json::parse(r.Finish().second)["choices"][0];
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["name"], "b");
  EXPECT_EQ(choice["finish_reason"], "tool_calls");

  ToolCallOptions named;
  named.mode = ToolCallOptions::Mode::kNamed;
  named.named = "get_weather";
  ChatRenderer streamed(Context(), named);
  EXPECT_TRUE(Chunks(streamed.StreamEvents({Text(R"({"city": )")})).empty());
  std::vector<json> chunks = Chunks(
      streamed.StreamEvents({Text(R"("Rome"})"), Final(FinishReason::kEos)}));
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(
      chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
      "get_weather");
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]
                  ["arguments"],
            R"({"city":"Rome"})");
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "tool_calls");

  // Cut short by max_tokens: the JSON is returned as content.
  ChatRenderer cut(Context(), named);
  cut.Add(Text(R"({"city": "Ro)"));
  cut.Add(Final(FinishReason::kLength));
  choice = json::parse(cut.Finish().second)["choices"][0];
  EXPECT_EQ(choice["message"]["content"], R"({"city": "Ro)");
  EXPECT_EQ(choice["finish_reason"], "length");
}

}  // namespace
}  // namespace seqboat
