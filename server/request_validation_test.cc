#include "server/request_validation.h"

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kVocab = 100;
constexpr int32_t kBos = 0;
constexpr int32_t kEos = 1;

// One token per whitespace-separated word: the word's length plus 10.
Vocabulary TestVocabulary() {
  Vocabulary v;
  v.rules.vocab_limit = kVocab;
  v.encode =
      [](absl::string_view text) -> absl::StatusOr<std::vector<int32_t>> {
    if (text == "untokenizable") return absl::InvalidArgumentError("bad byte");
    std::vector<int32_t> ids;
    for (absl::string_view word :
         absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
      ids.push_back(10 + static_cast<int32_t>(word.size()));
    }
    return ids;
  };
  v.is_special = [](int32_t id) { return id == kBos || id == kEos; };
  return v;
}

ValidationLimits TestLimits() {
  ValidationLimits limits;
  limits.max_new_tokens_default = 32;
  limits.max_new_tokens_limit = 64;
  limits.max_prompt_tokens = 5;
  return limits;
}

RequestFallbacks TestFallbacks() { return {"generated-id", 424242}; }

v1::GenerateRequest TextRequest(const std::string& text = "hello there") {
  v1::GenerateRequest proto;
  proto.set_text(text);
  return proto;
}

absl::StatusOr<Request> Convert(const v1::GenerateRequest& proto) {
  return RequestFromProto(proto, TestVocabulary(), TestLimits(),
                          TestFallbacks());
}

// Asserts INVALID_ARGUMENT whose message contains `field`.
void ExpectInvalid(const v1::GenerateRequest& proto, const std::string& field) {
  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_FALSE(request.ok()) << "accepted: " << proto.DebugString();
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(request.status().message()), HasSubstr(field));
  // The field is also carried apart from the message, and the message starts
  // with it.
  const std::string named = InvalidField(request.status());
  EXPECT_FALSE(named.empty()) << request.status();
  EXPECT_TRUE(absl::StartsWith(request.status().message(), named + " "))
      << request.status();
}

TEST(RequestValidationTest, DefaultsFilledIn) {
  absl::StatusOr<Request> request = Convert(TextRequest("hello there"));
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->id, "generated-id");
  EXPECT_THAT(request->prompt, ElementsAre(15, 15));
  EXPECT_EQ(request->sampling.temperature, 1.0f);
  EXPECT_EQ(request->sampling.top_k, 0);
  EXPECT_EQ(request->sampling.top_p, 1.0f);
  EXPECT_EQ(request->sampling.min_p, 0.0f);
  EXPECT_EQ(request->sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(request->sampling.seed, 424242u);
  EXPECT_EQ(request->stopping.max_new_tokens, 32);
  EXPECT_TRUE(request->stopping.stop_strings.empty());
  EXPECT_FALSE(request->stopping.ignore_eos);
  EXPECT_FALSE(request->logprobs);
  EXPECT_EQ(request->top_logprobs, 0);
}

