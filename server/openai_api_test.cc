#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/chat_template.h"
#include "server/openai_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_validation.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

constexpr char kModel[] = "tiny";

ValidationLimits Limits() {
  ValidationLimits limits;
  limits.max_new_tokens_default = 16;
  limits.max_new_tokens_limit = 64;
  limits.max_prompt_tokens = 8;
  return limits;
}

// One id per byte, as the byte tokenizer does; 256 is EOS (special).
Vocabulary Bytes() {
  Vocabulary v;
  v.rules.vocab_limit = 257;
  v.encode =
      [](absl::string_view text) -> absl::StatusOr<std::vector<int32_t>> {
    return std::vector<int32_t>(text.begin(), text.end());
  };
  v.is_special = [](int32_t id) { return id == 256; };
  return v;
}

// `parse` (ParseCompletionRequest or ParseChatRequest) expected to accept
// the body, and what it read.
template <typename Parsed, typename ParseFn>
Parsed ParseOk(ParseFn parse, const std::string& body) {
  Parsed out;
  OpenAiError error;
  EXPECT_TRUE(parse(body, kModel, Limits(), &out, &error))
      << body << ": " << error.message;
  return out;
}

// `parse` expected to refuse the body, and its error.
template <typename Parsed, typename ParseFn>
OpenAiError ParseFails(ParseFn parse, const std::string& body) {
  Parsed out;
  OpenAiError error;
  EXPECT_FALSE(parse(body, kModel, Limits(), &out, &error))
      << "accepted: " << body;
  return error;
}

CompletionRequest Parse(const std::string& body) {
  return ParseOk<CompletionRequest>(ParseCompletionRequest, body);
}

OpenAiError ParseError(const std::string& body) {
  return ParseFails<CompletionRequest>(ParseCompletionRequest, body);
}

// Parsing, then validation as the server runs it; the error as sent.
OpenAiError ValidationError(const std::string& body) {
  CompletionRequest parsed = Parse(body);
  absl::StatusOr<Request> request =
      RequestFromProto(parsed.generate, Bytes(), Limits(), {"id", 1});
  EXPECT_FALSE(request.ok()) << "accepted: " << body;
  return ErrorFromStatus(request.status());
}

TEST(OpenAiParseTest, MapsEveryParameter) {
  CompletionRequest r = Parse(R"({
    "model": "tiny", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5,
    "top_p": 0.9, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.2,
    "seed": 99, "stop": ["\n", "END"], "logprobs": 3, "stream": true,
    "min_tokens": 5,
    "stream_options": {"include_usage": true}, "ignore_eos": true,
    "stop_token_ids": [256], "n": 1, "best_of": 1, "presence_penalty": 0.5,
    "frequency_penalty": -1.25, "echo": false, "suffix": null,
    "logit_bias": {}, "user": "someone"})");
  const v1::GenerateRequest& g = r.generate;
  EXPECT_EQ(g.text(), "Hello");
  EXPECT_EQ(g.stopping().max_new_tokens(), 7u);
  EXPECT_EQ(g.stopping().min_new_tokens(), 5u);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.05f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.2f);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -1.25f);
  EXPECT_EQ(g.sampling().seed(), 99u);
  EXPECT_THAT(g.stopping().stop(), ElementsAre("\n", "END"));
  EXPECT_THAT(g.stopping().stop_token_ids(), ElementsAre(256));
  EXPECT_TRUE(g.stopping().ignore_eos());
  EXPECT_TRUE(g.logprobs().enabled());
  EXPECT_EQ(g.logprobs().top_n(), 3u);
  EXPECT_EQ(g.n(), 1u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiParseTest, NullAndAbsentLeaveTheDefaults) {
  CompletionRequest r = Parse(R"({"prompt": "Hi", "max_tokens": null,
    "temperature": null, "stop": null, "logprobs": null, "seed": null,
    "model": null, "stream": null})");
  const v1::GenerateRequest& g = r.generate;
  EXPECT_FALSE(g.stopping().has_max_new_tokens());
  EXPECT_FALSE(g.sampling().has_temperature());
  EXPECT_FALSE(g.sampling().has_seed());
  EXPECT_FALSE(g.logprobs().enabled());
  EXPECT_EQ(g.stopping().stop_size(), 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(OpenAiParseTest, PromptForms) {
  EXPECT_EQ(Parse(R"({"prompt": "a"})").generate.text(), "a");
  EXPECT_EQ(Parse(R"({"prompt": ["a"]})").generate.text(), "a");
  EXPECT_THAT(Parse(R"({"prompt": [1, 2]})").generate.token_ids().ids(),
              ElementsAre(1, 2));
  EXPECT_THAT(Parse(R"({"prompt": [[3]]})").generate.token_ids().ids(),
              ElementsAre(3));
  EXPECT_EQ(
      Parse(R"({"stop": "x", "prompt": "a"})").generate.stopping().stop(0),
      "x");
}

TEST(OpenAiParseTest, TopKMinusOneIsOffAndNegativeSeedWraps) {
  EXPECT_EQ(
      Parse(R"({"prompt": "a", "top_k": -1})").generate.sampling().top_k(), 0);
  EXPECT_EQ(Parse(R"({"prompt": "a", "seed": -1})").generate.sampling().seed(),
            UINT64_MAX);
  EXPECT_EQ(Parse(R"({"prompt": "a", "seed": 18446744073709551615})")
                .generate.sampling()
                .seed(),
            UINT64_MAX);
}

TEST(OpenAiParseTest, LogprobsZeroAsksForTheChosenTokenOnly) {
  const v1::GenerateRequest g =
      Parse(R"({"prompt": "a", "logprobs": 0})").generate;
  EXPECT_TRUE(g.logprobs().enabled());
  EXPECT_EQ(g.logprobs().top_n(), 0u);
}

TEST(OpenAiParseTest, RefusesMalformedBodies) {
  OpenAiError e = ParseError("{\"prompt\": ");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_THAT(e.message, HasSubstr("not valid JSON"));
  EXPECT_EQ(e.param, "");
  EXPECT_THAT(ParseError("[1, 2]").message, HasSubstr("JSON object"));
  EXPECT_THAT(ParseError(R"({"prompt": "a", "prompt": "b"})").message,
              HasSubstr("duplicate key \"prompt\""));
  EXPECT_THAT(ParseError("\"\xff\"").message, HasSubstr("not valid JSON"));
}

TEST(OpenAiParseTest, RefusesUnknownParametersByName) {
  OpenAiError e = ParseError(R"({"prompt": "a", "temprature": 1})");
  EXPECT_EQ(e.param, "temprature");
  EXPECT_EQ(e.code, "unknown_parameter");
  EXPECT_THAT(e.message, HasSubstr("temprature"));
  e = ParseError(
      R"({"prompt": "a", "stream": true,
          "stream_options": {"continuous_usage_stats": true}})");
  EXPECT_EQ(e.param, "stream_options");
}

