#include "server/request_validation.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"

namespace seqboat {
namespace {

constexpr char kFieldPayload[] = "type.seqboat/invalid_field";

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  absl::Status status =
      absl::InvalidArgumentError(absl::StrCat(field, " ", what));
  status.SetPayload(kFieldPayload, absl::Cord(field));
  return status;
}

// Float checks written as "!(in range)" so NaN is rejected too.
absl::Status CheckFloat(absl::string_view field, float value, bool in_range,
                        absl::string_view range) {
  if (std::isfinite(value) && in_range) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be in ", range, ", got ", value));
}

absl::Status CheckTokenId(absl::string_view field, int32_t id,
                          int32_t vocab_size) {
  if (id >= 0 && id < vocab_size) return absl::OkStatus();
  return Invalid(field,
                 absl::StrCat("must be in [0, ", vocab_size, "), got ", id));
}

absl::StatusOr<std::vector<int32_t>> PromptFromProto(
    const v1::GenerateRequest& proto, const Vocabulary& vocabulary,
    const ValidationLimits& limits) {
  std::vector<int32_t> prompt;
  switch (proto.prompt_case()) {
    case v1::GenerateRequest::kText: {
      if (proto.text().empty()) return Invalid("text", "must not be empty");
      if (absl::Status s = CheckTextBytes("text", proto.text(), limits);
          !s.ok()) {
        return s;
      }
      if (!vocabulary.encode) {
        return absl::InternalError("no tokenizer to encode text prompts");
      }
      absl::StatusOr<std::vector<int32_t>> ids =
          vocabulary.encode(proto.text());
      if (!ids.ok()) {
        return Invalid("text", absl::StrCat("could not be tokenized: ",
                                            ids.status().message()));
      }
      prompt = *std::move(ids);
      if (prompt.empty()) return Invalid("text", "tokenizes to no tokens");
      if (prompt.size() > static_cast<size_t>(limits.max_prompt_tokens)) {
        return Invalid(
            "text", absl::StrCat("is ", prompt.size(), " tokens, the limit is ",
                                 limits.max_prompt_tokens));
      }
      // The tokenizer's own output is trusted to be inside the vocabulary,
      // but checking is cheap and keeps a tokenizer bug off the engine thread.
      for (size_t i = 0; i < prompt.size(); ++i) {
        const std::string problem =
            PromptIdProblem(vocabulary.rules, prompt[i]);
        if (!problem.empty()) {
          return absl::InternalError(
              absl::StrCat("tokenizer produced id ", prompt[i],
                           " as prompt token ", i, ", which ", problem));
        }
      }
      return prompt;
    }
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = proto.token_ids().ids();
      if (ids.empty()) return Invalid("token_ids.ids", "must not be empty");
      if (ids.size() > limits.max_prompt_tokens) {
        return Invalid("token_ids.ids", absl::StrCat("has ", ids.size(),
                                                     " tokens, the limit is ",
                                                     limits.max_prompt_tokens));
      }
      bool any_text = false;
      for (int i = 0; i < ids.size(); ++i) {
        const std::string problem = PromptIdProblem(vocabulary.rules, ids[i]);
        if (!problem.empty()) {
          return Invalid(absl::StrCat("token_ids.ids[", i, "]"), problem);
        }
        if (!vocabulary.is_special || !vocabulary.is_special(ids[i])) {
          any_text = true;
        }
      }
      // A prompt of control tokens alone (e.g. just BOS) gives the model
      // nothing to continue; it is almost always a client bug.
      if (!any_text) {
        return Invalid("token_ids.ids", "must contain a non-special token");
      }
      prompt.assign(ids.begin(), ids.end());
      return prompt;
    }
    case v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return Invalid("prompt", "must be set (text or token_ids)");
}

absl::StatusOr<SamplingParams> SamplingFromProto(
    const v1::SamplingParams& proto, uint64_t fallback_seed) {
  SamplingParams params;
  if (proto.has_temperature()) {
    float t = proto.temperature();
    absl::Status status =
        CheckFloat("sampling.temperature", t, t >= 0.0f && t <= kMaxTemperature,
                   absl::StrCat("[0, ", kMaxTemperature, "]"));
    if (!status.ok()) return status;
    params.temperature = t;
  }
  if (proto.has_top_k()) {
    if (proto.top_k() < 0) {
      return Invalid("sampling.top_k",
                     absl::StrCat("must be >= 0, got ", proto.top_k()));
    }
    params.top_k = proto.top_k();
  }
  if (proto.has_top_p()) {
    float p = proto.top_p();
    absl::Status status =
        CheckFloat("sampling.top_p", p, p > 0.0f && p <= 1.0f, "(0, 1]");
    if (!status.ok()) return status;
    params.top_p = p;
  }
  if (proto.has_min_p()) {
    float p = proto.min_p();
    absl::Status status =
        CheckFloat("sampling.min_p", p, p >= 0.0f && p <= 1.0f, "[0, 1]");
    if (!status.ok()) return status;
    params.min_p = p;
  }
  if (proto.has_repetition_penalty()) {
    float r = proto.repetition_penalty();
    absl::Status status =
        CheckFloat("sampling.repetition_penalty", r,
                   r > 0.0f && r <= kMaxRepetitionPenalty,
                   absl::StrCat("(0, ", kMaxRepetitionPenalty, "]"));
    if (!status.ok()) return status;
    params.repetition_penalty = r;
  }
  if (proto.has_presence_penalty()) {
    float v = proto.presence_penalty();
    absl::Status status = CheckFloat(
        "sampling.presence_penalty", v,
        v >= -kMaxCountPenalty && v <= kMaxCountPenalty,
        absl::StrCat("[", -kMaxCountPenalty, ", ", kMaxCountPenalty, "]"));
    if (!status.ok()) return status;
    params.presence_penalty = v;
  }
  if (proto.has_frequency_penalty()) {
    float v = proto.frequency_penalty();
    absl::Status status = CheckFloat(
        "sampling.frequency_penalty", v,
        v >= -kMaxCountPenalty && v <= kMaxCountPenalty,
        absl::StrCat("[", -kMaxCountPenalty, ", ", kMaxCountPenalty, "]"));
    if (!status.ok()) return status;
    params.frequency_penalty = v;
  }
  params.seed = proto.has_seed() ? proto.seed() : fallback_seed;
  return params;
}

absl::StatusOr<StoppingParams> StoppingFromProto(
    const v1::StoppingCriteria& proto, int32_t vocab_size,
    const ValidationLimits& limits) {
  StoppingParams params;
  params.max_new_tokens =
      std::min(limits.max_new_tokens_default, limits.max_new_tokens_limit);
  if (proto.has_max_new_tokens()) {
    uint32_t n = proto.max_new_tokens();
    if (n == 0 || n > static_cast<uint32_t>(limits.max_new_tokens_limit)) {
      return Invalid("stopping.max_new_tokens",
                     absl::StrCat("must be in [1, ",
                                  limits.max_new_tokens_limit, "], got ", n));
    }
    params.max_new_tokens = static_cast<int32_t>(n);
  }
  if (proto.has_min_new_tokens()) {
    const uint32_t n = proto.min_new_tokens();
    if (n > static_cast<uint32_t>(params.max_new_tokens)) {
      return Invalid(
          "stopping.min_new_tokens",
          absl::StrCat("must be in [0, ", params.max_new_tokens,
                       "] (at most the request's maximum of new tokens), got ",
                       n));
    }
    params.min_new_tokens = static_cast<int32_t>(n);
  }
  if (proto.stop_size() > kMaxStopStrings) {
    return Invalid("stopping.stop",
                   absl::StrCat("has ", proto.stop_size(),
                                " strings, the limit is ", kMaxStopStrings));
  }
  for (int i = 0; i < proto.stop_size(); ++i) {
    const std::string& stop = proto.stop(i);
    std::string field = absl::StrCat("stopping.stop[", i, "]");
    if (stop.empty()) return Invalid(field, "must not be empty");
    if (stop.size() > static_cast<size_t>(kMaxStopStringBytes)) {
      return Invalid(field,
                     absl::StrCat("is ", stop.size(), " bytes, the limit is ",
                                  kMaxStopStringBytes));
    }
    params.stop_strings.push_back(stop);
  }
  if (proto.stop_token_ids_size() > kMaxStopTokenIds) {
    return Invalid("stopping.stop_token_ids",
                   absl::StrCat("has ", proto.stop_token_ids_size(),
                                " ids, the limit is ", kMaxStopTokenIds));
  }
  for (int i = 0; i < proto.stop_token_ids_size(); ++i) {
    absl::Status status =
        CheckTokenId(absl::StrCat("stopping.stop_token_ids[", i, "]"),
                     proto.stop_token_ids(i), vocab_size);
    if (!status.ok()) return status;
    params.stop_token_ids.push_back(proto.stop_token_ids(i));
  }
  params.ignore_eos = proto.ignore_eos();
  return params;
}

// The request's speculative options over the server's default.
absl::StatusOr<SpeculativeParams> SpeculativeFromProto(
    const v1::SpeculativeOptions& proto, const ValidationLimits& limits) {
  SpeculativeParams spec = limits.speculative_default;
  switch (proto.method()) {
    case v1::SPECULATIVE_METHOD_UNSPECIFIED:
      break;
    case v1::SPECULATIVE_METHOD_NONE:
      spec.method = SpeculativeMethod::kNone;
      break;
    case v1::SPECULATIVE_METHOD_PROMPT_LOOKUP:
    case v1::SPECULATIVE_METHOD_DRAFT_MODEL:
    case v1::SPECULATIVE_METHOD_MTP:
      if (proto.method() == v1::SPECULATIVE_METHOD_DRAFT_MODEL &&
          !limits.draft_model) {
        return Invalid("speculative.method",
                       "draft_model needs a server started with a draft "
                       "model (--speculative_draft_model_dir)");
      }
      if (proto.method() == v1::SPECULATIVE_METHOD_MTP && !limits.mtp_head) {
        return Invalid("speculative.method",
                       "mtp needs a model with a multi-token-prediction "
                       "head (config.json \"mtp\"); the served model has "
                       "none");
      }
      spec.method = proto.method() == v1::SPECULATIVE_METHOD_DRAFT_MODEL
                        ? SpeculativeMethod::kDraftModel
                    : proto.method() == v1::SPECULATIVE_METHOD_MTP
                        ? SpeculativeMethod::kMtp
                        : SpeculativeMethod::kPromptLookup;
      if (spec.num_draft_tokens == 0) {
        spec.num_draft_tokens = std::min(4, limits.max_draft_tokens);
      }
      break;
    default:
      return Invalid("speculative.method",
                     absl::StrCat("unknown method ", proto.method()));
  }
  if (proto.has_num_draft_tokens()) {
    if (proto.num_draft_tokens() < 1 ||
        proto.num_draft_tokens() >
            static_cast<uint32_t>(limits.max_draft_tokens)) {
      return Invalid("speculative.num_draft_tokens",
                     absl::StrCat("must be in [1, ", limits.max_draft_tokens,
                                  "], got ", proto.num_draft_tokens()));
    }
    spec.num_draft_tokens = static_cast<int32_t>(proto.num_draft_tokens());
  }
  if (proto.has_ngram_min()) {
    spec.ngram_min =
        static_cast<int32_t>(std::min<uint32_t>(proto.ngram_min(), 1000));
  }
  if (proto.has_ngram_max()) {
    spec.ngram_max =
        static_cast<int32_t>(std::min<uint32_t>(proto.ngram_max(), 1000));
  }
  if (const std::string problem = NgramSizesProblem(spec); !problem.empty()) {
    return Invalid("speculative.ngram_min", problem);
  }
  if (spec.method == SpeculativeMethod::kNone) spec.num_draft_tokens = 0;
  return spec;
}

}  // namespace