TEST(RequestValidationTest, AllFieldsCarriedOver) {
  v1::GenerateRequest proto;
  proto.set_request_id("mine");
  proto.mutable_token_ids()->add_ids(kBos);
  proto.mutable_token_ids()->add_ids(42);
  auto* s = proto.mutable_sampling();
  s->set_temperature(0.0f);
  s->set_top_k(40);
  s->set_top_p(0.9f);
  s->set_min_p(0.05f);
  s->set_repetition_penalty(1.3f);
  s->set_presence_penalty(-2.0f);
  s->set_frequency_penalty(2.0f);
  s->set_seed(7);
  auto* st = proto.mutable_stopping();
  st->set_max_new_tokens(64);
  st->add_stop("\n\n");
  st->add_stop_token_ids(99);
  st->set_ignore_eos(true);
  proto.mutable_logprobs()->set_enabled(true);
  proto.mutable_logprobs()->set_top_n(20);

  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->id, "mine");
  EXPECT_THAT(request->prompt, ElementsAre(kBos, 42));
  EXPECT_EQ(request->sampling.temperature, 0.0f);
  EXPECT_EQ(request->sampling.top_k, 40);
  EXPECT_FLOAT_EQ(request->sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(request->sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(request->sampling.repetition_penalty, 1.3f);
  EXPECT_EQ(request->sampling.presence_penalty, -2.0f);
  EXPECT_EQ(request->sampling.frequency_penalty, 2.0f);
  EXPECT_EQ(request->sampling.seed, 7u);
  EXPECT_EQ(request->stopping.max_new_tokens, 64);
  EXPECT_THAT(request->stopping.stop_strings, ElementsAre("\n\n"));
  EXPECT_THAT(request->stopping.stop_token_ids, ElementsAre(99));
  EXPECT_TRUE(request->stopping.ignore_eos);
  EXPECT_TRUE(request->logprobs);
  EXPECT_EQ(request->top_logprobs, 20);
}

// The prefix cache's scope: the tenant and the salt, never two pairs alike.
TEST(RequestValidationTest, CacheScopeOfTenantAndSalt) {
  const auto scope = [](const std::string& tenant, const std::string& salt) {
    v1::GenerateRequest proto = TextRequest();
    proto.set_cache_salt(salt);
    RequestFallbacks fallbacks = TestFallbacks();
    fallbacks.cache_tenant = tenant;
    absl::StatusOr<Request> r =
        RequestFromProto(proto, TestVocabulary(), TestLimits(), fallbacks);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->cache_scope : "";
  };
  const std::set<std::string> scopes = {scope("", ""),   scope("a", ""),
                                        scope("", "a"),  scope("ab", ""),
                                        scope("a", "b"), scope("", "ab")};
  EXPECT_EQ(scopes.size(), 6u);
  EXPECT_EQ(scope("a", "b"), scope("a", "b"));
  v1::GenerateRequest long_salt = TextRequest();
  long_salt.set_cache_salt(std::string(kMaxCacheSaltBytes + 1, 's'));
  ExpectInvalid(long_salt, "cache_salt");
}

TEST(RequestValidationTest, SeedZeroIsAValidExplicitSeed) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_sampling()->set_seed(0);
  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->sampling.seed, 0u);
}

TEST(RequestValidationTest, TopNImpliesLogprobs) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_logprobs()->set_top_n(3);
  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_TRUE(request.ok());
  EXPECT_TRUE(request->logprobs);
  EXPECT_EQ(request->top_logprobs, 3);
}

TEST(RequestValidationTest, DefaultMaxNewTokensNeverExceedsLimit) {
  ValidationLimits limits = TestLimits();
  limits.max_new_tokens_default = 1000;
  absl::StatusOr<Request> request = RequestFromProto(
      TextRequest(), TestVocabulary(), limits, TestFallbacks());
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->stopping.max_new_tokens, 64);
}

TEST(RequestValidationTest, SpeculativeOptionsOverTheServersDefault) {
  ValidationLimits limits = TestLimits();
  limits.max_draft_tokens = 6;
  auto convert = [&](const v1::GenerateRequest& proto) {
    return RequestFromProto(proto, TestVocabulary(), limits, TestFallbacks());
  };
  // Off by default; a method alone takes a default count.
  absl::StatusOr<Request> r = convert(TextRequest());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->speculative.method, SpeculativeMethod::kNone);
  EXPECT_EQ(r->speculative.num_draft_tokens, 0);
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_speculative()->set_method(v1::SPECULATIVE_METHOD_PROMPT_LOOKUP);
  r = convert(proto);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->speculative.method, SpeculativeMethod::kPromptLookup);
  EXPECT_EQ(r->speculative.num_draft_tokens, 4);
  // The server's default applies unless the request says NONE.
  limits.speculative_default = {SpeculativeMethod::kPromptLookup, 5, 2, 4};
  r = convert(TextRequest());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->speculative.num_draft_tokens, 5);
  proto = TextRequest();
  proto.mutable_speculative()->set_method(v1::SPECULATIVE_METHOD_NONE);
  r = convert(proto);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->speculative.method, SpeculativeMethod::kNone);
  EXPECT_EQ(r->speculative.num_draft_tokens, 0);
  proto = TextRequest();
  proto.mutable_speculative()->set_num_draft_tokens(2);
  proto.mutable_speculative()->set_ngram_min(1);
  proto.mutable_speculative()->set_ngram_max(3);
  r = convert(proto);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->speculative.num_draft_tokens, 2);
  EXPECT_EQ(r->speculative.ngram_min, 1);
  EXPECT_EQ(r->speculative.ngram_max, 3);
  // Out of range, by name.
  for (uint32_t bad : {0u, 7u}) {
    proto = TextRequest();
    proto.mutable_speculative()->set_num_draft_tokens(bad);
    r = convert(proto);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(),
                HasSubstr("speculative.num_draft_tokens must be in [1, 6]"));
  }
  proto = TextRequest();
  proto.mutable_speculative()->set_ngram_min(4);
  proto.mutable_speculative()->set_ngram_max(3);
  r = convert(proto);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ngram_min"));
  proto = TextRequest();
  proto.mutable_speculative()->set_ngram_max(4000000000u);
  EXPECT_FALSE(convert(proto).ok());
  proto = TextRequest();
  proto.mutable_speculative()->set_method(
      static_cast<v1::SpeculativeMethod>(9));
  r = convert(proto);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("speculative.method"));
}