TEST(OpenAiParseTest, RefusesAnotherModel) {
  OpenAiError e = ParseError(R"({"model": "gpt-4", "prompt": "a"})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_THAT(e.message, HasSubstr("gpt-4"));
  EXPECT_THAT(e.message, HasSubstr("tiny"));
}

TEST(OpenAiParseTest, RefusesWhatTheEngineCannotDoNamingTheParameter) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {
           Case{R"({"prompt": "a", "best_of": 3})", "best_of"},
           Case{R"({"prompt": "a", "n": 2, "best_of": 3})", "best_of"},
           Case{R"({"prompt": "a", "echo": true})", "echo"},
           Case{R"({"prompt": "a", "suffix": "end"})", "suffix"},
           Case{R"({"prompt": "a", "logit_bias": {"5": 10}})", "logit_bias"},
           Case{R"({"prompt": ["a", "b"]})", "prompt"},
       }) {
    OpenAiError e = ParseError(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.code, "unsupported_value") << c.body;
    EXPECT_THAT(e.message, HasSubstr(c.param)) << c.body;
  }
}

TEST(OpenAiParseTest, RefusesWrongTypesNamingTheParameter) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {
           Case{R"({"prompt": "a", "temperature": "hot"})", "temperature"},
           Case{R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens"},
           Case{R"({"prompt": "a", "max_tokens": -3})", "max_tokens"},
           Case{R"({"prompt": "a", "top_k": 2.5})", "top_k"},
           Case{R"({"prompt": "a", "seed": "7"})", "seed"},
           Case{R"({"prompt": "a", "stop": 5})", "stop"},
           Case{R"({"prompt": "a", "stop": ["x", 5]})", "stop"},
           Case{R"({"prompt": "a", "logprobs": true})", "logprobs"},
           Case{R"({"prompt": "a", "logprobs": -1})", "logprobs"},
           Case{R"({"prompt": "a", "stream": "yes"})", "stream"},
           Case{R"({"prompt": "a", "stream_options": {}})", "stream_options"},
           Case{R"({"prompt": "a", "stream": true,
                    "stream_options": {"include_usage": 1}})",
                "stream_options"},
           Case{R"({"prompt": 5})", "prompt"},
           Case{R"({"prompt": []})", "prompt"},
           Case{R"({"prompt": [1, "a"]})", "prompt"},
           Case{R"({"prompt": [4294967296]})", "prompt"},
           Case{R"({"model": 5, "prompt": "a"})", "model"},
           Case{R"({"prompt": "a", "min_tokens": -1})", "min_tokens"},
           Case{R"({"prompt": "a", "n": 0})", "n"},
           Case{R"({"prompt": "a", "n": -2})", "n"},
           Case{R"({"prompt": "a", "n": 1.5})", "n"},
           Case{R"({"prompt": "a", "min_tokens": 2.5})", "min_tokens"},
           Case{R"({"prompt": "a", "presence_penalty": "x"})",
                "presence_penalty"},
           Case{R"({"prompt": "a", "frequency_penalty": [1]})",
                "frequency_penalty"},
       }) {
    OpenAiError e = ParseError(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_THAT(e.message, HasSubstr(c.param)) << c.body;
  }
  EXPECT_EQ(ParseError(R"({"prompt": "a", "max_tokens": -3})").message,
            "max_tokens must be in [1, 64], got -3");
}

