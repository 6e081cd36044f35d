#include "engine/request.h"

#include "absl/strings/str_cat.h"

namespace seqboat {

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

}  // namespace seqboat