TEST(RequestValidationTest, MtpNeedsAModelWithAHead) {
  ValidationLimits limits = TestLimits();
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_speculative()->set_method(v1::SPECULATIVE_METHOD_MTP);
  absl::StatusOr<Request> r =
      RequestFromProto(proto, TestVocabulary(), limits, TestFallbacks());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("multi-token-prediction head"));
  limits.mtp_head = true;
  r = RequestFromProto(proto, TestVocabulary(), limits, TestFallbacks());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->speculative.method, SpeculativeMethod::kMtp);
  EXPECT_EQ(r->speculative.num_draft_tokens, 4);
}

TEST(RequestValidationTest, RejectsMissingOrEmptyPrompt) {
  ExpectInvalid(v1::GenerateRequest(), "prompt");
  ExpectInvalid(TextRequest(""), "text");
  ExpectInvalid(TextRequest("   "), "text");  // tokenizes to nothing
  v1::GenerateRequest empty_ids;
  empty_ids.mutable_token_ids();
  ExpectInvalid(empty_ids, "token_ids.ids");
}

TEST(RequestValidationTest, RejectsTextTheTokenizerRefuses) {
  ExpectInvalid(TextRequest("untokenizable"), "text");
}

TEST(RequestValidationTest, RejectsTooLongPrompts) {
  ExpectInvalid(TextRequest("a b c d e f"), "text");  // 6 tokens > 5
  EXPECT_TRUE(Convert(TextRequest("a b c d e")).ok());
  v1::GenerateRequest proto;
  for (int i = 0; i < 6; ++i) proto.mutable_token_ids()->add_ids(5);
  ExpectInvalid(proto, "token_ids.ids");
}

TEST(RequestValidationTest, RejectsTokenIdsOutsideVocabulary) {
  for (int32_t bad : {-1, kVocab, std::numeric_limits<int32_t>::max()}) {
    v1::GenerateRequest proto;
    proto.mutable_token_ids()->add_ids(5);
    proto.mutable_token_ids()->add_ids(bad);
    absl::StatusOr<Request> request = Convert(proto);
    ASSERT_FALSE(request.ok());
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(request.status().message()),
                HasSubstr("token_ids.ids[1] must be in [0, 100)"));
  }
}

TEST(RequestValidationTest, InvalidFieldNamesTheIndexedField) {
  v1::GenerateRequest proto;
  proto.mutable_token_ids()->add_ids(5);
  proto.mutable_token_ids()->add_ids(kVocab);
  EXPECT_EQ(InvalidField(Convert(proto).status()), "token_ids.ids[1]");
  proto = TextRequest();
  proto.mutable_stopping()->add_stop("ok");
  proto.mutable_stopping()->add_stop("");
  EXPECT_EQ(InvalidField(Convert(proto).status()), "stopping.stop[1]");
  // Statuses that name no field.
  EXPECT_EQ(InvalidField(absl::InvalidArgumentError("text is bad")), "");
  EXPECT_EQ(InvalidField(absl::OkStatus()), "");
}

TEST(RequestValidationTest, TokenizerVocabularyKeepsTheEnginesRules) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      ParseTokenizerJson(R"({"model": {"type": "Bytes"},
        "added_tokens": [{"id": 256, "content": "<eos>", "special": true}]})");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  Vocabulary padded = TokenizerVocabulary(**tokenizer, PromptRules{200, 7});
  EXPECT_EQ(padded.rules.vocab_limit, 200);
  EXPECT_EQ(padded.rules.padding_id, 7);
  EXPECT_THAT(*padded.encode("hi"), ElementsAre('h', 'i'));
  EXPECT_TRUE(padded.is_special(256));
  EXPECT_FALSE(padded.is_special('h'));
}

