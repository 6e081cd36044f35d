#include "server/openai_api.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "engine/tokenizer/utf8.h"
#include "server/response_coalescer.h"

namespace seqboat {
namespace {

using json = nlohmann::json;
// Output keeps OpenAI's field order, which is what people read in curl.
using ojson = nlohmann::ordered_json;

std::string Dump(const ojson& value) {
  // The replace handler keeps a stray invalid byte from throwing; text from
  // the engine is complete UTF-8 and token texts go through TokenText.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

ojson NullIfEmpty(const std::string& s) {
  return s.empty() ? ojson(nullptr) : ojson(s);
}

// OpenAI's finish_reason for a response's; "" for none.
std::string FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP_STRING:
    case v1::FINISH_REASON_EOS:
      return "stop";
    default:
      return "";
  }
}

OpenAiError Invalid(std::string param, std::string message,
                    std::string code = "") {
  OpenAiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

OpenAiError Unsupported(const std::string& param, const std::string& message) {
  return Invalid(param, message, "unsupported_value");
}

// The parameters both endpoints take with one meaning (ParseChatRequest
// hands them to ParseCompletionRequest as they are): OpenAI's own, and the
// sampling extensions vLLM clients send (top_k, min_p, repetition_penalty,
// ignore_eos, stop_token_ids, min_tokens).
constexpr const char* kSharedParameters[] = {"model",
                                             "temperature",
                                             "top_p",
                                             "top_k",
                                             "min_p",
                                             "repetition_penalty",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "seed",
                                             "stop",
                                             "stop_token_ids",
                                             "ignore_eos",
                                             "min_tokens",
                                             "stream",
                                             "stream_options",
                                             "n",
                                             "logit_bias",
                                             "user"};

using ParameterSet = std::set<std::string, std::less<>>;

ParameterSet* WithShared(std::initializer_list<const char*> own) {
  auto* known = new ParameterSet(own.begin(), own.end());
  known->insert(std::begin(kSharedParameters), std::end(kSharedParameters));
  return known;
}

// The parameters a completions request may carry.
const ParameterSet& KnownParameters() {
  static const ParameterSet* known = WithShared(
      {"prompt", "max_tokens", "logprobs", "best_of", "echo", "suffix"});
  return *known;
}

// The parameters a chat request may carry: the shared ones, and those read
// in ParseChatRequest.
const ParameterSet& ChatParameters() {
  static const ParameterSet* known =
      WithShared({"messages", "max_tokens", "max_completion_tokens", "logprobs",
                  "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                  "response_format"});
  return *known;
}

// A JSON integer that fits int64 (unsigned values beyond it do not).
bool Int64Of(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

// Null counts as absent, as OpenAI's SDKs send it for unset fields.
const json* Field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<OpenAiError> ReadNumber(const json& body, const char* key,
                                      std::optional<double>* out) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    return Invalid(key,
                   absl::StrCat(key, " must be a number, got ", BriefJson(*v)));
  }
  *out = v->get<double>();
  return std::nullopt;
}

std::optional<OpenAiError> ReadBool(const json& body, const char* key,
                                    bool* out) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    return Invalid(
        key, absl::StrCat(key, " must be a boolean, got ", BriefJson(*v)));
  }
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<OpenAiError> ReadInt(const json& body, const char* key,
                                   std::optional<int64_t>* out) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  int64_t value = 0;
  if (!Int64Of(*v, &value)) {
    return Invalid(
        key, absl::StrCat(key, " must be an integer, got ", BriefJson(*v)));
  }
  *out = value;
  return std::nullopt;
}

// Token ids of a prompt or stop_token_ids: integers within int32 (the
// vocabulary check is validation's).
std::optional<OpenAiError> ReadIds(const json& array, const std::string& name,
                                   std::vector<int32_t>* out) {
  for (size_t i = 0; i < array.size(); ++i) {
    int64_t id = 0;
    if (!Int64Of(array[i], &id) || id < std::numeric_limits<int32_t>::min() ||
        id > std::numeric_limits<int32_t>::max()) {
      return Invalid(name, absl::StrCat(name, "[", i,
                                        "] must be an integer token id, got ",
                                        BriefJson(array[i])));
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

std::optional<OpenAiError> ReadPrompt(const json& body,
                                      v1::GenerateRequest* generate) {
  const json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return std::nullopt;  // validation names it
  if (prompt->is_string()) {
    generate->set_text(prompt->get<std::string>());
    return std::nullopt;
  }
  if (!prompt->is_array()) {
    return Invalid("prompt",
                   "prompt must be a string, an array of token ids, or an "
                   "array holding one of those");
  }
  if (prompt->empty()) {
    return Invalid("prompt", "prompt must not be empty");
  }
  const json* one = prompt;
  // A batch form ([text] or [[ids]]) holding a single prompt is that prompt.
  if ((*prompt)[0].is_string() || (*prompt)[0].is_array()) {
    if (prompt->size() > 1) {
      return Unsupported(
          "prompt",
          absl::StrCat("prompt holds ", prompt->size(),
                       " prompts; this server takes one per request"));
    }
    one = &(*prompt)[0];
    if (one->is_string()) {
      generate->set_text(one->get<std::string>());
      return std::nullopt;
    }
    if (one->empty()) return Invalid("prompt", "prompt must not be empty");
  }
  std::vector<int32_t> ids;
  if (auto e = ReadIds(*one, "prompt", &ids)) return e;
  generate->mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  return std::nullopt;
}

std::optional<OpenAiError> ReadStop(const json& body,
                                    v1::StoppingCriteria* stopping) {
  const json* stop = Field(body, "stop");
  if (stop == nullptr) return std::nullopt;
  if (stop->is_string()) {
    stopping->add_stop(stop->get<std::string>());
    return std::nullopt;
  }
  if (!stop->is_array()) {
    return Invalid("stop", "stop must be a string or an array of strings");
  }
  for (size_t i = 0; i < stop->size(); ++i) {
    if (!(*stop)[i].is_string()) {
      return Invalid("stop",
                     absl::StrCat("stop[", i, "] must be a string, got ",
                                  BriefJson((*stop)[i])));
    }
    stopping->add_stop((*stop)[i].get<std::string>());
  }
  return std::nullopt;
}

// The parameters OpenAI has and the engine does not: accepted at the value
// that means "off", refused otherwise.
std::optional<OpenAiError> ReadUnsupported(const json& body) {
  std::optional<int64_t> n;
  if (auto e = ReadInt(body, "n", &n)) return e;
  // best_of = n returns every sequence sampled, which n alone does; a
  // larger best_of would rank them, which this server does not.
  std::optional<int64_t> best_of;
  if (auto e = ReadInt(body, "best_of", &best_of)) return e;
  if (best_of.has_value() && *best_of != n.value_or(1)) {
    return Unsupported("best_of",
                       absl::StrCat("best_of must equal n (", n.value_or(1),
                                    "), got ", *best_of));
  }
  bool echo = false;
  if (auto e = ReadBool(body, "echo", &echo)) return e;
  if (echo) return Unsupported("echo", "echo is not supported");
  if (const json* suffix = Field(body, "suffix")) {
    if (!suffix->is_string() || !suffix->get<std::string>().empty()) {
      return Unsupported("suffix", "suffix is not supported");
    }
  }
  if (const json* bias = Field(body, "logit_bias")) {
    if (!bias->is_object() || !bias->empty()) {
      return Unsupported("logit_bias", "logit_bias is not supported");
    }
  }
  if (const json* user = Field(body, "user"); user && !user->is_string()) {
    return Invalid("user", "user must be a string");
  }
  return std::nullopt;
}

// A request body: a JSON object of `known` parameters only (unknown ones
// are refused, as OpenAI does).
std::optional<OpenAiError> ReadBody(std::string_view body,
                                    const ParameterSet& known, json* out) {
  if (absl::Status s = ParseJson(body, "the request body", out); !s.ok()) {
    return Invalid("", std::string(s.message()));
  }
  if (!out->is_object()) {
    return Invalid("", "the request body must be a JSON object");
  }
  for (const auto& [key, value] : out->items()) {
    if (known.count(key) == 0) {
      return Invalid(
          key, absl::StrCat("Unrecognized request argument supplied: ", key),
          "unknown_parameter");
    }
  }
  return std::nullopt;
}

// The proto's field names (request_validation's) to OpenAI's parameters.
struct FieldName {
  const char* proto;
  const char* openai;
};
constexpr FieldName kFieldNames[] = {
    {"text", "prompt"},
    {"token_ids.ids", "prompt"},
    {"prompt", "prompt"},
    {"sampling.temperature", "temperature"},
    {"sampling.top_k", "top_k"},
    {"sampling.top_p", "top_p"},
    {"sampling.min_p", "min_p"},
    {"sampling.repetition_penalty", "repetition_penalty"},
    {"sampling.presence_penalty", "presence_penalty"},
    {"sampling.frequency_penalty", "frequency_penalty"},
    {"sampling.seed", "seed"},
    {"stopping.max_new_tokens", "max_tokens"},
    {"stopping.min_new_tokens", "min_tokens"},
    {"stopping.stop_token_ids", "stop_token_ids"},
    {"stopping.stop", "stop"},
    {"stopping.ignore_eos", "ignore_eos"},
    {"logprobs.top_n", "logprobs"},
    {"n", "n"},
};

}  // namespace

std::string ErrorBody(const OpenAiError& error) {
  ojson inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = NullIfEmpty(error.param);
  inner["code"] = NullIfEmpty(error.code);
  ojson body;
  body["error"] = std::move(inner);
  return Dump(body);
}

OpenAiError ErrorFromStatus(const absl::Status& status) {
  OpenAiError e;
  e.message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: {
      e.http_status = 400;
      const std::string field = InvalidField(status);
      if (field.empty()) break;
      const std::string base = field.substr(0, field.find('['));
      for (const FieldName& name : kFieldNames) {
        if (base != name.proto) continue;
        e.param = name.openai;
        // "token_ids.ids[3] must ..." reads "prompt[3] must ...".
        std::string renamed =
            absl::StrCat(name.openai, field.substr(base.size()));
        if (absl::StartsWith(e.message, field)) {
          e.message = renamed + e.message.substr(field.size());
        }
        break;
      }
      break;
    }
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "server_overloaded";
      e.code = "queue_full";
      break;
    case absl::StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      break;
    case absl::StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case absl::StatusCode::kCancelled:
      // Nobody reads it (the client went away); 499 as nginx logs it.
      e.http_status = 499;
      e.type = "cancelled";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      e.http_status = 504;
      e.type = "timeout";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

absl::StatusCode StatusCodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 200:
      return absl::StatusCode::kOk;
    case 404:
      return absl::StatusCode::kNotFound;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 499:
      return absl::StatusCode::kCancelled;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return http_status >= 400 && http_status < 500
                 ? absl::StatusCode::kInvalidArgument
                 : absl::StatusCode::kInternal;
  }
}

bool ParseCompletionRequest(std::string_view body, const std::string& model_id,
                            const ValidationLimits& limits,
                            CompletionRequest* out, OpenAiError* error) {
  auto fail = [error](OpenAiError e) {
    *error = std::move(e);
    return false;
  };
  json parsed;
  if (auto e = ReadBody(body, KnownParameters(), &parsed)) return fail(*e);
  *out = CompletionRequest();
  v1::GenerateRequest& generate = out->generate;

  if (const json* model = Field(parsed, "model")) {
    if (!model->is_string()) {
      return fail(Invalid("model", "model must be a string"));
    }
    if (model->get<std::string>() != model_id) {
      return fail(Invalid(
          "model",
          absl::StrCat("The model `", model->get<std::string>(),
                       "` does not exist; this server serves `", model_id, "`"),
          "model_not_found"));
    }
  }
  if (auto e = ReadUnsupported(parsed)) return fail(*e);
  if (auto e = ReadPrompt(parsed, &generate)) return fail(*e);

  // Choices to sample; the bound (and n <= max_slots) is validation's.
  std::optional<int64_t> n;
  if (auto e = ReadInt(parsed, "n", &n)) return fail(*e);
  if (n.has_value()) {
    if (*n < 1 || *n > std::numeric_limits<uint32_t>::max()) {
      return fail(Invalid(
          "n", absl::StrCat("n must be in [1, ", limits.max_n, "], got ", *n)));
    }
    generate.set_n(static_cast<uint32_t>(*n));
  }

  std::optional<int64_t> max_tokens;
  if (auto e = ReadInt(parsed, "max_tokens", &max_tokens)) return fail(*e);
  if (max_tokens.has_value()) {
    if (*max_tokens < 1 || *max_tokens > std::numeric_limits<uint32_t>::max()) {
      return fail(Invalid(
          "max_tokens",
          absl::StrCat("max_tokens must be in [1, ",
                       limits.max_new_tokens_limit, "], got ", *max_tokens)));
    }
    generate.mutable_stopping()->set_max_new_tokens(
        static_cast<uint32_t>(*max_tokens));
  }
  // vLLM's min_tokens; its bound (max_tokens) is validation's.
  std::optional<int64_t> min_tokens;
  if (auto e = ReadInt(parsed, "min_tokens", &min_tokens)) return fail(*e);
  if (min_tokens.has_value()) {
    if (*min_tokens < 0 || *min_tokens > std::numeric_limits<uint32_t>::max()) {
      return fail(
          Invalid("min_tokens",
                  absl::StrCat("min_tokens must be in [0, max_tokens], got ",
                               *min_tokens)));
    }
    generate.mutable_stopping()->set_min_new_tokens(
        static_cast<uint32_t>(*min_tokens));
  }
  // Floats go to the proto as they are; validation checks their ranges (an
  // out-of-float value arrives as inf and is refused there).
  struct FloatField {
    const char* name;
    void (v1::SamplingParams::*set)(float);
  };
  for (const FloatField& f :
       {FloatField{"temperature", &v1::SamplingParams::set_temperature},
        FloatField{"top_p", &v1::SamplingParams::set_top_p},
        FloatField{"min_p", &v1::SamplingParams::set_min_p},
        FloatField{"repetition_penalty",
                   &v1::SamplingParams::set_repetition_penalty},
        FloatField{"presence_penalty",
                   &v1::SamplingParams::set_presence_penalty},
        FloatField{"frequency_penalty",
                   &v1::SamplingParams::set_frequency_penalty}}) {
    std::optional<double> value;
    if (auto e = ReadNumber(parsed, f.name, &value)) return fail(*e);
    if (value.has_value()) {
      (generate.mutable_sampling()->*f.set)(static_cast<float>(*value));
    }
  }
  std::optional<int64_t> top_k;
  if (auto e = ReadInt(parsed, "top_k", &top_k)) return fail(*e);
  if (top_k.has_value()) {
    // vLLM's clients send -1 for "off", which is 0 here.
    int64_t k = *top_k == -1 ? 0 : *top_k;
    if (k < std::numeric_limits<int32_t>::min()) {
      return fail(
          Invalid("top_k", absl::StrCat("top_k must be >= 0, got ", k)));
    }
    // Beyond the vocabulary is the whole vocabulary.
    k = std::min<int64_t>(k, std::numeric_limits<int32_t>::max());
    generate.mutable_sampling()->set_top_k(static_cast<int32_t>(k));
  }
  if (const json* seed = Field(parsed, "seed")) {
    // Any 64-bit integer; a negative one is taken modulo 2^64.
    if (seed->is_number_unsigned()) {
      generate.mutable_sampling()->set_seed(seed->get<uint64_t>());
    } else if (seed->is_number_integer()) {
      generate.mutable_sampling()->set_seed(
          static_cast<uint64_t>(seed->get<int64_t>()));
    } else {
      return fail(Invalid("seed", absl::StrCat("seed must be an integer, got ",
                                               BriefJson(*seed))));
    }
  }
  if (auto e = ReadStop(parsed, generate.mutable_stopping())) return fail(*e);
  if (const json* ids = Field(parsed, "stop_token_ids")) {
    if (!ids->is_array()) {
      return fail(Invalid("stop_token_ids",
                          "stop_token_ids must be an array of token ids"));
    }
    std::vector<int32_t> stop_ids;
    if (auto e = ReadIds(*ids, "stop_token_ids", &stop_ids)) return fail(*e);
    generate.mutable_stopping()->mutable_stop_token_ids()->Add(stop_ids.begin(),
                                                               stop_ids.end());
  }
  bool ignore_eos = false;
  if (auto e = ReadBool(parsed, "ignore_eos", &ignore_eos)) return fail(*e);
  generate.mutable_stopping()->set_ignore_eos(ignore_eos);

  // The completions API's logprobs: how many alternatives besides the
  // chosen token (0 gives the chosen token's alone).
  if (const json* logprobs = Field(parsed, "logprobs")) {
    int64_t n = 0;
    if (logprobs->is_boolean() || !Int64Of(*logprobs, &n)) {
      return fail(
          Invalid("logprobs",
                  absl::StrCat("logprobs must be an integer (the number of "
                               "alternatives to return with each token), got ",
                               BriefJson(*logprobs))));
    }
    if (n < 0 || n > std::numeric_limits<uint32_t>::max()) {
      return fail(
          Invalid("logprobs", absl::StrCat("logprobs must be in [0, ",
                                           kMaxTopLogprobs, "], got ", n)));
    }
    generate.mutable_logprobs()->set_enabled(true);
    generate.mutable_logprobs()->set_top_n(static_cast<uint32_t>(n));
  }

  if (auto e = ReadBool(parsed, "stream", &out->stream)) return fail(*e);
  if (const json* options = Field(parsed, "stream_options")) {
    if (!out->stream) {
      return fail(Invalid("stream_options",
                          "stream_options is only allowed when stream is "
                          "true"));
    }
    if (!options->is_object()) {
      return fail(
          Invalid("stream_options", "stream_options must be an object"));
    }
    for (const auto& [key, value] : options->items()) {
      if (key != "include_usage") {
        return fail(
            Invalid("stream_options",
                    absl::StrCat("stream_options.", key, " is not supported"),
                    "unknown_parameter"));
      }
    }
    if (auto e = ReadBool(*options, "include_usage", &out->include_usage)) {
      e->param = "stream_options";
      e->message = "stream_options." + e->message;
      return fail(*e);
    }
  }
  return true;
}

std::string OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStopString:
    case FinishReason::kEos:
      return "stop";
    case FinishReason::kCancelled:
    case FinishReason::kNone:
      break;
  }
  return "";
}

