// tokenizer.json's "model" when its type is "WordLevel": each pre-tokenized
// word is one id, or the unk token's when the vocabulary lacks it (Hugging
// Face's WordLevel). The model of a fairseq dictionary: the converter writes
// one for a checkpoint's dict.txt (weights/converters/fairseq_dictionary.py).
#ifndef SEQBOAT_ENGINE_TOKENIZER_WORD_LEVEL_MODEL_H_
#define SEQBOAT_ENGINE_TOKENIZER_WORD_LEVEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/token_model.h"
#include "nlohmann/json.hpp"

namespace seqboat {

class WordLevelModel final : public TokenModel {
 public:
  // `model` is tokenizer.json's "model" object: "vocab" (token -> id) and
  // "unk_token", which must be in the vocabulary, as Hugging Face requires
  // it to be for any word it lacks. Errors name the field.
  static absl::StatusOr<std::unique_ptr<WordLevelModel>> Parse(
      const nlohmann::json& model);

  void EncodeWord(std::string_view word,
                  std::vector<int32_t>* ids) const override;
  const std::string& IdToToken(int32_t id) const override;
  int32_t id_limit() const override {
    return static_cast<int32_t>(tokens_.size());
  }

 private:
  WordLevelModel() = default;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // by id
  int32_t unk_id_ = -1;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_WORD_LEVEL_MODEL_H_