TEST(RequestValidationTest, RejectsThePaddingIdInTokenIds) {
  Vocabulary vocabulary = TestVocabulary();
  vocabulary.rules.padding_id = 7;
  v1::GenerateRequest proto;
  for (int32_t id : {5, 7, 9}) proto.mutable_token_ids()->add_ids(id);
  absl::StatusOr<Request> r =
      RequestFromProto(proto, vocabulary, TestLimits(), TestFallbacks());
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("token_ids.ids[1] is the padding id 7"));
  EXPECT_EQ(InvalidField(r.status()), "token_ids.ids[1]");
}

TEST(RequestValidationTest, RejectsSpecialOnlyPrompt) {
  v1::GenerateRequest proto;
  proto.mutable_token_ids()->add_ids(kBos);
  proto.mutable_token_ids()->add_ids(kEos);
  ExpectInvalid(proto, "token_ids.ids");
}

TEST(RequestValidationTest, RejectsBadTemperature) {
  for (float t :
       {-0.1f, 100.5f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_temperature(t);
    ExpectInvalid(proto, "sampling.temperature");
  }
  for (float t : {0.0f, 100.0f}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_temperature(t);
    EXPECT_TRUE(Convert(proto).ok()) << t;
  }
}

TEST(RequestValidationTest, RejectsNegativeTopK) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_sampling()->set_top_k(-1);
  ExpectInvalid(proto, "sampling.top_k");
}

TEST(RequestValidationTest, TopPMessageNamesFieldAndValue) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_sampling()->set_top_p(1.5f);
  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().message(),
            "sampling.top_p must be in (0, 1], got 1.5");
}

TEST(RequestValidationTest, RejectsBadTopP) {
  for (float p : {0.0f, -0.5f, 1.0001f, std::nanf("")}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_top_p(p);
    ExpectInvalid(proto, "sampling.top_p");
  }
}

TEST(RequestValidationTest, RejectsBadMinP) {
  for (float p : {-0.01f, 1.01f, std::nanf("")}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_min_p(p);
    ExpectInvalid(proto, "sampling.min_p");
  }
  for (float p : {0.0f, 1.0f}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_min_p(p);
    EXPECT_TRUE(Convert(proto).ok()) << p;
  }
}

TEST(RequestValidationTest, RejectsBadRepetitionPenalty) {
  for (float r :
       {0.0f, -1.0f, 100.5f, -std::numeric_limits<float>::infinity()}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_repetition_penalty(r);
    ExpectInvalid(proto, "sampling.repetition_penalty");
  }
}

TEST(RequestValidationTest, RejectsPresenceAndFrequencyPenaltiesOutsideTwo) {
  const float bad[] = {-2.001f, 2.001f, 100.0f,
                       std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
  for (float v : bad) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_sampling()->set_presence_penalty(v);
    ExpectInvalid(proto, "sampling.presence_penalty");
    proto = TextRequest();
    proto.mutable_sampling()->set_frequency_penalty(v);
    ExpectInvalid(proto, "sampling.frequency_penalty");
  }
  v1::GenerateRequest unset = TextRequest();
  absl::StatusOr<Request> request = Convert(unset);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->sampling.presence_penalty, 0.0f);
  EXPECT_EQ(request->sampling.frequency_penalty, 0.0f);
}

TEST(RequestValidationTest, RejectsBadMaxNewTokens) {
  for (uint32_t n : {0u, 65u, 4000000000u}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_stopping()->set_max_new_tokens(n);
    ExpectInvalid(proto, "stopping.max_new_tokens");
  }
}

TEST(RequestValidationTest, MinNewTokensIsBoundedByTheMaximum) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_stopping()->set_max_new_tokens(10);
  proto.mutable_stopping()->set_min_new_tokens(10);
  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->stopping.min_new_tokens, 10);
  proto.mutable_stopping()->set_min_new_tokens(11);
  ExpectInvalid(proto, "stopping.min_new_tokens");
  EXPECT_EQ(Convert(proto).status().message(),
            "stopping.min_new_tokens must be in [0, 10] (at most the "
            "request's maximum of new tokens), got 11");
  // Against the default maximum (32) when max_new_tokens is unset.
  v1::GenerateRequest by_default = TextRequest();
  by_default.mutable_stopping()->set_min_new_tokens(32);
  EXPECT_TRUE(Convert(by_default).ok());
  by_default.mutable_stopping()->set_min_new_tokens(33);
  ExpectInvalid(by_default, "stopping.min_new_tokens");
  by_default.mutable_stopping()->set_min_new_tokens(4000000000u);
  ExpectInvalid(by_default, "stopping.min_new_tokens");
  EXPECT_EQ(Convert(TextRequest())->stopping.min_new_tokens, 0);
}