std::string TokenText(const std::string& bytes) {
  if (Utf8Lossy(bytes) == bytes) return bytes;
  std::string out = "bytes:";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

CompletionRenderer::CompletionRenderer(CompletionContext context)
    : ChoicesRenderer(std::move(context), "text_completion",
                      "text_completion") {}

namespace {

// The characters a token's bytes begin in the completion text: its lead
// bytes (non-continuation bytes) are what a str's length counts.
int64_t CharactersIn(const std::string& bytes) {
  int64_t n = 0;
  for (unsigned char c : bytes) n += (c & 0xC0) != 0x80;
  return n;
}

ojson Usage(const v1::Usage& usage) {
  ojson out;
  out["prompt_tokens"] = usage.prompt_tokens();
  out["completion_tokens"] = usage.generated_tokens();
  out["total_tokens"] =
      static_cast<uint64_t>(usage.prompt_tokens()) + usage.generated_tokens();
  ojson details;
  details["cached_tokens"] = usage.cached_prompt_tokens();
  out["prompt_tokens_details"] = std::move(details);
  return out;
}

// The final event that ended a request without error but without a normal
// finish (the server cancelled it while draining) reads as this error.
absl::Status CancelledByServer() {
  return absl::UnavailableError(
      "the request was cancelled: the server is shutting down");
}

}  // namespace

ojson CompletionRenderer::Choice(const v1::GenerateResponse& run, int32_t index,
                                 bool final_chunk) {
  ojson choice;
  choice["index"] = index;
  if (text_offset_.size() <= static_cast<size_t>(index)) {
    text_offset_.resize(static_cast<size_t>(index) + 1, 0);
  }
  int64_t& text_offset = text_offset_[static_cast<size_t>(index)];
  choice["text"] = run.text();
  if (context_.logprobs) {
    ojson tokens = ojson::array(), token_logprobs = ojson::array(),
          top_logprobs = ojson::array(), offsets = ojson::array();
    for (int i = 0; i < run.logprobs_size(); ++i) {
      const v1::TokenLogprobs& lp = run.logprobs(i);
      const std::string bytes =
          context_.token_bytes ? context_.token_bytes(lp.chosen().token_id())
                               : std::string();
      const std::string text = TokenText(bytes);
      tokens.push_back(text);
      token_logprobs.push_back(lp.chosen().logprob());
      // The chosen token and up to N alternatives, as OpenAI returns them.
      ojson top = ojson::object();
      top[text] = lp.chosen().logprob();
      for (const v1::TokenLogprob& alt : lp.top()) {
        const std::string alt_text = TokenText(
            context_.token_bytes ? context_.token_bytes(alt.token_id())
                                 : std::string());
        if (!top.contains(alt_text)) top[alt_text] = alt.logprob();
      }
      top_logprobs.push_back(std::move(top));
      offsets.push_back(text_offset);
      text_offset += CharactersIn(bytes);
    }
    ojson logprobs;
    logprobs["tokens"] = std::move(tokens);
    logprobs["token_logprobs"] = std::move(token_logprobs);
    logprobs["top_logprobs"] = std::move(top_logprobs);
    logprobs["text_offset"] = std::move(offsets);
    choice["logprobs"] = std::move(logprobs);
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = nullptr;
  if (final_chunk) {
    choice["finish_reason"] = NullIfEmpty(FinishName(run.finish_reason()));
    // vLLM's extension: which stop string ended it.
    choice["stop_reason"] = NullIfEmpty(run.matched_stop());
  }
  return choice;
}

namespace {

// Adds a choice's usage to the request's: the prompt was read once for all
// choices, their completions add up.
void AddUsage(const v1::Usage& choice, v1::Usage* total) {
  total->set_prompt_tokens(choice.prompt_tokens());
  total->set_cached_prompt_tokens(choice.cached_prompt_tokens());
  total->set_generated_tokens(total->generated_tokens() +
                              choice.generated_tokens());
}

// Whether an event ends its request: an error, or the last of the n
// choices' final events (*finals counts them).
bool EndsRequest(const GenerationEvent& event, int32_t n, int32_t* finals) {
  if (!event.status.ok()) return true;
  return event.finish != FinishReason::kNone && ++*finals >= n;
}

// The first error among a request's events, or OK.
absl::Status FirstError(const std::vector<SequenceEvents>& sequences) {
  for (const SequenceEvents& sequence : sequences) {
    for (const GenerationEvent& e : sequence.events) {
      if (!e.status.ok()) return e.status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

ChoicesRenderer::ChoicesRenderer(CompletionContext context,
                                 const char* chunk_object,
                                 const char* body_object)
    : context_(std::move(context)),
      chunk_object_(chunk_object),
      body_object_(body_object) {}

ojson ChoicesRenderer::Header(const char* object) const {
  ojson header;
  header["id"] = context_.id;
  header["object"] = object;
  header["created"] = context_.created;
  header["model"] = context_.model;
  return header;
}

std::string ChoicesRenderer::ChunkEvent(ojson choice) const {
  ojson chunk = Header(chunk_object_);
  chunk["choices"] = ojson::array({std::move(choice)});
  if (context_.include_usage) chunk["usage"] = nullptr;
  return absl::StrCat("data: ", Dump(chunk), "\n\n");
}

std::string ChoicesRenderer::StreamEvents(std::vector<GenerationEvent> events) {
  if (ended_ || events.empty()) return "";
  std::string out;
  absl::Status error;
  for (SequenceEvents& sequence : SplitBySequence(std::move(events))) {
    CoalescedEvents run =
        CoalesceEvents(std::move(sequence.events), context_.id);
    error = run.error;
    if (error.ok() && run.ended &&
        run.response.finish_reason() == v1::FINISH_REASON_CANCELLED) {
      error = CancelledByServer();
    }
    const bool finished_ok = run.ended && error.ok();
    const bool has_output = !run.response.text().empty() ||
                            (context_.logprobs && run.response.logprobs_size());
    if (has_output || finished_ok) {
      absl::StrAppend(&out, ChunkEvent(StreamChoice(
                                run.response, sequence.index, finished_ok)));
    }
    if (!error.ok()) break;
    if (finished_ok) {
      AddUsage(run.response.usage(), &usage_);
      ++finals_;
    }
  }
  if (error.ok() && finals_ < context_.n) return out;
  ended_ = true;
  if (!error.ok()) {
    final_code_ = error.code();
    absl::StrAppend(&out, "data: ", ErrorBody(ErrorFromStatus(error)), "\n\n");
  } else if (context_.include_usage) {
    ojson chunk = Header(chunk_object_);
    chunk["choices"] = ojson::array();
    chunk["usage"] = Usage(usage_);
    absl::StrAppend(&out, "data: ", Dump(chunk), "\n\n");
  }
  absl::StrAppend(&out, "data: [DONE]\n\n");
  return out;
}

void ChoicesRenderer::Add(GenerationEvent event) {
  if (ended_) return;
  ended_ = EndsRequest(event, context_.n, &finals_);
  pending_.push_back(std::move(event));
}

std::pair<int, std::string> ChoicesRenderer::Finish() {
  std::vector<SequenceEvents> sequences = SplitBySequence(std::move(pending_));
  pending_.clear();
  // Choices in index order.
  std::sort(sequences.begin(), sequences.end(),
            [](const SequenceEvents& a, const SequenceEvents& b) {
              return a.index < b.index;
            });
  ojson choices = ojson::array();
  // An error in any sequence is the answer.
  absl::Status error = FirstError(sequences);
  for (SequenceEvents& sequence : sequences) {
    if (!error.ok()) break;
    CoalescedEvents run =
        CoalesceEvents(std::move(sequence.events), context_.id);
    error = run.error;
    if (!run.ended) {
      error = absl::InternalError("the request ended without a final event");
    } else if (error.ok() &&
               run.response.finish_reason() == v1::FINISH_REASON_CANCELLED) {
      error = CancelledByServer();
    }
    if (!error.ok()) break;
    AddUsage(run.response.usage(), &usage_);
    choices.push_back(BodyChoice(run.response, sequence.index));
  }
  if (error.ok() && static_cast<int32_t>(choices.size()) < context_.n) {
    error = absl::InternalError("the request ended without a final event");
  }
  if (!error.ok()) {
    final_code_ = error.code();
    OpenAiError e = ErrorFromStatus(error);
    return {e.http_status, ErrorBody(e)};
  }
  ojson body = Header(body_object_);
  body["choices"] = std::move(choices);
  body["usage"] = Usage(usage_);
  return {200, Dump(body)};
}

ojson CompletionRenderer::StreamChoice(const v1::GenerateResponse& run,
                                       int32_t index, bool final_chunk) {
  return Choice(run, index, final_chunk);
}

ojson CompletionRenderer::BodyChoice(const v1::GenerateResponse& run,
                                     int32_t index) {
  return Choice(run, index, true);
}

namespace {

ojson Model(const std::string& model_id, int64_t created) {
  ojson model;
  model["id"] = model_id;
  model["object"] = "model";
  model["created"] = created;
  model["owned_by"] = "seqboat";
  return model;
}

}  // namespace

std::string ModelBody(const std::string& model_id, int64_t created) {
  return Dump(Model(model_id, created));
}

std::string ModelListBody(const std::string& model_id, int64_t created) {
  ojson list;
  list["object"] = "list";
  list["data"] = ojson::array({Model(model_id, created)});
  return Dump(list);
}

// --- /v1/chat/completions

namespace {

std::optional<OpenAiError> ReadContent(const json& content,
                                       const std::string& where,
                                       std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return Invalid("messages",
                   absl::StrCat(where,
                                " must be a string or a list of text parts, "
                                "got ",
                                BriefJson(content)));
  }
  // Text parts joined by newlines, as vLLM joins them.
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string at = absl::StrCat(where, "[", j, "]");
    if (!part.is_object()) {
      return Invalid("messages", absl::StrCat(at, " must be an object"));
    }
    const json* type = Field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return Invalid("messages", absl::StrCat(at, ".type must be a string"));
    }
    if (type->get<std::string>() != "text") {
      return Unsupported(
          "messages",
          absl::StrCat(at, " is of type '", type->get<std::string>(),
                       "'; this server takes text parts only"));
    }
    const json* text = Field(part, "text");
    if (text == nullptr || !text->is_string()) {
      return Invalid("messages", absl::StrCat(at, ".text must be a string"));
    }
    if (j > 0) *out += "\n";
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<OpenAiError> ReadMessages(const json& body,
                                        std::vector<ChatMessage>* out) {
  const json* messages = Field(body, "messages");
  if (messages == nullptr) {
    return Invalid("messages", "messages is required");
  }
  if (!messages->is_array()) {
    return Invalid("messages", "messages must be an array of messages");
  }
  if (messages->empty()) {
    return Invalid("messages", "messages must hold at least one message");
  }
  if (messages->size() > static_cast<size_t>(kMaxChatMessages)) {
    return Invalid(
        "messages",
        absl::StrCat("messages holds ", messages->size(),
                     " messages, more than the limit of ", kMaxChatMessages));
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) {
      return Invalid("messages", absl::StrCat(where, " must be an object"));
    }
    for (const auto& [key, value] : m.items()) {
      if (key == "role" || key == "content" || key == "name") continue;
      if (value.is_null()) continue;
      if (key == "tool_calls" || key == "tool_call_id" ||
          key == "function_call" || key == "audio" || key == "refusal") {
        return Unsupported("messages",
                           absl::StrCat(where, ".", key,
                                        " is not supported: this server does "
                                        "not call tools"));
      }
      return Invalid("messages",
                     absl::StrCat(where, " has an unknown field '", key, "'"));
    }
    ChatMessage message;
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) {
      return Invalid("messages", absl::StrCat(where, ".role must be a string"));
    }
    message.role = role->get<std::string>();
    if (message.role == "developer") message.role = "system";
    if (message.role != "system" && message.role != "user" &&
        message.role != "assistant") {
      return Invalid(
          "messages",
          absl::StrCat(where,
                       ".role must be 'system', 'developer', 'user' or "
                       "'assistant', got ",
                       BriefJson(*role)));
    }
    const json* content = Field(m, "content");
    if (content == nullptr) {
      return Invalid("messages", absl::StrCat(where, ".content is missing"));
    }
    if (auto e = ReadContent(*content, absl::StrCat(where, ".content"),
                             &message.content)) {
      return e;
    }
    if (const json* name = Field(m, "name")) {
      if (!name->is_string()) {
        return Invalid("messages",
                       absl::StrCat(where, ".name must be a string"));
      }
      message.name = name->get<std::string>();
    }
    out->push_back(std::move(message));
  }
  return std::nullopt;
}

// The tool and format parameters, accepted at the values that ask for
// plain text.
std::optional<OpenAiError> ReadChatUnsupported(const json& body) {
  if (const json* tools = Field(body, "tools")) {
    if (!tools->is_array() || !tools->empty()) {
      return Unsupported("tools",
                         "tools are not supported: this server does "
                         "not call tools");
    }
  }
  if (const json* choice = Field(body, "tool_choice")) {
    if (!choice->is_string() || (choice->get<std::string>() != "none" &&
                                 choice->get<std::string>() != "auto")) {
      return Unsupported("tool_choice",
                         "tool_choice must be \"none\": this server does not "
                         "call tools");
    }
  }
  if (const json* parallel = Field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) {
      return Invalid("parallel_tool_calls",
                     "parallel_tool_calls must be a boolean");
    }
  }
  if (const json* format = Field(body, "response_format")) {
    const json* type = format->is_object() ? Field(*format, "type") : nullptr;
    if (type == nullptr || !type->is_string() ||
        type->get<std::string>() != "text") {
      return Unsupported("response_format",
                         "response_format must be {\"type\": \"text\"}: "
                         "structured output is not supported");
    }
  }
  return std::nullopt;
}

// Renames parameter `from` to `to` in an error, param and message.
void Rename(OpenAiError* e, const std::string& from, const std::string& to) {
  if (e->param != from) return;
  e->param = to;
  if (absl::StartsWith(e->message, from)) {
    e->message = to + e->message.substr(from.size());
  }
}

}  // namespace

bool ParseChatRequest(std::string_view body, const std::string& model_id,
                      const ValidationLimits& limits, ChatRequest* out,
                      OpenAiError* error) {
  auto fail = [error](OpenAiError e) {
    *error = std::move(e);
    return false;
  };
  json parsed;
  if (auto e = ReadBody(body, ChatParameters(), &parsed)) return fail(*e);
  *out = ChatRequest();
  if (auto e = ReadMessages(parsed, &out->messages)) return fail(*e);
  if (auto e = ReadChatUnsupported(parsed)) return fail(*e);

  // The rest is a completions request with these names.
  json completion = json::object();
  for (const char* key : kSharedParameters) {
    if (auto it = parsed.find(key); it != parsed.end()) completion[key] = *it;
  }
  if (const json* limit = Field(parsed, "max_completion_tokens")) {
    completion["max_tokens"] = *limit;
    out->max_tokens_param = "max_completion_tokens";
  } else if (const json* limit = Field(parsed, "max_tokens")) {
    completion["max_tokens"] = *limit;
  }
  if (auto e = ReadBool(parsed, "logprobs", &out->logprobs)) return fail(*e);
  if (const json* top = Field(parsed, "top_logprobs")) {
    if (!out->logprobs) {
      return fail(
          Invalid("top_logprobs", "top_logprobs requires logprobs to be true"));
    }
    completion["logprobs"] = *top;
  } else if (out->logprobs) {
    completion["logprobs"] = 0;
  }
  if (!ParseCompletionRequest(completion.dump(), model_id, limits,
                              &out->completion, error)) {
    *error = ChatError(std::move(*error), *out);
    return false;
  }
  return true;
}

OpenAiError ChatError(OpenAiError error, const ChatRequest& request) {
  Rename(&error, "prompt", "messages");
  Rename(&error, "logprobs", "top_logprobs");
  Rename(&error, "max_tokens", request.max_tokens_param);
  return error;
}

ChatRenderer::ChatRenderer(CompletionContext context)
    : ChoicesRenderer(std::move(context), "chat.completion.chunk",
                      "chat.completion") {}

ojson ChatRenderer::Logprobs(const v1::GenerateResponse& run) const {
  const auto entry = [this](int32_t id, float logprob) {
    const std::string bytes =
        context_.token_bytes ? context_.token_bytes(id) : std::string();
    ojson item;
    item["token"] = TokenText(bytes);
    item["logprob"] = logprob;
    ojson raw = ojson::array();
    for (unsigned char c : bytes) raw.push_back(static_cast<int>(c));
    item["bytes"] = std::move(raw);
    return item;
  };
  ojson content = ojson::array();
  for (const v1::TokenLogprobs& lp : run.logprobs()) {
    ojson item = entry(lp.chosen().token_id(), lp.chosen().logprob());
    ojson top = ojson::array();
    for (const v1::TokenLogprob& alt : lp.top()) {
      top.push_back(entry(alt.token_id(), alt.logprob()));
    }
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  ojson logprobs;
  logprobs["content"] = std::move(content);
  logprobs["refusal"] = nullptr;
  return logprobs;
}

ojson ChatRenderer::StreamChoice(const v1::GenerateResponse& run, int32_t index,
                                 bool final_chunk) {
  ojson delta = ojson::object();
  if (!run.text().empty()) delta["content"] = run.text();
  ojson choice;
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  if (context_.logprobs && run.logprobs_size() > 0) {
    choice["logprobs"] = Logprobs(run);
  }
  choice["finish_reason"] = nullptr;
  if (final_chunk) {
    choice["finish_reason"] = NullIfEmpty(FinishName(run.finish_reason()));
    choice["stop_reason"] = NullIfEmpty(run.matched_stop());
  }
  return choice;
}

std::string ChatRenderer::StreamStart() {
  std::string out;
  for (int32_t index = 0; index < std::max(context_.n, 1); ++index) {
    ojson delta;
    delta["role"] = "assistant";
    delta["content"] = "";
    ojson choice;
    choice["index"] = index;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    absl::StrAppend(&out, ChunkEvent(std::move(choice)));
  }
  return out;
}

ojson ChatRenderer::BodyChoice(const v1::GenerateResponse& run, int32_t index) {
  ojson message;
  message["role"] = "assistant";
  message["content"] = run.text();
  ojson choice;
  choice["index"] = index;
  choice["message"] = std::move(message);
  choice["logprobs"] = nullptr;
  if (context_.logprobs) choice["logprobs"] = Logprobs(run);
  choice["finish_reason"] = NullIfEmpty(FinishName(run.finish_reason()));
  choice["stop_reason"] = NullIfEmpty(run.matched_stop());
  return choice;
}

}  // namespace seqboat
