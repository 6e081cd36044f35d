// tokenizer.json's "post_processor", reduced to what it does to the ids of a
// single text: special tokens before it (Llama's BOS) and after it.
// Supported: null, ByteLevel (offsets only, no ids), TemplateProcessing
// (its "single" template, SpecialToken and Sequence "A" items), Sequence.
#ifndef SEQBOAT_ENGINE_TOKENIZER_POST_PROCESSOR_H_
#define SEQBOAT_ENGINE_TOKENIZER_POST_PROCESSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seqboat {

struct SpecialAffixes {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

absl::StatusOr<SpecialAffixes> ParsePostProcessor(const nlohmann::json& value,
                                                  const std::string& where);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_POST_PROCESSOR_H_