TEST(RequestValidationTest, NIsBoundedBySixteenAndTheServersSlots) {
  EXPECT_EQ(Convert(TextRequest())->n, 1);
  for (uint32_t n : {1u, 16u}) {
    v1::GenerateRequest proto = TextRequest();
    proto.set_n(n);
    absl::StatusOr<Request> request = Convert(proto);
    ASSERT_TRUE(request.ok()) << request.status();
    EXPECT_EQ(request->n, static_cast<int32_t>(n));
  }
  for (uint32_t n : {0u, 17u, 4000000000u}) {
    v1::GenerateRequest proto = TextRequest();
    proto.set_n(n);
    ExpectInvalid(proto, "n");
  }
  ValidationLimits four_slots = TestLimits();
  four_slots.max_n = 4;
  v1::GenerateRequest proto = TextRequest();
  proto.set_n(5);
  absl::StatusOr<Request> request =
      RequestFromProto(proto, TestVocabulary(), four_slots, TestFallbacks());
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().message(), "n must be in [1, 4], got 5");
  EXPECT_EQ(InvalidField(request.status()), "n");
}

TEST(RequestValidationTest, RejectsBadStopStrings) {
  v1::GenerateRequest too_many = TextRequest();
  for (int i = 0; i < 17; ++i) too_many.mutable_stopping()->add_stop("x");
  ExpectInvalid(too_many, "stopping.stop");

  v1::GenerateRequest sixteen = TextRequest();
  for (int i = 0; i < 16; ++i) sixteen.mutable_stopping()->add_stop("x");
  EXPECT_TRUE(Convert(sixteen).ok());

  v1::GenerateRequest empty = TextRequest();
  empty.mutable_stopping()->add_stop("ok");
  empty.mutable_stopping()->add_stop("");
  ExpectInvalid(empty, "stopping.stop[1]");

  v1::GenerateRequest too_long = TextRequest();
  too_long.mutable_stopping()->add_stop(std::string(257, 'a'));
  ExpectInvalid(too_long, "stopping.stop[0]");

  v1::GenerateRequest longest = TextRequest();
  longest.mutable_stopping()->add_stop(std::string(256, 'a'));
  EXPECT_TRUE(Convert(longest).ok());
}

TEST(RequestValidationTest, RejectsStopTokenIdsOutsideVocabulary) {
  for (int32_t bad : {-1, kVocab}) {
    v1::GenerateRequest proto = TextRequest();
    proto.mutable_stopping()->add_stop_token_ids(3);
    proto.mutable_stopping()->add_stop_token_ids(bad);
    ExpectInvalid(proto, "stopping.stop_token_ids[1]");
  }
}

// A million ids once slowed every other stream (a linear search per token):
// the list is capped like the stop strings.
TEST(RequestValidationTest, CapsStopTokenIds) {
  v1::GenerateRequest most = TextRequest();
  for (int i = 0; i < kMaxStopTokenIds; ++i) {
    most.mutable_stopping()->add_stop_token_ids(i % kVocab);
  }
  EXPECT_TRUE(Convert(most).ok());
  v1::GenerateRequest over = most;
  over.mutable_stopping()->add_stop_token_ids(1);
  ExpectInvalid(over, "stopping.stop_token_ids");
  v1::GenerateRequest flood = TextRequest();
  for (int i = 0; i < 1000000; ++i) {
    flood.mutable_stopping()->add_stop_token_ids(1);
  }
  ExpectInvalid(flood, "the limit is 256");
}