TEST(OpenAiValidationTest, RangesAreValidationsNamedAsOpenAiParameters) {
  OpenAiError e = ValidationError(R"({"prompt": "a", "top_p": 1.5})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "top_p");
  EXPECT_EQ(e.message, "top_p must be in (0, 1], got 1.5");
  e = ValidationError(R"({"prompt": "a", "max_tokens": 65})");
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.message, "max_tokens must be in [1, 64], got 65");
  e = ValidationError(R"({"prompt": [65, 300]})");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.message, "prompt[1] must be in [0, 257), got 300");
  e = ValidationError(R"({"prompt": ""})");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.message, "prompt must not be empty");
  e = ValidationError(R"({"prompt": "a long prompt"})");
  EXPECT_EQ(e.message, "prompt is 13 tokens, the limit is 8");
  e = ValidationError(R"({})");
  EXPECT_EQ(e.param, "prompt");
  e = ValidationError(R"({"prompt": "a", "stop": ["x", ""]})");
  EXPECT_EQ(e.param, "stop");
  EXPECT_EQ(e.message, "stop[1] must not be empty");
  e = ValidationError(R"({"prompt": "a", "logprobs": 21})");
  EXPECT_EQ(e.param, "logprobs");
  EXPECT_EQ(e.message, "logprobs must be <= 20, got 21");
  for (const char* field : {"temperature", "min_p", "repetition_penalty"}) {
    e = ValidationError(
        absl::StrCat(R"({"prompt": "a", ")", field, R"(": -1})"));
    EXPECT_EQ(e.param, field);
    EXPECT_THAT(e.message, ::testing::StartsWith(field));
  }
  e = ValidationError(R"({"prompt": "a", "max_tokens": 4, "min_tokens": 5})");
  EXPECT_EQ(e.param, "min_tokens");
  EXPECT_EQ(e.message,
            "min_tokens must be in [0, 4] (at most the request's maximum of "
            "new tokens), got 5");
  e = ValidationError(R"({"prompt": "a", "n": 17})");
  EXPECT_EQ(e.param, "n");
  EXPECT_EQ(e.message, "n must be in [1, 16], got 17");
  e = ValidationError(R"({"prompt": "a", "presence_penalty": 2.5})");
  EXPECT_EQ(e.param, "presence_penalty");
  EXPECT_EQ(e.message, "presence_penalty must be in [-2, 2], got 2.5");
  e = ValidationError(R"({"prompt": "a", "frequency_penalty": -2.01})");
  EXPECT_EQ(e.param, "frequency_penalty");
  EXPECT_THAT(e.message,
              ::testing::StartsWith("frequency_penalty must be in [-2, 2]"));
  e = ValidationError(R"({"prompt": "a", "temperature": 1e300})");
  EXPECT_EQ(e.param, "temperature");
  e = ValidationError(R"({"prompt": "a", "stop_token_ids": [999]})");
  EXPECT_EQ(e.param, "stop_token_ids");
  EXPECT_EQ(e.message, "stop_token_ids[0] must be in [0, 257), got 999");
}

