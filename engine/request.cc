#include "engine/request.h"

#include "absl/strings/str_cat.h"

namespace seqboat {

std::string_view SpeculativeMethodName(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNone:
      return "none";
    case SpeculativeMethod::kPromptLookup:
      return "prompt_lookup";
    case SpeculativeMethod::kDraftModel:
      return "draft_model";
    case SpeculativeMethod::kMtp:
      return "mtp";
  }
  return "none";
}

std::string PromptIdProblem(const PromptRules& rules, int32_t id) {
  if (id < 0 || id >= rules.vocab_limit) {
    return absl::StrCat("must be in [0, ", rules.vocab_limit, "), got ", id);
  }
  if (rules.padding_id.has_value() && id == *rules.padding_id) {
    return absl::StrCat("is the padding id ", id,
                        ", which the model never takes as input");
  }
  return "";
}

std::string NgramSizesProblem(const SpeculativeParams& params) {
  if (params.ngram_min >= 1 && params.ngram_min <= params.ngram_max &&
      params.ngram_max <= kMaxNgram) {
    return "";
  }
  return absl::StrCat(
      "n-gram sizes must satisfy 1 <= ngram_min <= ngram_max <= ", kMaxNgram,
      ", got ", params.ngram_min, " and ", params.ngram_max);
}

}  // namespace seqboat