// A 4 MiB text was tokenized in full before the token limit was checked.
TEST(RequestValidationTest, TextOverTheByteLimitIsRefusedBeforeTokenizing) {
  ValidationLimits limits;
  limits.max_prompt_bytes = 10;
  Vocabulary vocabulary;
  vocabulary.rules.vocab_limit = kVocab;
  int encoded = 0;
  vocabulary.encode = [&encoded](absl::string_view text) {
    ++encoded;
    return absl::StatusOr<std::vector<int32_t>>(
        std::vector<int32_t>(text.size(), 1));
  };
  v1::GenerateRequest proto = TextRequest(std::string(11, 'a'));
  absl::StatusOr<Request> r = RequestFromProto(proto, vocabulary, limits, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("text is 11 bytes, the limit is 10"));
  EXPECT_EQ(encoded, 0);
  proto.set_text(std::string(10, 'a'));
  EXPECT_TRUE(RequestFromProto(proto, vocabulary, limits, {}).ok());
  EXPECT_EQ(encoded, 1);
}

TEST(RequestValidationTest, RejectsTooManyTopLogprobs) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_logprobs()->set_enabled(true);
  proto.mutable_logprobs()->set_top_n(21);
  ExpectInvalid(proto, "logprobs.top_n");
}

TEST(RequestValidationTest, RejectsTooLongRequestId) {
  v1::GenerateRequest proto = TextRequest();
  proto.set_request_id(std::string(257, 'r'));
  ExpectInvalid(proto, "request_id");
  proto.set_request_id(std::string(256, 'r'));
  EXPECT_TRUE(Convert(proto).ok());
}

TEST(RequestValidationTest, ParameterErrorsNeverTokenize) {
  int encode_calls = 0;
  Vocabulary vocabulary = TestVocabulary();
  vocabulary.encode = [&](absl::string_view) {
    ++encode_calls;
    return absl::StatusOr<std::vector<int32_t>>(std::vector<int32_t>{5});
  };
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_sampling()->set_top_k(-3);
  EXPECT_FALSE(
      RequestFromProto(proto, vocabulary, TestLimits(), TestFallbacks()).ok());
  EXPECT_EQ(encode_calls, 0);
}

TEST(RequestValidationTest, NoConstraintByDefault) {
  absl::StatusOr<Request> request = Convert(TextRequest());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_FALSE(request->constraint.has_value());
}

TEST(RequestValidationTest, ConstraintOneofBecomesTheRequestsConstraint) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_sampling()->set_json_schema(R"({"type": "integer"})");
  absl::StatusOr<Request> request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->constraint.has_value());
  EXPECT_EQ(request->constraint->kind, ConstraintKind::kJsonSchema);
  EXPECT_EQ(request->constraint->text, R"({"type": "integer"})");

  proto.mutable_sampling()->mutable_json_object();
  request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->constraint->kind, ConstraintKind::kAnyJson);

  proto.mutable_sampling()->set_regex("[a-z]+");
  request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->constraint->kind, ConstraintKind::kRegex);
  EXPECT_EQ(request->constraint->text, "[a-z]+");

  proto.mutable_sampling()->mutable_choice()->add_choices("yes");
  proto.mutable_sampling()->mutable_choice()->add_choices("no");
  request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->constraint->kind, ConstraintKind::kChoice);
  EXPECT_THAT(request->constraint->choices, ElementsAre("yes", "no"));

  proto.mutable_sampling()->set_grammar(R"(root ::= "a" | "b")");
  request = Convert(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->constraint->kind, ConstraintKind::kGrammar);
}

TEST(RequestValidationTest, RefusesBadConstraintsNamingTheField) {
  v1::GenerateRequest proto = TextRequest();
  proto.mutable_sampling()->set_json_schema("{not json");
  ExpectInvalid(proto, "sampling.json_schema");
  proto.mutable_sampling()->set_json_schema("");
  ExpectInvalid(proto, "sampling.json_schema");
  proto.mutable_sampling()->set_regex("[a-z]{1,100000}");
  ExpectInvalid(proto, "sampling.regex");
  proto.mutable_sampling()->set_grammar(std::string(40 * 1024, 'x'));
  ExpectInvalid(proto, "sampling.grammar");
  proto.mutable_sampling()->mutable_choice();  // no choices
  ExpectInvalid(proto, "sampling.choice");
  proto.mutable_sampling()->mutable_choice()->add_choices("");
  ExpectInvalid(proto, "sampling.choice");
  absl::StatusOr<Request> request = Convert(proto);
  EXPECT_EQ(InvalidField(request.status()), "sampling.choice");
}

}  // namespace
}  // namespace seqboat
