// Reading an OpenAI request body's fields, for openai_request.cc and
// openai_chat_request.cc: the body as a JSON object of known parameters,
// each field's type checked, and every refusal as OpenAI's error object
// naming the parameter. A null field counts as absent, as OpenAI's SDKs
// send it for unset ones. Internal to //server:openai_request.
#ifndef SEQBOAT_SERVER_OPENAI_REQUEST_FIELDS_H_
#define SEQBOAT_SERVER_OPENAI_REQUEST_FIELDS_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_error.h"

namespace seqboat::openai {

using json = nlohmann::json;

// A 400 naming `param`.
OpenAiError Invalid(std::string param, std::string message,
                    std::string code = "");
// A 400 for a value this server does not support (code unsupported_value).
OpenAiError Unsupported(const std::string& param, const std::string& message);

// The parameters both endpoints take with one meaning (ParseChatRequest
// hands them to ParseCompletionRequest as they are): OpenAI's own, and the
// sampling extensions vLLM clients send (top_k, min_p, repetition_penalty,
// ignore_eos, stop_token_ids, min_tokens), vLLM's cache_salt, and seqboat's
// speculative; the output's constraint (response_format and vLLM's guided_*,
// openai_constraint.h).
inline constexpr const char* kSharedParameters[] = {"model",
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
                                                    "user",
                                                    "cache_salt",
                                                    "speculative",
                                                    "response_format",
                                                    "guided_json",
                                                    "guided_regex",
                                                    "guided_choice",
                                                    "guided_grammar"};

using ParameterSet = std::set<std::string, std::less<>>;
// The shared parameters and an endpoint's `own`.
const ParameterSet* WithShared(std::initializer_list<const char*> own);

// A request body: a JSON object of `known` parameters only (unknown ones
// are refused, as OpenAI does).
std::optional<OpenAiError> ReadBody(std::string_view body,
                                    const ParameterSet& known, json* out);

// The field `key` of `body`, or null when absent or null.
const json* Field(const json& body, const char* key);
// A JSON integer that fits int64 (unsigned values beyond it do not).
bool Int64Of(const json& v, int64_t* out);
// OpenAI's rule for a function's and a json_schema format's name: 1 to 64
// letters, digits, '_' and '-'.
bool IsOpenAiName(const std::string& name);

// A field of its type into *out, left as it is when absent.
std::optional<OpenAiError> ReadNumber(const json& body, const char* key,
                                      std::optional<double>* out);
std::optional<OpenAiError> ReadBool(const json& body, const char* key,
                                    bool* out);
std::optional<OpenAiError> ReadInt(const json& body, const char* key,
                                   std::optional<int64_t>* out);
// Token ids of a prompt or stop_token_ids: integers within int32 (the
// vocabulary check is validation's), named `name` in errors.
std::optional<OpenAiError> ReadIds(const json& array, const std::string& name,
                                   std::vector<int32_t>* out);

}  // namespace seqboat::openai

#endif  // SEQBOAT_SERVER_OPENAI_REQUEST_FIELDS_H_