TEST(OpenAiErrorTest, StatusesMapToHttpStatusesAndTypes) {
  EXPECT_EQ(
      ErrorFromStatus(absl::ResourceExhaustedError("queue full")).http_status,
      429);
  OpenAiError e = ErrorFromStatus(absl::UnavailableError("draining"));
  EXPECT_EQ(e.http_status, 503);
  EXPECT_EQ(e.message, "draining");
  EXPECT_EQ(ErrorFromStatus(absl::InternalError("x")).http_status, 500);
  EXPECT_EQ(ErrorFromStatus(absl::InternalError("x")).type, "server_error");
  // A field-less INVALID_ARGUMENT (the engine's own checks) keeps its text.
  e = ErrorFromStatus(absl::InvalidArgumentError("prompt id 5 is padding"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "");
  EXPECT_EQ(e.message, "prompt id 5 is padding");
  EXPECT_EQ(StatusCodeForHttpStatus(400), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttpStatus(413), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForHttpStatus(429), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeForHttpStatus(503), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttpStatus(200), absl::StatusCode::kOk);
  EXPECT_EQ(StatusCodeForHttpStatus(500), absl::StatusCode::kInternal);
}

TEST(OpenAiErrorTest, BodyIsOpenAisErrorObject) {
  OpenAiError e;
  e.message = "n must be 1";
  e.param = "n";
  EXPECT_EQ(
      ErrorBody(e),
      R"({"error":{"message":"n must be 1","type":"invalid_request_error",)"
      R"("param":"n","code":null}})");
}

GenerationEvent Tokens(std::vector<int32_t> ids, std::string text) {
  GenerationEvent e;
  e.token_ids = std::move(ids);
  e.text = std::move(text);
  return e;
}

// "H" and a token of part of "€", with logprobs: the first with two
// alternatives (itself and "i"), the second with none.
GenerationEvent TokensWithLogprobs() {
  GenerationEvent e = Tokens({72, 200}, "H");
  e.logprobs.push_back({{72, -0.5f}, {{72, -0.5f}, {105, -1.5f}}});
  e.logprobs.push_back({{200, -0.25f}, {}});
  return e;
}

GenerationEvent Final(FinishReason reason, std::string stop = "") {
  GenerationEvent e;
  e.finish = reason;
  e.matched_stop = std::move(stop);
  e.prompt_tokens = 5;
  e.cached_prompt_tokens = 2;
  e.generated_tokens = 3;
  return e;
}

CompletionContext Context(bool logprobs = false, bool include_usage = false) {
  CompletionContext c;
  c.id = "cmpl-1";
  c.created = 1700000000;
  c.model = kModel;
  c.logprobs = logprobs;
  c.include_usage = include_usage;
  c.token_bytes = [](int32_t id) {
    if (id == 200) return std::string("\xE2\x82");  // part of a character
    return std::string(1, static_cast<char>(id));
  };
  return c;
}

// The JSON objects of an SSE stream's data lines, and whether it ended with
// [DONE].
std::vector<json> DataLines(const std::string& sse, bool* done) {
  std::vector<json> out;
  *done = false;
  for (absl::string_view event : absl::StrSplit(sse, "\n\n")) {
    if (event.empty()) continue;
    EXPECT_TRUE(absl::ConsumePrefix(&event, "data: ")) << event;
    EXPECT_FALSE(*done) << "data after [DONE]";
    if (event == "[DONE]") {
      *done = true;
      continue;
    }
    out.push_back(json::parse(event));
  }
  return out;
}

TEST(CompletionRendererTest, StreamsChunksThenFinishThenDone) {
  CompletionRenderer r(Context());
  bool done = false;
  std::vector<json> chunks =
      DataLines(r.StreamEvents({Tokens({72}, "H"), Tokens({105}, "i")}), &done);
  ASSERT_EQ(chunks.size(), 1u);  // a run is one chunk
  EXPECT_FALSE(done);
  EXPECT_EQ(chunks[0]["id"], "cmpl-1");
  EXPECT_EQ(chunks[0]["object"], "text_completion");
  EXPECT_EQ(chunks[0]["created"], 1700000000);
  EXPECT_EQ(chunks[0]["model"], "tiny");
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "Hi");
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 0);
  EXPECT_TRUE(chunks[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunks[0]["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(chunks[0].contains("usage"));

  // Tokens without complete text yet make no chunk.
  EXPECT_EQ(r.StreamEvents({Tokens({200}, "")}), "");

  chunks = DataLines(
      r.StreamEvents({Tokens({33}, "!"), Final(FinishReason::kLength)}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "!");
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(r.ended());
  EXPECT_EQ(r.final_code(), absl::StatusCode::kOk);
  EXPECT_EQ(r.StreamEvents({Tokens({1}, "x")}), "");
}

TEST(CompletionRendererTest, IncludeUsageAddsAUsageChunkBeforeDone) {
  CompletionRenderer r(Context(false, /*include_usage=*/true));
  bool done = false;
  std::vector<json> chunks =
      DataLines(r.StreamEvents({Tokens({72}, "H")}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0]["usage"].is_null());
  chunks = DataLines(r.StreamEvents({Final(FinishReason::kStopString, "\n")}),
                     &done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "");
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[0]["choices"][0]["stop_reason"], "\n");
  EXPECT_EQ(chunks[1]["choices"], json::array());
  EXPECT_EQ(chunks[1]["usage"],
            json::parse(R"({"prompt_tokens": 5, "completion_tokens": 3,
              "total_tokens": 8, "prompt_tokens_details": {"cached_tokens": 2}})"));
}

TEST(CompletionRendererTest, ErrorsEndTheStreamWithAnErrorObject) {
  CompletionRenderer r(Context());
  GenerationEvent failed;
  failed.status = absl::InternalError("step failed");
  bool done = false;
  std::vector<json> chunks =
      DataLines(r.StreamEvents({Tokens({72}, "H"), failed}), &done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "H");
  EXPECT_EQ(chunks[1]["error"]["message"], "step failed");
  EXPECT_EQ(chunks[1]["error"]["type"], "server_error");
  EXPECT_TRUE(done);
  EXPECT_EQ(r.final_code(), absl::StatusCode::kInternal);

  // The server cancelling a request (draining) is an error to the client.
  CompletionRenderer cancelled(Context());
  chunks = DataLines(cancelled.StreamEvents({Final(FinishReason::kCancelled)}),
                     &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_THAT(chunks[0]["error"]["message"].get<std::string>(),
              HasSubstr("shutting down"));
  EXPECT_EQ(cancelled.final_code(), absl::StatusCode::kUnavailable);
}

TEST(CompletionRendererTest, LogprobsInTheCompletionsForm) {
  CompletionRenderer r(Context(/*logprobs=*/true));
  bool done = false;
  std::vector<json> chunks =
      DataLines(r.StreamEvents({TokensWithLogprobs()}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  const json& lp = chunks[0]["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::parse(R"(["H", "bytes:\\xe2\\x82"])"));
  EXPECT_EQ(lp["token_logprobs"], json::parse("[-0.5, -0.25]"));
  EXPECT_EQ(lp["top_logprobs"][0], json::parse(R"({"H": -0.5, "i": -1.5})"));
  EXPECT_EQ(lp["top_logprobs"][1],
            json::parse(R"({"bytes:\\xe2\\x82": -0.25})"));
  EXPECT_EQ(lp["text_offset"], json::parse("[0, 1]"));
  // Offsets go on across chunks: "H" and the lead byte of the character
  // were two characters.
  GenerationEvent next = Tokens({33}, "\xE2\x82\xAC!");
  next.logprobs.push_back({{33, -1.0f}, {}});
  chunks = DataLines(r.StreamEvents({next}), &done);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["text_offset"],
            json::parse("[2]"));
}

TEST(CompletionRendererTest, NonStreamingBody) {
  CompletionRenderer r(Context());
  r.Add(Tokens({72}, "H"));
  EXPECT_FALSE(r.ended());
  r.Add(Tokens({105}, "i"));
  r.Add(Final(FinishReason::kEos));
  EXPECT_TRUE(r.ended());
  auto [status, body] = r.Finish();
  EXPECT_EQ(status, 200);
  json j = json::parse(body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());
  EXPECT_EQ(j["usage"]["total_tokens"], 8);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);

  CompletionRenderer failing(Context());
  GenerationEvent failed;
  failed.status = absl::InvalidArgumentError("prompt holds padding");
  failing.Add(failed);
  auto [error_status, error_body] = failing.Finish();
  EXPECT_EQ(error_status, 400);
  EXPECT_EQ(json::parse(error_body)["error"]["message"],
            "prompt holds padding");
}

TEST(OpenAiParseTest, NAndBestOfEqualToIt) {
  EXPECT_EQ(Parse(R"({"prompt": "a", "n": 4})").generate.n(), 4u);
  EXPECT_EQ(Parse(R"({"prompt": "a", "n": 4, "best_of": 4})").generate.n(), 4u);
  EXPECT_FALSE(Parse(R"({"prompt": "a"})").generate.has_n());
}

GenerationEvent At(int32_t index, GenerationEvent e) {
  e.index = index;
  return e;
}

// n = 2, streaming: one chunk per choice a run touches, each with its
// index; the end (usage: the prompt once, both choices' tokens) once both
// finished.
TEST(CompletionRendererTest, StreamsEachChoiceWithItsIndex) {
  CompletionContext context = Context(/*logprobs=*/true, true);
  context.n = 2;
  CompletionRenderer r(context);
  GenerationEvent a = Tokens({72}, "H"), b = Tokens({105}, "i");
  a.logprobs.push_back({{72, -0.5f}, {}});
  b.logprobs.push_back({{105, -0.25f}, {}});
  bool done = false;
  std::vector<json> chunks = DataLines(
      r.StreamEvents({At(1, b), At(0, a), At(1, Tokens({33}, "!"))}), &done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["choices"].size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 1);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "i!");
  EXPECT_EQ(chunks[1]["choices"][0]["index"], 0);
  EXPECT_EQ(chunks[1]["choices"][0]["text"], "H");
  GenerationEvent first_final = Final(FinishReason::kLength);
  first_final.generated_tokens = 4;
  chunks = DataLines(r.StreamEvents({At(0, first_final)}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_FALSE(done);
  EXPECT_FALSE(r.ended());
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 0);
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "length");
  // Each choice's logprob offsets run on their own.
  GenerationEvent c = Tokens({33}, "?");
  c.logprobs.push_back({{33, -1.0f}, {}});
  chunks = DataLines(
      r.StreamEvents({At(1, c), At(1, Final(FinishReason::kEos))}), &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 1);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["text_offset"],
            json::parse("[1]"));
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[1]["usage"],
            json::parse(R"({"prompt_tokens": 5, "completion_tokens": 7,
              "total_tokens": 12, "prompt_tokens_details": {"cached_tokens": 2}})"));
  EXPECT_TRUE(r.ended());
}

TEST(CompletionRendererTest, NonStreamingChoicesInIndexOrder) {
  CompletionContext context = Context();
  context.n = 3;
  CompletionRenderer r(context);
  r.Add(At(2, Tokens({99}, "c")));
  r.Add(At(0, Tokens({97}, "a")));
  r.Add(At(2, Final(FinishReason::kEos)));
  r.Add(At(1, Tokens({98}, "b")));
  r.Add(At(0, Final(FinishReason::kLength)));
  EXPECT_FALSE(r.ended());
  r.Add(At(1, Final(FinishReason::kStopString, "x")));
  EXPECT_TRUE(r.ended());
  auto [status, body] = r.Finish();
  EXPECT_EQ(status, 200);
  json j = json::parse(body);
  ASSERT_EQ(j["choices"].size(), 3u);
  const char* texts[] = {"a", "b", "c"};
  const char* reasons[] = {"length", "stop", "stop"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], texts[i]);
    EXPECT_EQ(j["choices"][i]["finish_reason"], reasons[i]);
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 9);
  EXPECT_EQ(j["usage"]["total_tokens"], 14);

  // An error in one choice is the answer.
  CompletionRenderer failing(context);
  failing.Add(At(0, Tokens({97}, "a")));
  GenerationEvent failed;
  failed.index = 1;
  failed.status = absl::InternalError("step failed");
  failing.Add(failed);
  EXPECT_TRUE(failing.ended());
  auto [error_status, error_body] = failing.Finish();
  EXPECT_EQ(error_status, 500);
  EXPECT_EQ(json::parse(error_body)["error"]["message"], "step failed");
}