std::string InvalidField(const absl::Status& status) {
  absl::optional<absl::Cord> field = status.GetPayload(kFieldPayload);
  return field.has_value() ? std::string(*field) : std::string();
}

Vocabulary TokenizerVocabulary(const Tokenizer& tokenizer,
                               const PromptRules& rules) {
  Vocabulary v;
  v.rules = rules;
  v.encode =
      [&tokenizer](
          absl::string_view text) -> absl::StatusOr<std::vector<int32_t>> {
    return tokenizer.Encode(std::string_view(text.data(), text.size()));
  };
  v.is_special = [&tokenizer](int32_t id) { return tokenizer.IsSpecial(id); };
  return v;
}

absl::Status CheckTextBytes(absl::string_view field, absl::string_view text,
                            const ValidationLimits& limits) {
  if (text.size() <= static_cast<size_t>(limits.max_prompt_bytes)) {
    return absl::OkStatus();
  }
  return Invalid(field,
                 absl::StrCat("is ", text.size(), " bytes, the limit is ",
                              limits.max_prompt_bytes));
}

namespace {

// The sampling's constraint oneof as the engine's Constraint, checked by
// CheckConstraint; its refusal names the field.
absl::StatusOr<std::optional<Constraint>> ConstraintFromProto(
    const v1::SamplingParams& proto, const ConstraintLimits& limits) {
  Constraint c;
  const char* field = nullptr;
  switch (proto.constraint_case()) {
    case v1::SamplingParams::CONSTRAINT_NOT_SET:
      return std::optional<Constraint>();
    case v1::SamplingParams::kJsonSchema:
      c.kind = ConstraintKind::kJsonSchema;
      c.text = proto.json_schema();
      field = "sampling.json_schema";
      break;
    case v1::SamplingParams::kJsonObject:
      c.kind = ConstraintKind::kAnyJson;
      field = "sampling.json_object";
      break;
    case v1::SamplingParams::kRegex:
      c.kind = ConstraintKind::kRegex;
      c.text = proto.regex();
      field = "sampling.regex";
      break;
    case v1::SamplingParams::kChoice:
      c.kind = ConstraintKind::kChoice;
      c.choices.assign(proto.choice().choices().begin(),
                       proto.choice().choices().end());
      field = "sampling.choice";
      break;
    case v1::SamplingParams::kGrammar:
      c.kind = ConstraintKind::kGrammar;
      c.text = proto.grammar();
      field = "sampling.grammar";
      break;
  }
  if (c.kind != ConstraintKind::kAnyJson && c.kind != ConstraintKind::kChoice &&
      c.text.empty()) {
    return Invalid(field, "must not be empty");
  }
  if (absl::Status s = CheckConstraint(c, limits); !s.ok()) {
    // CheckConstraint's message starts with the kind's name; the field
    // replaces it ("sampling.regex is refused: repetition count ...").
    absl::string_view why = s.message();
    const std::string_view kind = ConstraintKindName(c.kind);
    if (absl::StartsWith(why, absl::string_view(kind.data(), kind.size()))) {
      why.remove_prefix(kind.size());
      absl::ConsumePrefix(&why, ": ");
    }
    return Invalid(field, absl::StrCat("is refused: ", why));
  }
  return std::optional<Constraint>(std::move(c));
}

}  // namespace

