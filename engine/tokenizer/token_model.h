// tokenizer.json's "model": what turns one pre-tokenized word into ids. The
// pipeline around it (added tokens, normalizer, pre-tokenizer, decoder,
// post-processor) is the same for every model type, so HfTokenizer holds one
// of these behind this interface.
#ifndef SEQBOAT_ENGINE_TOKENIZER_TOKEN_MODEL_H_
#define SEQBOAT_ENGINE_TOKENIZER_TOKEN_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace seqboat {

// Ids above this are rejected: they would only inflate vocab_size.
inline constexpr int32_t kMaxTokenId = (1 << 24) - 1;

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of one pre-tokenized word.
  virtual void EncodeWord(std::string_view word,
                          std::vector<int32_t>* ids) const = 0;
  // The vocabulary string of `id` ("" for ids the vocabulary lacks).
  virtual const std::string& IdToToken(int32_t id) const = 0;
  // One past the largest vocabulary id.
  virtual int32_t id_limit() const = 0;
};

// The "vocab" object of `model` (token -> id): ids in [0, kMaxTokenId], no
// empty token, no id used twice. *tokens is indexed by id; ids the
// vocabulary skips hold "". Errors name "model.vocab[...]".
absl::Status ParseVocabObject(const nlohmann::json& model,
                              absl::flat_hash_map<std::string, int32_t>* vocab,
                              std::vector<std::string>* tokens);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_TOKEN_MODEL_H_