TEST(OpenAiTextTest, TokenTextKeepsValidUtf8AndWritesBytesOtherwise) {
  EXPECT_EQ(TokenText("abc"), "abc");
  EXPECT_EQ(TokenText("\xE2\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(TokenText("\xE2\x82"), "bytes:\\xe2\\x82");
  EXPECT_EQ(TokenText(""), "");
  EXPECT_EQ(OpenAiFinishReason(FinishReason::kStopString), "stop");
  EXPECT_EQ(OpenAiFinishReason(FinishReason::kEos), "stop");
  EXPECT_EQ(OpenAiFinishReason(FinishReason::kLength), "length");
}

TEST(OpenAiModelsTest, ListAndModel) {
  EXPECT_EQ(json::parse(ModelListBody("tiny", 5)),
            json::parse(R"({"object": "list", "data": [{"id": "tiny",
              "object": "model", "created": 5, "owned_by": "seqboat"}]})"));
  EXPECT_EQ(json::parse(ModelBody("tiny", 5))["id"], "tiny");
}

// --- /v1/chat/completions

ChatRequest ParseChat(const std::string& body) {
  return ParseOk<ChatRequest>(ParseChatRequest, body);
}

OpenAiError ParseChatError(const std::string& body) {
  return ParseFails<ChatRequest>(ParseChatRequest, body);
}

