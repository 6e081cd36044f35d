// /v1/completions bodies.
#include "server/openai_request.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "server/openai_constraint.h"
#include "server/openai_request_fields.h"

namespace seqboat {
namespace {

using openai::Field;
using openai::Int64Of;
using openai::Invalid;
using openai::json;
using openai::ReadBody;
using openai::ReadBool;
using openai::ReadIds;
using openai::ReadInt;
using openai::ReadNumber;
using openai::Unsupported;

// The parameters a completions request may carry.
const openai::ParameterSet& KnownParameters() {
  static const openai::ParameterSet* known = openai::WithShared(
      {"prompt", "max_tokens", "logprobs", "best_of", "echo", "suffix"});
  return *known;
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

// The model, absent or the one this server serves.
std::optional<OpenAiError> ReadModel(const json& body,
                                     const std::string& model_id) {
  const json* model = Field(body, "model");
  if (model == nullptr) return std::nullopt;
  if (!model->is_string()) return Invalid("model", "model must be a string");
  if (model->get<std::string>() != model_id) {
    return Invalid(
        "model",
        absl::StrCat("The model `", model->get<std::string>(),
                     "` does not exist; this server serves `", model_id, "`"),
        "model_not_found");
  }
  return std::nullopt;
}

// n, max_tokens and min_tokens, within what the proto's fields hold; their
// bounds are validation's.
std::optional<OpenAiError> ReadCounts(const json& body,
                                      const ValidationLimits& limits,
                                      v1::GenerateRequest* generate) {
  std::optional<int64_t> n;
  if (auto e = ReadInt(body, "n", &n)) return e;
  if (n.has_value()) {
    if (*n < 1 || *n > std::numeric_limits<uint32_t>::max()) {
      return Invalid(
          "n", absl::StrCat("n must be in [1, ", limits.max_n, "], got ", *n));
    }
    generate->set_n(static_cast<uint32_t>(*n));
  }
  v1::StoppingCriteria* stopping = generate->mutable_stopping();
  std::optional<int64_t> max_tokens;
  if (auto e = ReadInt(body, "max_tokens", &max_tokens)) return e;
  if (max_tokens.has_value()) {
    if (*max_tokens < 1 || *max_tokens > std::numeric_limits<uint32_t>::max()) {
      return Invalid("max_tokens", absl::StrCat("max_tokens must be in [1, ",
                                                limits.max_new_tokens_limit,
                                                "], got ", *max_tokens));
    }
    stopping->set_max_new_tokens(static_cast<uint32_t>(*max_tokens));
  }
  // vLLM's min_tokens.
  std::optional<int64_t> min_tokens;
  if (auto e = ReadInt(body, "min_tokens", &min_tokens)) return e;
  if (min_tokens.has_value()) {
    if (*min_tokens < 0 || *min_tokens > std::numeric_limits<uint32_t>::max()) {
      return Invalid("min_tokens",
                     absl::StrCat("min_tokens must be in [0, max_tokens], got ",
                                  *min_tokens));
    }
    stopping->set_min_new_tokens(static_cast<uint32_t>(*min_tokens));
  }
  return std::nullopt;
}

// Floats go to the proto as they are; validation checks their ranges (an
// out-of-float value arrives as inf and is refused there).
std::optional<OpenAiError> ReadFloats(const json& body,
                                      v1::SamplingParams* sampling) {
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
    if (auto e = ReadNumber(body, f.name, &value)) return e;
    if (value.has_value()) (sampling->*f.set)(static_cast<float>(*value));
  }
  return std::nullopt;
}

// top_k and seed.
std::optional<OpenAiError> ReadTopKAndSeed(const json& body,
                                           v1::SamplingParams* sampling) {
  std::optional<int64_t> top_k;
  if (auto e = ReadInt(body, "top_k", &top_k)) return e;
  if (top_k.has_value()) {
    // vLLM's clients send -1 for "off", which is 0 here.
    int64_t k = *top_k == -1 ? 0 : *top_k;
    if (k < std::numeric_limits<int32_t>::min()) {
      return Invalid("top_k", absl::StrCat("top_k must be >= 0, got ", k));
    }
    // Beyond the vocabulary is the whole vocabulary.
    k = std::min<int64_t>(k, std::numeric_limits<int32_t>::max());
    sampling->set_top_k(static_cast<int32_t>(k));
  }
  if (const json* seed = Field(body, "seed")) {
    // Any 64-bit integer; a negative one is taken modulo 2^64.
    if (seed->is_number_unsigned()) {
      sampling->set_seed(seed->get<uint64_t>());
    } else if (seed->is_number_integer()) {
      sampling->set_seed(static_cast<uint64_t>(seed->get<int64_t>()));
    } else {
      return Invalid("seed", absl::StrCat("seed must be an integer, got ",
                                          BriefJson(*seed)));
    }
  }
  return std::nullopt;
}

// stop, stop_token_ids and ignore_eos.
std::optional<OpenAiError> ReadStopping(const json& body,
                                        v1::StoppingCriteria* stopping) {
  if (auto e = ReadStop(body, stopping)) return e;
  if (const json* ids = Field(body, "stop_token_ids")) {
    if (!ids->is_array()) {
      return Invalid("stop_token_ids",
                     "stop_token_ids must be an array of token ids");
    }
    std::vector<int32_t> stop_ids;
    if (auto e = ReadIds(*ids, "stop_token_ids", &stop_ids)) return e;
    stopping->mutable_stop_token_ids()->Add(stop_ids.begin(), stop_ids.end());
  }
  bool ignore_eos = false;
  if (auto e = ReadBool(body, "ignore_eos", &ignore_eos)) return e;
  stopping->set_ignore_eos(ignore_eos);
  return std::nullopt;
}

// The completions API's logprobs: how many alternatives besides the chosen
// token (0 gives the chosen token's alone).
std::optional<OpenAiError> ReadLogprobs(const json& body,
                                        v1::GenerateRequest* generate) {
  const json* logprobs = Field(body, "logprobs");
  if (logprobs == nullptr) return std::nullopt;
  int64_t n = 0;
  if (logprobs->is_boolean() || !Int64Of(*logprobs, &n)) {
    return Invalid("logprobs",
                   absl::StrCat("logprobs must be an integer (the number of "
                                "alternatives to return with each token), got ",
                                BriefJson(*logprobs)));
  }
  if (n < 0 || n > std::numeric_limits<uint32_t>::max()) {
    return Invalid("logprobs", absl::StrCat("logprobs must be in [0, ",
                                            kMaxTopLogprobs, "], got ", n));
  }
  generate->mutable_logprobs()->set_enabled(true);
  generate->mutable_logprobs()->set_top_n(static_cast<uint32_t>(n));
  return std::nullopt;
}

// stream and stream_options.
std::optional<OpenAiError> ReadStream(const json& body,
                                      CompletionRequest* out) {
  if (auto e = ReadBool(body, "stream", &out->stream)) return e;
  const json* options = Field(body, "stream_options");
  if (options == nullptr) return std::nullopt;
  if (!out->stream) {
    return Invalid("stream_options",
                   "stream_options is only allowed when stream is "
                   "true");
  }
  if (!options->is_object()) {
    return Invalid("stream_options", "stream_options must be an object");
  }
  for (const auto& [key, value] : options->items()) {
    if (key != "include_usage") {
      return Invalid("stream_options",
                     absl::StrCat("stream_options.", key, " is not supported"),
                     "unknown_parameter");
    }
  }
  if (auto e = ReadBool(*options, "include_usage", &out->include_usage)) {
    e->param = "stream_options";
    e->message = "stream_options." + e->message;
    return e;
  }
  return std::nullopt;
}

// vLLM's cache_salt: the prefix cache's partition within the tenant's.
std::optional<OpenAiError> ReadCacheSalt(const json& body,
                                         v1::GenerateRequest* generate) {
  const json* salt = Field(body, "cache_salt");
  if (salt == nullptr) return std::nullopt;
  if (!salt->is_string()) {
    return Invalid("cache_salt", "cache_salt must be a string");
  }
  generate->set_cache_salt(salt->get<std::string>());
  return std::nullopt;
}

// seqboat's speculative decoding options: {"method": "prompt_lookup" |
// "draft_model" | "mtp" | "none", "num_draft_tokens", "ngram_min",
// "ngram_max"}; the ranges are validation's.
std::optional<OpenAiError> ReadSpeculative(const json& body,
                                           v1::GenerateRequest* generate) {
  const json* spec = Field(body, "speculative");
  if (spec == nullptr) return std::nullopt;
  if (!spec->is_object()) {
    return Invalid("speculative", "speculative must be an object");
  }
  v1::SpeculativeOptions& out = *generate->mutable_speculative();
  for (const auto& [key, value] : spec->items()) {
    if (key == "method") {
      const std::string method =
          value.is_string() ? value.get<std::string>() : std::string("?");
      if (method == "prompt_lookup") {
        out.set_method(v1::SPECULATIVE_METHOD_PROMPT_LOOKUP);
      } else if (method == "draft_model") {
        out.set_method(v1::SPECULATIVE_METHOD_DRAFT_MODEL);
      } else if (method == "mtp") {
        out.set_method(v1::SPECULATIVE_METHOD_MTP);
      } else if (method == "none") {
        out.set_method(v1::SPECULATIVE_METHOD_NONE);
      } else {
        return Invalid("speculative",
                       "speculative.method must be \"prompt_lookup\", "
                       "\"draft_model\", \"mtp\" or \"none\"");
      }
      continue;
    }
    if (key != "num_draft_tokens" && key != "ngram_min" && key != "ngram_max") {
      return Invalid("speculative",
                     absl::StrCat("speculative.", key, " is not supported"),
                     "unknown_parameter");
    }
    std::optional<int64_t> n;
    if (auto e = ReadInt(*spec, key.c_str(), &n)) {
      e->param = "speculative";
      e->message = "speculative." + e->message;
      return e;
    }
    if (*n < 0 || *n > 1000) {
      return Invalid("speculative", absl::StrCat("speculative.", key,
                                                 " must be in [0, 1000]"));
    }
    const uint32_t v = static_cast<uint32_t>(*n);
    if (key == "num_draft_tokens") out.set_num_draft_tokens(v);
    if (key == "ngram_min") out.set_ngram_min(v);
    if (key == "ngram_max") out.set_ngram_max(v);
  }
  return std::nullopt;
}

// A parsed body's fields, in the order their errors take precedence.
std::optional<OpenAiError> ReadCompletion(const json& body,
                                          const std::string& model_id,
                                          const ValidationLimits& limits,
                                          CompletionRequest* out) {
  v1::GenerateRequest& generate = out->generate;
  if (auto e = ReadModel(body, model_id)) return e;
  if (auto e = ReadUnsupported(body)) return e;
  if (const json* user = Field(body, "user"))
    out->user = user->get<std::string>();
  if (auto e = ReadPrompt(body, &generate)) return e;
  if (auto e = ReadCounts(body, limits, &generate)) return e;
  if (auto e = ReadFloats(body, generate.mutable_sampling())) return e;
  if (auto e = ReadTopKAndSeed(body, generate.mutable_sampling())) return e;
  if (auto e = ReadStopping(body, generate.mutable_stopping())) return e;
  if (auto e = ReadLogprobs(body, &generate)) return e;
  if (auto e = ReadCacheSalt(body, &generate)) return e;
  if (auto e = ReadSpeculative(body, &generate)) return e;
  if (auto e = openai::ReadConstraint(body, generate.mutable_sampling(),
                                      &out->constraint_param)) {
    return e;
  }
  return ReadStream(body, out);
}

}  // namespace

bool ParseCompletionRequest(std::string_view body, const std::string& model_id,
                            const ValidationLimits& limits,
                            CompletionRequest* out, OpenAiError* error) {
  json parsed;
  std::optional<OpenAiError> e = ReadBody(body, KnownParameters(), &parsed);
  if (!e.has_value()) {
    *out = CompletionRequest();
    e = ReadCompletion(parsed, model_id, limits, out);
  }
  if (!e.has_value()) return true;
  *error = *std::move(e);
  return false;
}

}  // namespace seqboat
