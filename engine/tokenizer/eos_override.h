// Wraps a tokenizer so that eos_token_id() reports a caller's choice (e.g.
// the eos_token_id of a model's config.json) instead of the one guessed from
// the special tokens. Everything else is forwarded.
#ifndef SEQBOAT_ENGINE_TOKENIZER_EOS_OVERRIDE_H_
#define SEQBOAT_ENGINE_TOKENIZER_EOS_OVERRIDE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

// Errors unless 0 <= eos_token_id < inner->vocab_size().
absl::StatusOr<std::unique_ptr<Tokenizer>> WithEosOverride(
    std::unique_ptr<Tokenizer> inner, int32_t eos_token_id);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_EOS_OVERRIDE_H_