TEST(OpenAiChatParseTest, MessagesAndEveryParameter) {
  ChatRequest r = ParseChat(R"({"model": "tiny", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "a"},
                                   {"type": "text", "text": "b"}],
       "name": "ann"},
      {"role": "assistant", "content": "", "tool_calls": null},
      {"role": "user", "content": "c"}],
    "max_completion_tokens": 9, "min_tokens": 2, "temperature": 0.5,
    "top_p": 0.9,
    "top_k": 7, "min_p": 0.1, "seed": 42, "stop": ["x", "y"],
    "presence_penalty": 0.5, "frequency_penalty": -0.5,
    "logprobs": true, "top_logprobs": 3, "stream": true,
    "stream_options": {"include_usage": true}, "user": "u", "n": 1,
    "tool_choice": "none", "tools": [], "response_format": {"type": "text"},
    "parallel_tool_calls": false})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");  // developer is system
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "a\nb");  // text parts, joined
  EXPECT_EQ(r.messages[1].name, "ann");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_FALSE(r.messages[2].name.has_value());
  const v1::GenerateRequest& g = r.completion.generate;
  EXPECT_FALSE(g.has_text() || g.has_token_ids());  // the caller's to set
  EXPECT_EQ(g.stopping().max_new_tokens(), 9u);
  EXPECT_EQ(g.stopping().min_new_tokens(), 2u);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 7);
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.1f);
  EXPECT_EQ(g.sampling().seed(), 42u);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -0.5f);
  EXPECT_THAT(g.stopping().stop(), ElementsAre("x", "y"));
  EXPECT_TRUE(g.logprobs().enabled());
  EXPECT_EQ(g.logprobs().top_n(), 3u);
  EXPECT_TRUE(r.logprobs);
  EXPECT_TRUE(r.completion.stream);
  EXPECT_TRUE(r.completion.include_usage);
  EXPECT_EQ(r.max_tokens_param, "max_completion_tokens");

  ChatRequest plain = ParseChat(
      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
          "logprobs": false})");
  EXPECT_EQ(plain.completion.generate.stopping().max_new_tokens(), 4u);
  EXPECT_FALSE(plain.completion.generate.has_logprobs());
  EXPECT_FALSE(plain.logprobs);
  EXPECT_EQ(plain.max_tokens_param, "max_tokens");
  // logprobs alone asks for the chosen tokens' only.
  ChatRequest chosen = ParseChat(
      R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true})");
  EXPECT_TRUE(chosen.completion.generate.logprobs().enabled());
  EXPECT_EQ(chosen.completion.generate.logprobs().top_n(), 0u);
}

TEST(OpenAiChatParseTest, RefusesBadMessagesNamingThem) {
  struct Case {
    const char* body;
    const char* message;
  };
  const std::string too_many = [] {
    std::string m = R"({"messages": [)";
    for (int i = 0; i <= kMaxChatMessages; ++i) {
      if (i > 0) m += ",";
      m += R"({"role": "user", "content": "x"})";
    }
    return m + "]}";
  }();
  for (
      const Case& c : {
          Case{R"({})", "messages is required"},
          Case{R"({"messages": "hi"})", "messages must be an array"},
          Case{R"({"messages": []})", "must hold at least one message"},
          Case{too_many.c_str(), "more than the limit of 1024"},
          Case{R"({"messages": [1]})", "messages[0] must be an object"},
          Case{R"({"messages": [{"content": "x"}]})",
               "messages[0].role must be a string"},
          Case{R"({"messages": [{"role": "user", "content": "x"},
                                 {"role": "function", "content": "x"}]})",
               "messages[1].role must be 'system', 'developer', 'user', "
               "'assistant' or 'tool', got \"function\""},
          Case{R"({"messages": [{"role": "user"}]})",
               "messages[0].content is missing"},
          Case{R"({"messages": [{"role": "user", "content": null}]})",
               "messages[0].content is missing"},
          Case{R"({"messages": [{"role": "user", "content": 3}]})",
               "messages[0].content must be a string or a list of text parts"},
          Case{R"({"messages": [{"role": "user", "content": [
                  {"type": "image_url", "image_url": {"url": "x"}}]}]})",
               "messages[0].content[0] is of type 'image_url'"},
          Case{
              R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
              "messages[0].content[0].text must be a string"},
          Case{R"({"messages": [{"role": "user", "content": "x", "name": 1}]})",
               "messages[0].name must be a string"},
          Case{R"({"messages": [{"role": "assistant", "content": "x",
                                  "tool_calls": [{"id": "1"}]}]})",
               "messages[0].tool_calls[0].function.name must be a string"},
          Case{R"({"messages": [{"role": "user", "content": "x", "mood": 1}]})",
               "messages[0] has an unknown field 'mood'"},
      }) {
    OpenAiError e = ParseChatError(c.body);
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param, "messages") << c.body;
    EXPECT_THAT(e.message, HasSubstr(c.message)) << c.body;
  }
}