absl::StatusOr<Request> RequestFromProto(const v1::GenerateRequest& proto,
                                         const Vocabulary& vocabulary,
                                         const ValidationLimits& limits,
                                         const RequestFallbacks& fallbacks) {
  Request request;
  if (proto.request_id().size() > static_cast<size_t>(kMaxRequestIdBytes)) {
    return Invalid("request_id",
                   absl::StrCat("is ", proto.request_id().size(),
                                " bytes, the limit is ", kMaxRequestIdBytes));
  }
  request.id =
      proto.request_id().empty() ? fallbacks.request_id : proto.request_id();
  if (proto.cache_salt().size() > static_cast<size_t>(kMaxCacheSaltBytes)) {
    return Invalid("cache_salt",
                   absl::StrCat("is ", proto.cache_salt().size(),
                                " bytes, the limit is ", kMaxCacheSaltBytes));
  }
  // Length-prefixed, so that no tenant and salt spell another pair's scope.
  request.cache_scope =
      absl::StrCat(fallbacks.cache_tenant.size(), ":", fallbacks.cache_tenant,
                   proto.cache_salt());
  if (proto.has_n()) {
    const int32_t max_n = std::min(limits.max_n, kMaxN);
    if (proto.n() < 1 || proto.n() > static_cast<uint32_t>(max_n)) {
      return Invalid(
          "n", absl::StrCat("must be in [1, ", max_n, "], got ", proto.n()));
    }
    request.n = static_cast<int32_t>(proto.n());
  }

  // Cheap field checks first, so a bad parameter never costs a tokenization.
  absl::StatusOr<SamplingParams> sampling =
      SamplingFromProto(proto.sampling(), fallbacks.seed);
  if (!sampling.ok()) return sampling.status();
  request.sampling = *sampling;

  absl::StatusOr<std::optional<Constraint>> constraint =
      ConstraintFromProto(proto.sampling(), limits.constraint);
  if (!constraint.ok()) return constraint.status();
  request.constraint = *std::move(constraint);

  absl::StatusOr<StoppingParams> stopping =
      StoppingFromProto(proto.stopping(), vocabulary.rules.vocab_limit, limits);
  if (!stopping.ok()) return stopping.status();
  request.stopping = *std::move(stopping);

  absl::StatusOr<SpeculativeParams> speculative =
      SpeculativeFromProto(proto.speculative(), limits);
  if (!speculative.ok()) return speculative.status();
  request.speculative = *speculative;

  if (proto.logprobs().top_n() > static_cast<uint32_t>(kMaxTopLogprobs)) {
    return Invalid("logprobs.top_n",
                   absl::StrCat("must be <= ", kMaxTopLogprobs, ", got ",
                                proto.logprobs().top_n()));
  }
  // Asking for alternatives implies asking for the chosen token's logprob.
  request.top_logprobs = static_cast<int32_t>(proto.logprobs().top_n());
  request.logprobs = proto.logprobs().enabled() || request.top_logprobs > 0;

  absl::StatusOr<std::vector<int32_t>> prompt =
      PromptFromProto(proto, vocabulary, limits);
  if (!prompt.ok()) return prompt.status();
  request.prompt = *std::move(prompt);
  return request;
}

}  // namespace seqboat