TEST(OpenAiChatParseTest, RefusesOtherParametersNamingThem) {
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  struct Case {
    std::string body;
    const char* param;
    const char* message;
  };
  for (const Case& c : {
           Case{"{" + m + R"(, "prompt": "x"})", "prompt",
                "Unrecognized request argument supplied: prompt"},
           Case{"{" + m + R"(, "echo": true})", "echo",
                "Unrecognized request argument supplied: echo"},
           Case{"{" + m + R"(, "model": "gpt-4"})", "model",
                "The model `gpt-4` does not exist"},
           Case{"{" + m + R"(, "tools": [{"type": "function"}]})", "tools",
                "tools[0].function must be an object"},
           Case{"{" + m + R"(, "tool_choice": "required"})", "tool_choice",
                "tool_choice asks for tool calls but the request has no tools"},
           Case{"{" + m + R"(, "response_format": {"type": "xml"}})",
                "response_format", "response_format.type must be"},
           Case{"{" + m + R"(, "logprobs": 1})", "logprobs",
                "logprobs must be a boolean"},
           Case{"{" + m + R"(, "top_logprobs": 2})", "top_logprobs",
                "top_logprobs requires logprobs to be true"},
           Case{"{" + m + R"(, "logprobs": true, "top_logprobs": -1})",
                "top_logprobs", "top_logprobs must be in [0, 20], got -1"},
           Case{"{" + m + R"(, "logprobs": true, "top_logprobs": "x"})",
                "top_logprobs", "top_logprobs must be an integer"},
           Case{"{" + m + R"(, "max_completion_tokens": 0})",
                "max_completion_tokens",
                "max_completion_tokens must be in [1, 64], got 0"},
           Case{"{" + m + R"(, "max_tokens": -5})", "max_tokens",
                "max_tokens must be in [1, 64], got -5"},
           Case{"{" + m + R"(, "temperature": "hot"})", "temperature",
                "temperature must be a number"},
           Case{"{" + m + R"(, "n": 0})", "n", "n must be in [1, 16], got 0"},
           Case{"{" + m + R"(, "stream_options": {"include_usage": true}})",
                "stream_options", "only allowed when stream is true"},
       }) {
    OpenAiError e = ParseChatError(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_THAT(e.message, HasSubstr(c.message)) << c.body;
  }
  EXPECT_EQ(ParseChatError("{not json").param, "");
}

TEST(OpenAiChatParseTest, ValidationErrorsAreNamedAsTheChatRequestNamedThem) {
  ChatRequest r = ParseChat(
      R"({"messages": [{"role": "user", "content": "x"}],
          "max_completion_tokens": 500})");
  r.completion.generate.mutable_token_ids()->add_ids(72);
  absl::StatusOr<Request> request =
      RequestFromProto(r.completion.generate, Bytes(), Limits(), {"id", 1});
  ASSERT_FALSE(request.ok());
  OpenAiError e = ChatError(ErrorFromStatus(request.status()), r);
  EXPECT_EQ(e.param, "max_completion_tokens");
  EXPECT_THAT(e.message, HasSubstr("max_completion_tokens must be"));

  // A rendered prompt over the token limit is the messages' fault.
  ChatRequest long_prompt =
      ParseChat(R"({"messages": [{"role": "user", "content": "x"}]})");
  for (int i = 0; i < 9; ++i) {
    long_prompt.completion.generate.mutable_token_ids()->add_ids(72);
  }
  request = RequestFromProto(long_prompt.completion.generate, Bytes(), Limits(),
                             {"id", 1});
  ASSERT_FALSE(request.ok());
  e = ChatError(ErrorFromStatus(request.status()), long_prompt);
  EXPECT_EQ(e.param, "messages");
  EXPECT_THAT(e.message, StartsWith("messages"));
}

CompletionContext ChatContext(bool logprobs = false,
                              bool include_usage = false) {
  CompletionContext c = Context(logprobs, include_usage);
  c.id = "chatcmpl-1";
  return c;
}

TEST(ChatRendererTest, StreamsRoleThenContentThenFinishThenDone) {
  ChatRenderer r(ChatContext());
  bool done = false;
  std::vector<json> chunks = DataLines(r.StreamStart(), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["id"], "chatcmpl-1");
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["created"], 1700000000);
  EXPECT_EQ(chunks[0]["model"], "tiny");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"],
            json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(chunks[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(chunks[0].contains("usage"));

  chunks =
      DataLines(r.StreamEvents({Tokens({72}, "H"), Tokens({105}, "i")}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"],
            json::parse(R"({"content": "Hi"})"));
  EXPECT_TRUE(chunks[0]["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(done);
  EXPECT_EQ(r.StreamEvents({Tokens({200}, "")}), "");

  chunks = DataLines(r.StreamEvents({Final(FinishReason::kEos)}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], json::object());
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(r.ended());
  EXPECT_EQ(r.final_code(), absl::StatusCode::kOk);
}

TEST(ChatRendererTest, UsageChunkAndErrors) {
  ChatRenderer r(ChatContext(false, /*include_usage=*/true));
  bool done = false;
  std::vector<json> chunks = DataLines(r.StreamStart(), &done);
  EXPECT_TRUE(chunks[0]["usage"].is_null());
  chunks = DataLines(
      r.StreamEvents({Tokens({72}, "H"), Final(FinishReason::kLength)}), &done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"],
            json::parse(R"({"content": "H"})"));
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[1]["choices"], json::array());
  EXPECT_EQ(chunks[1]["usage"]["total_tokens"], 8);

  ChatRenderer failing(ChatContext());
  GenerationEvent failed;
  failed.status = absl::UnavailableError("draining");
  chunks = DataLines(failing.StreamEvents({failed}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["error"]["type"], "service_unavailable");
  EXPECT_TRUE(done);
  EXPECT_EQ(failing.final_code(), absl::StatusCode::kUnavailable);
}

TEST(ChatRendererTest, LogprobsInTheChatForm) {
  ChatRenderer r(ChatContext(/*logprobs=*/true));
  bool done = false;
  std::vector<json> chunks =
      DataLines(r.StreamEvents({TokensWithLogprobs()}), &done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"], json::parse(R"({"content": [
      {"token": "H", "logprob": -0.5, "bytes": [72], "top_logprobs": [
          {"token": "H", "logprob": -0.5, "bytes": [72]},
          {"token": "i", "logprob": -1.5, "bytes": [105]}]},
      {"token": "bytes:\\xe2\\x82", "logprob": -0.25, "bytes": [226, 130],
       "top_logprobs": []}], "refusal": null})"));
}

// n = 2: a role chunk per choice, then each choice's chunks with its
// index, the end once both finished; the body lists both, usage counting
// the prompt once.
TEST(ChatRendererTest, ChoicesOfARequestOfN) {
  CompletionContext context = ChatContext(false, /*include_usage=*/true);
  context.n = 2;
  ChatRenderer r(context);
  bool done = false;
  std::vector<json> chunks = DataLines(r.StreamStart(), &done);
  ASSERT_EQ(chunks.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(chunks[i]["choices"][0]["index"], i);
    EXPECT_EQ(chunks[i]["choices"][0]["delta"]["role"], "assistant");
  }
  chunks = DataLines(
      r.StreamEvents({At(1, Tokens({98}, "b")), At(0, Tokens({97}, "a")),
                      At(1, Final(FinishReason::kEos))}),
      &done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_FALSE(done);
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 1);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["content"], "b");
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[1]["choices"][0]["index"], 0);
  chunks =
      DataLines(r.StreamEvents({At(0, Final(FinishReason::kLength))}), &done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_TRUE(done);
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[1]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(chunks[1]["usage"]["completion_tokens"], 6);

  ChatRenderer whole(context);
  whole.Add(At(1, Tokens({98}, "b")));
  whole.Add(At(1, Final(FinishReason::kEos)));
  whole.Add(At(0, Tokens({97}, "a")));
  EXPECT_FALSE(whole.ended());
  whole.Add(At(0, Final(FinishReason::kLength)));
  EXPECT_TRUE(whole.ended());
  auto [status, body] = whole.Finish();
  EXPECT_EQ(status, 200);
  json j = json::parse(body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "a");
  EXPECT_EQ(j["choices"][1]["message"]["content"], "b");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(j["usage"]["total_tokens"], 11);
}

TEST(ChatRendererTest, NonStreamingBody) {
  ChatRenderer r(ChatContext(/*logprobs=*/true));
  GenerationEvent e = Tokens({72}, "H");
  e.logprobs.push_back({{72, -0.5f}, {}});
  r.Add(e);
  r.Add(Tokens({105}, "i"));
  EXPECT_FALSE(r.ended());
  r.Add(Final(FinishReason::kStopString, "!"));
  EXPECT_TRUE(r.ended());
  auto [status, body] = r.Finish();
  EXPECT_EQ(status, 200);
  json j = json::parse(body);
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"],
            json::parse(R"({"role": "assistant", "content": "Hi"})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "!");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"].size(), 1u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);

  ChatRenderer cancelled(ChatContext());
  cancelled.Add(Final(FinishReason::kCancelled));
  auto [cancel_status, cancel_body] = cancelled.Finish();
  EXPECT_EQ(cancel_status, 503);
  EXPECT_EQ(cancelled.final_code(), absl::StatusCode::kUnavailable);
}

TEST(OpenAiParseTest, ChatTemplateKwargsReachTheTemplateAsVariables) {
  const ChatRequest parsed =
      ParseOk<ChatRequest>(ParseChatRequest,
                           R"({"messages": [{"role": "user", "content": "hi"}],
          "chat_template_kwargs": {"enable_thinking": false, "depth": 2}})");
  // Keys in either order: the request is parsed as an unordered object.
  EXPECT_EQ(nlohmann::json::parse(parsed.template_kwargs.dump()),
            nlohmann::json::parse(R"({"enable_thinking": false, "depth": 2})"));
  auto t = ChatTemplate::FromTokenizerConfig(
      R"({"chat_template": "{{ messages[0].content }}{% if enable_thinking is false %}/no_think{% endif %}"})",
      "tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ChatOptions options;
  options.kwargs = parsed.template_kwargs;
  EXPECT_EQ((*t)->Render(parsed.messages, options)->text, "hi/no_think");
  EXPECT_EQ((*t)->Render(parsed.messages)->text, "hi");
}

TEST(OpenAiParseTest, RefusesBadChatTemplateKwargsNamingThem) {
  for (const char* kwargs :
       {R"("on")", R"([1])", R"({"not an id": 1})", R"({"1st": true})"}) {
    const std::string body =
        absl::StrCat(R"({"messages": [{"role": "user", "content": "hi"}], )",
                     R"("chat_template_kwargs": )", kwargs, "}");
    OpenAiError e = ParseFails<ChatRequest>(ParseChatRequest, body);
    EXPECT_EQ(e.http_status, 400) << body;
    EXPECT_EQ(e.param, "chat_template_kwargs") << body;
  }
}

}  // namespace
}  // namespace seqboat
